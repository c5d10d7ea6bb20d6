"""``dupfilter-db dedupe`` against Debian's Dovecot IMAP server on loopback (IMAPS and
STARTTLS, a password from a file or the environment): each action as a mail client then sees
the folder, undo, a run killed half-way, and a run whose connection the server drops."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import dovecot
from support import mailboxes as mb
from support.cli import DUPFILTER_DB

FOLDER = "Cleanup"


@pytest.fixture(scope="module")
def server() -> Iterator[dovecot.Dovecot]:
    missing = dovecot.available()
    if missing:
        pytest.fail(f"the IMAP tests drive {missing}, not installed here: `bash .ci/run` "
                    "installs it", pytrace=False)
    # Not under pytest's tmp_path: its parents are 0700, and Dovecot's auth and mail
    # processes (users dovecot, nobody) must reach the password file and the mail.
    root = Path(tempfile.mkdtemp(prefix="dupfilter-dovecot-"))
    running = dovecot.start(root)
    try:
        yield running
    finally:
        running.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def filled(corpus_messages: list[Path]) -> mb.Filled:
    return mb.crafted_mailbox(corpus_messages, 40)


@pytest.fixture
def folder(server: dovecot.Dovecot, filled: mb.Filled, request: pytest.FixtureRequest
           ) -> Iterator[str]:
    """A fresh folder of its own for each test, holding the crafted mailbox."""
    name = f"{FOLDER}{abs(hash(request.node.name)) % 10**8}"
    dovecot.fill(server, name, filled.messages)
    yield name


def dedupe(server: dovecot.Dovecot, *args: str, env: dict[str, str] | None = None,
           timeout: float = 300) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("DUPFILTER_CONFIG", "DUPFILTER_IMAP_PASSWORD")}
    return subprocess.run([DUPFILTER_DB, "dedupe", "--tls-ca", str(server.ca_file), *args],
                          capture_output=True, text=True, timeout=timeout,
                          env=environment | (env or {}))


def by_content(filled: mb.Filled) -> dict[str, str]:
    """Message name by the SHA-256 of its bytes as the server hands them out (CRLF)."""
    return {hashlib.sha256(raw.replace(b"\n", b"\r\n")).hexdigest(): name
            for name, raw in filled.messages.items()}


def names_in(server: dovecot.Dovecot, folder: str, filled: mb.Filled,
             flag: bytes | None = None) -> list[str]:
    names = by_content(filled)
    return sorted(names[hashlib.sha256(raw).hexdigest()]
                  for _uid, raw, flags in dovecot.folder_messages(server, folder)
                  if flag is None or flag in flags)


def password_args(server: dovecot.Dovecot) -> list[str]:
    return ["--password-file", str(server.password_file)]


def test_report_over_imaps_finds_every_copy_and_marks_nothing_seen(
        server: dovecot.Dovecot, folder: str, filled: mb.Filled) -> None:
    done = dedupe(server, "--json", server.url(folder),
                  env={"DUPFILTER_IMAP_PASSWORD": dovecot.PASSWORD})
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    names = sorted(filled.messages)
    found = {names[int(copy["key"].split(":")[1]) - 1]
             for row in rows if "keep" in row for copy in row["copies"]}
    assert found == set(filled.copies)
    # BODY.PEEK: reading every message left none \Seen, and nothing moved.
    messages = dovecot.folder_messages(server, folder)
    assert len(messages) == len(filled.messages)
    assert not any(b"\\Seen" in flags for _uid, _raw, flags in messages)


def test_move_over_starttls_then_undo_puts_every_copy_back(
        server: dovecot.Dovecot, folder: str, filled: mb.Filled, tmp_path: Path) -> None:
    log = tmp_path / "undo.jsonl"
    target = f"{folder}-dups"
    done = dedupe(server, *password_args(server), "--action", "move", "--to", target,
                  "--undo-log", str(log), server.url(folder, starttls=True))
    assert done.returncode == 0, done.stderr
    assert names_in(server, target, filled) == sorted(filled.copies)
    assert names_in(server, folder, filled) == sorted(set(filled.messages) - set(filled.copies))
    entries = [json.loads(line) for line in log.read_text().splitlines()[1:]]
    assert {entry["op"] for entry in entries} == {"imap-move"}
    assert all(entry["uidvalidity"] and entry["uid"] for entry in entries)
    undone = dedupe(server, *password_args(server), "--undo", str(log))
    assert undone.returncode == 0, undone.stdout
    assert names_in(server, target, filled) == []
    assert names_in(server, folder, filled) == sorted(filled.messages)


def test_flag_sets_flagged_on_the_copies_only_and_undo_clears_it(
        server: dovecot.Dovecot, folder: str, filled: mb.Filled, tmp_path: Path) -> None:
    log = tmp_path / "undo.jsonl"
    done = dedupe(server, *password_args(server), "--action", "flag", "--undo-log", str(log),
                  server.url(folder))
    assert done.returncode == 0, done.stderr
    assert names_in(server, folder, filled, b"\\Flagged") == sorted(filled.copies)
    assert dedupe(server, *password_args(server), "--undo", str(log)).returncode == 0
    assert names_in(server, folder, filled, b"\\Flagged") == []


def test_delete_marks_deleted_and_expunges_only_when_asked(
        server: dovecot.Dovecot, folder: str, filled: mb.Filled, tmp_path: Path) -> None:
    log = tmp_path / "undo.jsonl"
    done = dedupe(server, *password_args(server), "--action", "delete", "--undo-log",
                  str(log), server.url(folder))
    assert done.returncode == 0, done.stderr
    assert names_in(server, folder, filled, b"\\Deleted") == sorted(filled.copies)
    assert len(dovecot.folder_messages(server, folder)) == len(filled.messages)
    # A later run passes over what is marked \Deleted (its first pass reads the flags):
    # the originals are left alone, not taken for copies of deleted ones.
    again = dedupe(server, *password_args(server), "--json", server.url(folder))
    summary = json.loads(again.stdout.splitlines()[-1])["summary"]
    assert (summary["messages"], summary["copies"]) == (
        len(filled.messages) - len(filled.copies), 0)
    assert dedupe(server, *password_args(server), "--undo", str(log)).returncode == 0
    assert names_in(server, folder, filled, b"\\Deleted") == []

    refused = dedupe(server, *password_args(server), "--action", "delete", "--expunge",
                     server.url(folder))
    assert refused.returncode == 2 and "--yes" in refused.stderr
    done = dedupe(server, *password_args(server), "--action", "delete", "--expunge", "--yes",
                  "--undo-log", str(tmp_path / "gone.jsonl"), server.url(folder))
    assert done.returncode == 0, done.stderr
    assert names_in(server, folder, filled) == sorted(set(filled.messages) - set(filled.copies))


def test_dry_run_and_a_password_on_the_command_line_change_nothing(
        server: dovecot.Dovecot, folder: str, filled: mb.Filled) -> None:
    before = dovecot.folder_messages(server, folder)
    done = dedupe(server, *password_args(server), "--action", "move", "--dry-run",
                  server.url(folder))
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("would move") == len(filled.copies)
    refused = dedupe(server, "--action", "move", server.url(folder).replace(
        f"{dovecot.USER}@", f"{dovecot.USER}:{dovecot.PASSWORD.replace(' ', '%20')}@"))
    assert refused.returncode == 2 and "no password in the URL" in refused.stderr
    assert dovecot.folder_messages(server, folder) == before


def test_whole_account_across_folders_keeps_the_preferred_folder(
        server: dovecot.Dovecot, filled: mb.Filled, tmp_path: Path) -> None:
    originals = {name: raw for name, raw in filled.messages.items() if name.startswith("m")}
    dovecot.fill(server, "Archive", dict(list(originals.items())[:5]))
    done = dedupe(server, *password_args(server), "--json", "--across-folders", "--keep",
                  "folder:Archive", server.url())
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines() if '"keep"' in line]
    archived = [row for row in rows if row["keep"]["folder_name"] == "Archive"]
    assert len(archived) == 5


def test_a_move_killed_half_way_loses_nothing_and_the_next_run_finishes(
        server: dovecot.Dovecot, folder: str, filled: mb.Filled, tmp_path: Path) -> None:
    log = tmp_path / "undo.jsonl"
    target = f"{folder}-dups"
    run = subprocess.Popen([DUPFILTER_DB, "dedupe", "--tls-ca", str(server.ca_file),
                            *password_args(server), "--action", "move", "--to", target,
                            "--rate", "2", "--undo-log", str(log), server.url(folder)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and run.poll() is None:
        if log.exists() and log.read_text().count("\n") > 5:
            os.kill(run.pid, signal.SIGKILL)
            break
        time.sleep(0.01)
    run.wait()
    assert run.returncode == -signal.SIGKILL
    everything = sorted(filled.messages)
    moved = names_in(server, target, filled)
    assert 3 <= len(moved) < len(filled.copies)
    assert sorted(names_in(server, folder, filled) + moved) == everything
    again = dedupe(server, *password_args(server), "--action", "move", "--to", target,
                   "--undo-log", str(tmp_path / "again.jsonl"), server.url(folder))
    assert again.returncode == 0, again.stderr
    assert names_in(server, target, filled) == sorted(filled.copies)


def test_a_run_whose_connection_the_server_drops_reconnects_and_finishes(
        server: dovecot.Dovecot, folder: str, filled: mb.Filled, tmp_path: Path) -> None:
    log = tmp_path / "undo.jsonl"
    target = f"{folder}-dups"
    run = subprocess.Popen([DUPFILTER_DB, "dedupe", "--tls-ca", str(server.ca_file),
                            *password_args(server), "--action", "move", "--to", target,
                            "--rate", "4", "--undo-log", str(log), server.url(folder)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    kicked = 0
    while time.monotonic() < deadline and run.poll() is None and kicked < 2:
        if log.exists() and log.read_text().count("\n") > 3 + 4 * kicked:
            server.doveadm("kick", dovecot.USER)
            kicked += 1
        time.sleep(0.01)
    out, err = run.communicate(timeout=120)
    assert kicked == 2
    assert run.returncode == 0, err
    assert "reconnected" in out
    assert names_in(server, target, filled) == sorted(filled.copies)
    assert names_in(server, folder, filled) == sorted(set(filled.messages) - set(filled.copies))


def test_the_imap_recipes_of_docs_cleanup_md_run_as_written(
        server: dovecot.Dovecot, filled: mb.Filled, tmp_path: Path) -> None:
    from doc_blocks import blocks
    home = tmp_path / "home"
    home.mkdir()
    (home / ".imap-password").write_text(dovecot.PASSWORD + "\n")
    (home / ".imap-password").chmod(0o600)
    (recipe,) = blocks("dedupe-imap")
    text = recipe.text.replace("imaps://alice@imap.example.org/",
                               f"imaps://alice@127.0.0.1:{server.imaps_port}/")
    text = text.replace("imap://alice@imap.example.org/",
                        f"imap://alice@127.0.0.1:{server.imap_port}/")
    assert text.count("127.0.0.1") == 2
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "DUPFILTER_"))}
    env |= {"HOME": str(home), "XDG_STATE_HOME": str(tmp_path / "state"),
            "SSL_CERT_FILE": str(server.ca_file)}
    inbox_before = len(dovecot.folder_messages(server, "INBOX"))
    dovecot.fill(server, "INBOX", filled.messages)
    done = subprocess.run(["bash", "-e", "-c", text], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert "with copies" in done.stdout and "moved" in done.stdout
    # Every copy of the account's folders went to Duplicates; INBOX holds one of each.
    assert len(dovecot.folder_messages(server, "INBOX")) == \
        inbox_before + len(filled.messages) - len(filled.copies)


def test_a_server_without_move_gets_copy_and_deleted_and_expunge_only_when_asked(
        filled: mb.Filled, tmp_path: Path) -> None:
    root = Path(tempfile.mkdtemp(prefix="dupfilter-dovecot-nomove-"))
    plain = dovecot.start(root, capabilities="IMAP4rev1 SASL-IR LOGIN-REFERRALS ID ENABLE "
                                             "IDLE LITERAL+ UIDPLUS")
    try:
        dovecot.fill(plain, "INBOX", filled.messages)
        log = tmp_path / "undo.jsonl"
        done = dedupe(plain, *password_args(plain), "--action", "move", "--undo-log",
                      str(log), plain.url("INBOX"))
        assert done.returncode == 0, done.stderr
        assert names_in(plain, "Duplicates", filled) == sorted(filled.copies)
        # Still in INBOX, marked \Deleted: nothing is expunged unless asked.
        assert names_in(plain, "INBOX", filled) == sorted(filled.messages)
        assert names_in(plain, "INBOX", filled, b"\\Deleted") == sorted(filled.copies)
        undone = dedupe(plain, *password_args(plain), "--undo", str(log))
        assert undone.returncode == 0, undone.stdout
        assert names_in(plain, "INBOX", filled, b"\\Deleted") == []
        assert names_in(plain, "INBOX", filled) == sorted(filled.messages)
        assert names_in(plain, "Duplicates", filled) == []
        done = dedupe(plain, *password_args(plain), "--action", "move", "--expunge", "--yes",
                      "--undo-log", str(tmp_path / "again.jsonl"), plain.url("INBOX"))
        assert done.returncode == 0, done.stderr
        assert names_in(plain, "INBOX", filled) == \
            sorted(set(filled.messages) - set(filled.copies))
        assert names_in(plain, "Duplicates", filled) == sorted(filled.copies)
    finally:
        plain.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_a_server_with_an_inbox_prefix_gets_inbox_duplicates_and_never_reads_it(
        filled: mb.Filled, tmp_path: Path) -> None:
    root = Path(tempfile.mkdtemp(prefix="dupfilter-dovecot-prefix-"))
    prefixed = dovecot.start(root, prefix="INBOX.")     # as Courier and Cyrus name folders
    try:
        dovecot.fill(prefixed, "INBOX", filled.messages)
        done = dedupe(prefixed, *password_args(prefixed), "--action", "move", "--undo-log",
                      str(tmp_path / "undo.jsonl"), prefixed.url())
        assert done.returncode == 0, done.stderr
        assert names_in(prefixed, "INBOX.Duplicates", filled) == sorted(filled.copies)
        again = dedupe(prefixed, *password_args(prefixed), prefixed.url())
        assert again.returncode == 0, again.stderr
        assert "in 1 folders" in again.stdout and "0 copies" in again.stdout
    finally:
        prefixed.stop()
        shutil.rmtree(root, ignore_errors=True)
