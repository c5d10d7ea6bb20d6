"""Recall on real copies (issue: recall on real copies and resends): a copy whose links a
security gateway rewrote is the same message; a templated notice whose links differ only in
their tracking tokens stays what it was."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from helpers import ANNOUNCEMENT, make_message, paragraph_text

from mailfilter.engine import Engine
from mailfilter.headers import verdict_value
from mailfilter.names import Kind
from mailfilter.normalise import wrapped_link

ORIGINAL_LINKS = ["https://portal.example.com/projects/42/review?tab=files",
                  "https://docs.example.org/handbook/deploy.html#rollback",
                  "https://calendar.example.com/event/8812"]

BODY = """Hello team,

the review of the storage migration plan is ready. Please read the plan before Thursday:
{0}

The rollback steps are in the handbook, section four, and have changed since the last
rehearsal; the new order is to stop the writers first, then switch the replicas over:
{1}

We meet on Thursday at ten in the large room; the invitation is here:
{2}

Bring your questions about the cut-over window and the monitoring we need during the move.
If you cannot come, send me your notes by Wednesday evening and I will raise them.

Thanks,
Ann
"""


def safelinks(link: str) -> str:
    return ("https://nam12.safelinks.protection.outlook.com/?url=" + quote(link, safe="")
            + "&data=05%7C02%7Cbob%40example.net%7C8f1e2d%7C72f988bf%7C0%7C0%7C6386&"
            "sdata=k3Jd8%2FqLw%3D&reserved=0")


def proofpoint_v2(link: str) -> str:
    encoded = quote(link, safe="").replace("%", "-").replace("/", "_")
    return (f"https://urldefense.proofpoint.com/v2/url?u={encoded}&d=DwMFaQ&c=euGZstcaTDllvim"
            "&r=Xq1&m=Zm9v&s=abc123&e=")


def proofpoint_v3(link: str) -> str:
    return f"https://urldefense.com/v3/__{link}__;!!ACWV5N9M2RV99hQ!Lm8x4bUCpD9Ea$"


def mimecast(link: str) -> str:
    host = link.split("/")[2]
    return f"https://protect-eu.mimecast.com/s/Xy7pCkRp3fz8W?domain={host}"


@pytest.mark.parametrize("wrap", [safelinks, proofpoint_v2, proofpoint_v3, mimecast])
def test_wrapped_link_gives_back_the_original(wrap) -> None:  # noqa: ANN001
    for link in ORIGINAL_LINKS:
        inner = wrapped_link(wrap(link))
        assert inner is not None and link.split("/")[2] in inner, (wrap(link), inner)


def test_a_plain_link_is_no_wrapper() -> None:
    assert wrapped_link("https://outlook.com/owa/mail") is None
    assert wrapped_link("https://www.google.com/search?q=storage") is None
    assert wrapped_link(ORIGINAL_LINKS[0]) is None


@pytest.mark.parametrize("wrap", [safelinks, proofpoint_v2, proofpoint_v3, mimecast])
def test_a_copy_through_a_link_rewriting_gateway_is_a_duplicate(engine: Engine, wrap) -> None:  # noqa: ANN001
    """Failed before: `shingles 0.91, but identifiers differ: outlook.com here` — the
    wrapper's host was read as data of the message."""
    first = engine.check(make_message(BODY.format(*ORIGINAL_LINKS), message_id="<plan@x>"),
                         ["carol@example.net"])
    assert first.kind is Kind.UNIQUE
    copy = engine.check(make_message(BODY.format(*map(wrap, ORIGINAL_LINKS)),
                                     message_id="<plan-gw@x>"), ["carol@example.net"])
    assert copy.is_duplicate, verdict_value(copy)


def wrapped_at(text: str, width: int = 72) -> str:
    """``text`` as a client that breaks long words wraps it: every line at ``width``,
    a link longer than that cut into pieces."""
    import textwrap
    return "\n".join(
        "\n".join(textwrap.wrap(line, width, break_long_words=True, break_on_hyphens=False))
        for line in text.split("\n"))


