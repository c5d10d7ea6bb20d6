"""Verdicts: duplicates, near-duplicates, replies, short bodies, recipient scope."""

from __future__ import annotations

import pytest
from helpers import make_message, make_mime, paragraph_text

from mailfilter.config import Settings
from mailfilter.engine import Engine
from mailfilter.headers import verdict_value

# Every test that opens a store runs on LMDB, Redis and a Redis Cluster (tests/support/stores.py).
pytestmark = pytest.mark.every_backend


def test_same_message_id_is_a_duplicate(engine: Engine) -> None:
    engine.check(make_message(paragraph_text(1), message_id="<same@x>"))
    verdict = engine.check(make_message(paragraph_text(2), message_id="<same@x>"))
    assert (verdict.kind, verdict.measure) == ("duplicate", "message-id")


def test_same_body_under_new_message_id_is_a_duplicate(engine: Engine) -> None:
    engine.check(make_message(paragraph_text(1), message_id="<a@x>"))
    verdict = engine.check(make_message(paragraph_text(1), message_id="<b@x>", crlf=True))
    assert (verdict.kind, verdict.measure) == ("duplicate", "digest")
    assert verdict.match.message_id == "<a@x>"
    assert verdict_value(verdict) == "duplicate; score=1.00; reason=digest; match=<a@x>; seen=2"


def test_edited_words_are_a_near_duplicate(engine: Engine) -> None:
    text = paragraph_text(3, count=300)
    engine.check(make_message(text, message_id="<orig@x>"))
    edited = text.replace("Market", "Bazaar", 1).replace(" the ", " a ", 2)
    words = edited.split(" ")
    words[40] = "changedword"
    verdict = engine.check(make_message(" ".join(words), message_id="<edit@x>"))
    assert verdict.kind == "near-duplicate" and verdict.measure == "shingles"
    assert 0.5 <= verdict.score < 1.0


def test_unrelated_messages_are_unique(engine: Engine) -> None:
    for seed in range(40):
        verdict = engine.check(make_message(paragraph_text(seed * 7 + 1000), message_id=None))
        assert verdict.kind == "unique", verdict.evidence


def test_reply_quoting_the_whole_message_is_not_a_duplicate(engine: Engine) -> None:
    original = paragraph_text(5, count=250)
    engine.check(make_message(original, message_id="<orig@x>"))
    quoted = "".join(f"> {line}\n" for line in original.splitlines())
    reply = ("I agree with most of this, but not the last point.\n\n"
             "On Mon, 30 Nov 2026, Ann <ann@example.org> wrote:\n" + quoted)
    verdict = engine.check(make_message(reply, message_id="<reply@x>"))
    assert verdict.kind == "unique"


def test_inline_forward_is_a_near_duplicate(engine: Engine) -> None:
    original = paragraph_text(6, count=250)
    engine.check(make_message(original, message_id="<orig@x>"))
    forward = ("FYI, see below.\n\n---------- Forwarded message ---------\n"
               "From: Ann <ann@example.org>\nDate: Mon, 30 Nov 2026\nSubject: Test\n\n"
               + original)
    verdict = engine.check(make_message(forward, message_id="<fwd@x>"))
    assert verdict.kind == "near-duplicate"


def test_short_bodies_match_exactly_only(engine: Engine) -> None:
    engine.check(make_message("Thanks, see you at noon.", message_id="<s1@x>"))
    exact = engine.check(make_message("Thanks,  see you\nat noon.", message_id="<s2@x>"))
    changed = engine.check(make_message("Thanks, see you at one.", message_id="<s3@x>"))
    assert exact.kind == "duplicate"
    assert changed.kind == "unique"


def test_empty_bodies_are_not_duplicates_of_each_other(engine: Engine) -> None:
    engine.check(make_message("", message_id="<e1@x>"))
    assert engine.check(make_message("", message_id="<e2@x>")).kind == "unique"


