"""Calendar invitations (mailfilter/invitations.py, the ``calendar`` rule), end to end.

Invitations of one organiser share pages of Teams/Zoom/Meet text, so text measures call
them copies of each other (issue 13: 100% false positives).  RFC 5545 tells them apart:
UID is the event, SEQUENCE its version, METHOD what the message does.  Each test delivers
real-looking invitations (a text part plus a ``text/calendar`` part) to a fresh store.
"""

from __future__ import annotations

import base64
import itertools

import pytest
from helpers import make_message

from mailfilter.engine import Engine
from mailfilter.features import key64
from mailfilter.headers import verdict_value
from mailfilter.invitations import calendar_summary, is_calendar

BOILERPLATE = {
    "teams": (
        "_" * 80 + "\nMicrosoft Teams meeting\nJoin on your computer, mobile app or room "
        "device\nClick here to join the meeting\nMeeting ID: 345 678 912 345\nPasscode: "
        "aB3cD4\nDownload Teams | Join on the web\nJoin with a video conferencing device\n"
        "teams@vc.example.com\nVideo Conference ID: 118 245 001 4\nAlternate VTC "
        "instructions\nOr call in (audio only)\n+353 1 555 0100,,123456789# Ireland, "
        "Dublin\nPhone Conference ID: 123 456 789#\nFind a local number | Reset PIN\n"
        "Learn More | Meeting options\n" + "_" * 80 + "\n"),
    "zoom": (
        "Jane Doe is inviting you to a scheduled Zoom meeting.\n\nJoin Zoom Meeting\n"
        "https://example.zoom.us/j/81234567890?pwd=QWErty12345\n\nMeeting ID: 812 3456 "
        "7890\nPasscode: 445566\n\n---\n\nOne tap mobile\n+13462487799,,81234567890#,,,,"
        "*445566# US (Houston)\n+16699006833,,81234567890#,,,,*445566# US (San Jose)\n\n"
        "Dial by your location\n• +1 346 248 7799 US (Houston)\n• +1 669 900 6833 US (San "
        "Jose)\n\nFind your local number: https://example.zoom.us/u/abcdEFGH\n\nJoin by "
        "SIP\n• 81234567890@zoomcrc.com\n\nJoin by H.323\n• 162.255.37.11 (US West)\n"),
    "meet": (
        "Join with Google Meet\nhttps://meet.google.com/abc-defg-hij\n\nJoin by phone\n"
        "(US) +1 402-555-0123 PIN: 123456789#\n\nMore phone numbers\n"
        "https://tel.meet/abc-defg-hij?pin=123456789\n\nInvitation from Google Calendar\n\n"
        "You are receiving this email because you are an attendee of the event. To stop "
        "receiving future updates for this event, decline this event.\n\nForwarding this "
        "invitation could allow any recipient to send a response to the organizer, be "
        "added to the guest list, invite others regardless of their own invitation "
        "status, or modify your RSVP. Learn more\n"),
}
_numbers = itertools.count(1)


def calendar(uid: str, *, sequence: int = 0, start: str = "20261202T100000",
             method: str = "REQUEST", summary: str = "Budget review",
             stamp: str = "20261201T090000Z", attendee: str = "bob@example.org",
             partstat: str = "NEEDS-ACTION", extra: str = "") -> str:
    """One VEVENT in a VCALENDAR, as Exchange and Google write them."""
    return (f"BEGIN:VCALENDAR\r\nMETHOD:{method}\r\nPRODID:-//Example//Calendar 1.0//EN\r\n"
            f"VERSION:2.0\r\nBEGIN:VEVENT\r\nORGANIZER;CN=Jane Doe:mailto:jane@example.org\r\n"
            f"ATTENDEE;ROLE=REQ-PARTICIPANT;PARTSTAT={partstat};RSVP=TRUE:mailto:{attendee}"
            f"\r\nUID:{uid}\r\nSUMMARY:{summary}\r\n"
            f"DTSTART;TZID=Europe/Dublin:{start}\r\n"
            f"DTEND;TZID=Europe/Dublin:{start[:9]}235900\r\nSEQUENCE:{sequence}\r\n"
            f"DTSTAMP:{stamp}\r\n{extra}STATUS:CONFIRMED\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n")


def invitation(ics: str | bytes, *, style: str = "teams", summary: str = "Budget review",
               method: str = "REQUEST", sender: str = "jane@example.org",
               encoding: str = "base64", content_type: str = "text/calendar",
               filename: str | None = None, multipart: str = "alternative") -> bytes:
    """An invitation mail: the client's text, then the calendar part."""
    data = ics.encode() if isinstance(ics, str) else ics
    payload = base64.encodebytes(data).decode() if encoding == "base64" else data.decode(
        "latin-1")
    disposition = f"Content-Disposition: attachment; filename=\"{filename}\"\n" \
        if filename else ""
    body = (f"--b\nContent-Type: text/plain; charset=utf-8\n\n{summary}\n\n"
            f"{BOILERPLATE[style]}\n--b\n"
            f"Content-Type: {content_type}; charset=utf-8; method={method}\n{disposition}"
            f"Content-Transfer-Encoding: {encoding}\n\n{payload}\n--b--\n")
    return make_message(body, sender=sender, subject=summary, to="bob@example.org",
                        message_id=f"<inv{next(_numbers)}@example.org>",
                        headers={"MIME-Version": "1.0",
                                 "Content-Type": f"multipart/{multipart}; boundary=b"})


