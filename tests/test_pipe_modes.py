"""``dupfilter`` without a mode flag, and with flags that make no sense, under the real
procmail (issue 14 item 1).

What procmail 3.23 does with a filter's exit status (checked here, and in
docs/procmail.md): ``:0 fw`` keeps the original message when the filter exits non-zero
("Rescue of unfiltered data succeeded", and the ``:0 e`` recipe runs); ``:0 f`` without
``w`` ignores the exit status and delivers whatever the filter wrote — an empty message if
it wrote nothing.  A ``* ?`` condition's program gets /dev/null as its stdout.  So
``dupfilter`` must write the whole message whenever it is not told ``--check``, and
must not answer "duplicate" (exit 0) to a condition that forgot ``--check``.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import make_message, paragraph_text
from support.cli import DUPFILTER, installed, run

PROCMAIL = shutil.which("procmail")


@pytest.fixture(autouse=True)
def _tools() -> None:
    assert PROCMAIL, "procmail is not installed (.ci/run installs it)"
    assert installed(), "dupfilter is not installed (pip install -e .)"


def deliver(tmp_path: Path, recipe: str, raw: bytes) -> tuple[int, str]:
    mail = tmp_path / "mail"
    mail.mkdir(exist_ok=True)
    rc = tmp_path / "procmailrc"
    rc.write_text(f"SHELL=/bin/sh\nPATH={Path(DUPFILTER).parent}:/usr/bin:/bin\n"
                  f"MAILDIR={mail}\nDEFAULT=$MAILDIR/inbox/\nLOGFILE={tmp_path}/log\n"
                  f"STORE={tmp_path}/store\n{recipe}")
    done = subprocess.run([PROCMAIL, "-m", str(rc)], input=raw, capture_output=True,
                          timeout=60)
    log = (tmp_path / "log").read_text() if (tmp_path / "log").exists() else ""
    return done.returncode, log


def delivered(tmp_path: Path) -> dict[str, list[bytes]]:
    found = {}
    for folder in (tmp_path / "mail").iterdir():
        if (folder / "new").is_dir():
            found[folder.name] = [p.read_bytes() for p in sorted((folder / "new").iterdir())]
    return found


def same(delivered: bytes, raw: bytes) -> bool:
    """procmail ends what it files with an empty line: compare without it."""
    return delivered.rstrip(b"\n") == raw.rstrip(b"\n")


def message(seed: int) -> bytes:
    return make_message(paragraph_text(seed, count=120), message_id=f"<mode{seed}@example.org>")


@pytest.mark.parametrize("flags", ["fw", "f"])
def test_filter_without_mode_flag_tags_the_message(tmp_path: Path, flags: str) -> None:
    """`:0 fw | dupfilter` (no --tag): on db08d02 a 0-byte message was delivered."""
    raw = message(1)
    recipe = f":0 {flags}\n| dupfilter --db $STORE\n:0 e\n{{ EXITCODE=75 HOST }}\n"
    for _ in range(2):
        code, log = deliver(tmp_path, recipe, raw)
        assert code == 0, log
    (first, second), = delivered(tmp_path).values()
    assert first.startswith(b"X-Dupfilter: unique\n") and same(first.split(b"\n", 1)[1], raw)
    assert second.startswith(b"X-Dupfilter: duplicate;") and \
        same(second.split(b"\n", 1)[1], raw)


def test_condition_without_check_files_nothing_apart(tmp_path: Path) -> None:
    """`* ? dupfilter` (no --check): stdout is /dev/null, so it answers "not a duplicate"
    and says why in procmail's log, instead of exit 0 ("duplicate") for every message."""
    recipe = ":0 HB\n* ? dupfilter --db $STORE\nduplicates/\n"
    for seed in (2, 3):
        code, log = deliver(tmp_path, recipe, message(seed))
        assert code == 0, log
    assert list(delivered(tmp_path)) == ["inbox"] and len(delivered(tmp_path)["inbox"]) == 2
    assert "write `* ? dupfilter --check`" in log
    assert not (tmp_path / "store").exists()                  # nothing checked or recorded


@pytest.mark.parametrize("flags", ["fw", "f"])
@pytest.mark.parametrize("args", ["--tag --no-such-flag", "--no-such-flag", "--tag --check",
                                  "--db redis:/127.0.0.1:6379", "--recipient ''"])
def test_filter_with_a_bad_command_line_passes_the_message_whole(
        tmp_path: Path, flags: str, args: str) -> None:
    raw = message(4)
    code, log = deliver(tmp_path, f":0 {flags}\n| dupfilter {args}\n", raw)
    assert code == 0, log
    (inbox,), = delivered(tmp_path).values()
    assert same(inbox, raw)
    assert "message passed through unchecked" in log, log


@pytest.mark.parametrize("args", ["--check --no-such-flag", "--check --db redis:/x:1"])
def test_check_with_a_bad_command_line_files_normally(tmp_path: Path, args: str) -> None:
    code, log = deliver(tmp_path, f":0 HB\n* ? dupfilter {args}\nduplicates/\n", message(5))
    assert code == 0 and list(delivered(tmp_path)) == ["inbox"], log
    assert "message not checked (exit 1: not a duplicate)" in log, log


def test_bad_command_line_at_a_terminal_reads_no_message(tmp_path: Path) -> None:
    """A person typing `dupfilter --bogus` gets the usage error at once (exit 2), not a
    filter waiting for a message on the terminal."""
    script = ("import os, pty, sys\n"
              "pid, fd = pty.fork()\n"
              "if pid == 0:\n"
              f"    os.execv({DUPFILTER!r}, [{DUPFILTER!r}, '--bogus'])\n"
              "out = b''\n"
              "while True:\n"
              "    try:\n"
              "        chunk = os.read(fd, 1024)\n"
              "    except OSError:\n"
              "        break\n"
              "    if not chunk:\n"
              "        break\n"
              "    out += chunk\n"
              "_, status = os.waitpid(pid, 0)\n"
              "print(os.waitstatus_to_exitcode(status), out)\n")
    done = subprocess.run(["python3", "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.startswith("2 "), done
    assert "unrecognized arguments: --bogus" in done.stdout


def test_json_without_mode_goes_to_stderr(tmp_path: Path) -> None:
    raw = message(6)
    done = run(DUPFILTER, "--db", str(tmp_path / "s"), "--json", stdin=raw)
    assert done.returncode == 0
    assert done.stdout.startswith(b"X-Dupfilter: unique\n") and done.stdout.endswith(raw)
    assert b'"verdict": "unique"' in done.stderr


def test_a_message_not_passed_on_is_not_remembered(tmp_path: Path) -> None:
    """stdout cannot be written (procmail gone): exit 75, procmail keeps the message and
    retries, and the retry is a new message, not a copy of one never delivered (before,
    the message was recorded before it was written)."""
    raw = make_message(paragraph_text(61), message_id="<lost@example.org>")
    store = tmp_path / "store"
    child = subprocess.Popen([DUPFILTER, "--db", str(store), "--tag"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert child.stdout is not None
    child.stdout.close()                        # nobody reads what it writes
    _, err = child.communicate(raw, timeout=60)
    assert child.returncode == 75, err
    assert b"cannot write the message" in err
    again = run(DUPFILTER, "--db", str(store), "--check", stdin=raw)
    assert again.returncode == 1, again.stderr      # not a duplicate