@pytest.mark.parametrize("wrap", [safelinks, proofpoint_v2, proofpoint_v3, mimecast])
def test_a_gateway_link_broken_over_lines_is_still_the_link_it_wraps(
        engine: Engine, wrap) -> None:  # noqa: ANN001
    """A plain-text copy whose client wrapped the rewritten links at 72 columns.  Failed
    before: the pieces were read as words and the cut link as the wrapper's host
    (`shingles 0.41, but identifiers differ: clearwater.com, google.com here`)."""
    links = [link.replace("portal.", "p.") for link in ORIGINAL_LINKS]
    body = BODY.replace("Thursday:\n{0}", "Thursday: {0}")    # one after words
    first = engine.check(make_message(wrapped_at(body.format(*links)),
                                      message_id="<plan@x>"), ["carol@example.net"])
    assert first.kind is Kind.UNIQUE
    text = wrapped_at(body.format(*map(wrap, links)))
    assert any(len(line) == 72 and "://" in line for line in text.splitlines()), text
    copy = engine.check(make_message(text, message_id="<plan-gw@x>"), ["carol@example.net"])
    assert copy.kind is Kind.DUPLICATE, verdict_value(copy)


def test_a_whole_gateway_link_is_not_joined_to_the_line_under_it() -> None:
    """Only a link cut short is joined: a whole Mimecast link at the end of a long line
    keeps the next line's words, and another link's line break is never touched."""
    from mailfilter.message import parse
    body = ("Please read the plan that the storage team wrote during the week before: "
            "https://protect-eu.mimecast.com/s/Xy7pCkRp3fz8W?domain=docs.example.com\n"
            "Thanks.for.reading and see you on Thursday\n"
            "The handbook lives on our own intranet server, under the path given here: "
            "https://intranet.example.com/handbook/chapters/\n"
            "deploy.html is the chapter to read\n")
    text = parse(make_message(body)).text
    assert "Thanks" in text and "deploy" in text and "example.comThanks" not in text


def test_another_message_behind_the_same_gateway_stays_unique(engine: Engine) -> None:
    """Every link through one wrapper host does not make two messages alike: a notice that
    links somewhere else is still another message."""
    engine.check(make_message(BODY.format(*map(safelinks, ORIGINAL_LINKS)),
                              message_id="<one@x>"), ["carol@example.net"])
    other_links = ["https://tickets.example.net/queue/7", "https://wiki.example.net/ops",
                   "https://status.example.net/"]
    other = BODY.replace("storage migration plan", "printer replacement order").replace(
        "stop the writers first, then switch the replicas over",
        "unplug the old printers first, then install the new drivers")
    verdict = engine.check(make_message(other.format(*map(safelinks, other_links)),
                                        message_id="<two@x>"), ["carol@example.net"])
    assert verdict.kind is Kind.UNIQUE, verdict_value(verdict)


OFFER = """Dear friend,

Are you tired of working for someone else? Our home business system has helped thousands
of people just like you earn a full-time income from their kitchen table. No experience is
needed, no selling, no meetings, no inventory. We give you the training, the web site and
the leads; you give it two hours a day. Reply today and receive our free report on the
seven secrets of working from home, and a complimentary consultation with a mentor.

To be removed from our list, reply with remove in the subject line.
"""


def test_a_campaign_copy_with_a_padded_counter_in_the_subject_is_a_duplicate(
        engine: Engine) -> None:
    """Corpus spam-2/00119 and 00121: one text, "Be Your Own Boss!!   13986" and
    "…   32140" from two addresses of one domain.  Failed before: `same text, but
    identifiers differ: 32140 here, others in the match`."""
    engine.check(make_message(OFFER, subject="Be Your Own Boss!!" + " " * 25 + "13986",
                              sender="sweetpea02@ecis.example", message_id="<o1@ecis>"))
    copy = engine.check(make_message(OFFER, subject="Be Your Own Boss!!" + " " * 25 + "32140",
                                     sender="tmancos@ecis.example", message_id="<o2@ecis>"))
    assert copy.kind is Kind.DUPLICATE, verdict_value(copy)


def test_a_daily_notice_whose_subject_alone_names_the_day_stays_unique(
        engine: Engine) -> None:
    """The same text under "Your Daily Comic 07/10/2002" and "… 07/11/2002" (corpus
    hard-ham-1: the HTML comic is an image; its text part never changes) from per-message
    bounce addresses: two days' issues, not copies."""
    notice = ("You're subscribed to the HTML version of the Daily Comic, which shows the "
              "strip as a graphic, but your mail system either can't support HTML or is set "
              "up to remove HTML content. For more information, contact your Internet "
              "service provider or mail system administrator.\n")
    engine.check(make_message(notice, subject="Your Daily Comic 07/10/2002",
                              sender="2.20290.44-t9bsg@mail.comics.example",
                              message_id="<d1@comics>"))
    next_day = engine.check(make_message(notice, subject="Your Daily Comic 07/11/2002",
                                         sender="2.20367.04-Dn9Zg@mail.comics.example",
                                         message_id="<d2@comics>"))
    assert next_day.kind is Kind.UNIQUE, verdict_value(next_day)


