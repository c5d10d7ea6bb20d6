"""A message's own new text, apart from what it quotes, its signature and list footers.

A reply that quotes an earlier message is not that message again, so everything a mail
client adds of the earlier message is set aside before the text is fingerprinted:

* lines quoted with ``>`` (and ``|>``), and the unquoted tails that re-wrapping broke off
  a long quoted line;
* attribution lines, one or two lines long: ``On Mon, 1 Dec 2026 at 10:00, Ann <…> wrote:``
  (Gmail, Apple Mail, Thunderbird, iPhone), and their German, French and Spanish forms;
* everything below a reply separator: Outlook's ``-----Original Message-----``, modern
  Outlook's line of underscores over a ``From:/Sent:/To:/Subject:`` block, or that block
  alone (Outlook Web, new Outlook, many phones) — unless the message is a forward, or an
  inline reply, where only the separator and its header block go;
* the header block of a forward separator (the forwarded text itself is kept: a forward is
  a near-duplicate of what it forwards);
* a ``-- `` signature, "Sent from my iPhone" lines, and a list footer under a rule line
  (10+ of ``-=_~*#``) among the last lines.

Regular expressions over the whole text do the work, each behind a literal test of a word
it needs, so that most texts never run the slower patterns.  Pure functions.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass

_QUOTED_LINE = re.compile(r"^[ \t]*(?:>|\|>)[^\n]*(?:\n|\Z)", re.MULTILINE)
# "On Mon, 1 Jan 2024, Ann <ann@x> wrote:" and its cousins, found by the verb at the end
# of a line first (a literal scan), then checked on that line (or that line and the one
# above: Gmail wraps a long attribution).
_VERBS = r"wrote|writes|schrieb|a écrit|escribió|schreef|ha scritto|escreveu|skrev|napisał"
_ATTRIBUTION_END = re.compile(rf"(?:{_VERBS})[ \t\xa0]*:[ \t]*$",
                              re.MULTILINE | re.IGNORECASE)
_ATTRIBUTION = re.compile(
    rf"[ \t]*(?:(?:on|am|le|el|op|il|em|den|dnia)\b.{{0,200}}?\b(?:{_VERBS})"
    r"|.{0,120}?\b(?:wrote|writes))[ \t\xa0]*:[ \t]*", re.IGNORECASE | re.DOTALL)
_ATTRIBUTION_START = re.compile(r"[ \t]*(?:on|am|le|el|op|il|em|den|dnia)\b", re.IGNORECASE)
_OUTLOOK_ORIGINAL = re.compile(
    r"^[ \t]*-{2,}[ \t]*(?:original message|ursprüngliche nachricht|message d'origine"
    r"|mensaje original|oorspronkelijk bericht|messaggio originale|mensagem original)"
    r"[ \t]*-{2,}[ \t]*$",
                               re.MULTILINE | re.IGNORECASE)
_UNDERSCORE_LINE = re.compile(r"^[ \t]*_{10,}[ \t]*$", re.MULTILINE)
_FORWARD_LINE = re.compile(
    r"^[ \t]*(?:-{2,}[ \t]*(?:forwarded message"
    r"|weitergeleitete nachricht|message transféré|mensaje reenviado"
    r"|doorgestuurd bericht|messaggio inoltrato)[ \t]*-{2,}|begin forwarded message:"
    r"|-{2,}[ \t]*begin forwarded text|-{2,}[ \t]*forwarded message from [^\n]{1,150}-{2,}"
    r"|début du message (?:réexpédié|transféré)[ \t]*:|anfang der weitergeleiteten "
    r"(?:nachricht|e-mail)[ \t]*:|inizio messaggio inoltrato[ \t]*:)[ \t]*$",
    re.MULTILINE | re.IGNORECASE)
_FORWARD_WORDS = re.compile(
    r"forwarded message|forwarded text|weitergeleitete|message transféré"
    r"|mensaje reenviado|doorgestuurd bericht|messaggio inoltrato|message réexpédié",
    re.IGNORECASE)
# mutt's closing line of a forwarded message.
_FORWARD_END = re.compile(r"^[ \t]*-{2,}[ \t]*end (?:of )?forwarded message[ \t]*-{2,}[ \t]*$",
                          re.MULTILINE | re.IGNORECASE)
# Header lines of a quoted or forwarded message, as clients write them in English, German,
# French, Spanish, Dutch, Italian and Portuguese (French puts a space, often a no-break
# space, before the colon).
_PSEUDO_HEADER = re.compile(
    r"[ \t]*\*?(?:from|date|sent|subject|to|cc|bcc|reply-to|importance|von|gesendet|datum"
    r"|an|betreff|kopie|de|envoyé|date d'envoi|à|objet|cc|enviado|enviado el|fecha|para"
    r"|asunto|van|verzonden|aan|onderwerp|datum|da|inviato|data|oggetto|a|enviada|assunto"
    r"|mensagem original)\*?[ \t\xa0]*:", re.IGNORECASE)
# The first line of a reply header block (Outlook, Outlook Web, phones): "From: …".
_BLOCK_FROM = re.compile(r"^[ \t]*\*?(?:from|von|de|van|da)\*?[ \t\xa0]*:[^\n]*\S",
                         re.MULTILINE | re.IGNORECASE)
_BLOCK_DATE = re.compile(
    r"[ \t]*\*?(?:sent|date|gesendet|datum|envoyé|date d'envoi|enviado|enviado el|fecha"
    r"|verzonden|inviato|data|enviada)\*?[ \t\xa0]*:", re.IGNORECASE)
_LINE = re.compile(r"[^\n]*(?:\n|\Z)")
_WORDS_ABOVE = re.compile(r"[^\W_]")
# A signature separator line ``-- `` (or ``--``): searched for as "\n--", a literal prefix
# that the regex engine finds fast; only the very first line needs the anchored pattern.
_SIGNATURE_FIRST_LINE = re.compile(r"-- ?(?:\n|\Z)")
_SIGNATURE_LINE = re.compile(r"\n-- ?(?:\n|\Z)")
_MOBILE_SIGNATURE = re.compile(
    r"^[ \t]*(?:sent from (?:my |the )?[\w .'-]{2,40}|get outlook for (?:ios|android)"
    r"(?:[ \t]*<[^>\n]{1,200}>)?"
    r"|sent from (?:outlook|mail|yahoo mail)(?: for [\w ]{2,20})?|von meinem [\w -]{2,30} "
    r"gesendet|envoyé de mon [\w -]{2,30}|enviado desde mi [\w -]{2,30}"
    r"|verstuurd vanaf mijn [\w -]{2,30}|inviato da [\w -]{2,30}"
    r"|enviado do meu [\w -]{2,30})[ \t.!]*$", re.MULTILINE | re.IGNORECASE)
# A rule line: 10+ of -=_~*#, or a rule with a few words in it ("---- Yahoo! Groups Sponsor
# ---~-->", "===== List footer =====").
# Possessive runs ({3,}+): the rule characters and the optional ending share "-" and "~",
# and a long rule followed by text would otherwise be tried at every split (80 ms on one
# corpus message's 99 dashes).
_RULE_LINE = re.compile(
    r"^[ \t]*(?:[-=_~*#]{3,}+|[-=_~*#]{4,}+[^\n]{1,60}?[-=_~*#]{4,}+)[~>-]*+[ \t]*$",
    re.MULTILINE)
_CASE_SENSITIVE = {pattern: re.compile(pattern.pattern, pattern.flags & ~re.IGNORECASE)
                   for pattern in (_OUTLOOK_ORIGINAL, _FORWARD_WORDS, _ATTRIBUTION_END,
                                   _MOBILE_SIGNATURE, _BLOCK_FROM, _FORWARD_END)}
# Words (lower case) one of which every match of the pattern contains: ``in`` over the
# lower-case copy rules most texts out far faster than running the pattern over them.
_KEYWORDS = {
    _OUTLOOK_ORIGINAL: ("original message", "ursprüngliche nachricht", "message d'origine",
                        "mensaje original", "oorspronkelijk bericht", "messaggio originale",
                        "mensagem original"),
    _FORWARD_WORDS: ("forwarded message", "forwarded text", "weitergeleitete",
                     "message transféré", "mensaje reenviado", "doorgestuurd bericht",
                     "messaggio inoltrato", "message réexpédié"),
    _ATTRIBUTION_END: ("wrote", "writes", "schrieb", "a écrit", "escribió", "schreef",
                       "ha scritto", "escreveu", "skrev", "napisał"),
    _MOBILE_SIGNATURE: ("sent from", "get outlook", "gesendet", "envoyé de", "enviado desde",
                        "verstuurd vanaf", "inviato da", "enviado do"),
    _FORWARD_END: ("end forwarded", "end of forwarded"),
    _BLOCK_FROM: ("from:", "from :", "from*:", "von:", "de:", "de :", "de\xa0:", "van:",
                  "da:"),
}
_ALL_KEYWORDS = frozenset(word for words in _KEYWORDS.values() for word in words)
_KEYWORDS = {pattern: frozenset(words) for pattern, words in _KEYWORDS.items()}
_FOOTER_LINES = 15
_RULE_START = re.compile(r"^[ \t]*[-=_~*#]{3}", re.MULTILINE)
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


@dataclass(frozen=True, slots=True)
class Reply:
    """A text split into what its author wrote and what was set aside."""

    text: str          # the new text (its segments joined)
    aside: str         # everything set aside (quotes, attributions, signature, footer)
    quoted: str        # of that, the quoted earlier message(s) alone
    # The new text in parts: the writer's own, then each forwarded message it carries;
    # with the name of who wrote each part ("" when unknown), so that sign-offs are
    # recognised part by part (a forwarder's name must not swallow what it forwards).
    segments: tuple[str, ...] = ()
    writers: tuple[str, ...] = ()
    # The From: value of each part's header block ("" for the writer's own part).
    from_values: tuple[str, ...] = ()


def _scan(pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """``pattern``'s matches in ``text``, found in its lower-case copy when lowering keeps
    every offset: Python's ``re`` is many times slower with IGNORECASE on large texts."""
    lowered = _lowered(text)
    if _KEYWORDS[pattern].isdisjoint(_present(lowered)):
        return iter(())
    if len(lowered) == len(text):
        return _CASE_SENSITIVE[pattern].finditer(lowered)
    return pattern.finditer(text)


