"""Raw bytes → :class:`Message`: the parts of a mail that fingerprints are made of.

Headers and MIME structure are read by hand (header fields as text, body parts split at
their boundary lines): no header objects are built (``email.policy.default`` spends seconds
on one corpus message with a 14 KB Content-Type header), and a multipart message costs a
fraction of the standard library parser's time.  Nothing here raises on bad input:
broken MIME, unknown or lying charsets, NUL bytes, a missing header/body separator all give
a :class:`Message` whose ``defects`` say what was odd, so that a front end can log it and
still give a verdict.
"""

from __future__ import annotations

import binascii
import codecs
import functools
import quopri
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import unquote

import xxhash
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
    # When only a prefix of the body was fingerprinted: a digest of the whole body (see
    # WholeBodyDigest), so that two huge messages that differ past the cap are not exact
    # duplicates.  None when the whole body was read.
    whole_body: bytes | None = None


class WholeBodyDigest:
    """A digest of a whole body fed in pieces (a milter gets it in chunks).

    xxh3-128 of the bytes with every CR removed (so CRLF and LF copies agree, however the
    body is chunked), then of the length.  Only bodies longer than the fingerprinting cap
    need one.
    """

    def __init__(self) -> None:
        self._hasher = xxhash.xxh3_128()
        self._length = 0

    def update(self, data: bytes) -> None:
        if b"\r" in data:
            data = data.translate(None, b"\r")
        self._hasher.update(data)
        self._length += len(data)

    def digest(self) -> bytes:
        hasher = self._hasher.copy()
        hasher.update(self._length.to_bytes(8, "little"))
        return hasher.digest()


def whole_body_digest(body: bytes) -> bytes:
    """:class:`WholeBodyDigest` of one body held in memory."""
    digest = WholeBodyDigest()
    digest.update(body)
    return digest.digest()


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


def _known_charset(charset: str | None) -> str | None:
    if not charset:
        return None
    try:
        return codecs.lookup(charset.strip().strip('"').strip("'")).name
    except (LookupError, ValueError):
        return None


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


@dataclass(frozen=True, slots=True)
class _Part:
    """One MIME entity: its header fields (first value of each name) and its raw body."""

    fields: dict[str, str]
    body: bytes

    @classmethod
    def split(cls, data: bytes) -> _Part:
        head, body = _split_entity(data)
        return cls(_first_values(read_headers(head)), body)

    def media_type(self, default: str = "text/plain") -> tuple[str, dict[str, str]]:
        value = self.fields.get("content-type")
        return _media_type(value) if value else (default, {})


def _split_entity(data: bytes, defects: list[str] | None = None) -> tuple[bytes, bytes]:
    """(header block, body) of a message or body part (LF line ends), as mail readers
    split it: at the first empty line; without one, all header if it starts like one."""
    if data.startswith(b"\n"):
        return b"", data[1:]
    head_end = data.find(b"\n\n")
    if head_end >= 0:
        return data[:head_end + 1], data[head_end + 2:]
    if _HEADER_LINE.match(data):
        if defects is not None:
            defects.append("no header/body separator: all header, no body")
        return data, b""
    if defects is not None:
        defects.append("no header/body separator: read as body")
    return b"", data


def _first_values(fields: list[tuple[str, str]]) -> dict[str, str]:
    first: dict[str, str] = {}
    for name, value in fields:
        first.setdefault(name, value)
    return first


def _split_multipart(body: bytes, boundary: str, defects: list[str]) -> list[bytes] | None:
    """The body parts between ``--boundary`` delimiter lines (RFC 2046), or None if the
    boundary never starts a line.  Preamble and epilogue are dropped; a missing closing
    delimiter ends the last part at the end of the body."""
    marker = b"--" + boundary.encode("utf-8", "replace")
    parts: list[bytes] = []
    part_start: int | None = None
    search_from = 0
    while True:
        if search_from == 0 and body.startswith(marker):
            line_start = 0
        else:
            found = body.find(b"\n" + marker, max(0, search_from - 1))
            if found < 0:
                break
            line_start = found + 1
        line_end = body.find(b"\n", line_start)
        line_end = len(body) if line_end < 0 else line_end
        rest = body[line_start + len(marker):line_end]
        closing = rest.startswith(b"--")
        search_from = line_end + 1
        if rest[2 if closing else 0:].strip(b" \t\r"):
            continue                      # a longer boundary that starts with this one
        if part_start is not None:
            parts.append(body[part_start:max(part_start, line_start - 1)])
        if closing:
            return parts
        part_start = line_end + 1
        if search_from > len(body):
            break
    if part_start is None:
        return None
    parts.append(body[part_start:])
    defects.append("multipart without its closing boundary")
    return parts


