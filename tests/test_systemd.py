"""systemd units: valid for systemd-analyze, naming the installed console scripts,
hardened (exposure score recorded in docs/operations.md)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
UNITS = sorted((REPO / "systemd").iterdir())
SCRIPTS = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]


def installed_copy(tmp_path: Path) -> list[Path]:
    """The units with /usr/local/bin/ pointed at where pip put the scripts here."""
    bin_dir = Path(shutil.which("dupfilter-db") or "").parent
    copies = []
    for unit in UNITS:
        copy = tmp_path / unit.name
        copy.write_text(unit.read_text().replace("/usr/local/bin/", f"{bin_dir}/"))
        copies.append(copy)
    return copies


def test_units_exist() -> None:
    assert {u.name for u in UNITS} == {"dupfilter-milter.service", "dupfilter-smtpd.service",
                                       "dupfilter-prune.service", "dupfilter-prune.timer"}


def test_systemd_analyze_verify(tmp_path: Path) -> None:
    assert shutil.which("systemd-analyze"), "systemd-analyze missing (package systemd)"
    # verify runs `man` for each Documentation= page: they are found where an installed
    # environment has them (share/man, as the package's own copy here).
    man = REPO / "mailfilter" / "data" / "man"
    result = subprocess.run(["systemd-analyze", "verify", *map(str, installed_copy(tmp_path))],
                            capture_output=True, text=True, timeout=120,
                            env={**os.environ, "MANPATH": f"{man}:"})
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr


@pytest.mark.parametrize("unit", [u for u in UNITS if u.suffix == ".service"], ids=str)
def test_exec_start_names_an_installed_console_script(unit: Path) -> None:
    starts = re.findall(r"^ExecStart=(\S+)", unit.read_text(), re.MULTILINE)
    assert starts
    for command in starts:
        name = Path(command).name
        assert name in SCRIPTS, f"{unit.name}: {name} is not a console script"
        assert shutil.which(name), f"{name} is not installed"


@pytest.mark.parametrize("unit", [u for u in UNITS if u.suffix == ".service"], ids=str)
def test_units_are_hardened(unit: Path, tmp_path: Path) -> None:
    text = unit.read_text()
    for line in ("NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes",
                 "PrivateTmp=yes", "CapabilityBoundingSet=\n", "MemoryMax="):
        assert line in text, f"{unit.name} lacks {line.strip()}"
    copy = next(c for c in installed_copy(tmp_path) if c.name == unit.name)
    result = subprocess.run(["systemd-analyze", "security", "--offline=true", str(copy)],
                            capture_output=True, text=True, timeout=120)
    score = float(re.search(r"Overall exposure level for \S+: ([\d.]+)", result.stdout)[1])
    assert score <= 2.0, result.stdout[-2000:]


def test_daemons_are_notify_and_restart_on_failure() -> None:
    for name in ("dupfilter-milter.service", "dupfilter-smtpd.service"):
        text = (REPO / "systemd" / name).read_text()
        assert "Type=notify" in text and "Restart=on-failure" in text
    timer = (REPO / "systemd" / "dupfilter-prune.timer").read_text()
    assert "OnCalendar=daily" in timer and "Persistent=true" in timer


def _setting(text: str, key: str) -> str:
    values = re.findall(rf"^{key}=(.*)$", text, re.MULTILINE)
    assert values, f"no {key}="
    return values[-1].strip()


def _seconds(value: str) -> float:
    number, unit = re.fullmatch(r"(\d+)\s*(s|min)?", value).groups()
    return float(number) * (60 if unit == "min" else 1)


def test_postfix_can_reach_the_milter_socket_folder() -> None:
    """Debian's smtpd runs chrooted in /var/spool/postfix: the socket is under it, in a
    folder the unit creates (as root, before the sandbox) with group postfix and search
    permission for that group, writable by the daemon despite ProtectSystem=strict."""
    text = (REPO / "systemd" / "dupfilter-milter.service").read_text()
    assert "--socket unix:/var/spool/postfix/dupfilter/milter.sock" in _setting(text, "ExecStart")
    assert _setting(text, "ExecStartPre") == \
        "+/usr/bin/install -d -o dupfilter -g postfix -m 0750 /var/spool/postfix/dupfilter"
    assert _setting(text, "ReadWritePaths") == "-/var/spool/postfix/dupfilter"
    assert "Before=postfix.service" not in text and "Before=postfix@-.service" in text


@pytest.mark.parametrize("unit", ["dupfilter-milter.service", "dupfilter-smtpd.service"])
def test_daemons_keep_their_status_and_log_to_facility_mail(unit: str) -> None:
    text = (REPO / "systemd" / unit).read_text()
    assert _setting(text, "RuntimeDirectory") == "dupfilter"
    assert _setting(text, "RuntimeDirectoryPreserve") == "yes"     # shared by both units
    assert _setting(text, "SyslogFacility") == "mail"
    assert _setting(text, "Documentation").startswith(f"man:{unit.split('.')[0]}(1)")


@pytest.mark.parametrize(("unit", "module", "grace"), [
    ("dupfilter-milter.service", "mailfilter.milter.server", "SHUTDOWN_GRACE_SECONDS"),
    ("dupfilter-smtpd.service", "mailfilter.smtpd.server", "DRAIN_SECONDS")])
def test_stop_timeout_outlasts_the_daemons_own_shutdown(unit: str, module: str,
                                                          grace: str) -> None:
    """systemd's SIGKILL must not land while the daemon still finishes messages in flight
    and commits what it accepted (plus 10 s for the queued records)."""
    import importlib
    own = getattr(importlib.import_module(module), grace) + 10
    text = (REPO / "systemd" / unit).read_text()
    assert _seconds(_setting(text, "TimeoutStopSec")) > own
