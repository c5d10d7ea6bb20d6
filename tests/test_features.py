"""The features a record keeps (mailfilter/features.py): encoded, stored, decoded.

Every pair rule compares a new message's features with a stored record's *decoded* ones, so
a field that does not survive the store changes a verdict; and a record whose features
exceed the store's limit cannot be stored at all.  Messages are built with the standard
library (as mail clients write them) and parsed by dupfilter's own parser.
"""

from __future__ import annotations

import base64
import random
from email.message import EmailMessage
from email.policy import SMTP

import pytest
from helpers import make_message, paragraph_text

from mailfilter.engine import Engine
from mailfilter.features import (
    DIGIT_WORD,
    FACT_WORD,
    MAX_ATTACHMENTS,
    MAX_THREAD_KEYS,
    WORDS_MAX,
    AttachmentSummary,
    CalendarSummary,
    Features,
    key64,
    message_features,
    normal_subject,
    registrable_domain,
    word_keys,
)
from mailfilter.headers import verdict_value
from mailfilter.message import parse
from mailfilter.store import FEATURES_MAX
from mailfilter.values import replace

CALENDAR = (
    "BEGIN:VCALENDAR\r\nMETHOD:REQUEST\r\nPRODID:Microsoft Exchange Server 2010\r\n"
    "VERSION:2.0\r\nBEGIN:VEVENT\r\nORGANIZER;CN=Jane Doe:mailto:jane@example.org\r\n"
    "ATTENDEE;PARTSTAT=NEEDS-ACTION:mailto:bob@example.org\r\nUID:040000008200E00074C5B7\r\n"
    "SUMMARY:Budget review\r\nDTSTART;TZID=Europe/Dublin:20261202T100000\r\n"
    "DTEND;TZID=Europe/Dublin:20261202T110000\r\nSEQUENCE:3\r\n"
    "DTSTAMP:20261201T090000Z\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n")


def build(*, attachments: int = 0, identifiers: int = 0, references: int = 0,
          subject: str = "Quarterly numbers", name: str = "Ann Lee",
          file_name: str = "report {}.pdf", calendar: str | None = None,
          sender: str = "ann@example.org") -> bytes:
    """A message as a mail client writes it, with the given amounts of everything."""
    rng = random.Random(attachments * 7 + identifiers * 3 + references)
    msg = EmailMessage()
    msg["From"] = f"{name} <{sender}>"
    msg["To"] = "bob@example.net"
    msg["Subject"] = subject
    msg["Message-ID"] = "<features@example.org>"
    if references:
        ids = [f"<ref{number}.{rng.randrange(10**9)}@example.org>" for number in range(references)]
        msg["References"] = " ".join(ids)
        msg["In-Reply-To"] = ids[-1]
    numbers = " ".join(str(rng.randrange(10**9)) for _ in range(identifiers))
    msg.set_content(paragraph_text(5, count=40) + numbers + "\n")
    if calendar is not None:          # first: the parser reads at most 200 parts
        msg.add_attachment(calendar.encode(), maintype="text", subtype="calendar",
                           params={"method": "REQUEST"})
    for number in range(attachments):
        msg.add_attachment(rng.randbytes(1500), maintype="application", subtype="pdf",
                           filename=file_name.format(number))
    return msg.as_bytes(policy=SMTP)


def features_of(raw: bytes) -> Features:
    return message_features(parse(raw))


ADVERSARIAL = {
    "plain": {},
    "400 attachments": {"attachments": 400},
    "10k identifiers": {"identifiers": 10_000},
    "1000 references": {"references": 1000},
    "5000-char subject": {"subject": "Re: " + "budget " * 700 + "42"},
    "non-ascii sender name": {"name": "Jürgen Müller-Lüdenscheidt 王小明 🙂"},
    "calendar": {"calendar": CALENDAR},
    "everything": {"attachments": 300, "identifiers": 10_000, "references": 1000,
                   "calendar": CALENDAR, "name": "Zoë Ångström",
                   "subject": "AW: " + "Übersicht " * 300},
}


