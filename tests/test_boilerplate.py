"""Disclaimers and banners (mailfilter/boilerplate.py) leave resemblance; the writer's words
stay.

Two notes from one company share a long legal disclaimer and an "external sender" banner;
left in, those make different notes look alike (issue 13: 84% false positives).  Taken out
too eagerly, they take the note itself along, and two different notes become one.
"""

from __future__ import annotations

import pytest
from helpers import make_message, paragraph_text

from mailfilter.boilerplate import split_boilerplate
from mailfilter.engine import Engine
from mailfilter.headers import verdict_value

ENGLISH = (
    "This email and any files transmitted with it are confidential and intended solely for "
    "the use of the individual or entity to whom they are addressed. If you have received "
    "this email in error please notify the sender immediately and delete it from your "
    "system. Any unauthorised copying, disclosure or distribution of the material in this "
    "email is strictly prohibited.")
GERMAN = (
    "Diese E-Mail enthält vertrauliche und/oder rechtlich geschützte Informationen. Wenn "
    "Sie nicht der richtige Adressat sind oder diese E-Mail irrtümlich erhalten haben, "
    "informieren Sie bitte sofort den Absender und vernichten Sie diese Mail. Das "
    "unerlaubte Kopieren sowie die unbefugte Weitergabe dieser Mail ist nicht gestattet.\n\n"
    "Beispiel GmbH, Sitz der Gesellschaft: Berlin, Amtsgericht Charlottenburg, HRB 123456, "
    "Geschäftsführer: Anna Muster")
FRENCH = (
    "Ce message et toutes les pièces jointes sont confidentiels et établis à l'intention "
    "exclusive de ses destinataires. Si vous avez reçu ce message par erreur, merci de le "
    "détruire et d'en avertir immédiatement l'expéditeur. Toute utilisation de ce message "
    "non conforme à sa destination est strictement interdite.")
SPANISH = (
    "Este mensaje es confidencial y puede contener información privilegiada. Si usted no "
    "es el destinatario indicado, queda notificado de que la lectura, utilización, "
    "divulgación y/o copia sin autorización está prohibida.")
BANNERS = (
    "CAUTION: This email originated from outside of the organization. Do not click links "
    "or open attachments unless you recognize the sender and know the content is safe.",
    "You don't often get email from ann@example.org. Learn why this is important",
    "[EXTERNAL] This message came from outside your organization.",
)
OWN = "The invoice for March is attached; please pay it by Friday so the vendor ships."


@pytest.mark.parametrize("disclaimer", [ENGLISH, GERMAN, FRENCH, SPANISH],
                         ids=["en", "de", "fr", "es"])
def test_disclaimers_are_set_aside_and_the_note_stays(disclaimer: str) -> None:
    """Every sentence of the disclaimer goes; greeting, note and name stay as written."""
    text = f"Hi Bob,\n\n{OWN}\n\nAnn\n\n{disclaimer}\n"
    kept, aside = split_boilerplate(text)
    assert kept.split() == f"Hi Bob,\n\n{OWN}\n\nAnn".split()
    assert aside.split() == disclaimer.split()


@pytest.mark.parametrize("banner", BANNERS, ids=["caution", "often-get", "external-tag"])
def test_banners_are_set_aside_wherever_they_sit(banner: str) -> None:
    """A banner as its own block at the top, or in the middle before a forwarded part,
    goes; the text around it stays."""
    for text in (f"{banner}\n\nHi Bob,\n\n{OWN}\n",
                 f"Hi Bob,\n\n{OWN}\n\n{banner}\n\nSee the thread below.\n"):
        kept, aside = split_boilerplate(text)
        assert OWN in kept and "Hi Bob," in kept
        assert " ".join(aside.split()) == " ".join(banner.split())


