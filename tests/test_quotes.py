"""A message's own text apart from what it quotes and forwards, in the layouts clients write.

Each case is a reply or forward as a real client lays it out; the test checks what the
user would notice: the reply's own words stay, the quoted original goes (a reply is not
a copy), and a forwarded message stays (a forward is a near-duplicate of it).
"""

from __future__ import annotations

import pytest
from helpers import make_message, paragraph_text
from hypothesis import given, settings
from hypothesis import strategies as st

from mailfilter.message import parse
from mailfilter.quotes import split_reply, split_signoff

ORIGINAL = paragraph_text(5, count=60)
OWN = "Agreed, let us ship it on Monday after the review."


@pytest.mark.parametrize("layout", [
    # Outlook desktop, modern: a line of underscores over the header block
    "_" * 32 + "\nFrom: Ann Lee <ann@example.org>\nSent: Monday, December 1, 2026 10:00 AM\n"
    "To: Bob <bob@example.net>\nSubject: Plan\n\n{original}",
    # Outlook on the web / new Outlook: the header block alone
    "From: Ann Lee <ann@example.org>\nSent: Monday, December 1, 2026 10:00\n"
    "To: Bob <bob@example.net>\nSubject: Plan\n\n{original}",
    # Outlook in German and in French (a no-break space before the colon)
    "Von: Ann Lee <ann@example.org>\nGesendet: Montag, 1. Dezember 2026 10:00\n"
    "An: Bob <bob@example.net>\nBetreff: Plan\n\n{original}",
    "De\xa0: Ann Lee <ann@example.org>\nEnvoyé\xa0: lundi 1 décembre 2026 10:00\n"
    "À\xa0: Bob <bob@example.net>\nObjet\xa0: Plan\n\n{original}",
    # Dutch Outlook
    "Van: Ann Lee <ann@example.org>\nVerzonden: maandag 1 december 2026 10:00\n"
    "Aan: Bob <bob@example.net>\nOnderwerp: Plan\n\n{original}",
    # "-----Original Message-----" and its German form
    "-----Original Message-----\nFrom: Ann\nSent: Monday\nTo: Bob\nSubject: Plan\n\n{original}",
    "-----Ursprüngliche Nachricht-----\nVon: Ann\nGesendet: Montag\nAn: Bob\nBetreff: Plan\n\n"
    "{original}",
    # Gmail with a wrapped attribution, Apple Mail, Thunderbird, iPhone
    "On Mon, Dec 1, 2026 at 10:00 AM Ann Lee <\nann@example.org> wrote:\n\n{quoted}",
    "On Dec 1, 2026, at 10:00, Ann Lee <ann@example.org> wrote:\n\n{quoted}",
    "On 12/1/26 10:00 AM, Ann Lee wrote:\n{quoted}",
    "Sent from my iPhone\n\nOn Dec 1, 2026, at 10:00 AM, Ann Lee <ann@example.org> wrote:\n\n"
    "{quoted}",
    # Dutch and Italian attributions
    "Op ma 1 dec 2026 om 10:00 schreef Ann Lee <ann@example.org>:\n\n{quoted}",
    "Il giorno lun 1 dic 2026 alle ore 10:00 Ann Lee <ann@example.org> ha scritto:\n\n{quoted}",
])
def test_reply_layouts_keep_only_the_new_text(layout: str) -> None:
    quoted = "\n".join("> " + line for line in ORIGINAL.split("\n"))
    body = OWN + "\n\n" + layout.format(original=ORIGINAL, quoted=quoted)
    text = parse(make_message(body, subject="RE: Plan")).text
    assert "ship it on Monday" in text
    assert ORIGINAL.strip() not in text


def test_quoting_broken_by_rewrapping_is_still_quoted() -> None:
    long_line = "> " + " ".join(ORIGINAL.split()[:14])
    body = f"{OWN}\n\nOn Monday, Ann wrote:\n{long_line}\nwrapped tail\n> more quoted text\n"
    text = parse(make_message(body, subject="Re: Plan")).text
    assert "wrapped tail" not in text and "ship it" in text


