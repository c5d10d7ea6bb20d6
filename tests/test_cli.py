"""The commands as a user runs them: `dupfilter` and `dupfilter-db`, real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import make_message, paragraph_text
from support.cli import DUPFILTER, DUPFILTER_DB, installed, run, tag


@pytest.fixture(autouse=True)
def _installed() -> None:
    assert installed(), "install the project first: pip install -e ."


def header_of(output: bytes) -> list[str]:
    head = output.split(b"\n\n", 1)[0].decode()
    return [line for line in head.splitlines() if line.lower().startswith("x-dupfilter:")]


def test_tag_adds_one_header_and_second_copy_is_duplicate(tmp_path: Path) -> None:
    raw = make_message(paragraph_text(1), message_id="<first@example.org>")
    first = tag(tmp_path, raw)
    assert first.returncode == 0, first.stderr
    assert header_of(first.stdout) == ["X-Dupfilter: unique"]
    assert first.stdout.endswith(raw.split(b"\n\n", 1)[1])
    second = tag(tmp_path, make_message(paragraph_text(1), message_id="<second@example.org>"))
    assert header_of(second.stdout) == [
        "X-Dupfilter: duplicate; score=1.00; reason=digest; match=<first@example.org>; seen=2"]


def test_incoming_header_is_replaced_even_when_folded(tmp_path: Path) -> None:
    raw = make_message(paragraph_text(2), headers={
        "X-Dupfilter": "duplicate; forged=yes\n\tcontinued-forgery", "X-DUPFILTER": "again"})
    out = tag(tmp_path, raw).stdout
    assert header_of(out) == ["X-Dupfilter: unique"]
    assert b"forged" not in out and b"continued-forgery" not in out and b"again" not in out


def test_crlf_message_stays_crlf(tmp_path: Path) -> None:
    raw = make_message(paragraph_text(3), crlf=True)
    out = tag(tmp_path, raw).stdout
    assert out.startswith(b"X-Dupfilter: unique\r\n") and out.endswith(raw.split(b"\r\n\r\n")[1])


def test_check_exit_status_and_json(tmp_path: Path) -> None:
    raw = make_message(paragraph_text(4))
    assert run(DUPFILTER, "--db", str(tmp_path), "--check", stdin=raw).returncode == 1
    result = run(DUPFILTER, "--db", str(tmp_path), "--check", "--json", stdin=raw)
    assert result.returncode == 0
    verdict = json.loads(result.stdout)
    assert verdict["verdict"] == "duplicate" and verdict["match"]["message_id"]


def test_no_record_leaves_the_store_unchanged(tmp_path: Path) -> None:
    raw = make_message(paragraph_text(5))
    for _ in range(2):
        assert run(DUPFILTER, "--db", str(tmp_path), "--check", "--no-record",
                   stdin=raw).returncode == 1


def test_failure_passes_the_message_through_unchanged(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the store should be")
    raw = make_message(paragraph_text(6))
    result = tag(blocker, raw)
    assert result.returncode == 0
    assert result.stdout == raw
    assert b"passed through unchecked" in result.stderr
    assert b"Traceback" not in result.stderr


def test_bad_config_passes_through_and_says_why(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text("[detector]\nno_such_key = 1\n")
    raw = make_message("hello")
    result = run(DUPFILTER, "--config", str(config), "--db", str(tmp_path / "s"), "--tag",
                 stdin=raw)
    assert result.returncode == 0 and result.stdout == raw
    assert b"unknown key detector.no_such_key" in result.stderr and b":2:" in result.stderr


def forged(seed: int) -> tuple[bytes, bytes]:
    """A message with forged X-Dupfilter fields (one folded), and the same without them.
    The body's own "X-Dupfilter: duplicate" line is not a header and stays."""
    text = paragraph_text(seed) + "\nX-Dupfilter: duplicate (quoted in the body)\n"
    raw = make_message(text, headers={"X-Dupfilter": "duplicate; forged=yes\n\tcontinued",
                                      "X-Other": "kept", "x-dupfilter ": "near-duplicate"})
    return raw, make_message(text, headers={"X-Other": "kept"})