def test_a_banner_glued_to_the_first_line_goes_alone() -> None:
    """A banner sentence in the same paragraph as the note: only the banner goes."""
    kept, aside = split_boilerplate(f"{BANNERS[0]} {OWN}\n\nAnn\n")
    assert kept.split() == f"{OWN}\n\nAnn".split()
    assert aside.split() == BANNERS[0].split()


@pytest.mark.parametrize("tag", ["[EXTERNAL]", "EXTERNAL EMAIL: use caution",
                                 "CAUTION: External sender"])
def test_a_banner_line_right_above_the_note_takes_only_itself(tag: str) -> None:
    """Gateways put "[EXTERNAL]" on the line above the note; the note must stay."""
    kept, _ = split_boilerplate(f"{tag}\n{OWN}\n\nAnn\n")
    assert OWN in kept


@pytest.mark.parametrize("text", [
    "Please keep the salary numbers confidential until the board meets on Monday.",
    "The intended plan was to ship in May; I am not sure the recipient list is ready.",
    "We registered the new domain yesterday, and the external auditors start next week.",
    "Quick question about the outside of the building: is the paint delivered already?",
])
def test_ordinary_words_of_a_note_are_not_boilerplate(text: str) -> None:
    """One word a disclaimer also uses ("confidential", "intended", "external") does not
    make the writer's own sentence boilerplate."""
    assert split_boilerplate(text) == (text, "")


def test_a_text_that_is_only_a_disclaimer_keeps_nothing() -> None:
    """A body that is all disclaimer has no text of its own; nothing breaks."""
    kept, aside = split_boilerplate(ENGLISH)
    assert kept.strip() == ""
    assert aside.split() == ENGLISH.split()


# -- end to end ------------------------------------------------------------------------


@pytest.mark.parametrize("disclaimer", [GERMAN, FRENCH, SPANISH], ids=["de", "fr", "es"])
def test_different_notes_under_a_foreign_disclaimer_stay_unique(
        engine: Engine, disclaimer: str) -> None:
    """Two notes of one company, each a few lines, under the same long disclaimer."""
    for number, seed in enumerate((11, 12)):
        body = f"Hallo,\n\n{paragraph_text(seed, count=20)}\nAnna\n\n{disclaimer}\n"
        verdict = engine.check(make_message(body, sender=f"a{number}@beispiel.example.de",
                                            subject=f"Thema {number}",
                                            message_id=f"<f{number}@x>"))
    assert verdict.kind == "unique", verdict_value(verdict)


@pytest.mark.parametrize("disclaimer", [ENGLISH, GERMAN, FRENCH, SPANISH],
                         ids=["en", "de", "fr", "es"])
def test_the_same_note_under_a_disclaimer_sent_again_is_a_duplicate(
        engine: Engine, disclaimer: str) -> None:
    """Setting the disclaimer aside must not cost recall: a redelivery is still found."""
    body = f"{BANNERS[0]}\n\nHi Bob,\n\n{paragraph_text(13, count=40)}\nAnn\n\n{disclaimer}\n"
    engine.check(make_message(body, message_id="<r1@x>"))
    again = engine.check(make_message(body, message_id="<r2@x>"))
    assert again.kind == "duplicate", verdict_value(again)


def test_two_reports_under_an_external_tag_line_stay_unique(engine: Engine) -> None:
    """Different weekly notes from one partner, each under the gateway's tag line."""
    notes = ("the build for week 48 passed on all three platforms and the installers are "
             "in the shared folder for review",
             "the release slipped to Thursday because the signing server was down and "
             "two translations are still missing")
    for number, note in enumerate(notes):
        body = f"[EXTERNAL]\nHi team, {note}\n\nAnn\n"
        verdict = engine.check(make_message(body, sender="ann@partner.example.com",
                                            subject="Weekly report",
                                            message_id=f"<wr{number}@x>"))
    assert verdict.kind == "unique", verdict_value(verdict)


