"""Fixtures shared by the whole suite: defaults, temporary stores, the shared corpus."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))   # helpers, support, ...

from support import corpus  # noqa: E402

from mailfilter.config import Settings, load_settings  # noqa: E402
from mailfilter.engine import Engine  # noqa: E402

# The backend fixtures (backend, store_location, store; ``every_backend`` tests) and the
# Redis servers they start.
pytest_plugins = ("support.stores", "redis_servers")


@pytest.fixture
def settings() -> Settings:
    return load_settings(search=False)


@pytest.fixture
def engine(store_location: str, settings: Settings):  # noqa: ANN201
    """An Engine on an empty store: LMDB, or each backend in an ``every_backend`` test."""
    with Engine(settings, store_location) as opened:
        yield opened


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shared SpamAssassin corpus, unpacked once per test session."""
    missing = corpus.missing()
    if missing:
        pytest.fail(missing, pytrace=False)
    return corpus.unpack(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="session")
def corpus_messages(corpus_dir: Path) -> list[Path]:
    """Every message of the corpus (one file each), in a stable order."""
    files = corpus.message_files(corpus_dir)
    assert len(files) == corpus.CORPUS_MESSAGES, \
        f"expected {corpus.CORPUS_MESSAGES:,} corpus messages, found {len(files)}"
    return files


@pytest.fixture
def tiny_filesystem(tmp_path: Path):  # noqa: ANN201
    """A 4 MB tmpfs, for a store that fills its disk (tests run as root, as CI does)."""
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount_point)],
                   check=True)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)