@pytest.mark.parametrize("style", list(BOILERPLATE))
def test_two_meetings_of_one_organiser_are_unique(engine: Engine, style: str) -> None:
    """Same organiser, same conferencing text, another meeting: the attendee needs both."""
    engine.check(invitation(calendar("uid-budget"), style=style, summary="Budget review"))
    other = engine.check(invitation(calendar("uid-hiring", start="20261203T140000",
                                             summary="Hiring plan"),
                                    style=style, summary="Hiring plan"))
    assert other.kind == "unique", verdict_value(other)
    assert other.evidence and other.evidence[0].rule == "calendar"
    assert "UID differs" in other.evidence[0].note


@pytest.mark.parametrize("style", list(BOILERPLATE))
def test_the_same_invitation_sent_twice_is_a_duplicate(engine: Engine, style: str) -> None:
    """A new Message-ID and a new DTSTAMP (the copy's time) do not make a new invitation."""
    engine.check(invitation(calendar("uid-1", stamp="20261201T090000Z"), style=style))
    again = engine.check(invitation(calendar("uid-1", stamp="20261201T173000Z"),
                                    style=style))
    assert (again.kind, again.measure) == ("duplicate", "calendar"), verdict_value(again)


def test_the_same_invitation_from_another_client_is_still_a_duplicate(engine: Engine) -> None:
    """The event decides, not the text around it: 8-bit instead of base64, another
    client's wording."""
    engine.check(invitation(calendar("uid-7"), style="teams"))
    again = engine.check(invitation(calendar("uid-7", stamp="20261201T120000Z"),
                                    style="meet", encoding="8bit"))
    assert (again.kind, again.measure) == ("duplicate", "calendar"), verdict_value(again)


def test_an_update_is_news_and_the_update_resent_is_not(engine: Engine) -> None:
    """SEQUENCE 1 after 0 is a new version of the event (a new time the attendee must
    see); the same version sent again is a duplicate."""
    engine.check(invitation(calendar("uid-2", sequence=0)))
    update = engine.check(invitation(calendar("uid-2", sequence=1, start="20261202T150000")))
    assert update.kind == "unique", verdict_value(update)
    assert any("SEQUENCE 1 after 0" in e.note for e in update.evidence)
    again = engine.check(invitation(calendar("uid-2", sequence=1, start="20261202T150000",
                                             stamp="20261201T180000Z")))
    assert (again.kind, again.measure) == ("duplicate", "calendar")


def test_a_higher_sequence_alone_is_an_update(engine: Engine) -> None:
    """The organiser re-sent the event as version 2 (an agenda or attendee changed
    outside the fields compared): RFC 5545 says it supersedes version 1."""
    engine.check(invitation(calendar("uid-10", sequence=1)))
    update = engine.check(invitation(calendar("uid-10", sequence=2)))
    assert update.kind == "unique", verdict_value(update)
    assert any("SEQUENCE 2 after 1" in e.note for e in update.evidence)


def test_a_moved_meeting_without_a_new_sequence_is_news(engine: Engine) -> None:
    """A sloppy sender moves the meeting and forgets SEQUENCE: still a change."""
    engine.check(invitation(calendar("uid-3", start="20261202T100000")))
    moved = engine.check(invitation(calendar("uid-3", start="20261204T100000")))
    assert moved.kind == "unique", verdict_value(moved)


def test_a_cancellation_is_not_a_duplicate_of_the_request(engine: Engine) -> None:
    """CANCEL after REQUEST tells the attendee the meeting is off; twice is a copy."""
    engine.check(invitation(calendar("uid-4", sequence=0)))
    cancel = engine.check(invitation(calendar("uid-4", sequence=1, method="CANCEL"),
                                     method="CANCEL", summary="Canceled: Budget review"))
    assert cancel.kind == "unique", verdict_value(cancel)
    assert any("CANCEL after REQUEST" in e.note for e in cancel.evidence)
    twice = engine.check(invitation(calendar("uid-4", sequence=1, method="CANCEL",
                                             stamp="20261201T200000Z"),
                                    method="CANCEL", summary="Canceled: Budget review"))
    assert (twice.kind, twice.measure) == ("duplicate", "calendar")


