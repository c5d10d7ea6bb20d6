"""A message's own new text, apart from what it quotes, its signature and list footers.

A reply that quotes an earlier message is not that message again, so everything a mail
client adds of the earlier message is set aside before the text is fingerprinted:

* lines quoted with ``>`` (and ``|>``), and the unquoted tails that re-wrapping broke off
  a long quoted line;
* attribution lines, one or two lines long: ``On Mon, 1 Dec 2026 at 10:00, Ann <…> wrote:``
  (Gmail, Apple Mail, Thunderbird, iPhone), and their German, French, Spanish, Dutch,
  Italian, Portuguese, Scandinavian and Polish forms;
* everything below a reply separator: Outlook's ``-----Original Message-----``, modern
  Outlook's line of underscores over a ``From:/Sent:/To:/Subject:`` block, or that block
  alone (Outlook Web, new Outlook, many phones) — unless the message is a forward, or an
  inline reply, where only the separator and its header block go;
* the header block of a forward separator (the forwarded text itself is kept: a forward is
  a near-duplicate of what it forwards);
* a ``-- `` signature, "Sent from my iPhone" lines, and a list footer under a rule line
  (10+ of ``-=_~*#``) among the last lines.

Each pattern runs only where the one keyword scan of the text (mailfilter/text.py) found a
word it needs, and each finds its matches in one pass: no step scans the text again from
the start for each line, block or round, so the work grows with the text's length, not
with its square (tests/test_hostile_input.py measures it).  Pure functions.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from itertools import compress
from typing import Protocol

from mailfilter.text import NOT_SPACE, Pattern, Prepared, first_word_at, prepare, register

_M, _I = re.MULTILINE, re.IGNORECASE
# Runs of quoted lines (``>`` or ``|>``), read in "\n" + a text (see _WRAPPED_TAIL).
# (Possessive: a line is taken whole or not at all, so nothing is kept to backtrack into;
# the regex engine kept about 300 bytes a line, 314 MB for a million quoted lines.)
_QUOTED_LINES = Pattern(r"\n((?:[ \t]*+(?:>|\|>)[^\n]*+(?:\n|\Z))++)")
# "On Mon, 1 Jan 2024, Ann <ann@x> wrote:" and its cousins, found by the verb at the end
# of a line first (where the keyword scan found one), then checked on that line (or that
# line and the one above: Gmail wraps a long attribution).
_VERBS = r"wrote|writes|schrieb|a écrit|escribió|schreef|ha scritto|escreveu|skrev|napisał"
# German and Dutch clients put the writer after the verb ("Am 3.11.2026 um 10:00 schrieb
# Ann Berg <ann@example.org>:", "Op 3 nov. 2026 om 10:00 schreef Ann Berg:").
_NAME_AFTER = r"(?:schrieb|schreef)[ \t\xa0][^\n:]{1,150}?"
_ATTRIBUTION_END = Pattern(rf"(?:{_NAME_AFTER}|{_VERBS})[ \t\xa0]*:[ \t]*$", _M | _I)
_ATTRIBUTION = Pattern(
    rf"[ \t]*(?:(?:on|am|le|el|op|il|em|den|dnia)\b.{{0,200}}?\b(?:{_NAME_AFTER}|{_VERBS})"
    r"|.{0,120}?\b(?:wrote|writes))[ \t\xa0]*:[ \t]*", _I | re.DOTALL)
_ATTRIBUTION_START = Pattern(r"[ \t]*(?:on|am|le|el|op|il|em|den|dnia)\b", _I)
_OUTLOOK_ORIGINAL = Pattern(
    r"^[ \t]*-{2,}+[ \t]*(?:original message|ursprüngliche nachricht|message d'origine"
    r"|mensaje original|oorspronkelijk bericht|messaggio originale|mensagem original)"
    r"[ \t]*-{2,}+[ \t]*$", _M | _I)
_UNDERSCORE_LINE = Pattern(r"^[ \t]*_{10,}+[ \t]*$", _M)
# Possessive dash runs ({2,}+): no word of the alternatives starts with a dash, so giving
# dashes back could never help, and a long run of them would be tried at every length.
_FORWARD_LINE = Pattern(
    r"^[ \t]*(?:-{2,}+[ \t]*(?:forwarded message"
    r"|weitergeleitete nachricht|message transféré|mensaje reenviado"
    r"|doorgestuurd bericht|messaggio inoltrato)[ \t]*-{2,}+|begin forwarded message:"
    r"|-{2,}+[ \t]*begin forwarded text|-{2,}+[ \t]*forwarded message from [^\n]{1,150}-{2,}"
    r"|début du message (?:réexpédié|transféré)[ \t]*:|anfang der weitergeleiteten "
    r"(?:nachricht|e-mail)[ \t]*:|inizio messaggio inoltrato[ \t]*:)[ \t]*$", _M | _I)
# mutt's closing line of a forwarded message.
_FORWARD_END = Pattern(r"^[ \t]*-{2,}+[ \t]*end (?:of )?forwarded message[ \t]*-{2,}+[ \t]*$",
                       _M | _I)
# Header lines of a quoted or forwarded message, as clients write them in English, German,
# French, Spanish, Dutch, Italian and Portuguese (French puts a space, often a no-break
# space, before the colon).
_PSEUDO_HEADER = Pattern(
    r"[ \t]*\*?(?:from|date|sent|subject|to|cc|bcc|reply-to|importance|von|gesendet|datum"
    r"|an|betreff|kopie|de|envoyé|date d'envoi|à|objet|cc|enviado|enviado el|fecha|para"
    r"|asunto|van|verzonden|aan|onderwerp|datum|da|inviato|data|oggetto|a|enviada|assunto"
    r"|mensagem original)\*?[ \t\xa0]*:", _I)
# Runs of lines read by one pattern each (possessive: each line is taken whole, nothing is
# kept to backtrack into): pseudo-header lines; and the lines a header block goes on
# with, pseudo-header lines and wrapped values (a line that starts with a space or tab
# and holds more than white space).
# (Each line with its break, or the text's end.)
_PSEUDO_LINES = Pattern(rf"(?:{_PSEUDO_HEADER.source}[^\n]*+(?:\n|\Z))*+", _I)
_BLOCK_LINE = rf"(?:{_PSEUDO_HEADER.source}|[ \t](?=[^\n]*\S))[^\n]*+(?:\n|\Z)"
_BLOCK_LINES = Pattern(rf"(?:{_BLOCK_LINE})*+", _I)
# Runs of three such lines or more, each read after a line break in "\n" + the text: a
# reply header block has three header lines, one of them a date (:meth:`_Layout.reply_block`),
# so a From: line in a shorter run, or in one without a date, heads none.
_THREE_LINE_RUNS = Pattern(rf"\n((?:{_BLOCK_LINE}){{3,}}+)", _I)
# A text with more From: lines than this has those in shorter runs, and in runs without
# a date, set aside before any is weighed (600,000 "De: b" lines, each between blank
# lines, took 3.7 s weighed one by one); most mail has a few.
_FROM_LINES_WEIGHED = 16
# The first line of a reply header block (Outlook, Outlook Web, phones): "From: …".
_BLOCK_FROM = Pattern(r"^[ \t]*\*?(?:from|von|de|van|da)\*?[ \t\xa0]*:[^\n]*\S", _M | _I)
_BLOCK_DATE = Pattern(
    r"[ \t]*\*?(?:sent|date|gesendet|datum|envoyé|date d'envoi|enviado|enviado el|fecha"
    r"|verzonden|inviato|data|enviada)\*?[ \t\xa0]*:", _I)
# A Sent: or Date: line, read after a line break (in "\n" + the text).
_DATE_AFTER_BREAK = Pattern("\n" + _BLOCK_DATE.source, _I)
_LINE = Pattern(r"[^\n]*(?:\n|\Z)")
# A word of the writer's own: a token with a letter or digit that is not a link (a tracker
# notice starts with its ticket's link and nothing else above its news).
_OWN_WORD = Pattern(r"(?:^|(?<=\s))(?![^\s]*(?:://|www\.))[^\s]*?[^\W_]")
# A signature separator line ``-- `` (or ``--``): searched for as "\n--", a literal prefix
# that the regex engine finds fast; only the very first line needs the anchored pattern.
_SIGNATURE_FIRST_LINE = Pattern(r"-- ?(?:\n|\Z)")
_SIGNATURE_LINE = Pattern(r"\n-- ?(?:\n|\Z)")
_MOBILE_SIGNATURE = Pattern(
    r"^[ \t]*(?:sent from (?:my |the )?[\w .'-]{2,40}|get outlook for (?:ios|android)"
    r"(?:[ \t]*<[^>\n]{1,200}>)?"
    r"|sent from (?:outlook|mail|yahoo mail)(?: for [\w ]{2,20})?|von meinem [\w -]{2,30} "
    r"gesendet|envoyé de mon [\w -]{2,30}|enviado desde mi [\w -]{2,30}"
    r"|verstuurd vanaf mijn [\w -]{2,30}|inviato da [\w -]{2,30}"
    r"|enviado do meu [\w -]{2,30})[ \t.!]*$", _M | _I)
# A rule line: 10+ of -=_~*#, or a rule with a few words in it ("---- Yahoo! Groups Sponsor
# ---~-->", "===== List footer =====").
# Possessive runs ({3,}+): the rule characters and the optional ending share "-" and "~",
# and a long rule followed by text would otherwise be tried at every split (80 ms on one
# corpus message's 99 dashes).
_RULE_LINE = Pattern(
    r"^[ \t]*(?:[-=_~*#]{3,}+|[-=_~*#]{4,}+[^\n]{1,60}?[-=_~*#]{4,}+)[~>-]*+[ \t]*$", _M)
# Words (lower case) one of which every match of the pattern contains: the keyword scan
# rules most texts out before any pattern runs.
_KEYWORDS = {
    _OUTLOOK_ORIGINAL: register(("original message", "ursprüngliche nachricht",
                                 "message d'origine", "mensaje original",
                                 "oorspronkelijk bericht", "messaggio originale",
                                 "mensagem original")),
    _FORWARD_LINE: register(("forwarded message", "forwarded text", "weitergeleitete",
                             "message transféré", "mensaje reenviado", "doorgestuurd bericht",
                             "messaggio inoltrato", "message réexpédié")),
    _ATTRIBUTION_END: register(("wrote", "writes", "schrieb", "a écrit", "escribió",
                                "schreef", "ha scritto", "escreveu", "skrev", "napisał")),
    _MOBILE_SIGNATURE: register(("sent from", "get outlook", "gesendet", "envoyé de",
                                 "enviado desde", "verstuurd vanaf", "inviato da",
                                 "enviado do")),
    _FORWARD_END: register(("end forwarded", "end of forwarded")),
    _BLOCK_FROM: register(("from:", "from :", "from*:", "von:", "de:", "de :", "de\xa0:",
                           "van:", "da:")),
}
_CASE_SENSITIVE = {pattern: Pattern(pattern.source, pattern.flags & ~_I)
                   for pattern in _KEYWORDS}
_FOOTER_LINES = 15
_RULE_START = Pattern(r"[ \t]*[-=_~*#]{3}")
_RULE_START_LINE = Pattern(r"\n[ \t]*[-=_~*#]{3}")
# What a list footer says (one of these must be under the rule line: a rule over a table
# of figures, or over the rest of a report, is no footer).
_FOOTER_WORDS = ("unsubscribe", "subscribe", "mailing list", "listinfo", "list info",
                 "http", "www.", "mailto:", "sponsor", "archive", "digest", "topic",
                 "receiving this", "abmelden", "désabonner", "désinscri", "baja")
_FOOTER_MIN_WORDS_ABOVE = 12
# A quoted line at least this long, followed at once by a short unquoted line and then by
# another quoted line: the short line is the tail that re-wrapping broke off it.
_WRAPPED_QUOTE_MIN = 50
_WRAPPED_TAIL_MAX = 45
# Header blocks and forward lines cut out of one text at most (inline replies, forwarded
# messages); any further ones stay in the text as written.  Real mail has a few (the
# corpus and 2,131 realworld messages: two at most); a crafted text of 174,000 forward
# lines took 1.7 s at 4 MiB, one of 54,000 inline replies 1.2 s.
CUTS_MAX = 1000


class Reply:
    """A text split into what its author wrote and what was set aside."""

    __slots__ = ("text", "aside", "quoted", "segments", "writers", "from_values")

    def __init__(self, text: str, aside: str, quoted: str, segments: tuple[str, ...] = (),
                 writers: tuple[str, ...] = (), from_values: tuple[str, ...] = ()) -> None:
        self.text = text          # the new text (its segments joined)
        self.aside = aside        # everything set aside (quotes, attributions, signature…)
        self.quoted = quoted      # of that, the quoted earlier message(s) alone
        # The new text in parts: the writer's own, then each forwarded message it carries;
        # with the name of who wrote each part ("" when unknown), so that sign-offs are
        # recognised part by part (a forwarder's name must not swallow what it forwards).
        self.segments = segments
        self.writers = writers
        # The From: value of each part's header block ("" for the writer's own part).
        self.from_values = from_values

    def __repr__(self) -> str:
        return f"Reply(text={self.text!r}, aside={self.aside!r}, quoted={self.quoted!r})"


def _scan(pattern: Pattern, prepared: Prepared) -> Iterator[_Span]:
    """``pattern``'s matches in the text, found case-sensitively in its lower-case copy
    when lowering kept every offset; none at all when none of its words occurs."""
    matches, after_break = _found(pattern, prepared)
    return map(_LineMatch, matches) if after_break else matches


def _starts(pattern: Pattern, prepared: Prepared) -> list[int]:
    """Where each of :func:`_scan`'s matches starts (no object made for each: a crafted
    text has hundreds of thousands)."""
    matches, after_break = _found(pattern, prepared)
    return [match.start(1) - 1 for match in matches] if after_break \
        else [match.start() for match in matches]


def _found(pattern: Pattern, prepared: Prepared) -> tuple[Iterator[re.Match[str]], bool]:
    """(the matches :func:`_scan` reads, whether they are an :data:`_AFTER_BREAK`
    pattern's, whose group 1 is the line's match in "\n" + the text)."""
    if not prepared.any(_KEYWORDS[pattern]):
        return iter(()), False
    if prepared.aligned:
        after_break = _AFTER_BREAK.get(pattern)
        if after_break is not None:
            return after_break.get().finditer("\n" + prepared.lowered), True
        return _CASE_SENSITIVE[pattern].get().finditer(prepared.lowered), False
    return pattern.get().finditer(prepared.text), False


class _Span(Protocol):
    def start(self) -> int: ...
    def end(self) -> int: ...
    def span(self) -> tuple[int, int]: ...
    def group(self, index: int = 0) -> str: ...


# The line patterns (``^…``) as "\n(…)", read in "\n" + the lower-case copy: a line start
# is then a literal the regex engine scans for, instead of "^" tried at every position
# (several times as fast); no match spans a line, so none takes the next one's break.
_AFTER_BREAK = {pattern: Pattern("\n(" + pattern.source[1:] + ")", pattern.flags & ~_I)
                for pattern in _KEYWORDS if pattern.source.startswith("^")}


class _LineMatch:
    """A match of an :data:`_AFTER_BREAK` pattern, as the line pattern's match in the text."""

    __slots__ = ("_match",)

    def __init__(self, match: re.Match[str]) -> None:
        self._match = match

    def start(self) -> int:
        return self._match.start(1) - 1

    def end(self) -> int:
        return self._match.end(1) - 1

    def span(self) -> tuple[int, int]:
        return self.start(), self.end()

    def group(self, index: int = 0) -> str:
        return self._match.group(index + 1)


