"""`dupfilter-db status` over the daemons' status files, the store-up gauge, the error
counters from start, and `stats` counting every decision (issue 15): the daemons run as
processes (slow tier, tests/conftest.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from support.cli import DUPFILTER_DB, run
from support.daemons import MilterDaemon, SmtpdDaemon
from support.ports import free_port
from test_milter_protocol import body_of, headers


def status(folder: Path, *extra: str) -> tuple[int, str]:
    done = run(DUPFILTER_DB, "status", "--status-dir", str(folder), *extra)
    return done.returncode, done.stdout.decode() + done.stderr.decode()


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return response.read().decode()


def test_status_of_a_healthy_milter_then_stopped(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    config = '[milter.actions]\nduplicate = "reject"\n'
    daemon = MilterDaemon(tmp_path, config, args=("--allow-root", "--status-dir",
                                                   str(folder)))
    with daemon:
        with daemon.client() as client:
            for number in range(3):
                client.message("a@example.test", ["b@example.test"], headers(f"s{number}"),
                               body_of(), queue_id=f"S{number}")
        daemon.wait_lines(3)
        time.sleep(1.5)                     # the status file is rewritten within 0.5 s
        code, text = status(folder)
        assert code == 0, text
        assert text.startswith("dupfilter-milter ") and ": OK" in text.splitlines()[0]
        assert "store      " in text and ": open since" in text
        assert "messages   3 since start; verdicts: duplicate 2, unique 1" in text
        assert "decisions: reject 2, tag 1" in text
        code, raw = status(folder, "--json")
        report = json.loads(raw)
        (milter,) = report["daemons"]
        assert report["healthy"] and milter["healthy"] and milter["pid"] == daemon.proc.pid
        assert milter["store"]["open"] and milter["listening"] == daemon.spec
        assert milter["decisions"] == {"reject": 2, "tag": 1}
    # Stopped: the file says so, and status is not healthy (monitoring alerts).
    code, text = status(folder)
    assert code == 1 and "PROBLEM: stopped" in text, text
    # stats: the rejected copies are counted although they were never recorded.
    stats = json.loads(run(DUPFILTER_DB, "--db", daemon.db, "stats", "--json").stdout)
    (day,) = stats["decisions_per_day"].values()
    assert day == {"reject": 2, "tag": 1}
    (verdicts,) = stats["verdicts_per_day"].values()
    assert verdicts == {"unique": 1}
    text = run(DUPFILTER_DB, "stats", "--db", daemon.db).stdout.decode()
    assert "unique 1  |  tag 1  reject 2" in text


def test_status_says_why_the_store_is_not_open(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the store should be")
    port = free_port()
    config = f'[metrics]\nenabled = true\nlisten = "127.0.0.1:{port}"\n'
    daemon = MilterDaemon(tmp_path, config, db=blocker / "store",
                          args=("--allow-root", "--status-dir", str(folder)))
    with daemon:
        metrics = scrape(port)
        assert 'dupfilter_store_up{front_end="milter"} 0.0' in metrics
        for kind in ("store-unavailable", "StoreError", "other"):
            assert f'dupfilter_errors_total{{front_end="milter",kind="{kind}"}} 0.0' in metrics
        with daemon.client() as client:
            client.message("a@example.test", ["b@example.test"], headers("u1"), body_of(),
                           queue_id="U1")
        daemon.wait_lines(1)
        time.sleep(1.5)
        code, text = status(folder, "dupfilter-milter")
        assert code == 1, text
        assert "PROBLEM: store not open" in text and "messages get on_error=accept" in text
        assert "errors     2" in text and "(queue U1): store unavailable" in text
        assert 'kind="store-unavailable"} 1.0' in scrape(port)


def test_status_of_the_smtpd_and_a_vanished_daemon(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    daemon = SmtpdDaemon(tmp_path, free_port(), free_port(),
                         args=("--allow-root", "--status-dir", str(folder)))
    with daemon:
        code, text = status(folder)
        assert code == 0, text
        assert text.startswith("dupfilter-smtpd ")
        daemon.kill()
    code, text = status(folder)
    assert code == 1 and "not running" in text, text
    code, text = status(tmp_path / "nothing-here")
    assert code == 3 and "no dupfilter daemon status" in text


def test_no_status_folder_is_one_info_line(tmp_path: Path) -> None:
    daemon = MilterDaemon(tmp_path, "", args=("--allow-root", "--status-dir",
                                              str(tmp_path / "missing")))
    with daemon:
        pass
    log = daemon.log_text()
    assert "no status file: " in log and "WARNING" not in log and "Traceback" not in log


def test_installation_not_readable_by_the_user_is_refused_clearly(tmp_path: Path) -> None:
    """The "No module named 'json'" trap: a Python the --user cannot read (a pyenv under
    /root) is refused at start, naming what it cannot read."""
    probe = subprocess.run(
        ["runuser", "-u", "nobody", "--", sys.executable, "-c", "import json"],
        capture_output=True, text=True, timeout=60)
    if probe.returncode == 0:
        pytest.skip("this Python is readable by nobody: nothing to refuse")
    daemon = MilterDaemon(tmp_path, "", args=("--user", "nobody"))
    done = subprocess.run(daemon.command(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "--user nobody cannot read" in done.stderr
    assert "docs/install.md" in done.stderr and "Traceback" not in done.stderr


pytest_plugins = ("redis_servers",)


@pytest.mark.parametrize("backend", ["lmdb", "redis", "cluster"])
def test_count_decision_on_every_backend(backend: str, request: pytest.FixtureRequest,
                                         tmp_path: Path) -> None:
    from mailfilter.config import load_settings
    from mailfilter.engine import Engine
    location = {"lmdb": lambda: str(tmp_path / "store"),
                "redis": lambda: request.getfixturevalue("redis_url"),
                "cluster": lambda: request.getfixturevalue("cluster_url")}[backend]()
    settings = load_settings(search=False)
    day = 20000 * 86400
    with Engine(settings, location) as engine:
        for decision in ("reject", "reject", "discard", "skipped", "no-such-decision"):
            engine.store.count_decision(decision, day + 5)
        engine.store.count_decision("tag", day + 86400)
        engine.store.count_verdict("duplicate", day)
        stats = engine.store.stats()
    decided = {int(k): v for k, v in stats["decisions_per_day"].items()}
    assert decided == {day: {"reject": 2, "discard": 1, "skipped": 1},
                       day + 86400: {"tag": 1}}
    verdicts = {int(k): v for k, v in stats["verdicts_per_day"].items()}
    assert verdicts == {day: {"duplicate": 1}}