def test_one_occurrence_of_a_series_is_not_the_series(engine: Engine) -> None:
    """RECURRENCE-ID names one occurrence: moving it is news about the weekly meeting."""
    engine.check(invitation(calendar("uid-5", extra="RRULE:FREQ=WEEKLY;COUNT=10\r\n")))
    occurrence = engine.check(invitation(calendar(
        "uid-5", start="20261209T110000",
        extra="RECURRENCE-ID;TZID=Europe/Dublin:20261209T100000\r\n")))
    assert occurrence.kind == "unique", verdict_value(occurrence)


def test_answers_are_news_once_each(engine: Engine) -> None:
    """The organiser needs each attendee's answer once; a changed answer is news."""
    def answer(partstat: str, attendee: str = "bob@example.org") -> bytes:
        return invitation(calendar("uid-6", method="REPLY", attendee=attendee,
                                   partstat=partstat,
                                   stamp=f"202612{10 + next(_numbers) % 18}T080000Z"),
                          method="REPLY", summary="Accepted: Budget review",
                          sender=attendee)
    engine.check(answer("ACCEPTED"))
    assert engine.check(answer("ACCEPTED")).kind == "duplicate"
    assert engine.check(answer("DECLINED")).kind == "unique"
    assert engine.check(answer("ACCEPTED", "carol@example.org")).kind == "unique"


def test_an_ics_file_is_a_calendar_part_whatever_its_type(engine: Engine) -> None:
    """Clients that attach invite.ics (multipart/mixed) as application/octet-stream
    still send events."""
    assert is_calendar("application/octet-stream", "invite.ICS")
    assert is_calendar("application/ics", None) and not is_calendar("text/plain", "a.txt")
    engine.check(invitation(calendar("uid-8"), content_type="application/octet-stream",
                            filename="invite.ics", multipart="mixed"))
    other = engine.check(invitation(calendar("uid-9", start="20261205T100000"),
                                    content_type="application/octet-stream",
                                    filename="invite.ics", multipart="mixed"))
    assert other.kind == "unique", verdict_value(other)
    assert other.evidence and other.evidence[0].rule == "calendar"


def test_calendar_summary_reads_identity_version_and_method() -> None:
    """UID, SEQUENCE and METHOD as sent; DTSTAMP is not part of the version."""
    defects: list[str] = []
    first = calendar_summary([calendar("U-1", sequence=4).encode()], defects)
    restamped = calendar_summary([calendar("U-1", sequence=4, stamp="20270101T000000Z")
                                  .encode()], defects)
    assert first is not None and restamped is not None and defects == []
    assert (first.uid, first.sequence, first.method) == (key64("U-1"), 4, "REQUEST")
    assert first.key == restamped.key


BASE = calendar("uid-broken")
BROKEN = {
    "not icalendar": b"hello, this is not a calendar",
    "empty": b"",
    "no END:VCALENDAR": BASE.replace("END:VCALENDAR\r\n", "").encode(),
    "bad date": BASE.replace("20261202T100000", "notadate").encode(),
    "unknown time zone": BASE.replace("Europe/Dublin", "Mars/Olympus_Mons").encode(),
    "huge SEQUENCE": BASE.replace("SEQUENCE:0", "SEQUENCE:" + "9" * 40).encode(),
    "negative SEQUENCE": BASE.replace("SEQUENCE:0", "SEQUENCE:-3").encode(),
    "word SEQUENCE": BASE.replace("SEQUENCE:0", "SEQUENCE:two").encode(),
    "bad RRULE": BASE.replace("STATUS", "RRULE:FREQ=SOMETIMES;COUNT=x\r\nSTATUS").encode(),
    "no UID": BASE.replace("UID:uid-broken\r\n", "").encode(),
    "no VEVENT": b"BEGIN:VCALENDAR\r\nMETHOD:REQUEST\r\nEND:VCALENDAR\r\n",
    "latin-1 bytes": BASE.replace("Budget review", "R\xe9union").encode("latin-1"),
    "binary": bytes(range(256)) * 8,
    "deep nesting": ("BEGIN:VCALENDAR\r\n" + "BEGIN:X\r\n" * 3000 + "END:X\r\n" * 3000
                     + "END:VCALENDAR\r\n").encode(),
}


@pytest.mark.parametrize("ics", BROKEN.values(), ids=BROKEN.keys())
def test_broken_calendar_data_gets_a_verdict(engine: Engine, ics: bytes) -> None:
    """Whatever the calendar part holds, the message is checked, never an exception; the
    same message sent again is still found."""
    first = engine.check(invitation(ics))
    again = engine.check(invitation(ics))
    assert first.kind == "unique"
    assert again.kind == "duplicate", verdict_value(again)


def test_an_unparsable_calendar_part_is_reported_as_a_defect(engine: Engine) -> None:
    """explain shows why the calendar rule did not apply."""
    verdict = engine.check(invitation(BROKEN["not icalendar"]))
    assert any("calendar part does not parse" in d for d in verdict.defects), verdict.defects