@pytest.mark.parametrize("options", ADVERSARIAL.values(), ids=ADVERSARIAL.keys())
def test_features_round_trip_and_fit_the_store(options: dict) -> None:
    """What the store gives back is what the message had, within FEATURES_MAX bytes."""
    features = features_of(build(**options))
    encoded = features.encode()
    assert len(encoded) <= FEATURES_MAX
    assert Features.decode(encoded) == features


def test_features_keep_what_the_rules_need_of_a_busy_message() -> None:
    """Capped, not lost: the largest attachments, the thread's root and latest ids, a
    bit map for many identifiers, the calendar event."""
    message = parse(build(**ADVERSARIAL["everything"]))
    features = message_features(message)
    files = [a for a in message.attachments if a.content_type != "text/calendar"]
    assert len(files) >= 150          # the parser's part limit (200) bounds the work
    assert len(features.attachments) == MAX_ATTACHMENTS
    assert features.attachment_bytes == 1500 * len(files)   # every file counts in the share
    assert len(features.thread) == MAX_THREAD_KEYS
    assert features.identifiers == () and len(features.identifier_bits) == 128
    assert features.calendar is not None and features.calendar.sequence == 3
    assert features.calendar.method == "REQUEST"


def test_the_largest_possible_features_fit_the_store() -> None:
    """Every field at its cap at once (both identifier forms, 59-byte names, a 16-byte
    method) still fits: no message can make a record the store refuses."""
    features = Features(
        sender=2**64 - 1, sender_name=2**64 - 1, sender_domain=2**64 - 1,
        subject=2**64 - 1, thread=tuple(range(1, 50)), quoted=2**64 - 1,
        identifiers=tuple(range(32)), identifier_bits=b"\xff" * 128,
        calendar=CalendarSummary(2**64 - 1, 2**64 - 1, 2**40, "X-" + "M" * 40),
        attachments=tuple(AttachmentSummary(2**64 - 1, 2**40, "n" * 200) for _ in range(50)),
        attachment_bytes=2**63, text_bytes=2**40, automated=True, is_reply=True,
        forwarded_from=tuple(range(1, 40)), resend_note=True, notifier=True,
        subject_stem=2**64 - 1, tracker=True, event=2**64 - 1)
    assert len(features.encode()) <= FEATURES_MAX
    decoded = Features.decode(features.encode())
    assert decoded.subject_stem == decoded.event == 2**64 - 1 and decoded.tracker


@pytest.mark.parametrize(("stem", "tracker", "event"), [(0, False, 0), (7, False, 0),
                                                         (0, True, 0), (0, True, 9),
                                                         (7, True, 9)])
def test_the_second_flag_byte_and_the_event_key_round_trip(stem: int, tracker: bool,
                                                           event: int) -> None:
    """A tracker's comment key (flag 128's second byte, bit 2, then 8 bytes) comes back
    as written, and a record written before it existed (no bit 2) reads as no event."""
    features = Features(sender=1, subject=2, subject_stem=stem, tracker=tracker, event=event)
    decoded = Features.decode(features.encode())
    assert (decoded.subject_stem, decoded.tracker, decoded.event) == (stem, tracker, event)
    older = Features(sender=1, subject=2, subject_stem=stem, tracker=tracker).encode()
    assert Features.decode(older).event == 0


@pytest.mark.parametrize(("stem", "event"), [(0, 0), (7, 0), (0, 9), (7, 9)])
def test_a_short_texts_word_keys_round_trip(stem: int, event: int) -> None:
    """The word keys (flag 128's second byte, bit 4, after the event key) come back in
    order, beside a stem and an event key; older records read as no words."""
    words = word_keys("please send me the slides 2 before friday".split())
    assert len(words) == 8 and words[5] & DIGIT_WORD and not words[4] & DIGIT_WORD
    assert words[7] & FACT_WORD and not any(key & FACT_WORD for key in words[:7])
    assert word_keys([b"not", b"friday", b"slides"]) == word_keys(["not", "friday", "slides"])
    features = Features(sender=1, subject=2, subject_stem=stem, event=event, words=words)
    decoded = Features.decode(features.encode())
    assert (decoded.words, decoded.subject_stem, decoded.event) == (words, stem, event)
    assert Features.decode(replace(features, words=()).encode()).words == ()


