"""``dupfilter-db forget`` and ``prune`` (issue 14 item 5): a preview (``--dry-run``), a list
of what went, ``forget`` of a message removes that message's record only (``--near`` for
its near-duplicates too), and a prune that would empty the store needs ``--yes``.

On db08d02 (and main before this change): ``forget < message`` removed every near match
("forgot 4 records", none named), neither command had ``--dry-run``, and ``prune
--older-than 0s`` (or ``30``, read as 30 seconds) emptied the store without a word.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from helpers import make_message, paragraph_text
from support.cli import DUPFILTER_DB, installed, run

from mailfilter.config import load_settings
from mailfilter.engine import Engine, remember

TEXT = paragraph_text(41, count=150)
DAY = 86400


@pytest.fixture(autouse=True)
def _installed() -> None:
    assert installed(), "install the project first: pip install -e ."


def variant(number: int) -> str:
    """TEXT with one word changed: a near-duplicate of it."""
    words = TEXT.split(" ")
    words[12 * number] = f"changed{number}"
    return " ".join(words)


def fill(store: Path, ages_in_days: dict[str, tuple[str, float]]) -> dict[str, int]:
    """Record messages (Message-ID → (text, age in days)) as if they arrived that long ago;
    returns their record numbers."""
    now = int(time.time())
    ids = {}
    with Engine(load_settings(search=False), str(store)) as engine:
        for message_id, (text, age) in ages_in_days.items():
            decision = engine.process(engine.analyse(make_message(text, message_id=message_id)),
                                      (), remember, now=now - int(age * DAY))
            assert decision.recording is not None
            ids[message_id] = decision.recording.doc_id
    return ids


def records(store: Path) -> dict[str, int]:
    """Message-ID → seen, of every record in the store."""
    with Engine(load_settings(search=False), str(store), create=False) as engine:
        return {r.message_id: r.seen for r in engine.store.records()}


def db(store: Path, *args: str, stdin: bytes = b"") -> tuple[int, str, str]:
    done = run(DUPFILTER_DB, "--db", str(store), *args, stdin=stdin)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


LISTED = re.compile(r"^  #(\d+) (<[^>]+>)  first seen \d{4}-\d\d-\d\d \d\d:\d\d:\d\d, last seen "
                    r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d, seen (\d+) times?(?:; (.*))?$", re.M)


def listed(output: str) -> list[str]:
    return [found[2] for found in LISTED.finditer(output)]


@pytest.fixture
def campaign(tmp_path: Path) -> Path:
    """An original, two near-duplicates of it and an unrelated message."""
    store = tmp_path / "store"
    fill(store, {"<orig@example.org>": (TEXT, 3), "<near1@example.org>": (variant(1), 2),
                 "<near2@example.org>": (variant(2), 1),
                 "<other@example.org>": (paragraph_text(42, count=150), 1)})
    assert len(records(store)) == 4
    return store


# ----------------------------------------------------------------------------- forget

def test_forget_by_message_removes_that_message_only(campaign: Path) -> None:
    copy = make_message(TEXT, message_id="<resent@example.org>")     # a later copy
    code, out, err = db(campaign, "forget", stdin=copy)
    assert code == 0, err
    assert out.startswith("forgot 1 record:\n")
    assert listed(out) == ["<orig@example.org>"]
    assert "the same text (digest)" in out
    assert "kept: 2 records this message is a near-duplicate of (--near forgets them too)" \
        in out
    assert set(records(campaign)) == {"<near1@example.org>", "<near2@example.org>",
                                      "<other@example.org>"}


def test_forget_near_removes_its_near_duplicates_too(campaign: Path) -> None:
    code, out, _ = db(campaign, "forget", "--near", stdin=make_message(TEXT))
    assert code == 0 and out.startswith("forgot 3 records:\n")
    assert sorted(listed(out)) == ["<near1@example.org>", "<near2@example.org>",
                                   "<orig@example.org>"]
    assert out.count("near-duplicate 0.") == 2
    assert set(records(campaign)) == {"<other@example.org>"}


def test_forget_dry_run_lists_and_keeps(campaign: Path) -> None:
    before = records(campaign)
    for args in (["forget", "--dry-run"], ["forget", "--dry-run", "--near"]):
        code, out, err = db(campaign, *args, stdin=make_message(TEXT))
        assert code == 0, err
        assert out.startswith("would forget ") and "(--dry-run: nothing removed)" in out
    assert sorted(listed(out)) == ["<near1@example.org>", "<near2@example.org>",
                                   "<orig@example.org>"]
    code, out, _ = db(campaign, "forget", "--message-id", "near1@example.org", "--dry-run")
    assert code == 0 and listed(out) == ["<near1@example.org>"]
    assert records(campaign) == before


@pytest.mark.parametrize("spelling", ["<near2@example.org>", "near2@example.org",
                                      " <near2@EXAMPLE.org> "])
def test_forget_message_id_with_or_without_brackets(campaign: Path, spelling: str) -> None:
    code, out, err = db(campaign, "forget", "--message-id", spelling)
    assert code == 0, err
    assert out.startswith("forgot 1 record:\n") and listed(out) == ["<near2@example.org>"]
    assert "<near2@example.org>" not in records(campaign)


def test_forget_a_message_id_no_record_keeps_says_what_to_do(campaign: Path) -> None:
    """A later exact copy bumps the first one's record; its own Message-ID is not kept."""
    copy = make_message(TEXT, message_id="<copy@example.org>")
    with Engine(load_settings(search=False), str(campaign)) as engine:
        engine.check(copy)
    code, out, _ = db(campaign, "forget", "--message-id", "<copy@example.org>")
    assert code == 1
    assert out.strip() == ("no record with Message-ID <copy@example.org>; a record keeps the "
                           "Message-ID of the first copy only: give a copy of the message on "
                           "stdin (dupfilter-db forget < message.eml)")
    assert records(campaign)["<orig@example.org>"] == 2


