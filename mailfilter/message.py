"""Raw bytes → :class:`Message`: the parts of a mail that fingerprints are made of.

Parsing uses the standard library's ``compat32`` policy, which does not build header objects:
``email.policy.default`` spends seconds on one corpus message with a 14 KB Content-Type
header.  Nothing here raises on bad input: broken MIME, unknown or lying charsets, NUL bytes,
a missing header/body separator all give a :class:`Message` whose ``defects`` say what was
odd, so that a front end can log it and still give a verdict.
"""

from __future__ import annotations

import binascii
import codecs
import email
import email.message
import email.parser
import functools
import quopri
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from selectolax.lexbor import LexborHTMLParser

# A body separator exactly as chisto finds it: the first two consecutive LF bytes.
_CHISTO_SEPARATOR = b"\n\n"
_MBOX_FROM = re.compile(rb"\AFrom [^\n]*\n")
# Quoted lines; and "On Mon, 1 Jan 2024, Ann <ann@x> wrote:" and its cousins, found by the
# verb at the end of a line first (a literal scan), then checked on that one line.
_QUOTED_LINE = re.compile(r"^[ \t]*(?:>|\|>)[^\n]*(?:\n|\Z)", re.MULTILINE)
_ATTRIBUTION_END = re.compile(
    r"(?:wrote|writes|schrieb|a écrit|escribió)[ \t]*:[ \t]*$", re.MULTILINE | re.IGNORECASE)
_ATTRIBUTION = re.compile(
    r"[ \t]*(?:(?:on|am|le|el)\b.{0,200}?\b(?:wrote|writes|schrieb|a écrit|escribió)"
    r"|.{0,120}?\b(?:wrote|writes))[ \t]*:[ \t]*", re.IGNORECASE)
# Where a reply's new text ends (Outlook), where a forward's header block starts, a
# signature, and the rule line above a list footer.
_OUTLOOK_ORIGINAL = re.compile(r"^[ \t]*-{2,}[ \t]*original message[ \t]*-{2,}[ \t]*$",
                               re.MULTILINE | re.IGNORECASE)
_FORWARD_LINE = re.compile(
    r"^[ \t]*(?:-{2,}[ \t]*forwarded message[ \t]*-{2,}|begin forwarded message:"
    r"|-{2,}[ \t]*(?:weitergeleitete nachricht|message transféré)[ \t]*-{2,})[ \t]*$",
    re.MULTILINE | re.IGNORECASE)
_FORWARD_WORDS = re.compile(
    r"forwarded message|weitergeleitete nachricht|message transféré", re.IGNORECASE)
_PSEUDO_HEADER = re.compile(
    r"[ \t]*(?:from|date|sent|subject|to|cc|bcc|reply-to|von|gesendet|datum|an|betreff|de"
    r"|envoyé|à|objet)[ \t]*:", re.IGNORECASE)
_LINE = re.compile(r"[^\n]*(?:\n|\Z)")
# A signature separator line ``-- `` (or ``--``): searched for as "\n--", a literal prefix
# that the regex engine finds fast; only the very first line needs the anchored pattern.
_SIGNATURE_FIRST_LINE = re.compile(r"-- ?(?:\n|\Z)")
_SIGNATURE_LINE = re.compile(r"\n-- ?(?:\n|\Z)")
_RULE_LINE = re.compile(r"^[ \t]*[-=_~*]{10,}[ \t]*$", re.MULTILINE)
_CASE_SENSITIVE = {pattern: re.compile(pattern.pattern, pattern.flags & ~re.IGNORECASE)
                   for pattern in (_OUTLOOK_ORIGINAL, _FORWARD_WORDS, _ATTRIBUTION_END)}
