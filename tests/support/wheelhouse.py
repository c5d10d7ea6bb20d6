"""Wheels of installed distributions, for installing offline what the package index would
serve (tests/sandboxed_docs.py: docs/install.md's venv on Debian's python3 has no network).

A wheel is a zip of a distribution's files with its .dist-info; each installed
distribution is packed back from its RECORD (files outside site-packages, such as console
scripts, are left out: pip writes those again from entry_points.txt).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.metadata as metadata
import io
import re
import zipfile
from pathlib import Path

from packaging.requirements import Requirement


def _wheel_tag(dist: metadata.Distribution) -> str:
    text = dist.read_text("WHEEL") or ""
    tags = [tag.split("-") for tag in re.findall(r"^Tag: (\S+)$", text, re.MULTILINE)]
    if not tags:
        return "py3-none-any"
    # Tag: py2-none-any and Tag: py3-none-any make py2.py3-none-any (compressed tag set).
    interpreters = ".".join(dict.fromkeys(t[0] for t in tags if t[1:] == tags[0][1:]))
    return "-".join([interpreters, *tags[0][1:]])


def pack(dist: metadata.Distribution, folder: Path) -> Path:
    """``dist`` as a wheel in ``folder``; returns its path."""
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"])
    version = dist.version
    wheel = folder / f"{name}-{version}-{_wheel_tag(dist)}.whl"
    rows = []
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        record_name = None
        for file in dist.files or []:
            path = str(file)
            if path.startswith("..") or "__pycache__" in path or path.endswith(".pyc"):
                continue
            if path.endswith(".dist-info/RECORD"):
                record_name = path
                continue
            if path.endswith((".dist-info/INSTALLER", ".dist-info/direct_url.json",
                              ".dist-info/REQUESTED")):
                continue
            located = Path(file.locate())
            if not located.is_file():
                continue
            data = located.read_bytes()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            archive.writestr(path, data)
            rows.append((path, f"sha256={digest.decode()}", str(len(data))))
        record_name = record_name or f"{name}-{version}.dist-info/RECORD"
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerows([*rows, (record_name, "", "")])
        archive.writestr(record_name, out.getvalue())
    return wheel


def closure(requirements: list[str], extras: tuple[str, ...] = ()) -> list[str]:
    """Every installed distribution ``requirements`` need (markers for this Python)."""
    wanted, seen = list(requirements), set()
    while wanted:
        requirement = Requirement(wanted.pop())
        key = re.sub(r"[-_.]+", "-", requirement.name).lower()
        if key in seen:
            continue
        seen.add(key)
        dist = metadata.distribution(requirement.name)
        for child in dist.requires or []:
            parsed = Requirement(child)
            chosen = requirement.extras or set()
            if parsed.marker is None or any(parsed.marker.evaluate({"extra": e})
                                             for e in (chosen or {""})):
                wanted.append(child.split(";")[0])
    return sorted(seen)


def wheelhouse(folder: Path, requirements: list[str]) -> list[Path]:
    """Wheels of ``requirements`` and everything they need, as installed here."""
    folder.mkdir(parents=True, exist_ok=True)
    return [pack(metadata.distribution(name), folder) for name in closure(requirements)]
