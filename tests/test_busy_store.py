"""Detection in a store that looks like a busy host's: the thousandth copy of a text is found
like the second (issue: detection in a busy store).

Boilerplate is what *different* texts share: a copy (a near-duplicate at least
``copy_threshold`` alike) joins its match's text cluster and counts once, so a campaign's or a
newsletter's personalised copies never make the text look common; the recipients of every
copy are filed under the cluster, so "did this mailbox have this text?" is one look-up
however many mailboxes received it.  Every test runs on LMDB, Redis and a Redis Cluster.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import make_message, paragraph_text
from support import cli

from mailfilter.config import Settings
from mailfilter.engine import Engine
from mailfilter.headers import verdict_value
from mailfilter.names import Kind

pytestmark = pytest.mark.every_backend

NEWSLETTER = paragraph_text(4242, count=260)
NAMES = ["Ann", "Bob", "Carol", "Dan", "Eve", "Finn", "Gus", "Hal", "Ida", "Jo", "Kim", "Lou"]


def newsletter(number: int, name: str) -> bytes:
    """One subscriber's copy: their greeting, the issue, their unsubscribe token."""
    body = (f"Hi {name},\n\n{NEWSLETTER}\n\nYou get this because you subscribed as "
            f"{name.lower()}{number}@example.net.\nUnsubscribe: "
            f"https://news.example.com/u/{number:08x}{number * 7919:06x}\n")
    return make_message(body, subject="The Weekly Letter: issue 214",
                        sender="letters@news.example.com",
                        message_id=f"<issue214.{number}@news.example.com>")


@pytest.mark.parametrize("others", [3, 10, 40])
def test_a_newsletter_to_many_mailboxes_is_found_again_for_the_first(
        engine: Engine, others: int) -> None:
    """Failed before: after 9 or more other mailboxes got their personalised copy, the
    newsletter's shingles were "boilerplate" (8 records held them) and the first mailbox's
    second copy had no candidate at all; 0.91 after 3."""
    first = engine.check(newsletter(0, "Ann"), ["ann@example.org"])
    assert first.kind is Kind.UNIQUE
    for number in range(1, others + 1):
        copy = engine.check(newsletter(number, NAMES[number % len(NAMES)]),
                            [f"reader{number}@example.org"])
        assert copy.kind is Kind.UNIQUE, verdict_value(copy)     # new to that mailbox
    again = engine.check(newsletter(others + 1, "Ann"), ["ann@example.org"])
    assert again.kind is Kind.NEAR_DUPLICATE, verdict_value(again)
    assert again.recipients_seen == ("ann@example.org",)
    assert not again.boilerplate


def test_a_mailbox_that_had_one_of_many_copies_is_told(engine: Engine) -> None:
    """Per-recipient scope at scale: 60 mailboxes had personalised copies; the one that gets
    it again (another personalisation) has a duplicate, a new one has a new message —
    whatever copy the check weighs, the cluster knows who had the text."""
    for number in range(60):
        engine.check(newsletter(number, NAMES[number % len(NAMES)]),
                     [f"reader{number}@example.org"])
    again = engine.check(newsletter(1000, "Zed"), ["reader17@example.org"])
    assert again.is_duplicate and again.recipients_seen == ("reader17@example.org",), \
        verdict_value(again)
    new = engine.check(newsletter(1001, "Zed"), ["newcomer@example.org"])
    assert new.kind is Kind.UNIQUE
    both = engine.check(newsletter(1002, "Zed"), ["reader3@example.org", "late@example.org"])
    assert both.is_duplicate and both.recipients_seen == ("reader3@example.org",)
    assert not both.all_recipients_seen


def test_copies_of_one_text_count_once_for_boilerplate(engine: Engine) -> None:
    """A campaign's copies (one text, a new token each) do not turn its text into
    boilerplate: the 30th copy is found at the same resemblance as the 2nd."""
    def campaign(number: int) -> bytes:
        return make_message(f"{NEWSLETTER}\n\nReference {number * 104729:09d}\n",
                            subject=f"Be your own boss {number * 31 % 9973}",
                            sender=f"offers{number}@promo{number}.example",
                            message_id=f"<c{number}@promo.example>")
    engine.check(campaign(0))
    second = engine.check(campaign(1))
    for number in range(2, 30):
        engine.check(campaign(number))
    thirtieth = engine.check(campaign(30))
    assert second.kind is thirtieth.kind is Kind.NEAR_DUPLICATE, verdict_value(thirtieth)
    assert not thirtieth.boilerplate
    assert thirtieth.score == pytest.approx(second.score, abs=0.1)