@pytest.mark.parametrize("case", ["store-error", "bad-config", "usage-error"])
def test_pass_through_removes_a_forged_header(tmp_path: Path, case: str) -> None:
    """Unchecked is not unfiltered: a forged "X-Dupfilter: duplicate" must not reach the
    recipe that files duplicates apart while the filter is failing."""
    raw, clean = forged(11)
    args = [DUPFILTER, "--db", str(tmp_path / "s"), "--tag"]
    if case == "store-error":
        (tmp_path / "s").write_text("a file where the store should be")
    elif case == "bad-config":
        (tmp_path / "bad.toml").write_text("[detector]\nno_such_key = 1\n")
        args += ["--config", str(tmp_path / "bad.toml")]
    else:
        args.append("--no-such-flag")
    for message, expected in ((raw, clean), (raw.replace(b"\n", b"\r\n"),
                                             clean.replace(b"\n", b"\r\n"))):
        result = run(*args, stdin=message)
        assert result.returncode == 0, result.stderr
        assert result.stdout == expected
        assert b"passed through unchecked" in result.stderr
        assert b"Traceback" not in result.stderr


def test_pass_through_keeps_the_message_if_removing_the_header_fails(tmp_path: Path) -> None:
    """The removal itself failing (here: made to) must not lose the message: it goes
    through byte for byte, and stderr says why."""
    raw, _ = forged(12)
    (tmp_path / "s").write_text("a file where the store should be")
    script = ("import sys\n"
              "import mailfilter.headers as headers\n"
              "def broken(raw):\n"
              "    raise MemoryError('no room to rebuild the header')\n"
              "headers.remove_ours = broken\n"
              "from mailfilter.cli.pipe import main\n"
              "sys.exit(main())\n")
    result = run(sys.executable, "-c", script, "--db", str(tmp_path / "s"), "--tag",
                 stdin=raw)
    assert result.returncode == 0, result.stderr
    assert result.stdout == raw
    assert b"cannot remove the incoming X-Dupfilter header (MemoryError: no room" \
        in result.stderr and b"passed through unchanged" in result.stderr


def test_garbage_input_gets_a_verdict(tmp_path: Path) -> None:
    garbage = bytes(range(256)) * 100 + b"\x00" * 1000
    result = tag(tmp_path, garbage)
    assert result.returncode == 0 and result.stdout.startswith(b"X-Dupfilter: ")
    assert result.stdout.endswith(garbage[-1000:])


def corpus_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "mail"
    folder.mkdir()
    for index in range(12):
        body = paragraph_text(index % 8, count=150)
        (folder / f"{index:03d}.eml").write_bytes(
            make_message(body, message_id=f"<c{index}@example.org>"))
    (folder / "README").write_text("not a message\n")
    return folder


def test_import_then_scan_reports_duplicates_in_order(tmp_path: Path) -> None:
    folder = corpus_folder(tmp_path)
    store = tmp_path / "store"
    imported = run(DUPFILTER_DB, "--db", str(store), "import", str(folder))
    assert imported.returncode == 0, imported.stderr
    assert b"imported 12 messages (8 unique, 4 duplicate" in imported.stdout
    scan_store = tmp_path / "scan"
    scanned = run(DUPFILTER_DB, "--db", str(scan_store), "scan", "--json", str(folder))
    rows = [json.loads(line) for line in scanned.stdout.splitlines()]
    assert [Path(r["path"]).name for r in rows] == [f"{i:03d}.eml" for i in range(12)]
    assert [r["verdict"] for r in rows] == ["unique"] * 8 + ["duplicate"] * 4
    assert rows[8]["match"]["message_id"] == "<c0@example.org>"
    assert all(set(r) >= {"path", "message_id", "verdict", "score", "match"} for r in rows)
    assert b"skipped" in scanned.stderr and b"README" in scanned.stderr
    stats = json.loads(run(DUPFILTER_DB, "--db", str(scan_store), "stats", "--json").stdout)
    assert stats["records"] == 8