@pytest.mark.parametrize(("first", "second"), [
    ("Be Your Own Boss!! 13986", "Be Your Own Boss!! 32140"),
    ("Earn money from home k83jf02x", "Earn money from home q9z27vw4"),
    ("48213" + " " * 8 + "Hot stock alert", "90217" + " " * 8 + "Hot stock alert"),
])
def test_a_campaign_copy_with_a_random_token_in_the_subject_is_a_duplicate(
        engine: Engine, first: str, second: str) -> None:
    """The same text with a counter after the subject's closing punctuation, a random run
    of letters and digits at its end, or a padded number in front.  Failed before: `same
    text, but identifiers differ: 32140 here, others in the match`."""
    engine.check(make_message(OFFER, subject=first, sender="a1@ecis.example",
                              message_id="<c1@ecis>"))
    copy = engine.check(make_message(OFFER, subject=second, sender="zz9@ecis.example",
                                     message_id="<c2@ecis>"))
    assert copy.kind is Kind.DUPLICATE, verdict_value(copy)


@pytest.mark.parametrize(("first", "second"), [
    ("Build #1234 failed: api-main", "Build #1235 failed: api-main"),
    ("Your order no. 5512 has shipped", "Your order no. 5513 has shipped"),
    ("Your sign-in code: X7K2PQ", "Your sign-in code: Y8H3RT"),
    ("Pipeline failed for 4f2a9c1", "Pipeline failed for 9b3e0d7"),
])
def test_notices_whose_data_live_only_in_the_subject_stay_unique(
        engine: Engine, first: str, second: str) -> None:
    """A labelled number, a code after a colon, a commit id: data, not a campaign's token,
    though the bodies are the same byte for byte."""
    engine.check(make_message(OFFER, subject=first, sender="ci@example.org",
                              message_id="<n1@example.org>"))
    notice = engine.check(make_message(OFFER, subject=second, sender="ci@example.org",
                                       message_id="<n2@example.org>"))
    assert notice.kind is Kind.UNIQUE, verdict_value(notice)


NOTE = ("Bob, I am forwarding the announcement below because the plan changed again after "
        "the call this morning and I am not sure the list delivered it to everyone. ") * 6


def forwarded_as_attachment(original: bytes, *, as_file: bool = False) -> bytes:
    """Carol forwards ``original`` whole, with a long note of her own: as message/rfc822
    (what Outlook and Thunderbird send), or as an .eml file of no particular type."""
    from email import message_from_bytes, policy
    from email.message import EmailMessage
    forward = EmailMessage(policy=policy.default)
    forward["From"] = "Carol <carol@example.net>"
    forward["To"] = "bob@example.org"
    forward["Subject"] = "FW: the storage plan"
    forward["Message-ID"] = "<forward@example.net>"
    forward.set_content(NOTE + "\n\nCarol\n")
    if as_file:
        forward.add_attachment(original, maintype="application", subtype="octet-stream",
                               filename="Storage plan.eml")
    else:
        forward.add_attachment(message_from_bytes(original, policy=policy.default),
                               filename="Storage plan.eml")
    return forward.as_bytes()


@pytest.mark.parametrize("as_file", [False, True])
def test_a_message_forwarded_as_an_attachment_is_a_copy_for_who_had_it(
        engine: Engine, as_file: bool) -> None:
    """The attached message is fingerprinted on its own and found by its digest, however
    long the note above it (here its shingles alone are 0.3 alike): near-duplicate for a
    mailbox that had the original, new for one that had not.  Failed before: unique, no
    candidate."""
    original = make_message(BODY.format(*ORIGINAL_LINKS), message_id="<plan@x>")
    engine.check(original, ["bob@example.org"])
    forward = forwarded_as_attachment(original, as_file=as_file)
    again = engine.check(forward, ["bob@example.org"], record=False)
    assert again.kind is Kind.NEAR_DUPLICATE and again.decided_by == "attached-message", \
        verdict_value(again)
    assert engine.check(forward, ["dave@example.org"], record=False).kind is Kind.UNIQUE