def test_a_short_mailing_personalised_for_many_mailboxes_is_found_again(
        engine: Engine) -> None:
    """Twelve mailboxes got a short post each under their own greeting ("Hi Ann," over 14
    words leaves two copies 0.7 alike, below copy_threshold): one mailing's copies (one
    sender, one subject) join one text cluster.  Before: each was a text of its own, the
    post's shingles were boilerplate, and its list copy (the list's own paragraph added)
    was unique for the mailbox that had the post (busy realworld list_crosspost, 2 of 30)."""
    post = "Our movie trivia night moves to Thursday at the library, bring a friend along."

    def copy(number: int, name: str, footer: str = "") -> bytes:
        return make_message(f"Hi {name},\n\n{post}\n{footer}", subject="Movie trivia",
                            sender="lisa@example.com", message_id=f"<m{number}@example.com>")
    for number in range(1, 13):
        engine.check(copy(number, NAMES[number % len(NAMES)]), [f"r{number}@example.org"])
    first = engine.check(copy(100, "Zed"), ["zed@example.org"])
    assert first.kind is Kind.UNIQUE, verdict_value(first)          # new to that mailbox
    footer = ("\nThis list is run by the events committee of the library friends; see the "
              "calendar on our site for the other evenings planned this autumn.\n")
    again = engine.check(copy(101, "Zed", footer), ["zed@example.org"])
    assert again.is_duplicate and again.recipients_seen == ("zed@example.org",), \
        verdict_value(again)
    assert not again.boilerplate


def test_what_different_texts_share_is_boilerplate_and_explain_says_so(
        engine: Engine, settings: Settings, tmp_path: Path) -> None:
    """A block that many different messages carry (a sponsor's paragraph no cleaning
    recognises) is set aside: a different short post under it is another message, and the
    verdict names the hashes and how many different texts hold each (explain prints it)."""
    footer = "\n\n" + paragraph_text(7777, count=45) + "\n"
    for number in range(12):
        engine.check(make_message(paragraph_text(500 + number, count=60) + footer,
                                  subject=f"topic {number}", sender=f"m{number}@example.org",
                                  message_id=f"<post{number}@lists.example>"))
    post = engine.check(make_message(paragraph_text(900, count=25) + footer,
                                     subject="a new topic", sender="new@example.org",
                                     message_id="<new@lists.example>"), record=False)
    assert post.kind is Kind.UNIQUE, verdict_value(post)
    assert post.boilerplate and all(count >= settings.detector.common_postings
                                    for _value, count in post.boilerplate)
    message = tmp_path / "post.eml"
    message.write_bytes(make_message(paragraph_text(900, count=25) + footer,
                                     message_id="<new2@lists.example>"))
    done = cli.run(cli.DUPFILTER_DB, "--db", engine.store.location, "explain", str(message))
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.decode().splitlines()
                if line.startswith("boilerplate:"))
    assert f"{len(post.boilerplate)} of its shingles were left out" in line
    assert "held by 8 or more different stored texts" in line and "(8+)" in line


def test_one_text_to_more_mailboxes_than_a_record_keeps(engine: Engine) -> None:
    """One announcement, the same text, delivered to 100 mailboxes one at a time (more than
    the 64 recipients a record holds): every one of them that gets it again has a duplicate,
    a mailbox that never had it a new message.  Failed before: the first 36 mailboxes were
    dropped from the record and their second copy was called unique."""
    def announcement(number: int) -> bytes:
        return make_message(NEWSLETTER, subject="Maintenance on Saturday",
                            sender="it@example.com", message_id=f"<maint.{number}@example.com>")
    for number in range(100):
        engine.check(announcement(number), [f"user{number}@example.org"])
    for number in (0, 1, 35, 63, 64, 99):
        again = engine.check(announcement(1000 + number), [f"user{number}@example.org"])
        assert again.kind is Kind.DUPLICATE and again.recipients_seen == (
            f"user{number}@example.org",), (number, verdict_value(again))
    assert engine.check(announcement(5000), ["stranger@example.org"]).kind is Kind.UNIQUE
    assert engine.store.verify() == []