@functools.lru_cache(maxsize=4)
def _present(lowered: str) -> frozenset[str]:
    """Which keywords of all the patterns occur in ``lowered`` (one pass per text)."""
    return frozenset(word for word in _ALL_KEYWORDS if word in lowered)


@functools.lru_cache(maxsize=4)
def _lowered(text: str) -> str:
    """One lower-case copy per text for the several scans of :func:`split_reply`."""
    return text.lower()


def _header_block_end(text: str, position: int) -> int:
    """End of the ``From:/Sent:/To:/Subject:`` lines that start at ``position`` (a blank
    line may come first; a field value may wrap onto an indented line)."""
    begun = False
    for match in _LINE.finditer(text, position):
        line = match.group(0)
        if not line.strip():
            if not begun:
                continue
            return match.end()
        begun = True
        if not _PSEUDO_HEADER.match(line) and not (line[:1] in " \t" and
                                                   match.start() > position):
            return match.start()
    return len(text)


def _reply_block(text: str, begin: int = 0) -> tuple[int, int] | None:
    """(start, end of header block) of the first reply header block below some new text:
    a ``From:`` line with a ``Sent:``/``Date:`` line among the next three pseudo-header
    lines — Outlook's (under a line of underscores, or alone), Outlook Web's, phones'.
    A block with no words above it starts a pasted or forwarded message, not a reply."""
    for found in _scan(_BLOCK_FROM, text):
        if found.start() < begin:
            continue
        start = text.rfind("\n", 0, found.start()) + 1
        while start > 0:            # the block may begin with To:, Date: … above From:
            above = text.rfind("\n", 0, start - 1) + 1
            if not _PSEUDO_HEADER.match(text, above, start):
                break
            start = above
        if not _WORDS_ABOVE.search(_FORWARD_LINE.sub("", text[begin:start])):
            continue
        end = _header_block_end(text, start)
        block = text[start:end].split("\n")
        fields = [line for line in block if _PSEUDO_HEADER.match(line)]
        if len(fields) < 3 or not any(_BLOCK_DATE.match(line) for line in fields[:4]):
            continue
        rule = _UNDERSCORE_LINE.search(text, max(0, start - 200), start)
        if rule is not None and not text[rule.end():start].strip():
            start = rule.start()
        return start, end
    return None