@pytest.mark.parametrize("separator, subject", [
    ("---------- Forwarded message ---------\nFrom: Ann <ann@example.org>\n"
     "Date: Mon, 1 Dec 2026\nSubject: Plan\nTo: Bob <bob@example.net>", "Fwd: Plan"),
    ("Begin forwarded message:\n\nFrom: Ann <ann@example.org>\nSubject: Plan\n"
     "Date: 1 December 2026\nTo: Bob <bob@example.net>", "Fwd: Plan"),
    ("----- Forwarded message from Ann Lee <ann@example.org> -----\n\n"
     "Date: Mon, 1 Dec 2026\nFrom: Ann Lee <ann@example.org>\nSubject: Plan", "Fwd: Plan"),
    ("-----Original Message-----\nFrom: Ann\nSent: Monday\nTo: Bob\nSubject: Plan", "FW: Plan"),
])
def test_forwards_keep_the_forwarded_text(separator: str, subject: str) -> None:
    body = f"FYI, see below.\n\nMark\n\n{separator}\n\n{ORIGINAL}"
    text = parse(make_message(body, subject=subject, sender="Mark Twain <mark@example.net>")
                 ).text
    assert ORIGINAL.strip().split("\n")[0] in text, text
    assert "ann@example.org" not in text


def test_a_tagline_above_a_forward_does_not_take_the_forward_along() -> None:
    body = (f"FYI\n\n-- \nSent from my Android device with K-9 Mail.\n\n"
            f"-------- Original Message --------\nFrom: Ann\nSent: Monday\nTo: Bob\n"
            f"Subject: Plan\n\n{ORIGINAL}")
    text = parse(make_message(body, subject="Fwd: Plan")).text
    assert ORIGINAL.strip().split("\n")[0] in text


def test_apple_mail_forward_quoted_with_brackets_is_the_forwarded_text() -> None:
    quoted = "\n".join("> " + line for line in ORIGINAL.split("\n"))
    body = (f"Have a look.\n\nBegin forwarded message:\n\n> From: Ann <ann@example.org>\n"
            f"> Subject: Plan\n> Date: 1 December 2026\n> To: Bob\n>\n{quoted}")
    text = parse(make_message(body, subject="Fwd: Plan")).text
    assert ORIGINAL.strip().split("\n")[0] in text


@pytest.mark.parametrize("closing", ["Best regards,", "Thanks,", "Cheers", "Mit freundlichen "
                                     "Grüßen", "Met vriendelijke groet,", "Cordialement,",
                                     "Rgds,", "Gr.,"])
def test_sign_off_blocks_are_set_aside(closing: str) -> None:
    text = (f"Hi Bob,\n\nConfirmed.\n\n{closing}\n\nAnn Lee\nProject Manager\nAcme Widgets Ltd\n"
            "T: +44 20 7946 0000\nwww.acme.example\n")
    kept, aside = split_signoff(text, "Ann Lee")
    assert "Confirmed" in kept and "Project Manager" not in kept and "Acme" in aside


def test_a_name_line_sign_off_without_a_closing_line() -> None:
    kept, _ = split_signoff("Hi all,\n\nAgreed.\n\nEdward Nguyen\nSales | Northwind\n",
                            "Edward Nguyen")
    assert kept.strip() == "Hi all,\n\nAgreed."


def test_thanks_opening_a_reply_does_not_take_the_reply_along() -> None:
    """"Thanks!" above the reply's own paragraphs (under a quote): a closing word, but two
    lines of prose below it are the message.  Before, the whole reply was set aside as a
    sign-off and the text was its attribution line alone (realworld
    resends_and_reencodings seed 7: an edited copy went unfound)."""
    text = ("Ciaran stated the following:\n\nThanks!\n\nIn the past I tried lilo -u /dev/hda "
            "and it would not work, an\noriginal copy of the MBR must be in the boot "
            "directory for it to work.\nWhich is exactly what I did not have here.\n")
    kept, _ = split_signoff(text, "Linda Jensen")
    assert "original copy of the MBR" in kept and "exactly what I did not have" in kept