# Words (lower case) one of which every match of the pattern contains: ``in`` over the
# lower-case copy rules most texts out far faster than running the pattern over them.
_KEYWORDS = {
    _OUTLOOK_ORIGINAL: ("original message",),
    _FORWARD_WORDS: ("forwarded message", "weitergeleitete nachricht", "message transféré"),
    _ATTRIBUTION_END: ("wrote", "writes", "schrieb", "a écrit", "escribió"),
}
_FOOTER_LINES = 15
_FOOTER_MIN_WORDS_ABOVE = 12
_WORD = re.compile(r"[^\W_]")
_FORWARD_SUBJECT = re.compile(r"\s*(?:\[[^\]]*\]\s*)?(?:fwd?|fw|wg|tr)\s*:", re.IGNORECASE)
_NOT_BASE64 = re.compile(rb"[^A-Za-z0-9+/]")
_HEADER_LINE = re.compile(rb"^([!-9;-~]+)[ \t]*:[ \t]*(.*)$", re.MULTILINE)
_PARAM = re.compile(r";\s*([!#-'*+.0-9A-Z^-~-]+)\s*=\s*(\"[^\"]*\"|[^;\s]*)")
_EMPTY_PARAMS = re.compile(rb";(?:[ \t]*;)+")
_HEADERS_MAX = 1000
_UNFOLD_TEXT = re.compile(r"\n[ \t]+")
_HEADER_FIELD = re.compile(r"^([!-9;-~]+)[ \t]*:[ \t]*(.*)$", re.MULTILINE)
_HEADER_FIELD_MAX = 8192
_HTML_DROP = "script, style, head, title, noscript, template"
_MAX_PARTS = 200
_MAX_DEPTH = 20


@dataclass(frozen=True, slots=True)
class Attachment:
    """A non-text part, decoded from its transfer encoding."""

    content_type: str
    filename: str | None
    data: bytes


@dataclass(frozen=True, slots=True)
class Message:
    """What the fingerprints see of a mail; header text is kept only where it is needed."""

    message_id: str | None
    date: str | None
    # The bytes after the first LF LF, exactly what chisto counts (empty if there is none).
    raw_body: bytes
    # New text of the body: decoded, HTML reduced to text, quotes/signature/footer set aside.
    text: str
    # What was set aside: quoted lines and attribution lines (for containment reports).
    quoted: str = ""
    attachments: tuple[Attachment, ...] = ()
    defects: tuple[str, ...] = field(default=())
    # Every header field as (lowercased name, unfolded value), bounded, for policy rules.
    headers: tuple[tuple[str, str], ...] = ()


def raw_body(raw: bytes) -> bytes:
    """The body as chisto sees it: everything after the first ``\\n\\n`` (else nothing)."""
    at = raw.find(_CHISTO_SEPARATOR)
    return b"" if at < 0 else raw[at + 2:]


def transfer_decode(data: bytes, encoding: str, defects: list[str]) -> bytes:
    """Undo a Content-Transfer-Encoding leniently (bad base64 and QP still give bytes)."""
    encoding = encoding.strip().lower()
    if encoding == "base64":
        cleaned = _NOT_BASE64.sub(b"", data)
        remainder = len(cleaned) % 4
        if remainder == 1:      # one stray character cannot encode anything: drop it
            cleaned = cleaned[:-1]
        elif remainder:
            cleaned += b"=" * (4 - remainder)
        try:
            return binascii.a2b_base64(cleaned)
        except (binascii.Error, ValueError):
            defects.append("invalid base64")
            return b""
    if encoding == "quoted-printable":
        try:
            return quopri.decodestring(data)
        except (ValueError, binascii.Error):
            defects.append("invalid quoted-printable")
            return data
    return data


def _decode_payload(part: email.message.Message, defects: list[str]) -> bytes:
    """The part's bytes, transfer-decoded (the standard library's lenient decoders: its
    ``get_payload()`` without decoding would give text already charset-decoded)."""
    try:
        data = part.get_payload(decode=True)
    except Exception:  # noqa: BLE001 - e.g. a broken uuencode body: keep the raw text
        payload = part.get_payload()
        if not isinstance(payload, str):
            return b""
        defects.append("undecodable transfer encoding")
        return payload.encode("ascii", "surrogateescape")
    return data if isinstance(data, bytes) else b""


def _known_charset(charset: str | None) -> str | None:
    if not charset:
        return None
    try:
        return codecs.lookup(charset.strip().strip('"').strip("'")).name
    except (LookupError, ValueError):
        return None


def _charset_of(part: email.message.Message) -> str | None:
    try:
        charset = part.get_content_charset()
    except Exception:  # noqa: BLE001 - RFC 2231 garbage in parameters
        return None
    return _known_charset(charset)