def _is_inline_reply(text: str, start: int, block_end: int, begin: int = 0) -> bool:
    """Outlook Express style: nothing but blank or quoted lines above the separator (from
    ``begin``, where a forwarded message starts), and the quoted original (answered
    between its lines) right below its header block."""
    above = text[begin:start]
    if any(line.strip() and not line.lstrip().startswith(">") for line in above.split("\n")):
        return False
    return text[block_end:].lstrip("\n").lstrip().startswith(">")


def _footer_start(text: str) -> int | None:
    """Start of a list footer: the first rule line (3+ of ``-=_~*#``, or a rule with a few
    words in it) among the last 15 non-blank lines, with at least 12 words above it and
    something a list footer says below it (unsubscribe, a list address, a link)."""
    tail_start = len(text)
    seen = 0
    while tail_start > 0 and seen < _FOOTER_LINES:
        previous = text.rfind("\n", 0, tail_start - 1)
        if text[previous + 1:tail_start].strip():
            seen += 1
        tail_start = previous + 1 if previous >= 0 else 0
        if previous < 0:
            break
    rule = None
    # Lines that begin with 4+ rule characters are rare: found by a simple pattern, then
    # each checked against the whole rule-line pattern.
    for start in _RULE_START.finditer(text, tail_start):
        if _RULE_LINE.match(text, start.start()):
            below = text[start.start():].lower()
            # A footer says what a list footer says, and is shorter than the message.
            below_words = len(below.split())
            if any(word in below for word in _FOOTER_WORDS) and len(
                    text[:start.start()].split(None, below_words)) > below_words:
                rule = start.start()
                break
    if rule is None or len(text[:rule].split(None, _FOOTER_MIN_WORDS_ABOVE)) \
            < _FOOTER_MIN_WORDS_ABOVE:
        return None
    return rule


