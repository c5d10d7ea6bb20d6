"""The daemons' command-line flags (issue 14, the flag review): a value that cannot be what
the user meant stops the start (exit 2) with one line that names the flag — not the
configuration file it overrides — the value, the expected form and an example.

On db08d02 and main before this change: ``--db redis:/typo`` started the daemon, which then
failed to open that "store" every 10 s (``on_error`` for every message); ``--socket`` and
``--listen`` errors were reported against the configuration file; ``--store-retry 0``,
``nan`` or ``-5`` were taken; ``--user`` was looked up only after the socket was bound.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.ports import free_port

CASES = [
    ("mailfilter.milter", ["--db", "redis:/127.0.0.1:6379"],
     "--db: store.path = 'redis:/127.0.0.1:6379' looks like a URL (redis:)", "e.g. redis://"),
    ("mailfilter.milter", ["--db", ""], "--db: store.path = '' names no store", "e.g. /"),
    ("mailfilter.milter", ["--socket", "inet:99999@127.0.0.1"],
     "--socket: milter.socket = 'inet:99999@127.0.0.1' has port 99999, outside 1-65535",
     "e.g. inet:8890@127.0.0.1"),
    ("mailfilter.milter", ["--socket", "inet:8890"],
     "--socket: milter.socket = 'inet:8890' names no host", "e.g. inet:8890@127.0.0.1"),
    ("mailfilter.milter", ["--socket", "unix:relative.sock"],
     "--socket: milter.socket = 'unix:relative.sock' is not an absolute path", "e.g. unix:/"),
    ("mailfilter.milter", ["--user", "no-such-user-here"],
     "--user 'no-such-user-here' is no user on this machine", "e.g. dupfilter"),
    ("mailfilter.milter", ["--store-retry", "0"],
     "--store-retry 0.0 is not a time in seconds more than 0", "e.g. 10"),
    ("mailfilter.milter", ["--store-retry", "nan"], "--store-retry nan is not a time",
     "e.g. 10"),
    ("mailfilter.smtpd", ["--db", "redis//127.0.0.1:6379"],
     "--db: store.path = 'redis//127.0.0.1:6379' looks like a URL with its colon missing",
     "e.g. redis://127.0.0.1:6379"),
    ("mailfilter.smtpd", ["--listen", "0.0.0.0:99999"],
     "--listen: smtpd.listen = '0.0.0.0:99999' has port 99999, outside 1-65535",
     "e.g. 127.0.0.1:10025"),
    ("mailfilter.smtpd", ["--listen", ":10025"],
     "--listen: smtpd.listen = ':10025' names no host", "e.g. 127.0.0.1:10025"),
    ("mailfilter.smtpd", ["--listen", "127.0.0.1:0"],
     "--listen: smtpd.listen = '127.0.0.1:0' has port 0, outside 1-65535", "e.g. 127.0.0."),
    ("mailfilter.smtpd", ["--next-hop", "127.0.0.1"],
     "--next-hop: smtpd.next_hop = '127.0.0.1' is not HOST:PORT", "e.g. 127.0.0.1:10026"),
    ("mailfilter.smtpd", ["--connections", "0"], "--connections 0 is not from 1 to 1000",
     "e.g. 10"),
    ("mailfilter.smtpd", ["--user", "no-such-user-here"],
     "--user 'no-such-user-here' is no user on this machine", "e.g. dupfilter"),
    ("mailfilter.smtpd", ["--store-retry", "-5"],
     "--store-retry -5.0 is not a time in seconds more than 0", "e.g. 10"),
]


def start(module: str, flags: list[str], tmp_path: Path, config: str = ""
          ) -> subprocess.CompletedProcess[str]:
    (tmp_path / "c.toml").write_text(config)
    own = (["--socket", f"unix:{tmp_path}/m.sock"] if module.endswith("milter") else
           ["--listen", f"127.0.0.1:{free_port()}", "--next-hop", "127.0.0.1:1"])
    given = {flag for flag in flags if flag.startswith("--")}
    own = [word for flag, word in zip(own[::2], own[1::2], strict=True)
           if flag not in given for word in (flag, word)]
    return subprocess.run([sys.executable, "-m", module, "--config", str(tmp_path / "c.toml"),
                           "--db", str(tmp_path / "db"), *own, "--allow-root",
                           "--status-dir", "", *flags],
                          capture_output=True, text=True, timeout=30,
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("module, flags, says, example", CASES,
                         ids=[f"{m.split('.')[1]} {' '.join(f)}" for m, f, _, _ in CASES])
def test_a_bad_flag_stops_the_start_with_one_line_naming_it(
        tmp_path: Path, module: str, flags: list[str], says: str, example: str) -> None:
    started = time.monotonic()
    done = start(module, flags, tmp_path)
    program = "dupfilter-" + module.split(".")[1]
    assert done.returncode == 2, done
    assert done.stderr.count("\n") == 1 and done.stdout == "", done.stderr
    assert done.stderr.startswith(f"{program}: {says}"), done.stderr
    assert "; expected " in done.stderr and example in done.stderr, done.stderr
    assert str(tmp_path / "c.toml") not in done.stderr          # the flag, not the file
    assert time.monotonic() - started < 20
    assert not (tmp_path / "m.sock").exists() and not (tmp_path / "db").exists()


@pytest.mark.parametrize("module, key, value", [
    ("mailfilter.milter", "[milter]\nsocket", "inet:99999@127.0.0.1"),
    ("mailfilter.smtpd", "[smtpd]\nlisten", "0.0.0.0:99999"),
])
def test_the_same_value_from_the_file_names_the_file_and_line(
        tmp_path: Path, module: str, key: str, value: str) -> None:
    config = f"{key} = \"{value}\"\n"
    (tmp_path / "c.toml").write_text(config)
    own = ([] if module.endswith("milter") else ["--next-hop", "127.0.0.1:1"])
    done = subprocess.run([sys.executable, "-m", module, "--config", str(tmp_path / "c.toml"),
                           "--db", str(tmp_path / "db"), *own, "--allow-root", "--status-dir", ""],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert done.stderr.startswith(f"dupfilter-{module.split('.')[1]}: {tmp_path}/c.toml:2: ")


@pytest.mark.parametrize("module", ["mailfilter.milter", "mailfilter.smtpd"])
def test_a_relative_db_is_made_absolute(tmp_path: Path, module: str) -> None:
    """``--db store`` is the folder where the daemon was started, said so in full (the
    store is opened later, after --user, and again on retries)."""
    (tmp_path / "c.toml").write_text("")
    port = free_port()
    own = (["--socket", f"unix:{tmp_path}/m.sock"] if module.endswith("milter") else
           ["--listen", f"127.0.0.1:{port}", "--next-hop", "127.0.0.1:1"])
    log = tmp_path / "log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", module, "--config", "c.toml", "--db",
                                 "st", *own, "--allow-root", "--status-dir", ""],
                                cwd=tmp_path, stdout=out,
                                stderr=subprocess.STDOUT, env={**os.environ,
                                                               "PYTHONUNBUFFERED": "1"})
    try:
        deadline = time.monotonic() + 30
        while "listening on" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
    finally:
        proc.terminate()
        proc.wait(40)
    assert f"store opened: {tmp_path}/st\n" in log.read_text(), log.read_text()
    assert (tmp_path / "st" / "data.mdb").exists()


def test_daemons_of_the_tests_leave_the_hosts_run_folder_alone(tmp_path: Path) -> None:
    """Issue 20: the daemons these tests start wrote their status into the host's live
    /run/dupfilter (a phantom root-owned dupfilter-smtpd in `dupfilter-db status` of a
    host where dupfilter is installed).  Started as the tests start them, a daemon keeps
    no status outside the test's folder."""
    from support.daemons import MilterDaemon
    before = set(Path("/run/dupfilter").glob("*")) if Path("/run/dupfilter").is_dir() else set()
    daemon = MilterDaemon(tmp_path)
    assert "--status-dir" in daemon.command()
    with daemon:
        assert daemon.proc is not None
        pid = daemon.proc.pid
    after = set(Path("/run/dupfilter").glob("*")) if Path("/run/dupfilter").is_dir() else set()
    assert after == before
    assert f'"pid": {pid}' not in "".join(p.read_text() for p in after if p.is_file())
    assert "no status file" in daemon.log_text()