def _in_long_runs(text: str, starts: list[int]) -> list[int]:
    """Those of ``starts`` (From: lines) in a run of three header or wrapped lines or
    more that holds a Sent: or Date: line: a From: line in another run has fewer than
    three header lines from the top of its block to its end, or no date among them, and
    heads no reply block, whatever text is above it."""
    after_break = "\n" + text
    date = _DATE_AFTER_BREAK.get()
    runs = [(run.start(1) - 1, run.end(1) - 1)
            for run in _THREE_LINE_RUNS.get().finditer(after_break)
            if date.search(after_break, run.start(), run.end())]
    kept = []
    index = 0
    for start in starts:
        while index < len(runs) and runs[index][1] <= start:
            index += 1
        if index < len(runs) and runs[index][0] <= start:
            kept.append(start)
    return kept


class _Layout:
    """What :func:`split_reply` asks of one text, each answer found once: its reply header
    blocks, Outlook separators, forward lines and the ends of pseudo-header runs.  Rounds
    of the splitter move forward through these lists; nothing is searched again from the
    start of the text."""

    def __init__(self, prepared: Prepared) -> None:
        self.prepared = prepared
        text = self.text = prepared.text
        self.forwards = _forward_lines(prepared)
        self.originals = list(_scan(_OUTLOOK_ORIGINAL, prepared))
        self.original_starts = [hit.start() for hit in self.originals]
        self.from_starts = _starts(_BLOCK_FROM, prepared)
        if len(self.from_starts) > _FROM_LINES_WEIGHED:
            self.from_starts = _in_long_runs(text, self.from_starts)
        self.next_from = 0               # block starts before this one failed for good
        # The runs of header lines read so far (:meth:`_run_end`), by their first line:
        # the first lines in order, and for each the last line read and the run's end.
        self.run_firsts: list[int] = []
        self.runs: dict[int, tuple[int, int]] = {}
        self.tops: dict[int, int] = {}         # line start → top of the pseudo-header run
        self.forward_spans = [(line.start(), line.end()) for line in self.forwards]
        # A header block right under a forward separator line belongs to the forward:
        # text between the last forward line's end and a block is blank up to here.
        if self.forwards:
            self.last_forward_end = max(line.end() for line in self.forwards)
            found = NOT_SPACE.get().search(text, self.last_forward_end)
            self.blank_until = len(text) if found is None else found.start()
        self.words_from: tuple[int, int] = (-1, -1)   # (begin, first word line from there)

    # -- header blocks ----------------------------------------------------------------

    def block_end(self, position: int) -> int:
        """End of the ``From:/Sent:/To:/Subject:`` lines that start at ``position`` (a
        blank line may come first; a field value may wrap onto an indented line)."""
        text = self.text
        line = _LINE.get()
        pseudo = _PSEUDO_HEADER.get()
        for match in line.finditer(text, position):
            content = match.group(0)
            if not content.strip():
                continue
            if not pseudo.match(content) and not (content[:1] in " \t"
                                                   and match.start() > position):
                return match.start()
            return self._run_end(match.end())
        return len(text)

    def _run_end(self, start: int) -> int:
        """Where a run of header lines ends when it goes on at ``start`` (a line start).
        Its lines are read by one pattern, and each run read is kept, so that a run is
        read once whichever of its lines it is asked from (a crafted text of wrapped
        From: lines asks it from each of them)."""
        firsts, runs = self.run_firsts, self.runs
        index = bisect_right(firsts, start) - 1
        if index >= 0 and start <= runs[firsts[index]][0]:
            return runs[firsts[index]][1]
        text = self.text
        # A run read before, below: reading stops at its first line and takes its end.
        following = firsts[index + 1] if index + 1 < len(firsts) else len(text) + 1
        position = _BLOCK_LINES.get().match(text, start, min(following, len(text))).end()
        if position == following:
            last, end = runs.pop(following)
            firsts[index + 1] = start
        else:
            last = position
            newline = text.find("\n", position)
            line_end = len(text) if newline < 0 else newline + 1
            # A blank line ends the block, with it; another line, without it.
            end = position if text[position:line_end].strip() else line_end
            firsts.insert(index + 1, start)
        runs[start] = (last, end)
        return end

    def _top(self, start: int) -> int:
        """The first line of the pseudo-header lines right above and including the line
        at ``start`` (the block may begin with To:, Date: … above From:)."""
        tops = self.tops
        text = self.text
        pseudo = _PSEUDO_HEADER.get()
        visited = []
        while start > 0:
            if start in tops:
                start = tops[start]
                break
            visited.append(start)
            above = text.rfind("\n", 0, start - 1) + 1
            if not pseudo.match(text, above, start):
                break
            start = above
        for line in visited:
            tops[line] = start
        return start

    def _words_above(self, begin: int, start: int) -> bool:
        """A line with a word, other than a forward separator line, in [begin, start)."""
        known_begin, first = self.words_from
        if not (known_begin <= begin <= first):
            first = self._first_word_line(begin)
        self.words_from = (begin, first)
        return first < start

    def _first_word_line(self, begin: int) -> int:
        text = self.text
        spans = self.forward_spans
        position = begin
        while (at := first_word_at(text, position)) >= 0:
            index = bisect_left(spans, (at + 1,)) - 1
            if index >= 0 and spans[index][0] <= at < spans[index][1]:
                position = spans[index][1]
                continue
            return at
        return len(text) + 1

    def reply_block(self, begin: int) -> tuple[int, int] | None:
        """(start, end of header block) of the first reply header block below some new
        text from ``begin`` on: a ``From:`` line with a ``Sent:``/``Date:`` line among the
        next three pseudo-header lines — Outlook's (under a line of underscores, or alone),
        Outlook Web's, phones'.  A block with no words above it starts a pasted or
        forwarded message, not a reply."""
        text = self.text
        pseudo = _PSEUDO_HEADER.get()
        date = _BLOCK_DATE.get()
        index = max(self.next_from, bisect_left(self.from_starts, begin))
        while index < len(self.from_starts):
            start = self._top(self.from_starts[index])
            # Failing here fails for every later begin too (fewer lines above), and the
            # fields below never change: such a block is not looked at again.
            failed = True
            if self._words_above(begin, start):
                end = self.block_end(start)
                fields: list[int] = []
                position = start
                while position < end and len(fields) < 4:
                    newline = text.find("\n", position, end)
                    line_end = end if newline < 0 else newline
                    if pseudo.match(text, position, line_end):
                        fields.append(position)
                    position = line_end + 1
                if len(fields) >= 3 and any(date.match(text, field) for field in fields[:4]):
                    failed = False
            if failed:
                # Every later From: line of the same run of header lines has this top
                # too, and fails alike: they are stepped over at once (a crafted run of
                # 300,000 was weighed again from its top for each line: 18 µs a line).
                index = self.next_from = bisect_left(self.from_starts,
                                                     self._header_run_end(start), index + 1)
                continue
            rule = _UNDERSCORE_LINE.get().search(text, max(0, start - 200), start)
            if rule is not None and not text[rule.end():start].strip():
                start = rule.start()
            return start, end
        return None

    def separator(self, begin: int) -> tuple[int, int] | None:
        """(start, header block end) of the first reply separator from ``begin`` on, or
        None.  A header block right under a forward separator line belongs to the
        forward."""
        number = bisect_left(self.original_starts, begin)
        original = self.originals[number] if number < len(self.originals) else None
        if original is not None and self._blocks_below(original.end(), begin):
            return original.start(), self.block_end(original.end() + 1)
        block = self.reply_block(begin)
        if block is not None and self.forwards and (
                self.last_forward_end >= block[0] or self.blank_until >= block[0]):
            block = None
        if original is not None and (block is None or original.start() <= block[0]):
            return original.start(), self.block_end(original.end() + 1)
        return block

    def _header_run_end(self, top: int) -> int:
        """Where the pseudo-header lines from ``top`` (a top of :meth:`_top`) end: the
        start of the first line below that is none.  Each From: line before it (a From:
        line is a pseudo-header line) has ``top`` for its top."""
        return _PSEUDO_LINES.get().match(self.text, top).end()

    def _blocks_below(self, end: int, begin: int) -> bool:
        """Every reply block :meth:`reply_block` could find from ``begin`` on starts below
        ``end`` (an Outlook original's line end), so that the original comes first
        without weighing them (54,000 inline replies weighed twice each took 2 s).  The
        first From: line it would weigh heads a run of header lines that starts below
        ``end``, and so does every later one (a later line's run starts no higher); an
        underscore rule above a run moves its start up only over blank lines, never past
        the original's line."""
        index = max(self.next_from, bisect_left(self.from_starts, begin))
        return index >= len(self.from_starts) or self._top(self.from_starts[index]) >= end

    def is_inline_reply(self, start: int, block_end: int, begin: int = 0) -> bool:
        """Outlook Express style: nothing but blank or quoted lines above the separator
        (from ``begin``, where a forwarded message starts), and the quoted original
        (answered between its lines) right below its header block."""
        text = self.text
        above = text[begin:start]
        if any(line.strip() and not line.lstrip().startswith(">")
               for line in above.split("\n")):
            return False
        below = NOT_SPACE.get().search(text, block_end)
        return below is not None and text[below.start()] == ">"