def _signature_start(text: str) -> int | None:
    """Where a ``-- `` signature line starts, or None."""
    if _SIGNATURE_FIRST_LINE.match(text):
        return 0
    found = _SIGNATURE_LINE.search(text)
    return None if found is None else found.start() + 1


def _forward_lines(text: str) -> list[re.Match[str]]:
    """Forward separator lines: found by their words first, then checked whole."""
    found = []
    for hit in _scan(_FORWARD_WORDS, text):
        start = text.rfind("\n", 0, hit.start()) + 1
        end = text.find("\n", hit.end())
        line = _FORWARD_LINE.match(text, start, len(text) if end < 0 else end)
        if line is not None and (not found or found[-1].start() != line.start()):
            found.append(line)
    return found


def _reply_separator(text: str, forwards: list[re.Match[str]], begin: int = 0
                     ) -> tuple[int, int] | None:
    """(start, header block end) of the first reply separator from ``begin`` on, or None.
    A header block right under a forward separator line belongs to the forward."""
    original = next((hit for hit in _scan(_OUTLOOK_ORIGINAL, text) if hit.start() >= begin),
                    None)
    block = _reply_block(text, begin)
    if block is not None and any(not text[line.end():block[0]].strip() for line in forwards):
        block = None
    if original is not None and (block is None or original.start() <= block[0]):
        return original.start(), _header_block_end(text, original.end() + 1)
    return block