def decode_text(data: bytes, charset: str | None, defects: list[str] | None = None) -> str:
    """Bytes of a text part → str; unknown or lying charsets never raise.

    The declared charset is tried strictly, then UTF-8, then cp1252 (which most mail that
    lies about being ASCII or Latin-1 really is), finally Latin-1 which decodes anything.
    """
    if b"\x00" in data:
        data = data.replace(b"\x00", b"")
        if defects is not None:
            defects.append("NUL bytes in text")
    tried = []
    for candidate in (charset, "utf-8", "cp1252"):
        if candidate and candidate not in tried:
            tried.append(candidate)
            try:
                return data.decode(candidate)
            except (UnicodeDecodeError, LookupError):
                continue
    if defects is not None and charset:
        defects.append(f"text does not decode as its charset {charset}")
    return data.decode("latin-1")


def html_to_text(html: str) -> str:
    """Visible text of an HTML part (Lexbor), blockquotes marked as quoted lines."""
    try:
        tree = LexborHTMLParser(html)
        for node in tree.css(_HTML_DROP):
            node.decompose()
        for quote in tree.css("blockquote"):
            inner = quote.text(separator="\n")
            quote.replace_with("\n" + "\n".join("> " + line for line in inner.splitlines())
                               + "\n")
        for br in tree.css("br, p, div, tr, li, h1, h2, h3, h4, h5, h6"):
            br.insert_after("\n")
        root = tree.body or tree.root
        return root.text(separator="") if root is not None else ""
    except Exception:  # noqa: BLE001 - a broken document is text-less, not fatal
        return re.sub(r"<[^>]*>", " ", html)


def _header_block_end(text: str, position: int) -> int:
    """End of the ``From:/Sent:/To:/Subject:`` lines that follow a forward or Outlook
    separator line starting at ``position`` (a blank line may come first)."""
    for match in _LINE.finditer(text, position):
        line = match.group(0)
        if not line.strip():
            if match.start() == position:
                continue
            return match.end()
        if not _PSEUDO_HEADER.match(line):
            return match.start()
    return len(text)


def _is_inline_reply(text: str, separator: re.Match[str], block_end: int) -> bool:
    """Outlook Express style: nothing but blank or quoted lines above the separator, and
    the quoted original (answered between its lines) right below its header block."""
    above = text[:separator.start()]
    if any(line.strip() and not line.lstrip().startswith(">") for line in above.split("\n")):
        return False
    return text[block_end:].lstrip("\n").lstrip().startswith(">")


def _footer_start(text: str) -> int | None:
    """Start of a list footer: the first rule line (10+ of ``-=_~*``) among the last 15
    non-blank lines, when at least 12 words stay above it."""
    tail_start = len(text)
    seen = 0
    while tail_start > 0 and seen < _FOOTER_LINES:
        previous = text.rfind("\n", 0, tail_start - 1)
        if text[previous + 1:tail_start].strip():
            seen += 1
        tail_start = previous + 1 if previous >= 0 else 0
        if previous < 0:
            break
    rule = _RULE_LINE.search(text, tail_start)
    if rule is None or len(text[:rule.start()].split(None, _FOOTER_MIN_WORDS_ABOVE)) \
            < _FOOTER_MIN_WORDS_ABOVE:
        return None
    return rule.start()