def _footer_start(text: str) -> int | None:
    """Start of a list footer: the first rule line (3+ of ``-=_~*#``, or a rule with a few
    words in it) among the last 15 non-blank lines, with at least 12 words above it and
    something a list footer says below it (unsubscribe, a list address, a link)."""
    tail_start = _last_lines_start(text, _FOOTER_LINES)
    rule = None
    rule_line = _RULE_LINE.get()
    # Lines that begin with 3+ rule characters are rare: found by a simple pattern (its
    # line break a literal the regex engine finds fast; the first line's start matched
    # on its own), then each checked against the whole rule-line pattern.
    first = _RULE_START.get().match(text, tail_start)
    starts = [tail_start] if first is not None else []
    starts += [found.start() + 1 for found in _RULE_START_LINE.get().finditer(text, tail_start)]
    for at in starts:
        if rule_line.match(text, at):
            below = text[at:].lower()
            # A footer says what a list footer says, and is shorter than the message.
            below_words = len(below.split())
            if any(word in below for word in _FOOTER_WORDS) and len(
                    text[:at].split(None, below_words)) > below_words:
                rule = at
                break
    if rule is None or len(text[:rule].split(None, _FOOTER_MIN_WORDS_ABOVE)) \
            < _FOOTER_MIN_WORDS_ABOVE:
        return None
    return rule