def _attributions(text: str) -> list[tuple[int, int]]:
    """(start, end) of every attribution line (one line, or two when wrapped)."""
    found = []
    for match in _scan(_ATTRIBUTION_END, text):
        start = text.rfind("\n", 0, match.start()) + 1
        end = match.end() + 1 if text.startswith("\n", match.end()) else match.end()
        if match.end() - start < 250 and _ATTRIBUTION.fullmatch(text, start, match.end()):
            found.append((start, end))
            continue
        above = text.rfind("\n", 0, max(0, start - 1)) + 1
        if 0 < start and match.end() - above < 300 and _ATTRIBUTION_START.match(
                text, above) and _ATTRIBUTION.fullmatch(text, above, match.end()):
            found.append((above, end))
    return found


_QUOTE_MARK = re.compile(r"^[ \t]*> ?", re.MULTILINE)


def _unquote_forwarded(text: str) -> str:
    """A forward whose forwarded message is quoted with ``>`` (Apple Mail's plain text):
    one level of quoting removed from its first quoted forward separator or ``From:``
    line on, so that the forwarded text counts as the message's (a forward is a
    near-duplicate of what it forwards, not a reply to it)."""
    for line in _LINE.finditer(text):
        content = line.group(0)
        if not content.lstrip().startswith(">"):
            continue
        # Only when the quoting begins with the forwarded message's own separator, or with
        # its header right under an unquoted separator: quotes further down belong to the
        # forwarded message itself.
        inner = _QUOTE_MARK.sub("", content, count=1)
        above = text[:line.start()].rstrip().rpartition("\n")[2]
        if _ATTRIBUTION_END.search(above.lower()):
            return text     # a reply quoting something (a forward in it, even): a quote
        if _FORWARD_LINE.match(inner.rstrip("\n")) or (
                _BLOCK_FROM.match(inner) and _FORWARD_LINE.match(above)):
            start = line.start()
            return text[:start] + _QUOTE_MARK.sub("", text[start:])
        return text
    return text


_WRAPPED_TAIL = re.compile(
    rf"^[ \t]*>[^\n]{{{_WRAPPED_QUOTE_MIN - 1},}}\n([ \t]*[^>\s][^\n]{{0,{_WRAPPED_TAIL_MAX - 1}}})"
    rf"\n(?=[ \t]*>)", re.MULTILINE)


def _wrapped_quote_tails(text: str) -> str:
    """Mark (with ``>``) short unquoted lines that re-wrapping broke off a long quoted line:
    a quoted line, then at once a short unquoted one, then a quoted one again."""
    tails = [match.start(1) for match in _WRAPPED_TAIL.finditer(text)]
    for start in reversed(tails):
        text = text[:start] + "> " + text[start:]
    return text


_FROM_VALUE = re.compile(r"^[ \t]*\*?(?:from|von|de|van|da)\*?[ \t\xa0]*:[ \t]*([^\n]*)",
                         re.MULTILINE | re.IGNORECASE)


def _writer(block: str) -> str:
    """The display name in a forwarded message's header block ("" when none)."""
    found = _FROM_VALUE.search(block)
    if found is None:
        return ""
    value = found.group(1)
    return value.split("<", 1)[0].strip().strip('"\'*').strip() if "<" in value else ""