def test_a_one_word_message_is_not_its_own_sign_off() -> None:
    assert split_signoff("Thanks!\n", "Bob Martin") == ("Thanks!\n", "")


def test_a_rule_over_a_table_is_no_list_footer() -> None:
    table = ("SOURCE            TOTAL FILES   FILES TRANS   TOTAL MB   MB TRANS   TIME SECONDS\n"
             + "-" * 90 + "\n/home/          87923    1387   13758.76   239.64   4.793\n"
             "root@db01:/var/lib/postgresql/   461568   2989   53010.90   829.42   16.588\n")
    assert "87923" in split_reply(table).text


def test_a_list_footer_under_a_rule_is_set_aside() -> None:
    body = ORIGINAL + "\n" + "#" * 60 + "\n\nTo unsubscribe from the XYZ-L list, click:\n" \
        "https://listserv.example.org/scripts/wa.exe?SUBED1=XYZ-L&A=1\n"
    reply = split_reply(body)
    assert "unsubscribe" not in reply.text and "unsubscribe" in reply.aside


def test_a_name_line_ending_in_a_colon_introduces_news_and_is_no_signature() -> None:
    """Before: "Ann Lee updated OPS-1:" (a tracker's news heading) was set aside with all
    below it as Ann Lee's signature."""
    text = "Fixed the build.\n\nAnn Lee updated OPS-1:\n---\nStatus: Done  (was: Open)\n"
    assert split_signoff(text, "Ann Lee") == (text, "")
    signed = "Fixed the build.\n\nAnn Lee\nRelease Manager\n"
    assert split_signoff(signed, "Ann Lee")[1] == "Ann Lee\nRelease Manager\n"


def test_a_link_alone_above_is_no_message_to_sign() -> None:
    """Before: a ticket's link counted as text above a sign-off, so the news under it went."""
    text = "[ https://jira.example.com/browse/OPS-1 ]\n\nAnn Lee\nStatus: Done\n"
    assert split_signoff(text, "Ann Lee") == (text, "")


def test_prose_under_a_line_with_the_senders_name_is_no_signature() -> None:
    """Before: a newsletter whose masthead is its sender's name ("Product Digest") lost
    everything under the masthead as a signature when a note stood above it."""
    text = ("Here it is again.\n\nProduct Digest\n\nIn the Lurgan Mail there was also news "
            "of a dramatic robbery at the shop.\n")
    assert split_signoff(text, "Product Digest") == (text, "")


def _holds_cue(sequence: object, cues: frozenset[str]) -> bool:
    """Every match of the parsed ``sequence`` holds one of ``cues``: each way to spell one
    of its runs of literal text (alternatives of literals spelled out, "s?" both ways)
    contains one, or one of its groups does, or each alternative of an alternation, or a
    repeat taken at least once."""
    from re import _constants as c  # type: ignore[attr-defined]

    def spellings(item: list) -> list[str] | None:
        """The strings a sequence of literals, literal alternatives and optional
        literals matches (None when it is anything else)."""
        out = [""]
        for op, av in item:
            if op is c.LITERAL:
                out = [text + chr(av) for text in out]
            elif op is c.BRANCH:
                options = [spellings(alt) for alt in av[1]]
                if any(option is None for option in options):
                    return None
                out = [text + tail for text in out for option in options for tail in option]
            elif op is c.MAX_REPEAT and av[:2] == (0, 1):
                tails = spellings(av[2])
                if tails is None:
                    return None
                out = [text + tail for text in out for tail in ["", *tails]]
            else:
                return None
        return out

    runs = [""]
    for op, av in [*sequence, (None, None)]:          # type: ignore[misc]
        spelled = spellings([(op, av)]) if op is not None else None
        if spelled is not None and len(runs) * len(spelled) <= 256:
            runs = [text + tail for text in runs for tail in spelled]
            continue
        if all(any(cue in text for cue in cues) for text in runs):
            return True
        runs = [""]
        if op is c.SUBPATTERN and _holds_cue(av[-1], cues):
            return True
        if op is c.BRANCH and all(_holds_cue(alt, cues) for alt in av[1]):
            return True
        if op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT) and av[0] >= 1 \
                and _holds_cue(av[2], cues):
            return True
    return False