def test_an_attachment_that_is_not_a_message_is_not_read_as_one(engine: Engine) -> None:
    """A text file named .eml that holds no header is an attachment like any other."""
    from mailfilter.engine import analyse
    raw = forwarded_as_attachment(b"just some notes, no header at all\n", as_file=True)
    assert analyse(raw, engine.settings.fingerprint).fingerprint.attached_digests == ()




def follow_up(note: str, sender: str = "Ann Berg <ann@example.org>") -> bytes:
    quoted = "\n".join("> " + line for line in ANNOUNCEMENT.splitlines())
    return make_message(f"{note}\n\nOn Tue, 3 Nov 2026 at 10:00, Ann Berg <ann@example.org> "
                        f"wrote:\n{quoted}\n", subject="Re: Storage review moved to Thursday",
                        sender=sender, message_id="<rev2@example.org>",
                        headers={"In-Reply-To": "<rev1@example.org>",
                                 "References": "<rev1@example.org>"})


@pytest.mark.parametrize("note", [
    "Resending - my first email bounced back. Apologies if you get it twice.",
    "Sending this again, it does not seem to have gone through yesterday.",
    "Re-sending in case you missed it.",
    "Trying again - got a bounce from your server on the original. Apologies if this is "
    "a duplicate."])
def test_a_resend_after_a_bounce_is_a_copy(engine: Engine, note: str) -> None:
    """Its writer sends it again above the quoted original (a reply to oneself).  Failed
    before: unique, nothing in common (the note alone was compared)."""
    engine.check(make_message(ANNOUNCEMENT, subject="Storage review moved to Thursday",
                              sender="Ann Berg <ann@example.org>",
                              message_id="<rev1@example.org>"), ["bob@example.org"])
    again = engine.check(follow_up(note), ["bob@example.org"], record=False)
    assert again.kind is Kind.NEAR_DUPLICATE and again.decided_by == "resend-note", \
        verdict_value(again)


@pytest.mark.parametrize(("note", "sender"), [
    ("Thursday works for me, but can we start at three instead of two?",
     "Bob <bob@example.org>"),
    ("One more thing: the vendor asked for the rack diagrams, please bring them.",
     "Ann Berg <ann@example.org>"),
    ("Resending this to the list: mine bounced too.", "Bob <bob@example.org>")])
def test_replies_and_follow_ups_stay_new(engine: Engine, note: str, sender: str) -> None:
    """A reply, the writer's own follow-up, and a note from someone else are new."""
    engine.check(make_message(ANNOUNCEMENT, subject="Storage review moved to Thursday",
                              sender="Ann Berg <ann@example.org>",
                              message_id="<rev1@example.org>"), ["bob@example.org"])
    verdict = engine.check(follow_up(note, sender), ["bob@example.org"], record=False)
    assert verdict.kind is Kind.UNIQUE, verdict_value(verdict)


# -- resends under another subject, and short messages without a Subject -------------------

QUESTION = ("Hi Bob,\n\nCould you confirm whether the budget review moved to Thursday at "
            "three, and whether Carol still presents the forecast?\n\nAnn\n")


@pytest.mark.parametrize("layout", ["outlook", "gmail", "pasted"])
def test_a_note_over_ones_own_whole_message_under_another_subject_is_a_copy(
        engine: Engine, layout: str) -> None:
    """Before: `resemblance 0.36 below 0.70 (same sender domain, another subject, another
    thread)` or `fewer than 12 words on one side`."""
    engine.check(make_message(QUESTION, subject="Budget review", message_id="<q1@example.org>"))
    note = "Hi Bob, I never heard back on this one, see below. Could you answer today?\n\n"
    block = {"outlook": "From: Ann Berg <ann@example.org>\nSent: Monday, November 30, 2026 "
                        "10:00 AM\nTo: Bob <bob@example.net>\nSubject: Budget review\n\n",
             "gmail": "---------- Forwarded message ---------\nFrom: Ann Berg "
                      "<ann@example.org>\nDate: Mon, Nov 30, 2026 at 10:00 AM\nSubject: "
                      "Budget review\nTo: <bob@example.net>\n\n",
             "pasted": ""}[layout]
    again = engine.check(make_message(note + block + QUESTION, subject="Any update?",
                                      message_id="<q2@example.org>"))
    assert again.kind is Kind.NEAR_DUPLICATE, verdict_value(again)
    assert again.decided_by in ("resent-original", "resend-note")