_RFC2231_VALUE = re.compile(r"^[^']*'[^']*'")


def _parameter(params: dict[str, str], name: str) -> str | None:
    """A Content-Type/-Disposition parameter, plain or RFC 2231 (``name*=``)."""
    value = params.get(name)
    if value is not None:
        return value
    extended = params.get(name + "*") or params.get(name + "*0*") or params.get(name + "*0")
    if extended is None:
        return None
    return unquote(_RFC2231_VALUE.sub("", extended), errors="replace")


class _Collector:
    """Walks a MIME tree once, collecting text (with alternatives chosen) and attachments."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.html_sources: list[bytes] = []
        self.attachments: list[Attachment] = []
        self.defects: list[str] = []
        self.parts = 0

    def walk(self, part: _Part, depth: int = 0, default: str = "text/plain") -> None:
        self.parts += 1
        if self.parts > _MAX_PARTS or depth > _MAX_DEPTH:
            if "too many MIME parts or nesting too deep" not in self.defects:
                self.defects.append("too many MIME parts or nesting too deep")
            return
        media, params = part.media_type(default)
        if media.startswith("multipart/"):
            boundary = params.get("boundary")
            bodies = _split_multipart(part.body, boundary, self.defects) if boundary else None
            if bodies is None:
                self.defects.append(f"{media} without a usable boundary: read as text")
                media, params = "text/plain", {}
            else:
                child_default = "message/rfc822" if media == "multipart/digest" \
                    else "text/plain"
                children = [_Part.split(body) for body in bodies]
                if media == "multipart/alternative":
                    self._alternative(children, depth, child_default)
                else:
                    for child in children:
                        self.walk(child, depth + 1, child_default)
                return
        if media == "message/rfc822":
            inner = transfer_decode(part.body, part.fields.get("content-transfer-encoding", ""),
                                    self.defects)
            self.walk(_Part.split(inner), depth + 1)
            return
        disposition = part.fields.get("content-disposition", "")
        filename = (_parameter(_media_type("x/x;" + disposition)[1], "filename")
                    or _parameter(params, "name"))
        data = transfer_decode(part.body, part.fields.get("content-transfer-encoding", ""),
                               self.defects)
        self.leaf(media, _known_charset(params.get("charset")), disposition, filename, data)

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

    def _alternative(self, children: list[_Part], depth: int, default: str) -> None:
        """Prefer text/plain (if it has words), else the richest other choice."""
        types = [child.media_type(default)[0] for child in children]
        for child, media in zip(children, types, strict=True):
            if media != "text/plain":
                continue
            before = len(self.texts)
            self.walk(child, depth + 1, default)
            if len(self.texts) > before and self.texts[-1].strip():
                return
            del self.texts[before:]
        for child, media in zip(reversed(children), reversed(types), strict=True):
            if media != "text/plain":
                self.walk(child, depth + 1, default)
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


def parse(raw: bytes, *, max_body_bytes: int = 4 * 1024 * 1024,
          whole_body: bytes | None = None) -> Message:
    """Parse one message; never raises on bad input (see ``Message.defects``).

    MIME is walked here, without the standard library's ``email`` package (which took
    about 1 ms a multipart message, most of the cost of parsing one).  Only the first
    ``max_body_bytes`` of the body are parsed, so that huge mail costs bounded time and
    memory; ``raw_body`` is likewise capped.  The whole digest of a longer body goes into
    ``Message.whole_body``; a caller that itself kept only a prefix of the body (the
    milter) passes the :class:`WholeBodyDigest` of all it received as ``whole_body``.
    """
    if not isinstance(raw, (bytes, bytearray, memoryview)):
        raise TypeError("parse() takes bytes")
    raw = bytes(raw)
    defects: list[str] = []
    chisto_body = raw_body(raw)[:max_body_bytes]
    data = _MBOX_FROM.sub(b"", raw, count=1)
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n")
    head, body = _split_entity(data, defects)
    fields = read_headers(head)
    headers = _first_values(fields)
    if len(body) > max_body_bytes:
        if whole_body is None:
            whole_body = whole_body_digest(body)
        body = body[:max_body_bytes]
        defects.append(f"body truncated to {max_body_bytes} bytes for fingerprinting")
    collector = _Collector()
    collector.walk(_Part(headers, body))
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
        whole_body=whole_body,
    )