@pytest.mark.parametrize("args, message", [
    (["--message-id", ""], "forget --message-id '' names no Message-ID; expected one, with or "
                           "without angle brackets, e.g. --message-id "
                           "'<20240101.1234@example.org>'"),
    (["--message-id", "<>"], "forget --message-id '<>' names no Message-ID"),
    (["--message-id", "<x@example.org>", "--near"], "forget --near finds near matches of a "
                                                    "message on stdin"),
])
def test_forget_refuses_what_cannot_be_meant(campaign: Path, args: list[str],
                                             message: str) -> None:
    code, out, err = db(campaign, "forget", *args)
    assert code == 2 and out == ""
    assert err.startswith(f"dupfilter-db: {message}") and err.count("\n") == 1, err
    assert len(records(campaign)) == 4


# ----------------------------------------------------------------------------- prune

def test_prune_lists_what_it_removed(campaign: Path) -> None:
    code, out, err = db(campaign, "prune", "--older-than", "36h")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("pruning records last seen before ")
    assert listed(out) == ["<orig@example.org>", "<near1@example.org>"]    # oldest first
    assert re.match(r"pruned 2 records last seen before .*; 2 remain$", lines[-1])
    assert set(records(campaign)) == {"<near2@example.org>", "<other@example.org>"}


def test_prune_dry_run_lists_and_keeps(campaign: Path) -> None:
    code, out, err = db(campaign, "prune", "--older-than", "36h", "--dry-run")
    assert code == 0, err
    assert "(--dry-run: nothing removed)" in out
    assert listed(out) == ["<orig@example.org>", "<near1@example.org>"]
    assert out.splitlines()[-1].startswith("would prune 2 records last seen before ")
    assert len(records(campaign)) == 4


@pytest.mark.parametrize("age, message", [
    ("0s", "--older-than '0s' is no time at all; expected a number with a unit s, m, h, d or "
           "w, e.g. 30d"),
    ("0m", "--older-than '0m' is no time at all"),
    ("30", "--older-than '30' has no unit; expected a number with a unit s, m, h, d or w, "
           "e.g. 30d"),
    ("-1d", "--older-than '-1d' is not a duration"),
    ("soon", "--older-than 'soon' is not a duration"),
])
def test_prune_refuses_a_duration_that_cannot_be_meant(campaign: Path, age: str,
                                                       message: str) -> None:
    code, out, err = db(campaign, "prune", f"--older-than={age}")
    assert code == 2 and out == ""
    assert err.startswith(f"dupfilter-db: {message}") and err.count("\n") == 1, err
    assert len(records(campaign)) == 4


def test_prune_of_every_record_needs_yes(campaign: Path) -> None:
    code, out, err = db(campaign, "prune", "--older-than", "1s")
    assert code == 2 and out == ""
    assert err.startswith("dupfilter-db: prune --older-than 1s would remove every record (4, "
                          "the newest last seen ") and err.count("\n") == 1, err
    assert err.rstrip().endswith("add --yes to empty the store, or --dry-run to list them")
    assert len(records(campaign)) == 4
    code, out, _ = db(campaign, "prune", "--older-than", "1s", "--dry-run")
    assert code == 0 and len(listed(out)) == 4 and len(records(campaign)) == 4
    code, out, _ = db(campaign, "prune", "--older-than", "1s", "--yes")
    assert code == 0 and len(listed(out)) == 4 and out.endswith("; 0 remain\n")
    assert records(campaign) == {}
    code, out, _ = db(campaign, "prune", "--older-than", "1s")     # an empty store: fine
    assert code == 0 and out.startswith("pruned 0 records")


def test_prune_by_retention_applies_it_to_every_record(tmp_path: Path) -> None:
    """[store] retention is the postmaster's policy: the daily timer (or cron) applies it
    even to a store that got no mail for that long, and lists what went."""
    store = tmp_path / "store"
    fill(store, {"<old1@example.org>": (TEXT, 40), "<old2@example.org>": (variant(3), 35)})
    code, out, err = db(store, "prune")               # [store] retention: 30d
    assert code == 0, err
    assert listed(out) == ["<old1@example.org>", "<old2@example.org>"]
    assert records(store) == {}