def _clean_segment(text: str, aside: list[str]) -> tuple[str, str]:
    """One part of a message (its own text, or a message it forwards), without its
    signature, phone tagline, list footer, attributions and quoted lines; returns (text,
    the quoted lines)."""
    signature = _signature_start(text)
    if signature is not None:
        aside.append(text[signature:])
        text = text[:signature]
    for match in reversed(list(_scan(_MOBILE_SIGNATURE, text))):
        aside.append(match.group(0))
        text = text[:match.start()] + text[match.end():]
    footer = _footer_start(text)
    if footer is not None:
        aside.append(text[footer:])
        text = text[:footer]
    for start, end in reversed(_attributions(text)):
        aside.insert(0, text[start:end])
        text = text[:start] + text[end:]
    quoted_lines = ""
    if ">" in text:
        text = _wrapped_quote_tails(text)
        lines = _QUOTED_LINE.findall(text)
        if lines:
            text = _QUOTED_LINE.sub("", text)
            quoted_lines = "".join(lines)
    return text, quoted_lines


def split_reply(text: str, *, forward: bool = False, writer: str = "") -> Reply:
    """Split ``text`` into its new text and what was set aside (see the module docstring).

    ``forward`` (from the Subject) keeps the text below an Outlook-style separator, which
    is then the forwarded message rather than the one replied to.  Each forwarded message
    is cleaned as it would be alone (its signature, footer, quotes): a forwarder's ``-- ``
    tagline above it must not take it along.  ``writer``: the sender's display name.
    """
    aside: list[str] = []
    below = ""                      # the original under a reply separator
    if forward and ">" in text:
        text = _unquote_forwarded(text)
    # A forward named by its subject (Outlook's FW: has no forward line, only a reply
    # separator) keeps the text below its first separator; separators further down belong
    # to the forwarded message and end its own text, as they do in that message alone.
    forwards = _forward_lines(text)
    forwarding = forward and not forwards
    cuts: list[tuple[int, int]] = []      # header blocks removed; each starts a new part
    begin = 0
    while (separator := _reply_separator(text, forwards, begin)) is not None:
        start, block_end = separator
        if forwarding or _is_inline_reply(text, start, block_end, begin):
            cuts.append((start, block_end))
            forwarding, begin = False, block_end
            continue
        aside.append(text[start:block_end])
        below = text[block_end:]
        text = text[:start]
        break
    for line in forwards:
        if line.start() < len(text):
            cuts.append((line.start(), _header_block_end(text, line.end() + 1)))
    for line in _scan(_FORWARD_END, text):
        cuts.append((line.start(), line.end()))
    segments, writers, from_values = [], [], []
    position, name, from_value = 0, writer, ""
    for start, end in sorted(set(cuts)):
        if start < position:
            continue
        segments.append(text[position:start])
        writers.append(name)
        from_values.append(from_value)
        aside.append(text[start:end])
        position, name = end, _writer(text[start:end])
        found = _FROM_VALUE.search(text[start:end])
        from_value = found.group(1).strip() if found else ""
    segments.append(text[position:])
    writers.append(name)
    from_values.append(from_value)
    quoted_parts = []
    for number, segment in enumerate(segments):
        segments[number], quoted = _clean_segment(segment, aside)
        quoted_parts.append(quoted)
    quoted_lines = "".join(quoted_parts)
    return Reply("\n\n".join(segments), quoted_lines + "".join(aside) + below,
                 quoted_lines + below, tuple(segments), tuple(writers), tuple(from_values))


# A closing line ("Best regards,", "Thanks,", "Cheers", "Mit freundlichen Grüßen", …) alone
# on its line: what follows it, when short, is the writer's name and contact block.
_SIGNOFF = re.compile(
    r"^[ \t]*(?:(?:best|kind|warm|warmest|many|with|kindest|best wishes and)?[ \t]*"
    r"(?:regards|wishes|thanks)(?: and regards)?|thanks?(?: again| so much| a lot| all)?"
    r"|thank you(?: very much| all)?|cheers|sincerely(?: yours)?|yours(?: truly| sincerely"
    r"| faithfully)?|best|all the best|respectfully|rgds|tia|take care|talk soon"
    r"|(?:mit )?(?:freundlichen|viele|beste|liebe|herzliche) grü(?:ß|ss)e(?:n)?|gru(?:ß|ss)"
    r"|grü(?:ß|ss)e|mfg|lg|vg|cordialement|bien à vous|bien cordialement|amicalement|bises"
    r"|saludos(?: cordiales)?|un saludo|un abrazo|atentamente|(?:met )?vriendelijke "
    r"groet(?:en)?|hartelijke groet(?:en)?|met vriendelijke groet(?:en)?|groet(?:en|jes)?"
    r"|gr\.?|mvg|cordiali saluti|distinti saluti|saluti|abraços|atenciosamente|pozdrawiam"
    r"|med vänlig hälsning|hälsningar|mvh)[ \t]*[,.!]*[ \t]*$",
    re.IGNORECASE | re.MULTILINE)
