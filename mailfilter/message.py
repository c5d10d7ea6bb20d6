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
import quopri
import re
from dataclasses import dataclass, field

from selectolax.lexbor import LexborHTMLParser

# A body separator exactly as chisto finds it: the first two consecutive LF bytes.
_CHISTO_SEPARATOR = b"\n\n"
_MBOX_FROM = re.compile(rb"\AFrom [^\n]*\n")
# Quoted lines; and "On Mon, 1 Jan 2024, Ann <ann@x> wrote:" and its cousins, found by the
# verb at the end of a line first (a literal scan), then checked on that one line.
_QUOTED_LINE = re.compile(r"^[ \t]*(?:>|\|>)[^\n]*(?:\n|\Z)", re.MULTILINE)
_ATTRIBUTION_END = re.compile(
    r"\b(?:wrote|writes|schrieb|a écrit|escribió)[ \t]*:[ \t]*$", re.MULTILINE | re.IGNORECASE)
_ATTRIBUTION = re.compile(
    r"[ \t]*(?:(?:on|am|le|el)\b.{0,200}?\b(?:wrote|writes|schrieb|a écrit|escribió)"
    r"|.{0,120}?\b(?:wrote|writes))[ \t]*:[ \t]*", re.IGNORECASE)
# Where the new text ends: a signature or Outlook's "Original Message" line (group 1), or a
# line of underscores that starts a short closing block (a Mailman footer).
_CUT_LINE = re.compile(
    r"^(-- ?|-{2,}[ \t]*original message[ \t]*-{2,})[ \t]*$|^_{20,}[ \t]*$",
    re.MULTILINE | re.IGNORECASE)
_FOOTER_MAX_LINES = 12
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
    payload = part.get_payload()
    if isinstance(payload, list):
        return b""
    data = payload.encode("latin-1", "replace") if isinstance(payload, str) else payload or b""
    return transfer_decode(data, str(part.get("content-transfer-encoding", "")), defects)


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


def split_quotes(text: str) -> tuple[str, str]:
    """(new text, set-aside text): quoted lines, attributions, signature and list footer.

    Everything after a ``-- `` signature line, after an Outlook ``Original Message`` line,
    or in a short closing block under a line of underscores (Mailman's footer) is set aside.
    Regular expressions over the whole text do the work (no Python loop per line).
    """
    aside_tail = ""
    for cut in _CUT_LINE.finditer(text):
        if cut.group(1) is not None or text.count("\n", cut.start()) <= _FOOTER_MAX_LINES:
            text, aside_tail = text[:cut.start()], text[cut.start():]
            break
    spans = [match.span() for match in _QUOTED_LINE.finditer(text)]
    for match in _ATTRIBUTION_END.finditer(text):
        start = text.rfind("\n", 0, match.start()) + 1
        if match.end() - start < 250 and _ATTRIBUTION.fullmatch(text, start, match.end()):
            end = match.end() + 1 if text.startswith("\n", match.end()) else match.end()
            spans.append((start, end))
    if not spans:
        return text, aside_tail
    spans.sort()
    kept, aside, position = [], [], 0
    for start, end in spans:
        if start < position:          # an attribution that is also a quoted line
            continue
        kept.append(text[position:start])
        aside.append(text[start:end])
        position = end
    kept.append(text[position:])
    return "".join(kept), "".join(aside) + aside_tail


def _filename(part: email.message.Message) -> str | None:
    try:
        return part.get_filename()
    except Exception:  # noqa: BLE001
        return None


class _Collector:
    """Walks a MIME tree once, collecting text (with alternatives chosen) and attachments."""

    def __init__(self) -> None:
        self.texts: list[str] = []
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
            self.texts.append(html_to_text(text) if subtype == "html" else text)
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
    text, quoted = split_quotes("\n".join(collector.texts))
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