def test_scan_reads_an_mbox_in_file_order(tmp_path: Path) -> None:
    mbox = tmp_path / "box.mbox"
    parts = []
    for index in (1, 2, 1):
        raw = make_message(paragraph_text(index) + "\nFrom here on, a body line.\n",
                           message_id=f"<mb{len(parts)}@x>")
        parts.append(b"From someone@example.org Mon Nov 30 10:00:00 2026\n" + raw + b"\n")
    mbox.write_bytes(b"".join(parts))
    rows = [json.loads(line) for line in run(
        DUPFILTER_DB, "--db", str(tmp_path / "s"), "scan", "--json", str(mbox)).stdout.splitlines()]
    assert [r["path"].rsplit(":", 1)[1] for r in rows] == ["1", "2", "3"]
    assert [r["verdict"] for r in rows] == ["unique", "unique", "duplicate"]
    assert [r["message_id"] for r in rows] == ["<mb0@x>", "<mb1@x>", "<mb2@x>"]


def test_scan_reads_a_maildir(tmp_path: Path) -> None:
    maildir = tmp_path / "Maildir"
    for sub in ("cur", "new", "tmp"):
        (maildir / sub).mkdir(parents=True)
    (maildir / "cur" / "1.host:2,S").write_bytes(make_message(paragraph_text(1)))
    (maildir / "new" / "2.host").write_bytes(make_message(paragraph_text(1), message_id="<n@x>"))
    rows = [json.loads(line) for line in run(
        DUPFILTER_DB, "--db", str(tmp_path / "s"), "scan", "--json", str(maildir)
    ).stdout.splitlines()]
    assert [r["verdict"] for r in rows] == ["unique", "duplicate"]


def test_fingerprint_json_fields(tmp_path: Path) -> None:
    message = tmp_path / "m.eml"
    message.write_bytes(make_message(paragraph_text(1)))
    for mode in ("raw", "decoded"):
        row = json.loads(run(DUPFILTER_DB, "fingerprint", "--json", "--histogram", mode,
                             str(message)).stdout)
        assert len(row["histogram"]) == 72 and row["shingles"] > 50
        assert row["histogram_sum"] == sum(bytes.fromhex(row["histogram"]))
        assert len(row["digest"]) == 32


def test_compare_reports_every_measure(tmp_path: Path) -> None:
    a, b = tmp_path / "a.eml", tmp_path / "b.eml"
    text = paragraph_text(1, count=300)
    a.write_bytes(make_message(text, message_id="<a@example.org>"))
    words = text.split(" ")
    words[50] = "bazaar"
    b.write_bytes(make_message(" ".join(words), message_id="<b@example.org>"))
    for chunking in ("fsp", "cdc", "sbc"):
        result = json.loads(run(DUPFILTER_DB, "compare", str(a), str(b), "--json",
                                "--chunking", chunking).stdout)
        assert 0.5 < result["shingles"]["resemblance"] < 1.0
        assert 0.0 <= result["chunks"]["length_weighted_similarity"] <= 1.0
        assert result["chunks"]["lcs_similarity"] is not None
        assert result["verdict"] == "near-duplicate" and result["rule"] == "shingles"
    readable = run(DUPFILTER_DB, "compare", str(a), str(b), "--bins").stdout.decode()
    assert readable.startswith("verdict: B is a near-duplicate of A, by rule shingles")
    assert "r[ 0]=" in readable and "word-shingle resemblance" in readable
    assert "length-weighted chunk similarity" in readable and "formula" not in readable