def test_only_a_short_text_keeps_its_words() -> None:
    """Up to WORDS_MAX words the features carry their keys in order; a longer text, which
    the shingles judge, carries none."""
    short = parse(make_message(body="Could you send me the slides from this morning?\n"))
    assert message_features(short).words == word_keys(
        "could you send me the slides from this morning".split())
    long = parse(make_message(body=" ".join(["word"] * (WORDS_MAX + 1)) + "\n"))
    assert message_features(long).words == ()


def test_word_keys_give_way_when_the_features_are_full() -> None:
    """The largest features with a short text's words still fit the store: the words are
    left out (the rest decides more), and everything else comes back whole."""
    largest = Features(
        sender=2**64 - 1, subject=2**64 - 1, thread=tuple(range(1, 50)),
        identifiers=tuple(range(32)), identifier_bits=b"\xff" * 128,
        calendar=CalendarSummary(2**64 - 1, 2**64 - 1, 2**40, "X-" + "M" * 40),
        attachments=tuple(AttachmentSummary(2**64 - 1, 2**40, "n" * 200) for _ in range(50)),
        forwarded_from=tuple(range(1, 40)), subject_stem=2**64 - 1, tracker=True,
        event=2**64 - 1, words=tuple(range(WORDS_MAX)))
    encoded = largest.encode()
    assert len(encoded) <= FEATURES_MAX
    decoded = Features.decode(encoded)
    assert decoded.words == () and decoded.event == 2**64 - 1
    assert decoded.attachments == Features.decode(replace(largest, words=()).encode()).attachments
    roomy = replace(largest, attachments=largest.attachments[:2])
    assert Features.decode(roomy.encode()).words == tuple(range(WORDS_MAX))


def test_engine_stores_and_matches_an_adversarial_message(engine: Engine) -> None:
    """Hundreds of attachments, thousands of identifiers and References: checked,
    stored, and the copy found again (by its content, not by its Message-ID)."""
    raw = build(**ADVERSARIAL["everything"])
    first = engine.check(raw)
    again = engine.check(raw.replace(b"<features@example.org>", b"<features-2@example.org>"))
    assert first.kind == "unique"
    assert again.kind == "duplicate" and again.measure in ("digest", "calendar")


@pytest.mark.parametrize("file_name", ["Übersicht {} März.pdf", "報告書 {}.xlsx",
                                       "Q{} résumé.docx"])
def test_non_ascii_attachment_names_round_trip(file_name: str) -> None:
    """A name a user would see in the header comes back from the store as it was."""
    features = features_of(build(attachments=2, file_name=file_name))
    assert {a.name for a in features.attachments} == {file_name.format(n) for n in (0, 1)}
    assert Features.decode(features.encode()) == features


@pytest.mark.parametrize("name", ["Protokoll Café", "Sitzung " + "ä" * 40,
                                  "a" + "é" * 40])
def test_attachment_names_decode_to_a_clean_prefix(name: str) -> None:
    """The stored name is the name, or its first 59 bytes cut between characters."""
    features = Features(attachments=(AttachmentSummary(1, 5000, name),))
    stored = Features.decode(features.encode()).attachments[0].name
    assert "\ufffd" not in stored
    assert name.startswith(stored) and len(stored.encode()) >= min(len(name.encode()), 56)


def test_the_header_names_a_long_non_ascii_attachment_in_full(engine: Engine) -> None:
    """The re-sent attachment is named in X-Dupfilter as the sender named it."""
    data = random.Random(3).randbytes(60_000)

    def mail(note: str, number: int) -> bytes:
        msg = EmailMessage()
        msg["From"] = "ann@example.org"
        msg["To"] = "bob@example.net"
        msg["Subject"] = "Bericht"
        msg["Message-ID"] = f"<att{number}@example.org>"
        msg.set_content(note)
        msg.add_attachment(data, maintype="application", subtype="pdf",
                           filename="Bericht Übersicht – äöü.pdf")
        return msg.as_bytes(policy=SMTP)

    engine.check(mail(paragraph_text(1, count=30), 1))
    verdict = engine.check(mail(paragraph_text(2, count=30), 2))
    assert verdict.measure == "attachments", verdict_value(verdict)
    assert 'attachment="Bericht Übersicht – äöü.pdf"' in verdict_value(verdict)