def _last_lines_start(text: str, count: int) -> int:
    """Start of the ``count``-th last non-blank line of ``text`` (0 when it has fewer):
    the lines of a tail of the text, a longer tail (4x) while that one has too few."""
    size = 100 * count
    while True:
        begin = max(0, len(text) - size)
        lines = text[begin:].split("\n")
        first = 1 if begin and text[begin - 1] != "\n" else 0    # cut off mid-line
        # (C loops: the non-blank lines' indexes, then one join for the offset.)
        nonblank = list(compress(range(first, len(lines)), map(str.strip, lines[first:])))
        if len(nonblank) >= count:
            return len(text) - len("\n".join(lines[nonblank[-count]:]))
        if not begin:
            return 0
        size *= 4


def _signature_start(text: str) -> int | None:
    """Where a ``-- `` signature line starts, or None."""
    if _SIGNATURE_FIRST_LINE.get().match(text):
        return 0
    found = _SIGNATURE_LINE.get().search(text)
    return None if found is None else found.start() + 1


def _forward_lines(prepared: Prepared) -> list[re.Match[str]]:
    """Forward separator lines: each line where the keyword scan found a forward word,
    checked whole once (however many such words it holds)."""
    if not prepared.any(_KEYWORDS[_FORWARD_LINE]):
        return []
    text = prepared.text
    if prepared.aligned:
        starts = prepared.starts(_KEYWORDS[_FORWARD_LINE])
    else:   # offsets of the lower-case copy are not the text's: find the words again
        starts = [hit.start() for hit in _FORWARD_WORDS.get().finditer(text)]
    found = []
    line_end = -1
    pattern = _FORWARD_LINE.get()
    for at in starts:
        if at < line_end:
            continue                  # this line was checked already
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        line_end = len(text) if end < 0 else end
        line = pattern.match(text, start, line_end)
        if line is not None:
            found.append(line)
    return found