def test_every_resend_note_holds_one_of_the_cue_words() -> None:
    """Catches a resend-note phrasing added to the pattern without a word in
    RESEND_CUES: parse would skip the pattern for a text that holds it, and a resent
    message would be taken for a new one (rule resend-note)."""
    from re import _parser  # type: ignore[attr-defined]

    from mailfilter.normalise import _RESEND_NOTE, RESEND_CUES

    assert _holds_cue(_parser.parse(_RESEND_NOTE.source), RESEND_CUES)
    assert not _holds_cue(_parser.parse(_RESEND_NOTE.source), RESEND_CUES - {"bounce"})


_LAYOUT_PIECES = [
    "From: Ann <a@x>\n", "De: b\n", "Sent: Monday, 1 May 2024 10:00\n", "To: c\n",
    "Subject: d\n", "Date: Mon, 1 May 2024\n", "\n", "Hello there words\n", "> quoted line\n",
    "________________________________\n", "-----Original Message-----\n",
    "   -- Ursprüngliche Nachricht --\n", "---------- Forwarded message ---------\n",
    "On Mon, Bob wrote:\n", "Thanks,\nAnn\n", "  wrapped value\n",
    "-----Original Message-----\nFrom: a\nSent: b\nTo: c\nSubject: d\n\n",
    "De: x\nEnviado: y\nPara: z\n", "From: x\nSent: y\nTo: z\n"]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_LAYOUT_PIECES), max_size=40), st.booleans())
def test_an_original_taken_without_weighing_the_blocks_below_it_splits_alike(
        pieces: list[str], forward: bool) -> None:
    """An Outlook original below which every reply block would start is taken without
    weighing those blocks (54,000 inline replies weighed twice each took 2 s): the same
    split as when every block is weighed."""
    from mailfilter import quotes
    text = "".join(pieces)

    def split() -> list[object]:
        reply = split_reply(text, forward=forward)
        return [getattr(reply, name) for name in type(reply).__slots__]

    fast = split()
    shortcut = quotes._Layout._blocks_below
    quotes._Layout._blocks_below = lambda self, end, begin: False   # weigh every block
    try:
        assert split() == fast
    finally:
        quotes._Layout._blocks_below = shortcut


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_LAYOUT_PIECES + ["Cc: e\n", "Von: x\nGesendet: y\n"]),
                max_size=40))
def test_a_failed_run_of_header_lines_stepped_over_at_once_splits_alike(
        pieces: list[str]) -> None:
    """The From: lines of a run of header lines that failed as a reply block are stepped
    over at once (600,000 of them, weighed one by one, took 1.6 s): the same split as
    when each is weighed."""
    from mailfilter import quotes
    text = "".join(pieces)

    def split() -> list[object]:
        reply = split_reply(text)
        return [getattr(reply, name) for name in type(reply).__slots__]

    fast = split()
    run_end = quotes._Layout._header_run_end
    quotes._Layout._header_run_end = lambda self, top: top      # one From: line at a time
    try:
        assert split() == fast
    finally:
        quotes._Layout._header_run_end = run_end


_RUN_PIECES = _LAYOUT_PIECES + [
    "Cc: e\n", " cont\n", "\tmore\n", "\t\n", " \xa0\n", "\xa0x\n", "From: a\n cont\n",
    "Date d'envoi : lundi\n", "*From:* x\n", "a: b\n", "x\n"]


def _run_end_line_by_line(text: str, start: int) -> int:
    """A header block's end read one line at a time: a blank line ends it (with it); a
    line that is neither a header line nor a wrapped value ends it (without it)."""
    from mailfilter.quotes import _PSEUDO_HEADER
    position = start
    while position < len(text):
        newline = text.find("\n", position)
        line_end = len(text) if newline < 0 else newline + 1
        line = text[position:line_end]
        if not line.strip():
            return line_end
        if not _PSEUDO_HEADER.get().match(line) and line[:1] not in " \t":
            return position
        position = line_end
    return len(text)