def test_explain_prune_verify_forget(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    raw = make_message(paragraph_text(1, count=200), message_id="<orig@example.org>")
    tag(Path(store), raw)
    near = make_message(paragraph_text(1, count=200) + "\nOne more sentence at the end.",
                        message_id="<near@example.org>")
    explained = run(DUPFILTER_DB, "--db", store, "explain", stdin=near).stdout.decode()
    assert "near-duplicate" in explained and "<orig@example.org>" in explained
    assert "resemblance" in explained
    assert run(DUPFILTER_DB, "--db", store, "verify").returncode == 0
    kept = run(DUPFILTER_DB, "--db", store, "prune", "--older-than", "12h")
    assert b"pruned 0 records" in kept.stdout
    forgot = run(DUPFILTER_DB, "--db", store, "forget", "--message-id", "<orig@example.org>")
    assert forgot.returncode == 0 and b"forgot 1 record" in forgot.stdout
    assert run(DUPFILTER, "--db", store, "--check", stdin=raw).returncode == 1


def test_prune_accepts_minutes_and_removes_old(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    tag(Path(store), make_message(paragraph_text(1)))
    # 0m is no age (issue 14: it emptied the store); one that takes every record needs --yes
    # (tests/test_forget_prune.py).
    assert run(DUPFILTER_DB, "--db", store, "prune", "--older-than", "0m").returncode == 2
    result = run(DUPFILTER_DB, "--db", store, "prune", "--older-than", "1s", "--yes")
    assert b"pruned 1 records" in result.stdout or b"pruned 0 records" in result.stdout
    assert run(DUPFILTER_DB, "--db", store, "prune", "--older-than", "90m").returncode == 0


@pytest.mark.parametrize("where", ["absent", "empty-folder"])
def test_prune_before_the_first_message_is_a_no_op(tmp_path: Path, where: str) -> None:
    """A fresh install (systemd's StateDirectory= made an empty folder, or none yet): the
    prune timer must not fail, and prune must not create the store."""
    store = tmp_path / "store"
    if where == "empty-folder":
        store.mkdir()
    result = run(DUPFILTER_DB, "--db", str(store), "prune")
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().startswith(f"nothing to prune: no dupfilter store at {store}")
    assert result.stderr == b""
    assert (list(store.iterdir()) == []) if where == "empty-folder" else not store.exists()
    # Every other command still says there is no store (exit 2).
    for command in (["stats"], ["verify"], ["forget", "--message-id", "<x@example.org>"]):
        other = run(DUPFILTER_DB, "--db", str(store), *command)
        assert other.returncode == 2 and b"no dupfilter store" in other.stderr, command
    assert (list(store.iterdir()) == []) if where == "empty-folder" else not store.exists()


def test_prune_on_something_that_is_not_a_store_still_fails(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the store should be")
    result = run(DUPFILTER_DB, "--db", str(blocker), "prune")
    assert result.returncode == 2 and b"no dupfilter store" in result.stderr
    assert blocker.read_text() == "a file where the store should be"


@pytest.mark.parametrize("args, message", [
    (["stats"], b"no dupfilter store"),
    (["prune", "--older-than", "soon"], b"not a duration"),
    (["scan", "/no/such/path"], b"no such file"),
    (["frobnicate"], b"invalid choice"),
])
def test_bad_usage_is_one_clear_line(tmp_path: Path, args: list[str], message: bytes) -> None:
    result = run(DUPFILTER_DB, "--db", str(tmp_path / "absent"), *args)
    assert result.returncode != 0
    assert message in result.stderr
    assert b"Traceback" not in result.stderr


def test_store_built_with_other_parameters_is_refused(tmp_path: Path) -> None:
    store = tmp_path / "s"
    tag(store, make_message("hello world"))
    config = tmp_path / "c.toml"
    config.write_text("[fingerprint]\nngram = 3\n")
    result = run(DUPFILTER_DB, "--db", str(store), "--config", str(config), "stats")
    assert result.returncode == 2
    assert b"other fingerprint parameters: ngram=5 (configured 3)" in result.stderr


def test_default_store_is_in_the_xdg_state_dir(tmp_path: Path) -> None:
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
           "DUPFILTER_CONFIG": ""}
    run(DUPFILTER, "--tag", stdin=make_message("hello"), env=env)
    assert (tmp_path / "state" / "dupfilter" / "data.mdb").exists()


def test_version_and_help() -> None:
    assert run(DUPFILTER, "--version").stdout.startswith(b"dupfilter ")
    helptext = run(DUPFILTER_DB, "--help").stdout
    for command in (b"import", b"scan", b"fingerprint", b"compare", b"explain", b"prune",
                    b"stats", b"verify", b"forget"):
        assert command in helptext


def test_stats_plot_draws_a_png(tmp_path: Path) -> None:
    store = tmp_path / "s"
    for number, seed in enumerate((1, 1, 2)):
        tag(store, make_message(paragraph_text(seed), message_id=f"<{number}@x>"))
    picture = tmp_path / "per-day.png"
    result = run(DUPFILTER_DB, "--db", str(store), "stats", "--plot", str(picture))
    assert result.returncode == 0, result.stderr
    assert picture.read_bytes().startswith(b"\x89PNG") and picture.stat().st_size > 5000


def test_scan_with_worker_processes_applies_allow_rules(tmp_path: Path) -> None:
    """Fingerprinting runs in worker processes; the header fields allow rules read must
    still reach the rules (and a skipped message is never recorded)."""
    config = tmp_path / "dupfilter.toml"
    config.write_text('[policy]\nrules = [{ name = "cron", field = "from", '
                      'pattern = "^cron@", action = "skip" }]\n')
    folder = tmp_path / "mail"
    folder.mkdir()
    for number in range(40):
        sender = "cron@host.example" if number % 2 else "ann@example.org"
        (folder / f"{number:03d}.eml").write_bytes(make_message(
            paragraph_text(number // 4), sender=sender, message_id=None))
    result = run(DUPFILTER_DB, "--db", str(tmp_path / "db"), "--config", str(config),
                 "scan", "--json", "--jobs", "2", str(folder))
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(rows) == 40
    for number, row in enumerate(rows):
        if number % 2:
            assert row["skipped_by"] == "cron" and row["verdict"] == "unique"
        else:
            assert row["skipped_by"] is None
    # ann's second copy of each text is a duplicate; cron's are never recorded
    assert [row["verdict"] for row in rows[0::2]] == ["unique", "duplicate"] * 10


# ------------------------------------------------------- the pipe filter under duress

@pytest.mark.parametrize("case", ["store-error", "json", "defects"])
def test_unwritable_stderr_still_passes_the_message_through(tmp_path: Path, case: str) -> None:
    """procmail's log on a full disk (stderr gives ENOSPC): the message still comes out."""
    raw = make_message(paragraph_text(7))
    db, extra = tmp_path / "s", []
    if case == "store-error":
        db.write_text("a file where the store should be")
    elif case == "json":
        extra = ["--json"]
    else:
        raw = b"Subject: no separator, no body"
    with open("/dev/full", "wb") as full:
        result = subprocess.run([DUPFILTER, "--db", str(db), "--tag", *extra], input=raw,
                                stdout=subprocess.PIPE, stderr=full, timeout=60)
    assert result.returncode == 0
    if case == "store-error":
        assert result.stdout == raw
    else:
        assert result.stdout.startswith(b"X-Dupfilter: unique") and raw in result.stdout


def test_closed_stderr_still_passes_the_message_through(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the store should be")
    raw = make_message(paragraph_text(8))
    result = subprocess.run([DUPFILTER, "--db", str(blocker), "--tag"], input=raw,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=60,
                            preexec_fn=lambda: os.close(2))
    assert result.returncode == 0 and result.stdout == raw


def test_interrupt_while_checking_passes_the_message_through(tmp_path: Path) -> None:
    """SIGINT (KeyboardInterrupt, not an Exception) while the store hangs: pass through."""
    import signal
    import socket

    raw = make_message(paragraph_text(9))
    with socket.create_server(("127.0.0.1", 0)) as silent:     # accepts, never answers
        port = silent.getsockname()[1]
        message = tmp_path / "message"
        message.write_bytes(raw)
        with open(message, "rb") as stdin:
            # SIGINT as a terminal delivers it, also when this suite runs in the
            # background (where a shell starts commands with SIGINT ignored).
            proc = subprocess.Popen([DUPFILTER, "--db", f"redis://127.0.0.1:{port}/0",
                                     "--tag"], stdin=stdin, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE,
                                    preexec_fn=lambda: signal.signal(  # noqa: PLW1509
                                        signal.SIGINT, signal.SIG_DFL))
        silent.settimeout(30)
        connection, _ = silent.accept()
        with connection:
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out == raw
    assert b"interrupted" in err and b"passed through unchecked" in err


def test_usage_error_with_tag_passes_the_message_through(tmp_path: Path) -> None:
    raw = make_message(paragraph_text(10))
    result = run(DUPFILTER, "--db", str(tmp_path), "--tag", "--no-such-flag", stdin=raw)
    assert result.returncode == 0 and result.stdout == raw
    assert b"unrecognized arguments: --no-such-flag" in result.stderr
    assert b"passed through unchecked" in result.stderr