_FORWARD_WORDS = Pattern("|".join(sorted(_KEYWORDS[_FORWARD_LINE])), _I)


def _attributions(prepared: Prepared) -> list[tuple[int, int]]:
    """(start, end) of every attribution line (one line, or two when wrapped)."""
    text = prepared.text
    found = []
    attribution = _ATTRIBUTION.get()
    for match in _attribution_ends(prepared):
        start = text.rfind("\n", 0, match.start()) + 1
        end = match.end() + 1 if text.startswith("\n", match.end()) else match.end()
        if match.end() - start < 250 and attribution.fullmatch(text, start, match.end()):
            found.append((start, end))
            continue
        above = text.rfind("\n", 0, max(0, start - 1)) + 1
        if 0 < start and match.end() - above < 300 and _ATTRIBUTION_START.get().match(
                text, above) and attribution.fullmatch(text, above, match.end()):
            found.append((above, end))
    return found


def _attribution_ends(prepared: Prepared) -> list[re.Match[str]]:
    """The ``… wrote:`` line ends: the verb pattern tried where a verb was found."""
    words = _KEYWORDS[_ATTRIBUTION_END]
    if not prepared.any(words):
        return []
    if not prepared.aligned:
        return list(_ATTRIBUTION_END.get().finditer(prepared.text))
    pattern = _CASE_SENSITIVE[_ATTRIBUTION_END].get()
    lowered = prepared.lowered
    found = []
    after = 0
    for at in prepared.starts(words):
        if at < after:
            continue
        match = pattern.match(lowered, at)
        if match is not None:
            found.append(match)
            after = match.end()
    return found