def _header_run_end_line_by_line(text: str, top: int) -> int:
    from mailfilter.quotes import _PSEUDO_HEADER
    position = top
    while position < len(text):
        line_end = text.find("\n", position)
        line_end = len(text) if line_end < 0 else line_end
        if not _PSEUDO_HEADER.get().match(text[position:line_end]):
            return position
        position = line_end + 1
    return len(text)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_RUN_PIECES), max_size=30),
       st.sampled_from(["", "\n", " ", "x", "\xa0", "From: z"]), st.randoms())
def test_runs_of_header_lines_read_by_pattern_end_where_reading_line_by_line_ends(
        pieces: list[str], ending: str, random: object) -> None:
    """The reply layout reads a run of header lines with one pattern and keeps each run it
    read (a crafted text of 600,000 From:/De: lines took 1.35 s line by line, 0.7 now):
    asked from any line, in any order, it ends where reading line by line ends."""
    from mailfilter.quotes import _Layout
    from mailfilter.text import Prepared
    text = "".join(pieces).rstrip("\n") + ending if ending != "\n" else "".join(pieces)
    layout = _Layout(Prepared(text))
    starts = [0] + [at + 1 for at, char in enumerate(text) if char == "\n"]
    random.shuffle(starts)                                  # type: ignore[attr-defined]
    for start in starts + starts[::-1]:
        assert layout._run_end(start) == _run_end_line_by_line(text, start), start
        assert layout._header_run_end(start) == _header_run_end_line_by_line(text, start)
    firsts = layout.run_firsts
    assert firsts == sorted(firsts)
    assert all(layout.runs[first][0] < later
               for first, later in zip(firsts, firsts[1:], strict=False))


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_RUN_PIECES + ["\n", "Hello there words\n"]), max_size=40),
       st.booleans())
def test_from_lines_in_short_runs_set_aside_before_weighing_split_alike(
        pieces: list[str], forward: bool) -> None:
    """A text of many From: lines has those in runs of fewer than three header or wrapped
    lines set aside before any is weighed (600,000 "De: b" lines between blank lines took
    3.7 s one by one): the same split as when each is weighed."""
    from mailfilter import quotes
    text = "".join(pieces)

    def split(threshold: int) -> list[object]:
        kept = quotes._FROM_LINES_WEIGHED
        quotes._FROM_LINES_WEIGHED = threshold
        try:
            reply = split_reply(text, forward=forward)
        finally:
            quotes._FROM_LINES_WEIGHED = kept
        return [getattr(reply, name) for name in type(reply).__slots__]

    assert split(-1) == split(10**9)


def test_a_text_is_cut_at_most_cuts_max_times() -> None:
    """The first CUTS_MAX header blocks and forward lines are cut out (174,000 forward
    lines took 1.7 s at 4 MiB); any further ones stay in the text.  Real mail has a few."""
    from mailfilter.quotes import CUTS_MAX
    forwarded = "".join(f"Begin forwarded message:\nnote {number}\n"
                        for number in range(CUTS_MAX + 5))
    reply = split_reply("Hello there, see below.\n" + forwarded)
    assert len(reply.segments) == CUTS_MAX + 1
    assert reply.segments[-1].count("Begin forwarded message:") == 5
    assert reply.segments[-1].startswith(f"note {CUTS_MAX - 1}\n")
    short = split_reply("Hello there, see below.\n" + forwarded[:2000])
    assert all("Begin forwarded" not in segment for segment in short.segments)
    inline = ("> quoted\n-----Original Message-----\nFrom: a\nSent: b\nTo: c\nSubject: d\n\n"
              "> more\n")
    assert split_reply(inline * 20).text.count("-----Original Message-----") == 0
    capped = split_reply(inline * (CUTS_MAX + 5))
    assert len(capped.segments) == CUTS_MAX + 1
    assert capped.text.count("-----Original Message-----") == 5