_SIGNOFF_LOWER = re.compile(_SIGNOFF.pattern, re.MULTILINE)
# Every closing line holds one of these (a literal test before the pattern).
_SIGNOFF_WORDS = ("regards", "wishes", "thank", "cheers", "sincerely", "yours", "best",
                  "rgds", "tia", "take care", "talk soon", "grü", "gruß", "gruss", "mfg",
                  "lg", "vg", "cordial", "bien à vous", "amicalement", "bises", "saludo",
                  "abrazo", "atentamente", "groet", "gr", "mvg", "salut", "abraços",
                  "atenciosamente", "pozdrawiam", "hälsning", "mvh")
_SIGNOFF_MAX_LINES = 10
_SIGNOFF_MAX_CHARS = 700


def _name_line(text: str, name: str) -> int | None:
    """Start of the last line near the end that begins with the writer's name (a
    signature block without a closing line), when text with words stays above it."""
    parts = [part for part in re.split(r"[\s,]+", name.lower()) if len(part) > 1]
    if not parts:
        return None
    position = len(text)
    for _ in range(_SIGNOFF_MAX_LINES):
        start = text.rfind("\n", 0, max(0, position - 1)) + 1
        line = text[start:position].strip(" \t\n-–—*_").lower()
        if line and (line.startswith(parts[0]) or line == parts[-1]):
            return start
        if start == 0:
            return None
        position = start
    return None


def split_signoff(text: str, sender_name: str = "") -> tuple[str, str]:
    """(text, the sign-off set aside): from a closing line ("Best regards,") or, without
    one, from a line that starts with the sender's name, to the end — when that is a short
    block (at most 10 lines) under text with words.  Two messages from one person share
    their name, title, company and telephone block; it says nothing of the message."""
    tail_from = max(0, len(text) - 2 * _SIGNOFF_MAX_CHARS)   # a sign-off is near the end
    tail = text[tail_from:].lower()
    found = None
    if not any(word in tail for word in _SIGNOFF_WORDS):
        pass                                        # no closing word at all: no pattern
    elif len(tail) == len(text) - tail_from:       # lowering kept every offset
        for match in _SIGNOFF_LOWER.finditer(tail):
            found = match
    else:
        for match in _SIGNOFF.finditer(text, tail_from):
            found = match
    closing = None if found is None else found.start() + (
        tail_from if found.re is _SIGNOFF_LOWER else 0)
    starts = [start for start in (closing,
                                  _name_line(text, sender_name) if sender_name else None)
              if start is not None and _WORDS_ABOVE.search(text, 0, start)]
    if not starts:
        return text, ""
    start = min(starts)
    block = text[start:]
    if len(block) > _SIGNOFF_MAX_CHARS or \
            sum(1 for line in block.split("\n") if line.strip()) > _SIGNOFF_MAX_LINES:
        return text, ""
    return text[:start], block


def has_attribution(text: str) -> bool:
    """True when ``text`` has an ``… wrote:`` line: someone answered something in it."""
    return next(_scan(_ATTRIBUTION_END, text), None) is not None


def split_quotes(text: str, *, forward: bool = False) -> tuple[str, str]:
    """(new text, set-aside text) of :func:`split_reply`."""
    reply = split_reply(text, forward=forward)
    return reply.text, reply.aside