_QUOTE_MARK = Pattern(r"^[ \t]*> ?", _M)


def unquoted(text: str) -> str:
    """``text`` with one level of ``>`` quoting taken off each line."""
    return _QUOTE_MARK.get().sub("", text) if ">" in text else text


def _unquote_forwarded(text: str) -> str:
    """A forward whose forwarded message is quoted with ``>`` (Apple Mail's plain text):
    one level of quoting removed from its first quoted forward separator or ``From:``
    line on, so that the forwarded text counts as the message's (a forward is a
    near-duplicate of what it forwards, not a reply to it)."""
    for line in _LINE.get().finditer(text):
        content = line.group(0)
        if not content.lstrip().startswith(">"):
            continue
        # Only when the quoting begins with the forwarded message's own separator, or with
        # its header right under an unquoted separator: quotes further down belong to the
        # forwarded message itself.
        inner = _QUOTE_MARK.get().sub("", content, count=1)
        above = text[:line.start()].rstrip().rpartition("\n")[2]
        if _ATTRIBUTION_END.get().search(above.lower()):
            return text     # a reply quoting something (a forward in it, even): a quote
        forward_line = _FORWARD_LINE.get()
        if forward_line.match(inner.rstrip("\n")) or (
                _BLOCK_FROM.get().match(inner) and forward_line.match(above)):
            return text[:line.start()] + unquoted(text[line.start():])
        return text
    return text


# Read in "\n" + the text: each line starts after a line break, a literal the regex engine
# finds fast (three times as fast as trying "^" at every position).
_WRAPPED_TAIL = Pattern(
    rf"\n[ \t]*>[^\n]{{{_WRAPPED_QUOTE_MIN - 1},}}"
    rf"\n([ \t]*[^>\s][^\n]{{0,{_WRAPPED_TAIL_MAX - 1}}})(?=\n[ \t]*>)")


def _wrapped_quote_tails(text: str) -> str:
    """Mark (with ``>``) short unquoted lines that re-wrapping broke off a long quoted line:
    a quoted line, then at once a short unquoted one, then a quoted one again."""
    pieces = []
    last = 0
    for match in _WRAPPED_TAIL.get().finditer("\n" + text):
        start = match.start(1) - 1
        pieces.append(text[last:start])
        pieces.append("> ")
        last = start
    if not pieces:
        return text
    pieces.append(text[last:])
    return "".join(pieces)


_FROM_VALUE = Pattern(r"^[ \t]*\*?(?:from|von|de|van|da)\*?[ \t\xa0]*:[ \t]*([^\n]*)", _M | _I)


def _writer(block: str) -> str:
    """The display name in a forwarded message's header block ("" when none)."""
    found = _FROM_VALUE.get().search(block)
    if found is None:
        return ""
    value = found.group(1)
    return value.split("<", 1)[0].strip().strip('"\'*').strip() if "<" in value else ""