def test_someone_elses_note_over_the_message_or_a_longer_follow_up_stays_new(
        engine: Engine) -> None:
    """Only the message's own sender re-sends it; 60 new words over it are a new message."""
    engine.check(make_message(QUESTION, subject="Budget review", message_id="<q1@example.org>"))
    other = engine.check(make_message(
        "Bob, Ann asked me to check: see her question below.\n\n" + QUESTION,
        subject="Any update?", sender="carol@example.org", message_id="<q2@example.org>"))
    assert other.kind is Kind.UNIQUE, verdict_value(other)
    longer = engine.check(make_message(
        paragraph_text(5, 60) + "\n\n" + QUESTION, subject="Budget, forecast and rooms",
        message_id="<q3@example.org>"))
    assert longer.kind is Kind.UNIQUE, verdict_value(longer)


ISSUE = "\n\n".join(paragraph_text(seed, 70) for seed in (11, 12, 13, 14)) + \
    "\n\nYou are receiving this because you subscribed.\nUnsubscribe: https://news.example/u\n"


def test_a_newsletter_re_sent_with_a_correction_under_a_new_subject_is_a_copy(
        engine: Engine) -> None:
    """Before: resemblance 0.64-0.66, below the 0.70 for another subject."""
    headers = {"List-Id": "Weekly <weekly.news.example>"}
    engine.check(make_message("Weekly Brief\n\n" + ISSUE, subject="Weekly Brief: the dams",
                              sender="news@news.example", message_id="<n1@news.example>",
                              headers=headers))
    edited = ISSUE.replace(paragraph_text(12, 70), paragraph_text(12, 70)[:-40]
                           + " corrected dates and rooms.")
    again = engine.check(make_message(
        "We are re-sending this issue because some of the links in yesterday's email did "
        "not work. Apologies for the duplicate!\n\nWeekly Brief\n\n" + edited,
        subject="[Correction] Weekly Brief: the dams and the river",
        sender="news@news.example", message_id="<n2@news.example>", headers=headers))
    assert again.kind is Kind.NEAR_DUPLICATE, verdict_value(again)
    assert again.decided_by == "resent-original"


def test_an_identical_short_message_without_a_subject_delivered_twice_is_a_duplicate(
        engine: Engine) -> None:
    """Foreign test fixtures: no Message-ID, no Subject, the same From and text.  Before:
    unique (`same text of 6 word(s), but no other sign it is the same message`)."""
    raw = b"From: alice@example.com\nTo: bob@example.com\n\nHello Bob, this is a test.\n"
    engine.check(raw)
    again = engine.check(raw)
    assert again.kind is Kind.DUPLICATE, verdict_value(again)
    assert again.decided_by == "short-text"


ISSUE = """Product Updates - Issue #153

Hi Ann,

UPCOMING WEBINARS

Our spring series starts next week with a session on planning storage migrations: what to
measure before the move, how to rehearse the cut-over and how to keep the writers quiet
while the replicas catch up.  The second session covers monitoring during the move, and
the third answers the questions you send us in advance.  Every session is recorded and the
recordings go out to everyone who registered, whether they attended or not.

Register here: https://news.example.com/webinars/spring

You are receiving this email because ann@example.net subscribed to Product Updates.
Unsubscribe: https://news.example.com/unsubscribe
"""


def test_a_newsletter_resent_under_a_new_subject_with_a_line_on_top_is_found(
        engine: Engine) -> None:
    """The issue again as "Last chance: …" with "Only 48 hours left to register!" above
    it.  Failed before: `shingles 1.00, but identifiers differ: 48 here, others in the
    match` — the issue number counted twice in the first (subject and masthead), once in
    the second."""
    headers = {"List-Unsubscribe": "<https://news.example.com/unsubscribe>"}
    engine.check(make_message(ISSUE, subject="Product Updates #153: Upcoming webinars",
                              sender="news@example.com", message_id="<i153@news>",
                              headers=headers), ["ann@example.net"])
    again = engine.check(make_message("Only 48 hours left to register!\n\n" + ISSUE,
                                      subject="Last chance: Upcoming webinars",
                                      sender="news@example.com", message_id="<i153b@news>",
                                      headers=headers), ["ann@example.net"])
    assert again.is_duplicate, verdict_value(again)
    assert "resent-original" in verdict_value(again) or "resend" in verdict_value(again)


def test_a_value_in_the_subject_and_the_text_is_one_datum() -> None:
    from mailfilter.identifiers import identifiers
    assert identifiers("Issue #153 of the series, see item 7 and item 7",
                       "Updates #153") == ["153", "7", "7#2"]
    assert identifiers("Issue 12", "Updates #153 and 153") == ["153", "153#2", "12"]
