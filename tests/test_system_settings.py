"""`dupfilter-db` on a host set up as docs/install.md says (issue 20, item 5): run as root on
the units' settings file, it works on the store and the socket the daemons really use (their
units pass them as --db and --socket), not on root's per-user store and the built-in socket.
The units are the shipped ones, installed in a folder of the test's own
(service.SYSTEMD_UNIT_DIRS) with their paths moved under it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import make_message, paragraph_text
from test_tools import MASTER, db, postfix_dir

from mailfilter import service
from mailfilter.config import Settings
from mailfilter.engine import Engine

REPO = Path(__file__).resolve().parents[1]
SPOOL_SOCKET = "/var/spool/postfix/dupfilter/milter.sock"


@pytest.fixture
def system(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """The shipped units under ``tmp_path/units``, their settings file and store moved to
    ``tmp_path/etc`` and ``tmp_path/var``; root's home (its per-user store) in tmp_path."""
    units = tmp_path / "units"
    units.mkdir()
    etc, var = tmp_path / "etc" / "dupfilter.toml", tmp_path / "var" / "dupfilter"
    etc.parent.mkdir()
    etc.write_text("")
    for unit in ("dupfilter-milter.service", "dupfilter-smtpd.service"):
        text = (REPO / "systemd" / unit).read_text()
        text = text.replace("/etc/dupfilter/dupfilter.toml", str(etc)) \
            .replace("--db /var/lib/dupfilter", f"--db {var}")
        (units / unit).write_text(text)
    monkeypatch.setattr(service, "SYSTEMD_UNIT_DIRS", (str(units),))
    monkeypatch.setenv("DUPFILTER_CONFIG", str(etc))
    monkeypatch.setenv("HOME", str(tmp_path / "root"))
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    return {"units": units, "config": etc, "store": var}


def record_one(store: Path) -> None:
    with Engine(Settings(), str(store)) as engine:
        engine.check(make_message(paragraph_text(1, 60)), ["bob@example.net"])


def test_stats_and_prune_as_root_use_the_daemons_store(capsys, system) -> None:  # noqa: ANN001
    """Issue 20 item 5: as root (cron, the prune timer's command by hand) `stats` and
    `prune` opened root's own ~/.local/state/dupfilter ("nothing to prune ... yet" for
    ever); now the store the units pass with --db."""
    record_one(system["store"])
    status, out, err = db(capsys, "stats", "--json")
    assert status == 0, err
    stats = json.loads(out)
    assert stats["location"] == str(system["store"]) and stats["records"] == 1
    status, out, err = db(capsys, "prune")
    assert status == 0, err
    assert "1 remain" in out and "nothing to prune" not in out
    # --db still wins, and another settings file is the user's own business.
    other = system["config"].with_name("mine.toml")
    other.write_text("")
    status, out, err = db(capsys, "--config", str(other), "prune")
    assert "nothing to prune: no dupfilter store at" in out and "root/.local/state" in out


def test_a_drop_in_moves_the_store(capsys, system) -> None:  # noqa: ANN001
    """A drop-in (``systemctl edit``) that gives ExecStart again is what counts."""
    moved = system["store"].with_name("elsewhere")
    record_one(moved)
    drop_in = system["units"] / "dupfilter-milter.service.d"
    drop_in.mkdir()
    unit = (system["units"] / "dupfilter-milter.service").read_text()
    exec_start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    (drop_in / "store.conf").write_text(
        "[Service]\nExecStart=\n" + exec_start.replace(str(system["store"]), str(moved)) + "\n")
    (system["units"] / "dupfilter-smtpd.service").unlink()
    status, out, err = db(capsys, "stats", "--json")
    assert status == 0, err
    assert json.loads(out)["location"] == str(moved)


def test_config_check_postfix_reads_the_units_socket_and_store(capsys, system) -> None:  # noqa: ANN001
    """Issue 20 item 5: `config --check --postfix` on the documented install said
    "PROBLEM smtpd_milters = unix:/dupfilter/milter.sock does not name dupfilter-milter's
    socket inet:8890@127.0.0.1" (a postmaster who "fixed" main.cf tempfailed all mail) and
    checked root's per-user store.  Now it compares Postfix with the unit's --socket, and
    checks the unit's store folder."""
    folder = postfix_dir(system["units"].parent, "smtpd_milters = unix:/dupfilter/milter.sock\n"
                         "milter_default_action = tempfail\n", MASTER)
    _, out, _ = db(capsys, "config", "--check", "--postfix", str(folder),
                   "--mta-user", "nobody-at-all", "--user", "root")
    assert f"ok       smtpd_milters = unix:/dupfilter/milter.sock: dupfilter-milter's socket " \
           f"(unix:{SPOOL_SOCKET})" in out, out
    assert "does not name dupfilter-milter's socket" not in out
    assert ".local/state" not in out and f"store folder {system['store']}" in out, out
    _, out, _ = db(capsys, "config", "--show")
    assert f'path = "{system["store"]}"  # {system["units"]}/dupfilter-milter.service --db' \
        in out, out


def test_instance_names_from_the_unit() -> None:
    """Issue 20 item 2: a daemon's status file is named after its unit's instance, or its
    unit when that is not the program's; outside a dupfilter unit it has no name."""
    name = service.instance_name
    assert name("dupfilter-milter", None, "dupfilter-milter@b.service") == "b"
    assert name("dupfilter-milter", None, "dupfilter-milter-b.service") == "dupfilter-milter-b"
    assert name("dupfilter-milter", None, "dupfilter-milter.service") is None
    assert name("dupfilter-milter", None, "gitlab-runner.service") is None
    assert name("dupfilter-milter", "a", "dupfilter-milter@b.service") == "a"
    assert service.status_file_name("dupfilter-milter", "b/../x") == "dupfilter-milter@b_.._x.json"
