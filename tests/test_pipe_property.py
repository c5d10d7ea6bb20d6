"""Property test of ``dupfilter``'s command line (issue 14 item 1): whatever flags a recipe
gives it, a message piped through it comes out whole.

``main(argv)`` runs in this process with stdin, stdout and stderr replaced by byte buffers,
on flag combinations built from the mode flags, every option (with good and bad values),
unknown flags, stray words and arbitrary text, and on well-formed and arbitrary messages:

- unless ``--check`` is given (and ``--tag`` is not), the mode is ``--tag``: exit 0 and the
  message on stdout with nothing removed but ``X-Dupfilter:`` fields (ours added, any from
  outside taken out) — never fewer bytes, never empty;
- with ``--check``: exit 0 or 1, and nothing on stdout but the ``--json`` line.

On db08d02 (and main before this change) ``dupfilter`` without a mode flag printed nothing
and exited 0: procmail's ``:0 fw`` then delivered an empty message.  ``--help`` and
``--version`` are left out: they answer a person and read no message (at a terminal
neither does a bad command line: see test_cli.py).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import make_message, paragraph_text
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mailfilter.cli.pipe import main
from mailfilter.headers import remove_ours

WORK = Path(tempfile.mkdtemp(prefix="dupfilter-pipe-property-"))
STORE = WORK / "store"
GOOD_CONFIG = WORK / "good.toml"
GOOD_CONFIG.write_text("[detector]\nscope = \"global\"\n")
BAD_CONFIG = WORK / "bad.toml"
BAD_CONFIG.write_text("[detector]\nno_such_key = 1\n")
BLOCKER = WORK / "a-file"
BLOCKER.write_text("a file where a store folder should be")


@pytest.fixture(scope="module", autouse=True)
def _work_removed() -> Iterator[None]:
    """The module's folder goes with its tests (it was left in /tmp at every run)."""
    yield
    shutil.rmtree(WORK, ignore_errors=True)

MODES = [[], ["--tag"], ["--check"], ["--tag", "--check"], ["--check", "--tag"], ["--ta"],
         ["--chec"], ["--tag", "--tag"], ["--check", "--check"]]
OPTIONS = [
    ["--no-record"], ["--json"], ["--no-rec"], ["--js"],
    ["--recipient", "ann@example.org"], ["--recipient=<bob@example.net>"],
    ["--recipient", ""], ["--recipient", "a\nb@example.org"], ["--recipient"],
    ["--db", str(STORE)], [f"--db={STORE}"], ["--db", "redis:/127.0.0.1:6379"],
    ["--db", "redis//host"], ["--db", ""], ["--db", str(BLOCKER)], ["--db"],
    ["--config", str(GOOD_CONFIG)], ["--config", str(BAD_CONFIG)],
    ["--config", str(WORK / "missing.toml")], ["--config"],
    ["--bogus"], ["--tagg"], ["--check-twice"], ["-x"], ["-"], ["positional"], ["--"],
    ["--json=yes"], ["--no-record=1"], ["--db", "--tag"], ["--recipient", "--check"],
]
words = st.text(max_size=12).filter(lambda w: not w.startswith("-h") and "--h" not in w
                                    and "--v" not in w)

# Messages: ordinary ones (LF, CRLF, mbox From_ line, a forged header, no body), then
# arbitrary bytes.
TEXT = paragraph_text(31, count=90)
MESSAGES = [
    make_message(TEXT, message_id="<prop1@example.org>"),
    make_message(TEXT, message_id="<prop2@example.org>", crlf=True),
    b"From ann@example.org Mon Jan  1 00:00:00 2024\n" + make_message(TEXT),
    make_message(TEXT, headers={"X-Dupfilter": "duplicate; forged"}),
    b"Subject: no body\n",
    b"",
]
messages = st.one_of(st.sampled_from(MESSAGES), st.binary(max_size=400))


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    parts = [draw(st.sampled_from(MODES))]
    parts += draw(st.lists(st.one_of(st.sampled_from(OPTIONS), words.map(lambda w: [w])),
                           max_size=4))
    order = draw(st.permutations(range(len(parts))))
    return [word for index in order for word in parts[index]]


def is_check(argv: list[str]) -> bool:
    """The documented rule: ``--check`` (or its abbreviation), and no ``--tag``, before
    any ``--``; otherwise the mode is ``--tag``."""
    before = argv[:argv.index("--")] if "--" in argv else argv

    def named(flag: str) -> bool:
        return any(len(w.split("=")[0]) > 2 and w.startswith("--")
                   and flag.startswith(w.split("=")[0]) for w in before)
    return named("--check") and not named("--tag")


def run_main(argv: list[str], raw: bytes) -> tuple[int, bytes, bytes]:
    streams = (io.TextIOWrapper(io.BytesIO(raw)), io.TextIOWrapper(io.BytesIO()),
               io.TextIOWrapper(io.BytesIO()))
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = streams
    try:
        try:
            code = main(argv)
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
        for stream in streams[1:]:
            stream.flush()
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
    return code, streams[1].buffer.getvalue(), streams[2].buffer.getvalue()


@pytest.fixture(autouse=True)
def _own_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """No settings or store of the user's: the defaults, and a state folder in WORK."""
    for key in list(os.environ):
        if key.startswith(("DUPFILTER_", "XDG_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(WORK / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(WORK / "state"))
    monkeypatch.setattr("mailfilter.config.SYSTEM_CONFIG", WORK / "no-system.toml")
    # A relative --db (a drawn word such as "positional") makes its store here, not in the
    # checkout the tests run from.
    monkeypatch.chdir(WORK)


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(argv=command_lines(), raw=messages)
def test_no_command_line_loses_the_message(argv: list[str], raw: bytes) -> None:
    code, out, err = run_main(argv, raw)
    assert b"Traceback" not in err, err
    if is_check(argv):
        assert code in (0, 1), (code, err)
        for line in out.splitlines():
            assert isinstance(json.loads(line), dict), out
        assert not out or "--json" in argv or "--js" in argv, out
        return
    assert code == 0, (code, err)
    lines = raw.split(b"\n")
    if raw and not raw.endswith(b"\n") and all(line[:1] in (b" ", b"\t") or
                                                line.startswith(b"From ") for line in lines):
        # Nothing but lines that continue no field, and no line end (" ", " \r"): our
        # field must go below them, which takes a line end (tests/fuzz/fuzz_pipeline.py
        # allows the same); every byte of the input is still there, in order.
        assert out.startswith(raw.rstrip(b"\r")), (argv, out)
        return
    assert remove_ours(out) == remove_ours(raw), (argv, err)
    assert len(out) >= len(remove_ours(raw))
    assert out or not raw


@pytest.mark.parametrize("argv", [[], ["--no-record"], ["--json"], ["--recipient", "a@b.c"],
                                  ["--db", str(STORE)]])
def test_no_mode_flag_means_tag(argv: list[str]) -> None:
    """The very case of item 1: ``dupfilter < message`` (no --tag) tags it."""
    raw = make_message(paragraph_text(32, count=90), message_id="<nomode@example.org>")
    code, out, err = run_main(argv, raw)
    assert code == 0, err
    assert out.startswith(b"X-Dupfilter: ") and out.endswith(raw.split(b"\n\n", 1)[1])
