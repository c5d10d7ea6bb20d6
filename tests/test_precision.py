"""Different messages that look alike stay unique; the same message again is still found.

Each test delivers a short realistic sequence to a fresh store and asserts what a user
would see: the verdict of the last message, and why (the rule that decided, in ``explain``).
"""

from __future__ import annotations

import base64
import random
from pathlib import Path

import pytest
from helpers import make_message, paragraph_text

from mailfilter.config import Settings
from mailfilter.engine import Engine
from mailfilter.headers import verdict_value
from mailfilter.message import parse

DISCLAIMER = (
    "This email and any files transmitted with it are confidential and intended solely for "
    "the use of the individual or entity to whom they are addressed. If you have received "
    "this email in error please notify the sender immediately and delete it from your "
    "system. Any unauthorised copying, disclosure or distribution of the material in this "
    "email is strictly prohibited. Acme Widgets Ltd is registered in England and Wales, "
    "company number 01234567, registered office 1 High Street, London.")
BANNER = ("CAUTION: This email originated from outside of the organization. Do not click "
          "links or open attachments unless you recognize the sender and know the content "
          "is safe.")


def invitation(uid: str, sequence: int, start: str, *, method: str = "REQUEST",
               summary: str = "Weekly sync", attendee: str = "bob@example.org",
               partstat: str = "NEEDS-ACTION", message_id: str) -> bytes:
    """A Teams-style invitation: boilerplate text plus a text/calendar part."""
    text = (f"{summary}\n\n" + "_" * 60 + "\nMicrosoft Teams meeting\nJoin on your computer, "
            "mobile app or room device\nClick here to join the meeting\nLearn More | Meeting "
            "options\n" + "_" * 60 + "\n")
    ics = (f"BEGIN:VCALENDAR\r\nMETHOD:{method}\r\nPRODID:Microsoft Exchange Server 2010\r\n"
           f"VERSION:2.0\r\nBEGIN:VEVENT\r\nORGANIZER;CN=Jane Doe:mailto:jane@example.org\r\n"
           f"ATTENDEE;PARTSTAT={partstat};CN=Bob:mailto:{attendee}\r\nUID:{uid}\r\n"
           f"SUMMARY:{summary}\r\nDTSTART;TZID=Europe/Dublin:{start}\r\n"
           f"DTEND;TZID=Europe/Dublin:{start[:-4]}1130\r\nSEQUENCE:{sequence}\r\n"
           f"DTSTAMP:20261201T{random.randrange(100000, 235959)}Z\r\nEND:VEVENT\r\n"
           f"END:VCALENDAR\r\n")
    return (f"From: Jane Doe <jane@example.org>\nTo: bob@example.org\nSubject: {summary}\n"
            f"Message-ID: {message_id}\nMIME-Version: 1.0\n"
            "Content-Type: multipart/alternative; boundary=b\n\n--b\n"
            f"Content-Type: text/plain; charset=utf-8\n\n{text}\n--b\n"
            f"Content-Type: text/calendar; charset=utf-8; method={method}\n"
            f"Content-Transfer-Encoding: base64\n\n"
            f"{base64.encodebytes(ics.encode()).decode()}\n--b--\n").encode()


def test_invitations_for_other_meetings_or_versions_stay_unique(engine: Engine) -> None:
    engine.check(invitation("uid-1", 0, "20261202T100000", message_id="<i1@x>"))
    other = engine.check(invitation("uid-2", 0, "20261203T100000", message_id="<i2@x>"))
    update = engine.check(invitation("uid-1", 1, "20261202T140000", message_id="<i3@x>"))
    assert other.kind == update.kind == "unique"
    notes = {e.note for e in update.evidence}
    assert any("SEQUENCE 1 after 0" in note for note in notes), notes
    again = engine.check(invitation("uid-1", 1, "20261202T140000", message_id="<i4@x>"))
    assert (again.kind, again.measure) == ("duplicate", "calendar")


def test_answers_of_two_attendees_are_two_messages(engine: Engine) -> None:
    for number, attendee in enumerate(("bob@example.org", "carol@example.org")):
        verdict = engine.check(invitation("uid-9", 0, "20261202T100000", method="REPLY",
                                          summary="Accepted: Weekly sync", attendee=attendee,
                                          partstat="ACCEPTED", message_id=f"<r{number}@x>"))
    assert verdict.kind == "unique"


@pytest.mark.parametrize("own", ["Approved.", "Thanks, see attached.",
                                 paragraph_text(41, count=25), paragraph_text(42, count=90)])
def test_messages_under_one_disclaimer_stay_unique(engine: Engine, own: str) -> None:
    first = paragraph_text(40, count=60)
    for number, text in enumerate((first, own)):
        body = f"{BANNER}\n\nHi Bob,\n\n{text}\n\nRegards,\nAnn\n\n{DISCLAIMER}\n"
        verdict = engine.check(make_message(body, message_id=f"<d{number}@x>",
                                            subject=f"Topic {number}"))
    assert verdict.kind == "unique", verdict_value(verdict)


