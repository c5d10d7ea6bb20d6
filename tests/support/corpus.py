"""The shared SpamAssassin corpus: where it is, and unpacking it.

CI clones the project beside ``shared/``, so the tarball is
``../shared/corpus/spamassassin.tar.gz`` from the repository's root.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
CORPUS_TARBALL = SHARED / "corpus" / "spamassassin.tar.gz"
# shared/README.md: 6,046 messages in five folders.
CORPUS_MESSAGES = 6046


def missing(tarball: Path = CORPUS_TARBALL) -> str | None:
    """Why the corpus cannot be used (None when it can)."""
    if tarball.is_file():
        return None
    return (f"the shared corpus is missing at {tarball}: CI clones the project beside "
            "shared/; run from such a checkout")


def unpack(target: Path, tarball: Path = CORPUS_TARBALL) -> Path:
    """Unpack the corpus into ``target`` (created); returns ``target``."""
    why = missing(tarball)
    if why:
        raise FileNotFoundError(why)
    target.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tarball) as archive:
        archive.extractall(target, filter="data")
    return target


def message_files(root: Path) -> list[Path]:
    """The corpus messages under ``root`` (one ``.txt`` file each), in a stable order."""
    return sorted(root.rglob("*.txt"))
