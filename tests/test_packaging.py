"""Packaging: sdist and wheel build cleanly, one version everywhere, helpful --help, and
the code base stays ruff-clean."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import mailfilter

REPO = Path(__file__).resolve().parents[1]


def test_sdist_and_wheel_build(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--sdist",
                             "--wheel", "--outdir", str(tmp_path), str(REPO)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    # The distribution is dupfilter-mail ("dupfilter" on the package index is another
    # project's); the wheel and sdist are named so.
    wheel = next(tmp_path.glob(f"dupfilter_mail-{mailfilter.__version__}-*.whl"))
    assert next(tmp_path.glob(f"dupfilter[-_]mail-{mailfilter.__version__}.tar.gz"))
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = archive.read(next(n for n in names if n.endswith("entry_points.txt")))
    for module in ("store/lmdb.py", "milter/server.py", "smtpd/server.py", "smtpd/__main__.py",
                   "cli/pipe.py", "cli/admin.py"):
        assert f"mailfilter/{module}" in names, module
    # The Redis store's scripts are package data: a wheel without them cannot open a store.
    scripts = {Path(n).name for n in names if n.startswith("mailfilter/store/redis/")}
    assert {"__init__.py", "common.lua", "find.lua", "store.lua", "lookup.lua", "write.lua",
            "lookup_add.lua"} <= scripts
    lua_files = sorted(p.name for p in (REPO / "mailfilter/store/redis").glob("*.lua"))
    assert lua_files and set(lua_files) <= scripts
    for script in (b"dupfilter =", b"dupfilter-db =", b"dupfilter-milter =",
                   b"dupfilter-smtpd ="):
        assert script in entry_points
    # Manual pages and completion, in the package and under the environment's share/.
    for page in ("man1/dupfilter.1", "man1/dupfilter-db.1", "man1/dupfilter-milter.1",
                 "man1/dupfilter-smtpd.1", "man5/dupfilter.toml.5"):
        assert f"mailfilter/data/man/{page}" in names, page
        assert any(n.endswith(f".data/data/share/man/{page}") for n in names), page
    assert any(n.endswith("share/bash-completion/completions/dupfilter.bash") for n in names)
    assert any(n.endswith("share/zsh/site-functions/_dupfilter") for n in names)
    # The Prometheus alerting rules docs/operations.md points at.
    assert any(n.endswith("share/dupfilter/prometheus/dupfilter-alerts.yml") for n in names)


def test_every_command_reports_the_one_version() -> None:
    for command in ("dupfilter", "dupfilter-db", "dupfilter-milter", "dupfilter-smtpd"):
        result = subprocess.run([shutil.which(command) or command, "--version"],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, (command, result.stderr)
        assert mailfilter.__version__ in result.stdout + result.stderr


def test_help_documents_every_option() -> None:
    for command in ("dupfilter", "dupfilter-db", "dupfilter-milter", "dupfilter-smtpd"):
        text = subprocess.run([shutil.which(command) or command, "--help"],
                              capture_output=True, text=True, timeout=60).stdout
        assert "usage:" in text and "--config" in text and "--db" in text, command
        assert len(text.splitlines()) > 8, command


def test_changelog_names_the_version() -> None:
    assert f"## {mailfilter.__version__}" in (REPO / "CHANGELOG.md").read_text()


def test_ruff_clean() -> None:
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "mailfilter", "tests",
                             "bench"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]