def test_the_same_message_under_a_disclaimer_is_still_a_duplicate(engine: Engine) -> None:
    body = f"Hi Bob,\n\n{paragraph_text(43, count=80)}\n\n{DISCLAIMER}\n"
    engine.check(make_message(body, message_id="<s1@x>"))
    assert engine.check(make_message(body, message_id="<s2@x>")).kind == "duplicate"


def notice(code: str, when: str, number: int) -> bytes:
    body = (f"Hello Ann,\n\nSomeone asked to reset the password of your account at "
            f"{when}. Your one-time code is {code}. It expires in 15 minutes. If this was not "
            "you, you can ignore this message and your password will stay as it is. For "
            "help, contact our support team any time; we answer within one working day.\n\n"
            "The Example Accounts team\n")
    return make_message(body, sender="no-reply@accounts.example.com",
                        subject="Your password reset code", message_id=f"<n{number}@x>")


def test_the_same_template_with_other_data_is_a_new_message(engine: Engine) -> None:
    engine.check(notice("482913", "10:02", 1))
    other = engine.check(notice("119384", "10:47", 2))
    assert other.kind == "unique"
    assert any("identifiers differ" in e.note and "119384" in e.note for e in other.evidence)
    retried = engine.check(notice("119384", "10:47", 3))
    assert retried.kind == "duplicate"


@pytest.mark.parametrize("reply", ["Thanks!", "+1", "Sounds good to me.", "Will do."])
def test_short_replies_from_other_people_stay_unique(engine: Engine, reply: str) -> None:
    for number, (sender, thread) in enumerate((("ann@example.org", "Budget"),
                                               ("carl@example.net", "Lunch on Friday"))):
        quoted = "\n".join("> " + line for line in paragraph_text(50 + number).split("\n"))
        body = f"{reply}\n\nOn Mon, 30 Nov 2026, Bob <bob@example.org> wrote:\n{quoted}\n"
        verdict = engine.check(make_message(body, sender=sender, subject=f"Re: {thread}",
                                            message_id=f"<q{number}@x>"))
    assert verdict.kind == "unique"
    assert verdict.evidence and verdict.evidence[0].rule == "short-text"


def test_a_short_message_sent_again_is_a_duplicate(engine: Engine) -> None:
    text = "Can you send me the Q3 numbers by Friday?"
    engine.check(make_message(text, subject="Q3 numbers", message_id="<m1@x>"))
    again = engine.check(make_message(text, subject="Q3 numbers", message_id="<m2@x>"))
    added = engine.check(make_message(text + "\nResending in case this got lost.",
                                      subject="Fwd: Q3 numbers", message_id="<m3@x>"))
    assert again.kind == "duplicate"
    assert (added.kind, added.measure) == ("near-duplicate", "resend")


def test_outlook_reply_quoting_the_whole_original_is_not_a_copy(engine: Engine) -> None:
    original = paragraph_text(60, count=200)
    engine.check(make_message(original, subject="Plan", message_id="<o1@x>"))
    reply = ("Agreed, let's go ahead with the second option.\n\nBob\n\n" + "_" * 32 +
             "\nFrom: Ann Lee <ann@example.org>\nSent: Monday, November 30, 2026 10:00 AM\n"
             "To: Bob Martin <bob@example.net>\nSubject: Plan\n\n" + original)
    verdict = engine.check(make_message(reply, subject="RE: Plan", sender="bob@example.net",
                                        message_id="<o2@x>"))
    assert verdict.kind == "unique"


def test_the_same_attachment_under_a_new_cover_note_is_found(engine: Engine) -> None:
    data = random.Random(7).randbytes(80_000)

    def mail(note: str, number: int) -> bytes:
        encoded = base64.encodebytes(data).decode()
        return (f"From: ann@example.org\nTo: bob@example.org\nSubject: Report\n"
                f"Message-ID: <a{number}@x>\nMIME-Version: 1.0\n"
                "Content-Type: multipart/mixed; boundary=b\n\n--b\n"
                f"Content-Type: text/plain\n\n{note}\n--b\nContent-Type: application/pdf\n"
                "Content-Disposition: attachment; filename=\"Q3 report.pdf\"\n"
                f"Content-Transfer-Encoding: base64\n\n{encoded}\n--b--\n").encode()

    engine.check(mail(paragraph_text(70, count=30), 1))
    verdict = engine.check(mail(paragraph_text(71, count=40), 2))
    assert (verdict.kind, verdict.measure) == ("near-duplicate", "attachments")
    assert 'attachment="Q3 report.pdf" (80000 bytes)' in verdict_value(verdict)