def copies_to_mailboxes(engine: Engine, count: int, *, first_at: int | None = None,
                        at: int | None = None) -> None:
    """``count`` personalised copies of the newsletter, each to its own mailbox
    (reader0@... gets the first, at ``first_at`` when given)."""
    for number in range(count):
        engine.check(newsletter(number, NAMES[number % len(NAMES)]),
                     [f"reader{number}@example.org"], now=first_at if number == 0 else at)


def assert_text_still_known(engine: Engine) -> None:
    """A mailbox that had a copy gets a duplicate, a new one a new message; the store's
    indexes are sound."""
    again = engine.check(newsletter(2000, "Zed"), ["reader5@example.org"], record=False)
    assert again.is_duplicate and again.recipients_seen == ("reader5@example.org",), \
        verdict_value(again)
    assert engine.check(newsletter(2001, "Zed"), ["newcomer@example.org"],
                        record=False).kind is Kind.UNIQUE
    assert engine.store.verify() == []


@pytest.fixture
def lmdb_engine(tmp_path: Path, settings: Settings):  # noqa: ANN201
    """An Engine on an LMDB store, for the tests of LMDB's text-cluster indexes (Redis
    reads every copy under a key and prunes by TTL: docs/scaling.md)."""
    with Engine(settings, str(tmp_path / "lmdb-store")) as opened:
        yield opened


def test_a_check_reads_one_record_of_a_text_however_many_copies(
        lmdb_engine: Engine) -> None:
    """LMDB files a text cluster once under each index hash and each histogram of its
    copies (docs/scaling.md, mass mail), so a check reads as many records with 40 copies
    stored as with 10 (the cluster's filer and its newest members).  Before, it read the
    newest 48 copies under each hash and every copy in the histogram window: as many
    records as copies (10, then 40; on 34d33cd)."""
    engine = lmdb_engine
    read = {}
    copies = 0
    for count in (10, 40):
        for number in range(copies, count):
            engine.check(newsletter(number, NAMES[number % len(NAMES)]),
                         [f"reader{number}@example.org"])
        copies = count
        probe = engine.analyse(newsletter(3000, "Zed"))
        query = engine.detector.query(probe.fingerprint, probe.message_id,
                                      ["reader5@example.org"])
        read[count] = len(engine.store.lookup(query).records)
    assert read[40] == read[10] <= 1 + engine.detector.query(
        probe.fingerprint, None).members + 2, read
    assert_text_still_known(engine)


def test_the_copy_that_filed_a_text_forgotten_the_others_still_find_it(
        engine: Engine) -> None:
    """The first copy of a text files what its cluster holds (index hashes, histogram);
    when it is forgotten, another copy files them, and the text is still found for every
    mailbox that had it.  Without the hand-over the second copy for reader5 was unique
    (nothing in the text indexes named the cluster any more) and verify listed the
    cluster's missing entries."""
    copies_to_mailboxes(engine, 12)
    first = [r for r in engine.store.records() if r.message_id == "<issue214.0@news.example.com>"]
    assert len(first) == 1 and first[0].cluster == 0
    assert engine.store.forget([first[0].doc_id]) == 1
    assert_text_still_known(engine)


def test_a_pruned_first_copy_leaves_its_text_findable(lmdb_engine: Engine) -> None:
    """Pruning removes the oldest record first, which is the one that filed its text's
    entries: the copies left keep the text findable (they file the entries instead), and
    once every copy is pruned nothing of the text is left in the indexes."""
    engine = lmdb_engine
    now = 1_800_000_000
    copies_to_mailboxes(engine, 12, first_at=now - 40 * 86400, at=now)
    assert engine.store.prune(now - 30 * 86400) == 1
    assert_text_still_known(engine)
    assert engine.store.prune(now + 1) == 11
    assert engine.store.verify() == []
    stats = engine.store.stats()
    assert stats["records"] == 0 and not any(stats["postings"].values()), stats["postings"]