def _scan(pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """``pattern``'s matches in ``text``, found in its lower-case copy when lowering keeps
    every offset: Python's ``re`` is many times slower with IGNORECASE on large texts."""
    lowered = _lowered(text)
    if not any(word in lowered for word in _KEYWORDS[pattern]):
        return iter(())
    if len(lowered) == len(text):
        return _CASE_SENSITIVE[pattern].finditer(lowered)
    return pattern.finditer(text)


@functools.lru_cache(maxsize=4)
def _lowered(text: str) -> str:
    """One lower-case copy per text for the several scans of :func:`split_quotes`."""
    return text.lower()


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


def split_quotes(text: str, *, forward: bool = False) -> tuple[str, str]:
    """(new text, set-aside text): quoted lines, attributions, signature and list footer.

    Set aside: lines quoted with ``>``; attribution lines (``On … wrote:``); the header
    block of a forward separator (the forwarded text itself is kept: a forward is a
    near-duplicate); everything after an Outlook ``Original Message`` line (a top-posted
    reply) — unless the message is a forward (``forward``, from the Subject) or an Outlook
    Express inline reply, where only the separator and its header block go; everything
    after a ``-- `` signature line; a list footer under a rule line near the end.
    Regular expressions over the whole text do the work (no Python loop per line).
    """
    aside: list[str] = []
    original = next(_scan(_OUTLOOK_ORIGINAL, text), None)
    if original is not None:
        block_end = _header_block_end(text, original.end() + 1)
        if forward or _is_inline_reply(text, original, block_end):
            aside.append(text[original.start():block_end])
            text = text[:original.start()] + text[block_end:]
        else:
            aside.append(text[original.start():])
            text = text[:original.start()]
    for separator in reversed(_forward_lines(text)):
        block_end = _header_block_end(text, separator.end() + 1)
        aside.append(text[separator.start():block_end])
        text = text[:separator.start()] + text[block_end:]
    signature = _signature_start(text)
    if signature is not None:
        aside.append(text[signature:])
        text = text[:signature]
    footer = _footer_start(text)
    if footer is not None:
        aside.append(text[footer:])
        text = text[:footer]
    attributions = []
    for match in _scan(_ATTRIBUTION_END, text):
        start = text.rfind("\n", 0, match.start()) + 1
        if match.end() - start < 250 and _ATTRIBUTION.fullmatch(text, start, match.end()):
            end = match.end() + 1 if text.startswith("\n", match.end()) else match.end()
            attributions.append((start, end))
    for start, end in reversed(attributions):
        aside.insert(0, text[start:end])
        text = text[:start] + text[end:]
    quoted = _QUOTED_LINE.findall(text) if ">" in text else []
    if quoted:
        text = _QUOTED_LINE.sub("", text)
    return text, "".join(quoted) + "".join(aside)


def _filename(part: email.message.Message) -> str | None:
    try:
        return part.get_filename()
    except Exception:  # noqa: BLE001
        return None


class _Collector:
    """Walks a MIME tree once, collecting text (with alternatives chosen) and attachments."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.html_sources: list[bytes] = []
        self.attachments: list[Attachment] = []
        self.defects: list[str] = []
        self.parts = 0

    def walk(self, part: email.message.Message, depth: int = 0) -> None:
        self.parts += 1
        if self.parts > _MAX_PARTS or depth > _MAX_DEPTH:
            if "too many MIME parts" not in self.defects:
                self.defects.append("too many MIME parts or nesting too deep")
            return
        content_type = part.get_content_type()
        maintype = part.get_content_maintype()
        if part.is_multipart():
            children = part.get_payload()
            if not isinstance(children, list):
                return
            if content_type == "multipart/alternative":
                self._alternative(children, depth)
            else:
                for child in children:
                    if isinstance(child, email.message.Message):
                        self.walk(child, depth + 1)
            return
        if maintype == "message" and content_type == "message/rfc822":
            payload = part.get_payload()
            inner = payload[0] if isinstance(payload, list) and payload else None
            if isinstance(inner, email.message.Message):
                self.walk(inner, depth + 1)
            return
        self.leaf(content_type, _charset_of(part),
                  str(part.get("content-disposition", "")), _filename(part),
                  _decode_payload(part, self.defects))

    def leaf(self, content_type: str, charset: str | None, disposition: str,
             filename: str | None, data: bytes) -> None:
        """One non-multipart part: text (decoded, HTML reduced) or an attachment."""
        maintype, _, subtype = content_type.partition("/")
        is_attachment = disposition.lower().lstrip().startswith("attachment") or (
            filename is not None and maintype == "text" and subtype not in ("plain", "html"))
        if maintype == "text" and not is_attachment and subtype in (
                "plain", "html", "enriched", "richtext"):
            text = decode_text(data, charset, self.defects)
            if subtype == "html":
                self.html_sources.append(data)
                text = html_to_text(text)
            self.texts.append(text)
        elif data:
            self.attachments.append(Attachment(content_type, filename, data))

    def _alternative(self, children: list, depth: int) -> None:
        """Prefer text/plain (if it has words), else the richest other choice."""
        candidates = [c for c in children if isinstance(c, email.message.Message)]
        plain = [c for c in candidates if c.get_content_type() == "text/plain"]
        for choice in plain:
            before = len(self.texts)
            self.walk(choice, depth + 1)
            if len(self.texts) > before and self.texts[-1].strip():
                return
            del self.texts[before:]
        for choice in reversed(candidates):
            if choice.get_content_type() != "text/plain":
                self.walk(choice, depth + 1)
                return


def read_headers(head: bytes) -> list[tuple[str, str]]:
    """Header fields as (lowercased name, unfolded value), at most 1,000, values capped.

    A hand-rolled reader: no header objects are built, so a pathological 14 KB header
    costs microseconds.
    """
    found = _HEADER_FIELD.findall(_UNFOLD_TEXT.sub(" ", head.decode("latin-1")))
    return [(name.lower(), value[:_HEADER_FIELD_MAX].strip())
            for name, value in found[:_HEADERS_MAX]]


def _media_type(value: str) -> tuple[str, dict[str, str]]:
    """(lowercased type/subtype, parameters) of a Content-Type value; text/plain if bad."""
    media = value.split(";", 1)[0].strip().lower()
    if "/" not in media:
        media = "text/plain"
    params = {key.lower(): val.strip('"') for key, val in _PARAM.findall(value[:4096])}
    return media, params


def parse(raw: bytes, *, max_body_bytes: int = 4 * 1024 * 1024) -> Message:
    """Parse one message; never raises on bad input (see ``Message.defects``).

    Single-part mail (most of it) is decoded directly; only multipart mail goes through
    the standard library's parser.  Only the first ``max_body_bytes`` of the body are
    parsed, so that huge mail costs bounded time and memory; ``raw_body`` is likewise
    capped.
    """
    if not isinstance(raw, (bytes, bytearray, memoryview)):
        raise TypeError("parse() takes bytes")
    raw = bytes(raw)
    defects: list[str] = []
    chisto_body = raw_body(raw)[:max_body_bytes]
    data = _MBOX_FROM.sub(b"", raw, count=1)
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n")
    if data.startswith(b"\n"):
        head, body = b"", data[1:]
    else:
        head_end = data.find(b"\n\n")
        if head_end >= 0:
            head, body = data[:head_end + 1], data[head_end + 2:]
        elif _HEADER_LINE.match(data):
            head, body = data, b""
            defects.append("no header/body separator: all header, no body")
        else:
            head, body = b"", data
            defects.append("no header/body separator: read as body")
    if len(body) > max_body_bytes:
        body = body[:max_body_bytes]
        defects.append(f"body truncated to {max_body_bytes} bytes for fingerprinting")
    fields = read_headers(head)
    headers: dict[str, str] = {}
    for name, value in fields:
        headers.setdefault(name, value)
    media, params = _media_type(headers.get("content-type", "text/plain"))
    collector = _Collector()
    if not media.startswith("multipart/") and media != "message/rfc822":
        disposition = headers.get("content-disposition", "")
        filename = (_media_type("x/x;" + disposition)[1].get("filename")
                    or params.get("name"))
        payload = transfer_decode(body, headers.get("content-transfer-encoding", ""),
                                  collector.defects)
        collector.leaf(media, _known_charset(params.get("charset")), disposition, filename,
                       payload)
    else:
        _walk_mime(_EMPTY_PARAMS.sub(b";", head) + b"\n" + body, collector, defects)
    defects.extend(collector.defects)
    full_text = "\n".join(collector.texts)
    subject = headers.get("subject", "")
    text, quoted = split_quotes(full_text, forward=bool(_FORWARD_SUBJECT.match(subject)))
    if not _WORD.search(text) and _WORD.search(full_text) and \
            next(_scan(_ATTRIBUTION_END, full_text), None) is None:
        # All of it looked quoted (a forward quoted with ">", HTML inside <blockquote>),
        # yet nobody replied to anything: the whole text is the message.
        text, quoted = full_text, ""
    if not _WORD.search(text) and collector.html_sources and not collector.attachments:
        # Text-less HTML (image-only spam): let its markup make the digest and chunks.
        collector.attachments.append(Attachment("text/html", None,
                                                b"".join(collector.html_sources)))
    return Message(
        message_id=headers.get("message-id") or None,
        date=headers.get("date") or None,
        raw_body=chisto_body,
        text=text,
        quoted=quoted,
        attachments=tuple(collector.attachments),
        defects=tuple(defects),
        headers=tuple(fields),
    )


def _walk_mime(data: bytes, collector: _Collector, defects: list[str]) -> None:
    """Multipart mail through the standard library parser (compat32: no header objects)."""
    try:
        msg = email.message_from_bytes(data)
        collector.walk(msg)
        defects.extend(type(d).__name__ for d in (msg.defects or [])[:5])
    except Exception as error:  # noqa: BLE001 - fall back to the undecoded body as text
        defects.append(f"MIME parsing failed ({type(error).__name__}); using the raw body")
        body = data.split(b"\n\n", 1)[-1]
        collector.texts = [decode_text(body, None, defects)]