def test_per_recipient_scope(store_location: str, settings: Settings) -> None:
    raw = make_message(paragraph_text(8), message_id="<r@x>")
    with Engine(settings, store_location) as engine:
        engine.check(raw, ["alice@example.org"])
        for_bob = engine.check(raw, ["bob@example.org"])
        assert for_bob.kind == "unique"
        both = engine.check(raw, ["alice@example.org", "carol@example.org"], record=False)
        assert both.kind == "duplicate" and both.recipients_seen == ("alice@example.org",)
        assert not both.all_recipients_seen
        again = engine.check(raw, ["Bob@Example.org", "alice@example.org"], record=False)
        assert again.all_recipients_seen
        # The same recipient twice (in two spellings) is one recipient who had it all.
        repeated = engine.check(raw, ["alice@example.org", "<ALICE@example.org>"],
                                record=False)
        assert repeated.kind == "duplicate" and repeated.all_recipients_seen


def test_global_scope_ignores_recipients(store_location: str, settings: Settings) -> None:
    settings.detector.scope = "global"
    raw = make_message(paragraph_text(8), message_id="<r@x>")
    with Engine(settings, store_location) as engine:
        engine.check(raw, ["alice@example.org"])
        assert engine.check(raw, ["bob@example.org"]).kind == "duplicate"


def test_attachment_only_messages_compare_by_chunks(engine: Engine) -> None:
    import random
    # Seeded: the edit lands in one chunk, and chunk sizes vary, so the similarity of a
    # random attachment is 0.95 typically but under the 0.8 threshold about 1 time in 1,200
    # (when the edited chunk is a very long one).  This one is typical (0.95).
    data = random.Random(1).randbytes(120_000)
    engine.check(make_mime("", attachment=data, message_id="<att1@x>"))
    near = data[:60_000] + b"small edit" + data[60_000:]
    verdict = engine.check(make_mime("", attachment=near, message_id="<att2@x>"))
    assert (verdict.kind, verdict.measure) == ("near-duplicate", "attachments")
    other = engine.check(make_mime("", attachment=random.Random(2).randbytes(120_000),
                                   message_id="<att3@x>"))
    assert other.kind == "unique"


def test_evidence_explains_the_decision(engine: Engine) -> None:
    text = paragraph_text(12, count=300)
    engine.check(make_message(text, message_id="<orig@x>"))
    verdict = engine.check(make_message(text + "\nOne more line.", message_id="<new@x>"),
                           record=False)
    best = verdict.evidence[0]
    assert best.record.message_id == "<orig@x>" and "shingles" in best.found_by
    assert best.resemblance is not None and best.resemblance > 0.9


def test_allow_rules_skip_or_do_not_record(store_location: str, settings: Settings) -> None:
    settings.policy.rules = [
        {"name": "cron", "field": "from", "pattern": "^cron@", "action": "skip"},
        {"name": "alerts", "field": "header:X-Monitor", "pattern": "nagios",
         "action": "no-record"},
        {"name": "bulk", "field": "envelope-sender", "pattern": "@news\\.example$"},
    ]
    report = make_message(paragraph_text(30), sender="cron@host.example", message_id=None)
    alert = make_message(paragraph_text(31), headers={"X-Monitor": "Nagios 4"}, message_id=None)
    with Engine(settings, store_location) as engine:
        for _ in range(3):
            verdict = engine.check(report)
            assert verdict_value(verdict) == "unique; skipped=cron"
            alerted = engine.check(alert)
            assert alerted.kind == "unique" and "rule=alerts" in verdict_value(alerted)
        newsletter = make_message(paragraph_text(32), message_id=None)
        for _ in range(2):
            assert engine.check(newsletter, sender="list@news.example").skipped_by == "bulk"
        assert engine.check(newsletter, sender="someone@else.example").kind == "unique"
        assert engine.check(newsletter, sender="someone@else.example").kind == "duplicate"
        assert engine.store.stats()["records"] == 1