def test_aliases_make_two_addresses_one_recipient(tmp_path: Path, settings: Settings) -> None:
    aliases = tmp_path / "aliases"
    aliases.write_text("# alias  mailbox\nj.doe@example.org  jane@example.org\n")
    settings.detector.aliases = str(aliases)
    newsletter = paragraph_text(80, count=150)
    with Engine(settings, str(tmp_path / "store")) as engine:
        engine.check(make_message(newsletter, message_id="<nl1@x>"), ["jane@example.org"])
        other = engine.check(make_message(newsletter, message_id="<nl2@x>"),
                             ["carl@example.org"])
        alias = engine.check(make_message(newsletter, message_id="<nl3@x>"),
                             ["J.Doe@example.org"])
    assert other.kind == "unique"
    assert alias.kind == "duplicate" and alias.recipients_seen == ("J.Doe@example.org",)


# -- a tracker's news is never cleaned away (recall issue) ---------------------------------

def jira_update(key: str, change: str, number: int) -> bytes:
    """Jira Server's plain notification: its link, "X updated KEY:", a rule, the change,
    and the ticket quoted with ">"."""
    body = (f"\n    [ https://jira.example.com/browse/{key}?page=com.atlassian.jira.plugin."
            f"system.issuetabpanels:all-tabpanel ]\n\nAnn Lee updated {key}:\n"
            f"{'-' * 24}\n    {change}\n\n> Deploy pipeline fails on arm64 runners\n"
            f"> {'-' * 38}\n>\n>                 Key: {key}\n>             Project: Ops\n"
            f">            Reporter: Bob Stone\n>\n> The deploy pipeline fails on the arm64 "
            "runners since the last image\n> update: the docker build step dies with exit "
            "code 137.\n\n\n\n--\nThis message was sent by Atlassian Jira\n"
            "(v8.20.10#820010-sha1:ace47f9)\n")
    thread = "<JIRA.42.1700000000000@Atlassian.JIRA>"
    return (f"From: \"Ann Lee (Jira)\" <jira@example.com>\nTo: bob@example.org\n"
            f"Subject: [JIRA] ({key}) Deploy pipeline fails on arm64 runners\n"
            f"Message-ID: <JIRA.42.1700000000000.{number}@Atlassian.JIRA>\n"
            f"In-Reply-To: {thread}\nReferences: {thread}\n"
            "Auto-Submitted: auto-generated\n\n" + body).encode()


def github_event(news: str, number: int) -> bytes:
    """GitHub's issue-event notification: one line of news over its footer."""
    return ("From: Ann Lee <notifications@github.com>\nTo: bob@example.org\n"
            "Subject: Re: [acme/api] Deploy fails on arm64 (Issue #77)\n"
            f"Message-ID: <acme/api/issues/77/issue_event/{number}@github.com>\n"
            "In-Reply-To: <acme/api/issues/77@github.com>\n"
            "References: <acme/api/issues/77@github.com>\n"
            "List-ID: acme/api <api.acme.github.com>\n\n"
            f"{news}\n\n—\nReply to this email directly, view it on GitHub:\n"
            f"https://github.com/acme/api/issues/77#event-{number}\nYou are receiving this "
            "because you are subscribed to this thread.\n\nMessage ID: <acme/api/issues/77/"
            f"issue_event/{number}@github.com>\n").encode()


def test_successive_status_changes_of_one_ticket_stay_unique(engine: Engine) -> None:
    """Before: the writer's name line "Ann Lee updated OPS-1:" was read as a signature
    and everything from it set aside, leaving the ticket's link: the second status change
    was a digest duplicate of the first."""
    engine.check(jira_update("OPS-1", "Status: In Progress  (was: Open)", 1))
    second = engine.check(jira_update("OPS-1", "Status: In Review  (was: In Progress)", 2))
    assert second.kind == "unique", verdict_value(second)
    assert "In Review" in parse(
        jira_update("OPS-1", "Status: In Review  (was: In Progress)", 2)).text


def test_the_same_tracker_notice_twice_is_still_a_duplicate(engine: Engine) -> None:
    """The news kept must not hide a real second delivery of one notice."""
    engine.check(jira_update("OPS-1", "Status: In Review  (was: In Progress)", 2))
    again = engine.check(jira_update("OPS-1", "Status: In Review  (was: In Progress)", 3))
    assert again.kind == "duplicate", verdict_value(again)


def test_two_github_events_of_one_issue_stay_unique(engine: Engine) -> None:
    """Before: GitHub's footer (reply directly, why you receive it, its Message ID line)
    outweighed the one line of news: 0.63 alike under one sender and subject, a
    near-duplicate."""
    engine.check(github_event("Closed #77 as completed.", 1001))
    reopened = engine.check(github_event("Reopened #77.", 1002))
    assert reopened.kind == "unique", verdict_value(reopened)
