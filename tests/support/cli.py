"""``dupfilter`` and ``dupfilter-db`` as a user runs them: the installed console scripts, each
in a process of its own."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

DUPFILTER = shutil.which("dupfilter") or "dupfilter"
DUPFILTER_DB = shutil.which("dupfilter-db") or "dupfilter-db"


def installed() -> bool:
    """Both console scripts are on PATH (``pip install -e .`` was run)."""
    return bool(shutil.which("dupfilter") and shutil.which("dupfilter-db"))


def run(*args: str, stdin: bytes = b"", env: dict[str, str] | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    """Run a command, its output captured.  A ``DUPFILTER_CONFIG`` of the caller's
    environment is left out: the commands read only the settings the test gives them."""
    environment = {k: v for k, v in os.environ.items() if k != "DUPFILTER_CONFIG"}
    return subprocess.run(list(args), input=stdin, capture_output=True, timeout=timeout,
                          env={**environment, **(env or {})})


def tag(db: Path | str, raw: bytes, *extra: str) -> subprocess.CompletedProcess[bytes]:
    """``dupfilter --db DB --tag`` on ``raw``."""
    return run(DUPFILTER, "--db", str(db), "--tag", *extra, stdin=raw)
