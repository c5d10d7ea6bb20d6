"""The postmaster's tools (issue 15): explain, compare, stats, config, global options,
progress, in process (``dupfilter-db``'s ``main``), so that they run in the quick tier."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from helpers import make_message, paragraph_text

from mailfilter.cli import admin
from mailfilter.cli.batch import Progress, input_bytes


def db(capsys: pytest.CaptureFixture[str], *args: str, stdin: bytes | None = None,
       monkeypatch: pytest.MonkeyPatch | None = None) -> tuple[int, str, str]:
    """``dupfilter-db ARGS`` in this process: (exit status, stdout, stderr)."""
    if stdin is not None:
        assert monkeypatch is not None
        import io
        import sys

        class Stdin:
            buffer = io.BytesIO(stdin)
        monkeypatch.setattr(sys, "stdin", Stdin)
    status = admin.main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture(autouse=True)
def _no_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Only the settings a test gives: no $DUPFILTER_CONFIG, no user or system file."""
    monkeypatch.delenv("DUPFILTER_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "no-config"))
    monkeypatch.setattr("mailfilter.config.SYSTEM_CONFIG", tmp_path / "no-system.toml")


@pytest.fixture
def messages(tmp_path: Path) -> dict[str, Path]:
    text = paragraph_text(3, count=200)
    files = {
        "a": make_message(text, message_id="<a@example.org>"),
        "near": make_message(text + "\nOne more sentence at the end.",
                             message_id="<near@example.org>"),
        "other": make_message(paragraph_text(77, count=200), message_id="<other@example.org>"),
        "reply": make_message(paragraph_text(78, count=30), message_id="<reply@example.org>",
                              headers={"In-Reply-To": "<a@example.org>",
                                             "References": "<a@example.org>"}),
    }
    out = {}
    for name, raw in files.items():
        out[name] = tmp_path / f"{name}.eml"
        out[name].write_bytes(raw)
    return out


def stored(capsys: pytest.CaptureFixture[str], store: Path, *paths: Path) -> None:
    status, _, err = db(capsys, "--db", str(store), "import", "--jobs", "1",
                        *map(str, paths))
    assert status == 0, err


# ------------------------------------------------------------------------------ explain

def test_explain_files_names_the_rule_and_why(capsys, tmp_path, messages) -> None:
    store = tmp_path / "store"
    stored(capsys, store, messages["a"])
    status, out, err = db(capsys, "explain", "--db", str(store), str(messages["near"]),
                          str(messages["other"]))
    assert status == 0, err
    near, other = out.split("\n== ")[0], out.split("\n== ")[1]
    assert near.startswith(f"== {messages['near']}")
    assert "X-Dupfilter: near-duplicate" in near
    assert "by rule shingles" in near and "word-shingle resemblance" in near
    assert "candidates weighed: 1" in near and "<a@example.org>" in near
    assert "X-Dupfilter: unique" in other


def test_explain_json_has_every_candidates_rule_and_note(capsys, tmp_path, messages,
                                                       monkeypatch) -> None:
    store = tmp_path / "store"
    stored(capsys, store, messages["a"])
    raw = messages["a"].read_bytes().replace(b"<a@example.org>", b"<again@example.org>")
    status, out, _ = db(capsys, "--db", str(store), "explain", "--json", stdin=raw,
                        monkeypatch=monkeypatch)
    row = json.loads(out)
    assert row["verdict"] == "duplicate" and row["decided_by"] == "digest"
    (candidate,) = row["candidates"]
    assert candidate["rule"] == "digest" and candidate["note"] == "same text"
    assert set(candidate) >= {"found_by", "resemblance", "containment",
                              "histogram_bins_differing", "attachment_chunk_similarity",
                              "attachment", "score"}
    assert row["why"] is None


def test_explain_json_of_a_reply_gives_why_not(capsys, tmp_path, messages) -> None:
    store = tmp_path / "store"
    stored(capsys, store, messages["a"])
    status, out, _ = db(capsys, "--db", str(store), "explain", "--json",
                        str(messages["reply"]))
    assert status == 0
    row = json.loads(out)
    assert row["path"] == str(messages["reply"]) and row["verdict"] == "unique"
    if row["candidates"]:
        assert row["candidates"][0]["rule"] in ("reply", "short-text", "subject", None)
        assert row["why"] == row["candidates"][0]["note"]
    status, text, _ = db(capsys, "--db", str(store), "explain", str(messages["reply"]))
    assert "X-Dupfilter: unique" in text
    assert "why" in text


def test_explain_with_no_candidate_says_so(capsys, tmp_path, messages) -> None:
    store = tmp_path / "store"
    stored(capsys, store, messages["a"])
    _, out, _ = db(capsys, "--db", str(store), "explain", str(messages["other"]))
    assert "no stored record shares" in out or "why unique" in out


# ------------------------------------------------------------------------------ compare

def test_compare_leads_with_the_verdict(capsys, messages) -> None:
    status, out, _ = db(capsys, "compare", str(messages["a"]), str(messages["near"]))
    assert status == 0
    lines = out.splitlines()
    assert lines[0].startswith("verdict: B is a near-duplicate of A, by rule shingles")
    assert lines[1].startswith("why: word-shingle resemblance 0.9")
    assert "seed" not in out and "formula" not in out and "r[ 0]" not in out
    _, out, _ = db(capsys, "compare", str(messages["a"]), str(messages["other"]))
    assert out.startswith("verdict: unique")


def test_compare_of_two_short_texts_explains_single_chunks(capsys, tmp_path) -> None:
    a, b = tmp_path / "a.eml", tmp_path / "b.eml"
    a.write_bytes(make_message("the meeting is moved to three o'clock in room four",
                               message_id="<m1@example.org>"))
    b.write_bytes(make_message("the meeting is moved to four o'clock in room three",
                               message_id="<m2@example.org>"))
    _, out, _ = db(capsys, "compare", str(a), str(b))
    assert "each message is a single chunk" in out
    row = json.loads(db(capsys, "compare", "--json", str(a), str(b))[1])
    assert row["chunks"]["one_chunk_each"] is True and row["verdict"] == "unique"


# ----------------------------------------------------------------------- global options

def test_global_options_after_the_command(capsys, tmp_path, messages) -> None:
    store = tmp_path / "store"
    stored(capsys, store, messages["a"])
    before = db(capsys, "--db", str(store), "stats", "--json")
    after = db(capsys, "stats", "--db", str(store), "--json")
    assert before[0] == after[0] == 0
    assert json.loads(before[1])["records"] == json.loads(after[1])["records"] == 1
    config = tmp_path / "d.toml"
    config.write_text("[detector]\nmin_words = 7\n")
    _, shown, _ = db(capsys, "config", "--show", "--config", str(config))
    assert f"min_words = 7  # {config}:2" in shown
    # Given before the command and not repeated after it, --db still counts.
    _, out, _ = db(capsys, "--db", str(store), "stats", "--config", str(config))
    assert "records    1" in out


# ----------------------------------------------------------------------------- progress

def test_progress_knows_the_total_of_files_folders_and_maildirs(tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    (folder / "sub").mkdir(parents=True)
    (folder / "one").write_bytes(b"x" * 100)
    (folder / "sub" / "two").write_bytes(b"y" * 50)
    (folder / ".hidden").write_bytes(b"z" * 1000)
    mbox = tmp_path / "box.mbox"
    mbox.write_bytes(b"m" * 70)
    assert input_bytes([str(folder), str(mbox)]) == 220
    assert input_bytes(["-"]) is None


def test_progress_bar_shows_total_and_time_left(capsys) -> None:
    bar = Progress(1000)
    bar.update(3, 400)
    bar.bar.refresh()
    bar.close()
    err = capsys.readouterr().err
    assert "1000" in err or "1.00k" in err or "0.98k" in err, err
    assert "3 msg" in err and "<" in err


# ------------------------------------------------------------------------------- config

def test_config_show_changed_lists_only_what_differs(capsys, tmp_path) -> None:
    config = tmp_path / "d.toml"
    config.write_text('[detector]\nmin_words = 12\nscope = "global"\n\n'
                      '[milter.actions]\nduplicate = "reject"\n')
    status, out, _ = db(capsys, "--config", str(config), "--db", str(tmp_path / "s"),
                        "config", "--show", "--changed")
    assert status == 0
    lines = [line for line in out.splitlines() if line and not line.startswith("#")]
    assert lines == ["[store]", f'path = "{tmp_path / "s"}"  # --db', "[detector]",
                     f'min_words = 12  # {config}:2', f'scope = "global"  # {config}:3',
                     "[milter]", f'actions.duplicate = "reject"  # {config}:6']
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    _, out, _ = db(capsys, "config", "--show", "--changed", "--config", str(empty))
    assert "every setting has its default value" in out


def test_config_check_wires_the_socket_group_and_the_folder(capsys, tmp_path,
                                                            monkeypatch) -> None:
    base = Path(tempfile.mkdtemp(prefix="dupfilter-check-"))     # /tmp: others may search
    base.chmod(0o755)
    run_dir = base / "run"
    run_dir.mkdir()
    run_dir.chmod(0o700)
    config = tmp_path / "d.toml"
    config.write_text(f'[milter]\nsocket = "unix:{run_dir}/milter.sock"\n'
                      'socket_group = "no-such-group-here"\n')
    status, out, _ = db(capsys, "config", "--check", "--config", str(config))
    assert status == 1
    assert f"PROBLEM  {config}:3: milter.socket_group = 'no-such-group-here' is no group" in out
    assert f"PROBLEM  postfix cannot reach {run_dir}/milter.sock: no search permission on " \
           f"{run_dir} (mode 0700" in out
    run_dir.chmod(0o751)
    config.write_text(f'[milter]\nsocket = "unix:{run_dir}/milter.sock"\n')
    status, out, _ = db(capsys, "config", "--check", "--config", str(config))
    shutil.rmtree(base)
    assert status == 0, out
    assert "ok       socket group postfix exists" in out
    assert "postfix can reach the folder of" in out


def postfix_dir(tmp_path: Path, main: str, master: str) -> Path:
    folder = tmp_path / "postfix"
    folder.mkdir(parents=True)
    (folder / "main.cf").write_text(main)
    (folder / "master.cf").write_text(master)
    return folder


MASTER = """smtp      inet  n       -       y       -       -       smtpd
pickup    unix  n       -       y       60      1       pickup
"""


def test_config_check_postfix_milter_in_the_chroot(capsys, tmp_path) -> None:
    spool = "/var/spool/postfix/dupfilter/milter.sock"
    folder = postfix_dir(tmp_path, "smtpd_milters = unix:/dupfilter/milter.sock\n"
                         "milter_default_action = tempfail\n", MASTER)
    config = tmp_path / "d.toml"
    config.write_text(f'[milter]\nsocket = "unix:{spool}"\nsocket_group = ""\n')
    _, out, _ = db(capsys, "config", "--check", "--config", str(config), "--postfix",
                   str(folder), "--mta-user", "nobody-at-all")
    assert "ok       smtpd_milters = unix:/dupfilter/milter.sock: dupfilter-milter's socket" \
        in out
    assert "ok       milter_default_action = tempfail" in out
    # The socket outside the chroot: said, with the way out.
    config.write_text('[milter]\nsocket = "unix:/run/dupfilter/milter.sock"\n'
                      'socket_group = ""\n')
    folder = postfix_dir(tmp_path / "2", "smtpd_milters = unix:/run/dupfilter/milter.sock\n"
                         "milter_default_action = reject\n", MASTER)
    status, out, _ = db(capsys, "config", "--check", "--config", str(config), "--postfix",
                        str(folder), "--mta-user", "nobody-at-all")
    assert status == 1
    assert "runs chrooted in /var/spool/postfix" in out
    assert "PROBLEM  milter_default_action = reject" in out


def test_config_check_postfix_content_filter(capsys, tmp_path) -> None:
    master = MASTER.replace("smtpd\n", "smtpd\n  -o content_filter=scan:[127.0.0.1]:10025\n", 1) + \
        "scan      unix  -       -       n       -       10      smtp\n" \
        "127.0.0.1:10026 inet n  -       n       -       10      smtpd\n" \
        "  -o content_filter=\n  -o receive_override_options=no_milters\n"
    folder = postfix_dir(tmp_path, "", master)
    config = tmp_path / "d.toml"
    config.write_text("")
    status, out, _ = db(capsys, "config", "--check", "--config", str(config), "--postfix",
                        str(folder))
    assert status == 0, out
    assert "smtp: content_filter = scan:[127.0.0.1]:10025 reaches dupfilter-smtpd" in out
    assert "master.cf has the re-injection smtpd 127.0.0.1:10026" in out
    config.write_text('[smtpd]\nlisten = "127.0.0.1:10027"\nmode = "proxy"\n')
    status, out, _ = db(capsys, "config", "--check", "--config", str(config), "--postfix",
                        str(folder))
    assert status == 1
    assert "does not reach dupfilter-smtpd's listen = 127.0.0.1:10027" in out


# ---------------------------------------------------------------------------------- logs

def test_syslog_target_writes_facility_mail(tmp_path, monkeypatch) -> None:
    """[log] target = "syslog": the per-message line reaches the syslog socket with facility
    mail (priority <22> = mail.info), tagged with the program and its pid (here a socket
    of the test's own: /dev/log may be absent)."""
    import os
    import socket

    from mailfilter import logs
    from mailfilter.config import LogSettings
    from mailfilter.names import Action
    path = tmp_path / "log.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    server.bind(str(path))
    server.settimeout(5)
    monkeypatch.setattr(logs, "SYSLOG_SOCKET", str(path))
    logger = logs.setup_logging(LogSettings(target="syslog"), "dupfilter-milter")
    try:
        from mailfilter.store import StoreUnavailable
        logs.OutcomeLog(logger).log(logs.failed(
            logs.Outcome(logs.MILTER_ERROR_LINE, action=Action.ACCEPT, queue="4XkQ2", size=10,
                         capped=False), StoreUnavailable()))
        data = server.recv(4096).decode()
    finally:
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
            handler.close()
        server.close()
    assert data.startswith(f"<{2 * 8 + 4}>dupfilter-milter[{os.getpid()}]: queue=4XkQ2 "
                           "action=accept error=\"store unavailable\"")


def test_outcome_decision_names() -> None:
    from mailfilter import logs
    from mailfilter.names import Action
    assert logs.Outcome(logs.SMTPD_REFUSED_LINE, action=Action.REFUSED,
                        refused_for="size").decision == "refused"
    assert logs.Outcome(logs.MILTER_ERROR_LINE, action=Action.ACCEPT,
                        error="x").decision == "unchecked"