def test_records_of_another_format_decode_to_no_features() -> None:
    """Records written before features existed (or by a later format) are read as
    "nothing known", never as garbage."""
    assert Features.decode(b"") == Features()
    assert Features.decode(b"\x02" + bytes(200)) == Features()


# -- subjects and senders --------------------------------------------------------------


@pytest.mark.parametrize("subject", [
    "Budget review",
    "Re: Budget review",
    "RE: Fwd: AW: WG: SV: Budget review",
    "Fw: [finance] Budget review",
    "[finance-team] [External] Re:  Budget   review",
    "Resend: Budget review",
    "UPDATED: Budget review",
    "Budget review (corrected)",
    "Re[2]: Budget review",
    "FYI: Budget Review",
])
def test_one_subject_in_many_dresses_has_one_key(subject: str) -> None:
    """Reply/forward prefixes, digit-free list tags and resend marks do not make a new
    subject: the same-subject rules must see these as one."""
    assert normal_subject(subject) == "budget review"
    features = features_of(build(subject=subject))
    assert features.subject == key64("budget review")


@pytest.mark.parametrize(("one", "other"), [
    ("[Ticket #27271] Printer broken", "[Ticket #27272] Printer broken"),
    ("Invoice 1001", "Invoice 1002"),
    ("Re: Budget review", "Re: Budget overview"),
])
def test_different_subjects_keep_different_keys(one: str, other: str) -> None:
    """A tag with a number names a ticket; it stays, and so do the subject's own words."""
    assert features_of(build(subject=one)).subject != features_of(build(subject=other)).subject


@pytest.mark.parametrize("address", ["ann@gmail.com", "ann.lee@yahoo.co.uk",
                                     "zoe@hotmail.fr", "ann@gmx.de"])
def test_freemail_senders_keep_their_address_as_domain(address: str) -> None:
    """People at a public provider are unrelated: each is their own "organisation"."""
    assert registrable_domain(address) == address
    ann = features_of(build(sender=address))
    other = features_of(build(sender="other." + address))
    assert ann.sender_domain != other.sender_domain


def test_people_of_one_company_share_its_registered_domain() -> None:
    """Subdomains and country second-level labels fold into one organisation."""
    assert registrable_domain("ann@mail.example.co.uk") == "example.co.uk"
    assert registrable_domain("bob@eu.mx.example.com") == "example.com"
    ann = features_of(build(sender="ann@mail.example.co.uk"))
    bob = features_of(build(sender="bob@example.co.uk"))
    assert ann.sender_domain == bob.sender_domain == key64("example.co.uk")
    assert ann.sender != bob.sender


def test_a_calendar_resent_with_a_new_dtstamp_keeps_its_key() -> None:
    """DTSTAMP is the time the copy was made: the same event again has the same key,
    a moved event does not."""
    first = features_of(build(calendar=CALENDAR)).calendar
    resent = features_of(build(calendar=CALENDAR.replace("090000Z", "171500Z"))).calendar
    moved = features_of(build(calendar=CALENDAR.replace("T100000", "T140000"))).calendar
    assert first is not None and resent is not None and moved is not None
    assert first.key == resent.key != moved.key
    assert first.uid == moved.uid == key64("040000008200E00074C5B7")


def test_base64_calendar_parts_are_read() -> None:
    """Outlook sends the calendar part base64-encoded; it is still an event."""
    raw = make_message(
        "--b\nContent-Type: text/plain\n\nBudget review\n--b\n"
        "Content-Type: text/calendar; method=REQUEST\nContent-Transfer-Encoding: base64\n\n"
        + base64.encodebytes(CALENDAR.encode()).decode() + "--b--\n",
        headers={"MIME-Version": "1.0", "Content-Type": "multipart/alternative; boundary=b"})
    calendar = features_of(raw).calendar
    assert calendar is not None and (calendar.method, calendar.sequence) == ("REQUEST", 3)