def _without(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` without the ``spans`` (ascending, not overlapping)."""
    pieces = []
    last = 0
    for start, end in spans:
        pieces.append(text[last:start])
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` sorted, overlapping ones joined (a wrapped attribution under another)."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _clean_segment(prepared: Prepared, aside: list[str]) -> tuple[str, str]:
    """One part of a message (its own text, or a message it forwards), without its
    signature, phone tagline, list footer, attributions and quoted lines; returns (text,
    the quoted lines)."""
    text = prepared.text
    signature = _signature_start(text)
    if signature is not None:
        aside.append(text[signature:])
        text = text[:signature]
        prepared = prepared.prefix(signature)
    if prepared.any(_KEYWORDS[_MOBILE_SIGNATURE]):
        taglines = list(_scan(_MOBILE_SIGNATURE, prepared))
        if taglines:
            aside.extend(match.group(0) for match in reversed(taglines))
            text = _without(text, [match.span() for match in taglines])
            prepared = Prepared(text)
    footer = _footer_start(text)
    if footer is not None:
        aside.append(text[footer:])
        text = text[:footer]
        prepared = prepared.prefix(footer)
    if prepared.any(_KEYWORDS[_ATTRIBUTION_END]):
        spans = _merged(_attributions(prepared))
        if spans:
            aside[:0] = [text[start:end] for start, end in spans]
            text = _without(text, spans)
    quoted_lines = ""
    if ">" in text:
        text = _wrapped_quote_tails(text)
        # Runs of quoted lines, each after a line break (see _WRAPPED_TAIL).
        quoted = _QUOTED_LINES.get()
        lines = quoted.findall("\n" + text)
        if lines:
            text = quoted.sub("\n", "\n" + text)[1:]
            quoted_lines = "".join(lines)
    return text, quoted_lines


def split_reply(text: str, *, forward: bool = False, writer: str = "",
                prepared: Prepared | None = None) -> Reply:
    """Split ``text`` into its new text and what was set aside (see the module docstring).

    ``forward`` (from the Subject) keeps the text below an Outlook-style separator, which
    is then the forwarded message rather than the one replied to.  Each forwarded message
    is cleaned as it would be alone (its signature, footer, quotes): a forwarder's ``-- ``
    tagline above it must not take it along.  ``writer``: the sender's display name.
    ``prepared``: ``text`` prepared already (mailfilter/text.py).
    """
    prepared = prepare(text, (prepared,))
    aside: list[str] = []
    below = ""                      # the original under a reply separator
    if forward and ">" in text:
        unquoted = _unquote_forwarded(text)
        if unquoted is not text:
            text, prepared = unquoted, Prepared(unquoted)
    # A forward named by its subject (Outlook's FW: has no forward line, only a reply
    # separator) keeps the text below its first separator; separators further down belong
    # to the forwarded message and end its own text, as they do in that message alone.
    layout = _Layout(prepared)
    forwards = layout.forwards
    forwarding = forward and not forwards
    cuts: list[tuple[int, int]] = []      # header blocks removed; each starts a new part
    begin = 0
    whole = len(text)
    while len(cuts) < CUTS_MAX and (separator := layout.separator(begin)) is not None:
        start, block_end = separator
        if forwarding or layout.is_inline_reply(start, block_end, begin):
            cuts.append((start, block_end))
            forwarding, begin = False, block_end
            continue
        aside.append(text[start:block_end])
        below = text[block_end:]
        text = text[:start]
        break
    for line in forwards:
        if len(cuts) >= CUTS_MAX or line.start() >= len(text):
            break
        # (the block ends where the text now does, at the latest)
        cuts.append((line.start(), min(layout.block_end(line.end() + 1), len(text))))
    if len(text) < whole:
        prepared = prepared.prefix(len(text))
    for line in _scan(_FORWARD_END, prepared):
        if len(cuts) >= CUTS_MAX:
            break
        cuts.append((line.start(), line.end()))
    segments, writers, from_values = [], [], []
    offsets = []                    # where each segment starts in the text
    position, name, from_value = 0, writer, ""
    from_pattern = _FROM_VALUE.get()
    for start, end in sorted(set(cuts)):
        if start < position:
            continue
        offsets.append(position)
        segments.append(text[position:start])
        writers.append(name)
        from_values.append(from_value)
        aside.append(text[start:end])
        position, name = end, _writer(text[start:end])
        found = from_pattern.search(text[start:end])
        from_value = found.group(1).strip() if found else ""
    offsets.append(position)
    segments.append(text[position:])
    writers.append(name)
    from_values.append(from_value)
    quoted_parts = []
    for number, segment in enumerate(segments):
        part = prepared if len(segments) == 1 else prepared.of(segment, offsets[number])
        segments[number], quoted = _clean_segment(part, aside)
        quoted_parts.append(quoted)
    quoted_lines = "".join(quoted_parts)
    return Reply("\n\n".join(segments), quoted_lines + "".join(aside) + below,
                 quoted_lines + below, tuple(segments), tuple(writers), tuple(from_values))


# A closing line ("Best regards,", "Thanks,", "Cheers", "Mit freundlichen Grüßen", …) alone
# on its line: what follows it, when short, is the writer's name and contact block.
_SIGNOFF = Pattern(
    r"^[ \t]*(?:(?:best|kind|warm|warmest|many|with|kindest|best wishes and)?[ \t]*"
    r"(?:regards|wishes|thanks)(?: and regards)?|thanks?(?: again| so much| a lot| all)?"
    r"|thank you(?: very much| all)?|cheers|sincerely(?: yours)?|yours(?: truly| sincerely"
    r"| faithfully)?|best|all the best|respectfully|rgds|tia|take care|talk soon"
    r"|(?:mit )?(?:freundlichen|viele|beste|liebe|herzliche) grü(?:ß|ss)e(?:n)?|gru(?:ß|ss)"
    r"|grü(?:ß|ss)e|mfg|lg|vg|cordialement|bien à vous|bien cordialement|amicalement|bises"
    r"|saludos(?: cordiales)?|un saludo|un abrazo|atentamente|(?:met )?vriendelijke "
    r"groet(?:en)?|hartelijke groet(?:en)?|met vriendelijke groet(?:en)?|groet(?:en|jes)?"
    r"|gr\.?|mvg|cordiali saluti|distinti saluti|saluti|abraços|atenciosamente|pozdrawiam"
    r"|med vänlig hälsning|hälsningar|mvh)[ \t]*[,.!]*[ \t]*$", _I | _M)
_SIGNOFF_LOWER = Pattern(_SIGNOFF.source, _M)
# A closing line is looked for only where one of these occurs near the end.
_SIGNOFF_WORDS = register(("regards", "wishes", "thank", "cheers", "sincerely", "yours",
                           "best", "rgds", "tia", "take care", "talk soon", "grü", "gruß",
                           "gruss", "mfg", "lg", "vg", "cordial", "bien à vous",
                           "amicalement", "bises", "saludo", "abrazo", "atentamente",
                           "groet", "gr", "mvg", "salut", "abraços", "atenciosamente",
                           "pozdrawiam", "hälsning", "mvh"))
# Every closing line holds one of these: the lines where they occur are the only ones the
# pattern is tried on ("respectfully" holds none of the words above).
_SIGNOFF_LINE_WORDS = _SIGNOFF_WORDS | register(("respectfully",))
_SIGNOFF_MAX_LINES = 10
_SIGNOFF_MAX_CHARS = 700
_PROSE_LINE_WORDS = 10     # a signature's lines (name, title, telephone) are shorter
_NAME_SEPARATORS = Pattern(r"[\s,]+")


def _name_line(text: str, name: str) -> int | None:
    """Start of the last line near the end that begins with the writer's name (a
    signature block without a closing line), when text with words stays above it."""
    parts = [part for part in _NAME_SEPARATORS.get().split(name.lower()) if len(part) > 1]
    if not parts:
        return None
    body = text[:-1] if text.endswith("\n") else text     # (its last line's break)
    lines = body.rsplit("\n", _SIGNOFF_MAX_LINES)
    offset = len(body)
    for line in reversed(lines[-_SIGNOFF_MAX_LINES:]):
        start = offset - len(line)
        line = line.strip(" \t\n-–—*_").lower()
        if line and (line.startswith(parts[0]) or line == parts[-1]):
            # "Ann Lee updated OPS-123:" introduces what follows (a tracker's news); a
            # signature's name line never ends with a colon.
            return None if line.endswith(":") else start
        offset = start - 1
    return None


def _closing_line(prepared: Prepared, tail_from: int) -> int | None:
    """Start of the last closing line in the text from ``tail_from`` on, read as a text of
    its own (a line may start at ``tail_from`` though it is mid-line in the whole)."""
    text = prepared.text
    if prepared.aligned:
        # Only lines that hold a closing word can be closing lines: the pattern is tried
        # at their starts, the last first.
        tail = prepared.lowered[tail_from:]
        pattern = _SIGNOFF_LOWER.get()
        candidates = {tail.rfind("\n", 0, at - tail_from) + 1
                      for at in prepared.starts(_SIGNOFF_LINE_WORDS, tail_from)}
        for start in sorted(candidates, reverse=True):
            if pattern.match(tail, start):
                return start + tail_from
        return None
    tail = text[tail_from:].lower()
    if not any(word in tail for word in _SIGNOFF_WORDS):
        return None
    if len(tail) == len(text) - tail_from:       # lowering kept every offset of the tail
        matches, offset = _SIGNOFF_LOWER.get().finditer(tail), tail_from
    else:
        matches, offset = _SIGNOFF.get().finditer(text, tail_from), 0
    found = None
    for match in matches:
        found = match
    return None if found is None else found.start() + offset


def split_signoff(text: str, sender_name: str = "", prepared: Prepared | None = None
                  ) -> tuple[str, str]:
    """(text, the sign-off set aside): from a closing line ("Best regards,") or, without
    one, from a line that starts with the sender's name, to the end — when that is a short
    block (at most 10 lines) under text with words of its own (a link alone is none: a
    tracker's notice under its ticket's link).  Two messages from one person share
    their name, title, company and telephone block; it says nothing of the message.
    ``prepared``: ``text`` prepared already (mailfilter/text.py)."""
    prepared = prepare(text, (prepared,))
    tail_from = max(0, len(text) - 2 * _SIGNOFF_MAX_CHARS)   # a sign-off is near the end
    closing = None
    if not prepared.aligned or prepared.starts(_SIGNOFF_WORDS, tail_from):
        closing = _closing_line(prepared, tail_from)
    named = _name_line(text, sender_name) if sender_name else None
    starts = [start for start in (closing, named)
              if start is not None and _OWN_WORD.get().search(text, 0, start)]
    if not starts:
        return text, ""
    start = min(starts)
    block = text[start:]
    if len(block) > _SIGNOFF_MAX_CHARS or \
            sum(1 for line in block.split("\n") if line.strip()) > _SIGNOFF_MAX_LINES:
        return text, ""
    lines = block.split("\n")
    if start != closing and any(len(line.split()) >= _PROSE_LINE_WORDS for line in lines):
        # Under a line that merely starts with the sender's name ("Product Digest", a
        # newsletter's masthead), a line of prose: the message itself, not a signature.
        return text, ""
    if start == closing and len(next((line for line in lines[1:] if line.strip()), "")
                                .split()) >= _PROSE_LINE_WORDS:
        # A closing word whose next line is prose ("Thanks!" opening a reply, its
        # paragraphs below), not a name: the message goes on.
        return text, ""
    return text[:start], block


def has_attribution(text: str, prepared: Prepared | None = None) -> bool:
    """True when ``text`` has an ``… wrote:`` line: someone answered something in it."""
    return bool(_attribution_ends(prepare(text, (prepared,))))


def split_quotes(text: str, *, forward: bool = False) -> tuple[str, str]:
    """(new text, set-aside text) of :func:`split_reply`."""
    reply = split_reply(text, forward=forward)
    return reply.text, reply.aside