def test_a_note_that_asks_for_confidentiality_is_still_the_note(engine: Engine) -> None:
    """Writers say "this is confidential" in their own words; those words are the
    message, and two different such notes are two messages."""
    notes = ("The March payroll figures are in the HR folder; they are confidential, so "
             "please do not disclose them outside the team.",
             "The bonus scheme for next year is attached to the board minutes; it is "
             "confidential and must not be disclosed before the announcement.")
    for number, note in enumerate(notes):
        verdict = engine.check(make_message(f"Hi all,\n\n{note}\n\nAnn\n",
                                            sender="ann@hr.example.com", subject="HR update",
                                            message_id=f"<hr{number}@x>"))
    assert verdict.kind == "unique", verdict_value(verdict)


def test_messages_that_are_only_a_disclaimer_get_a_verdict(engine: Engine) -> None:
    """Bodies with nothing but boilerplate: different messages are not called copies of
    one another, and a redelivery by Message-ID is still a duplicate."""
    first = engine.check(make_message(ENGLISH, sender="ann@acme.example.com",
                                      subject="Scan 1", message_id="<only1@x>"))
    other = engine.check(make_message(f"{BANNERS[0]}\n\n{ENGLISH}",
                                      sender="carl@acme.example.com", subject="Scan 2",
                                      message_id="<only2@x>"))
    again = engine.check(make_message(ENGLISH, sender="ann@acme.example.com",
                                      subject="Scan 1", message_id="<only1@x>"))
    assert (first.kind, other.kind) == ("unique", "unique")
    assert (again.kind, again.measure) == ("duplicate", "message-id")


def test_forge_and_tracker_notification_footers_are_boilerplate() -> None:
    """Before: GitHub's and Bugzilla's footers stayed in the text and made every notice of
    one issue resemble the others."""
    github = ("Reopened #77.\n\n—\nReply to this email directly, view it on GitHub:\n"
              "https://github.com/acme/api/issues/77\nYou are receiving this because you "
              "are subscribed to this thread.\n\nMessage ID: <acme/api/issues/77/issue_event/"
              "1@github.com>\n")
    kept, aside = split_boilerplate(github)
    assert kept.strip() == "Reopened #77."
    assert "subscribed" in aside and "Message ID" in aside
    bugzilla = ("Status changed.\n\nYou are receiving this mail because:\nYou are watching "
                "the assignee of the bug.\n")
    assert split_boilerplate(bugzilla)[0].strip() == "Status changed."
    prose = "You are receiving this because we met at the conference last week.\n"
    assert split_boilerplate(prose) == (prose, "")


@pytest.mark.parametrize("block", [
    "The information contained in this communication is confidential and is intended only "
    "for the use of the addressee. It is the property of Acme. Unauthorized use, disclosure "
    "or copying of this communication is strictly prohibited.",
    "IRS Circular 230 Disclosure: To ensure compliance with requirements imposed by the IRS, "
    "we inform you that any U.S. federal tax advice contained in this communication is not "
    "intended or written to be used for the purpose of avoiding penalties.",
    "ATTENTION: This email came from an external source. Do not open attachments or click on "
    "links from unknown senders or unexpected emails.",
    "Internet communications are not secure and therefore Acme does not accept legal "
    "responsibility for the contents of this message. Any views or opinions presented are "
    "solely those of the author.",
    "Ce message et toutes les pièces jointes sont établis à l'intention exclusive de ses "
    "destinataires et sont confidentiels. Si vous recevez ce message par erreur, merci de le "
    "détruire.",
    "This email has been scanned for viruses and malware, and may have been automatically "
    "archived by Mimecast Ltd.",
])
def test_disclaimers_are_set_aside_whole(block: str) -> None:
    """Before: one sentence or the whole block stayed ("It is the property of Acme.", the
    tax notice, the banner's second sentence), and two short notes of one sender under it
    resembled each other 0.72-0.80."""
    note = "Could you send me the signed copy of the lease before Friday?"
    assert split_boilerplate(f"{note}\n\n{block}\n")[0].strip() == note
