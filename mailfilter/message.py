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
import quopri
import re
from dataclasses import dataclass, field

import xxhash

from mailfilter.boilerplate import split_boilerplate
from mailfilter.features import CalendarSummary
from mailfilter.invitations import CALENDAR_TYPES, calendar_summary, is_calendar
from mailfilter.quotes import has_attribution, split_reply, split_signoff

# A body separator exactly as chisto finds it: the first two consecutive LF bytes.
_CHISTO_SEPARATOR = b"\n\n"
_MBOX_FROM = re.compile(rb"\AFrom [^\n]*\n")
_WORD = re.compile(r"[^\W_]")
_REPLY_SUBJECT = re.compile(r"\s*(?:\[[^\]]*\]\s*)?(?:re|aw|sv|vs|antw|rif|r)\s*(?:\[\d+\])?\s*:",
                            re.IGNORECASE)
_FORWARD_SUBJECT = re.compile(r"\s*(?:\[[^\]]*\]\s*)?(?:fwd?|fw|wg|tr)\s*:", re.IGNORECASE)
_NOT_BASE64 = re.compile(rb"[^A-Za-z0-9+/]")
_HEADER_LINE = re.compile(rb"^([!-9;-~]+)[ \t]*:[ \t]*(.*)$", re.MULTILINE)
_PARAM = re.compile(r";\s*([!#-'*+.0-9A-Z^-~-]+)\s*=\s*(\"[^\"]*\"|[^;\s]*)")
_HEADERS_MAX = 1000
_UNFOLD_TEXT = re.compile(r"\n[ \t]+")
_HEADER_FIELD = re.compile(r"^([!-9;-~]+)[ \t]*:[ \t]*(.*)$", re.MULTILINE)
_HEADER_FIELD_MAX = 8192
_HTML_DROP = "script, style, head, title, noscript, template"
_BREAK_THEN_NEWLINE = re.compile(
    r"(<br\b[^>]*>|</(?:p|div|li|tr|h[1-6]|blockquote|table)\s*>)[ \t]*\r?\n", re.IGNORECASE)
_MESSAGE_IDS = re.compile(r"<[^<>\s]{1,250}>")
_ADDRESS = re.compile(r"<([^<>\s]+@[^<>\s]+)>|([^\s<>\"(),;:]+@[^\s<>\"(),;:]+)")
_ENCODED_WORD = "=?"
_LINK = re.compile(r"\b(?:[a-z][a-z0-9+.-]{1,15}://|www\.)([^\s/?#<>\"')\]]*)"
                   r"[^\s<>\"')\]]*", re.IGNORECASE)
_VIA = re.compile(r"\s+via\s+\S.*$", re.IGNORECASE)
_MAX_PARTS = 200
_MAX_DEPTH = 20


@dataclass(frozen=True, slots=True)
class Attachment:
    """A non-text part, decoded from its transfer encoding."""

    content_type: str
    filename: str | None
    data: bytes
    # An image shown inside the HTML (Content-ID, or inline disposition): a logo or a
    # signature picture, part of the layout rather than a file sent.
    inline: bool = False


@dataclass(frozen=True, slots=True)
class Message:
    """What the fingerprints see of a mail; header text is kept only where it is needed."""

    message_id: str | None
    date: str | None
    # The bytes after the first LF LF, exactly what chisto counts (empty if there is none).
    raw_body: bytes
    # New text of the body: decoded, HTML reduced to text, quotes, signature, footer,
    # disclaimers and banners set aside.
    text: str
    # What was set aside of it: the quoted earlier message(s) alone...
    quoted: str = ""
    # ... and disclaimers and banners (mailfilter/boilerplate.py).
    boilerplate: str = ""
    attachments: tuple[Attachment, ...] = ()
    defects: tuple[str, ...] = field(default=())
    # Every header field as (lowercased name, unfolded value), bounded, for policy rules.
    headers: tuple[tuple[str, str], ...] = ()
    # When only a prefix of the body was fingerprinted: a digest of the whole body (see
    # WholeBodyDigest), so that two huge messages that differ past the cap are not exact
    # duplicates.  None when the whole body was read.
    whole_body: bytes | None = None
    # The From address (lower case, no brackets), the Subject (encoded words decoded),
    # and the ids of In-Reply-To and References (the thread it answers), for the rules
    # that tell a message sent again from a new one that looks alike.
    sender: str | None = None
    sender_name: str = ""
    subject: str = ""
    thread: tuple[str, ...] = ()
    # Characters of the whole decoded text, quotes and boilerplate included.
    text_length: int = 0
    # The events of its text/calendar parts (mailfilter/invitations.py), if any.
    calendar: CalendarSummary | None = None
    # Sent by a program, not a person (Auto-Submitted, a cron job, a notifier's address):
    # its reports and notices repeat their words and change their data.
    automated: bool = False
    # The display names and addresses of the writers of the messages it forwards (their
    # header blocks' From:), those with text of their own.
    forwarded_from: tuple[str, ...] = ()

    @property
    def is_forward(self) -> bool:
        return bool(_FORWARD_SUBJECT.match(self.subject))

    @property
    def is_reply(self) -> bool:
        """It answers a message: it names one (In-Reply-To/References) or says Re:."""
        return bool(self.thread) or bool(_REPLY_SUBJECT.match(self.subject))


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
    from selectolax.lexbor import LexborHTMLParser  # HTML parts only
    try:
        # A source line break right after <br> or a closing block tag would double the
        # break inserted for the tag: every line of <br>-separated HTML would be followed
        # by a blank one, and line-based rules (quotes, reply headers) would read it
        # otherwise than the same text sent as plain text.
        html = _BREAK_THEN_NEWLINE.sub(r"\1", html)
        tree = LexborHTMLParser(html)
        for node in tree.css(_HTML_DROP):
            node.decompose()
        for quote in tree.css("blockquote"):
            inner = quote.text(separator="\n")
            quote.replace_with("\n" + "\n".join("> " + line for line in inner.splitlines())
                               + "\n")
        for rule in tree.css("hr"):        # Outlook's HTML reply separator, among others
            rule.replace_with("\n" + "_" * 32 + "\n")
        for br in tree.css("br, div, tr, li, h1, h2, h3, h4, h5, h6"):
            br.insert_after("\n")
        for paragraph in tree.css("p"):
            paragraph.insert_after("\n\n")
        root = tree.body or tree.root
        return root.text(separator="") if root is not None else ""
    except Exception:  # noqa: BLE001 - a broken document is text-less, not fatal
        return re.sub(r"<[^>]*>", " ", html)


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
_MAX_CONTINUATIONS = 64


def _parameter(params: dict[str, str], name: str) -> str | None:
    """A Content-Type/-Disposition parameter, plain or RFC 2231 (``name*=``)."""
    value = params.get(name)
    if value is not None:
        return value
    extended = params.get(name + "*")
    if extended is not None:
        return _rfc2231(extended)
    # A continued value (RFC 2231 section 3): name*0*, name*1, … in order, each piece
    # percent-encoded when it ends in "*", in the charset the first piece names.
    pieces = []
    for number in range(_MAX_CONTINUATIONS):
        encoded = params.get(f"{name}*{number}*")
        piece = encoded if encoded is not None else params.get(f"{name}*{number}")
        if piece is None:
            break
        pieces.append((piece, encoded is not None))
    if not pieces:
        return None
    from urllib.parse import unquote_to_bytes  # rare: not on every message's path
    first, first_encoded = pieces[0]
    charset = "utf-8"
    if first_encoded:
        prefix = _RFC2231_VALUE.match(first)
        if prefix is not None:
            charset = prefix.group(0).split("'")[0] or "utf-8"
    raw = b"".join(
        unquote_to_bytes(_RFC2231_VALUE.sub("", piece) if number == 0 and encoded else piece)
        if encoded else piece.encode("latin-1", "replace")
        for number, (piece, encoded) in enumerate(pieces))
    try:
        return raw.decode(charset, "replace")
    except LookupError:
        return raw.decode("utf-8", "replace")


def _rfc2231(value: str) -> str:
    """One RFC 2231 value (``charset'language'percent-encoded``)."""
    from urllib.parse import unquote  # rare: not on every message's path
    prefix = _RFC2231_VALUE.match(value)
    charset = (prefix.group(0).split("'")[0] if prefix else "") or "utf-8"
    try:
        return unquote(_RFC2231_VALUE.sub("", value), encoding=charset, errors="replace")
    except LookupError:
        return unquote(_RFC2231_VALUE.sub("", value), errors="replace")


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
        inline = media.startswith("image/") and (
            "content-id" in part.fields or disposition.lower().lstrip().startswith("inline"))
        self.leaf(media, _known_charset(params.get("charset")), disposition, filename, data,
                  inline)

    def leaf(self, content_type: str, charset: str | None, disposition: str,
             filename: str | None, data: bytes, inline: bool = False) -> None:
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
            self.attachments.append(Attachment(content_type, filename, data, inline))

    def _alternative(self, children: list[_Part], depth: int, default: str) -> None:
        """Prefer text/plain (if it has words), else the richest other choice.  An
        iCalendar alternative (how Outlook and Google send invitations) is kept as well,
        as an attachment: it says which event the text is about."""
        types = [child.media_type(default)[0] for child in children]
        for child, media in zip(children, types, strict=True):
            if media in CALENDAR_TYPES:
                self.walk(child, depth + 1, default)
        children = [c for c, media in zip(children, types, strict=True)
                    if media not in CALENDAR_TYPES]
        types = [media for media in types if media not in CALENDAR_TYPES]
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
    subject = decode_header_text(headers.get("subject", ""))
    sender_field = decode_header_text(headers.get("from", ""))
    sender_name = _display_name(sender_field)
    if _VIA.search(sender_name):
        # A list that rewrote From for DMARC ("Ann via list <list@…>"): the writer is in
        # X-Original-From (Google Groups, Mailman 3) or Reply-To when the list kept it.
        original = headers.get("x-original-from") or headers.get("x-original-sender") \
            or headers.get("reply-to")
        sender_name = _VIA.sub("", sender_name)
        if original:
            sender_field = decode_header_text(original)
            sender_name = _display_name(sender_field) or sender_name
        else:
            sender_field = ""
    # Whose sign-off to look for: the display name, else the address's local part
    # ("ann.lee@…" signs "Ann"), so that a forward naming "Ann Lee" and her own message
    # lose the same closing line.
    signer = sender_name
    local = (_address(sender_field) or "").partition("@")[0]
    if not signer and local.lower() not in _PROGRAMS and re.fullmatch(
            r"[a-z]{2,}(?:[._-][a-z]{2,}){0,2}", local, re.IGNORECASE):
        signer = re.sub(r"[._-]", " ", local)
    reply = split_reply(full_text, forward=bool(_FORWARD_SUBJECT.match(subject)),
                        writer=signer)
    quoted = reply.quoted
    if not any(_WORD.search(part) for part in reply.segments) and _WORD.search(full_text) \
            and not has_attribution(full_text):
        # All of it looked set aside (a forward quoted with ">", HTML inside <blockquote>),
        # yet nobody replied to anything: the whole text is the message.
        parts, writers, quoted = [full_text], [signer], ""
        forwarded_from: tuple[str, ...] = ()
    else:
        parts, writers = list(reply.segments), list(reply.writers)
        # Who wrote each message it forwards (with text of its own): name and address.
        forwarded_from = tuple(
            who for value, part in zip(reply.from_values[1:], reply.segments[1:],
                                       strict=True) if value and _WORD.search(part)
            for who in (_display_name(value), _address(value)) if who)
    # Each part (the writer's own text, each message it forwards) loses its disclaimers,
    # banners and sign-off block on its own: a forwarder's name line must not take the
    # forwarded message along.
    boilerplate_parts = []
    for number, (part, writer) in enumerate(zip(parts, writers, strict=True)):
        part, boilerplate = split_boilerplate(part)
        parts[number] = split_signoff(part, writer)[0]
        boilerplate_parts.append(boilerplate)
    text = "\n\n".join(part for part in parts if part.strip()) if len(parts) > 1 \
        else parts[0]
    if "://" in text or "www." in text:
        # A link counts by the site it leads to: its path and query carry tracking tokens,
        # per-recipient unsubscribe codes and reset tokens, which differ between copies of
        # one message and say nothing about it.
        text = _LINK.sub(_link_host, text)
    boilerplate = "\n\n".join(part for part in boilerplate_parts if part)
    calendar_parts = [a.data for a in collector.attachments
                      if is_calendar(a.content_type, a.filename)]
    calendar = calendar_summary(calendar_parts, defects) if calendar_parts else None
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
        boilerplate=boilerplate,
        sender=_address(sender_field),
        sender_name=sender_name,
        subject=subject,
        thread=_thread(headers),
        text_length=len(full_text),
        calendar=calendar,
        automated=_automated(headers, _address(sender_field)),
        forwarded_from=forwarded_from,
    )


_PROGRAMS = frozenset((
    "root", "cron", "daemon", "mailer-daemon", "nagios", "icinga", "zabbix", "alertmanager",
    "grafana", "prometheus", "monit", "munin", "jenkins", "gitlab", "buildkite", "circleci",
    "travis", "logwatch", "apticron", "noreply", "no-reply", "donotreply", "do-not-reply",
    "notifications", "jira"))


def _automated(headers: dict[str, str], sender: str | None) -> bool:
    """Mail a program sent: Auto-Submitted (RFC 3834) other than "no", cron's X-Cron-Env,
    or a From address whose local part names a program (root, cron, noreply, jenkins…) —
    but not newsletters and list mail (List-Unsubscribe, List-Id): those are written by
    people, and their copies differ by design (personal greetings and digests)."""
    if "list-unsubscribe" in headers or "list-id" in headers:
        return False
    submitted = headers.get("auto-submitted", "").strip().lower()
    if submitted and submitted != "no":
        return True
    if "x-cron-env" in headers:
        return True
    local = (sender or "").partition("@")[0].lower()
    return local in _PROGRAMS or local.startswith(("noreply", "no-reply", "donotreply"))


def _thread(headers: dict[str, str]) -> tuple[str, ...]:
    """Ids of the messages this one answers: the thread's root (first of References),
    then the closest ones (In-Reply-To and the end of References), at most six."""
    ids = _MESSAGE_IDS.findall(headers.get("references", ""))
    ids += _MESSAGE_IDS.findall(headers.get("in-reply-to", ""))
    if len(ids) > 6:
        ids = ids[:1] + ids[-5:]
    return tuple(dict.fromkeys(ids))


def decode_header_text(value: str) -> str:
    """A header value with RFC 2047 encoded words decoded (best effort, never raises); a
    word in an unknown charset is read as Latin-1, as raw 8-bit header bytes are."""
    if _ENCODED_WORD not in value:
        return value
    try:
        from email.header import decode_header  # only for encoded values

        pieces = []
        for data, charset in decode_header(value):
            if isinstance(data, str):
                pieces.append(data)
                continue
            try:
                pieces.append(data.decode(_known_charset(charset) or "latin-1"))
            except UnicodeDecodeError:
                pieces.append(data.decode("latin-1"))
        return "".join(pieces)
    except Exception:  # noqa: BLE001 - an undecodable word stays as it came
        return value


def _link_host(match: re.Match[str]) -> str:
    """The site a link leads to: its registered domain, lower case (no user, port, path or
    query, no tracking subdomain like ``u9414681.ct.sendgrid.net``)."""
    host = match.group(1).rpartition("@")[2].partition(":")[0].lower()
    return site_of(host)


# Second-level labels under which registries sell names (example.co.uk, example.com.au).
_SECOND_LEVEL = frozenset(("co", "com", "org", "net", "ac", "gov", "edu", "ne", "or", "go"))


def site_of(host: str) -> str:
    """The domain an organisation registered (``mail.example.co.uk`` → ``example.co.uk``),
    without a list of public suffixes: the last two labels, or three under a common
    second-level label of a country code."""
    labels = host.strip(".").split(".")
    if len(labels) >= 3 and len(labels[-1]) == 2 and labels[-2] in _SECOND_LEVEL:
        return ".".join(labels[-3:])
    return ".".join(labels[-2:])


def _display_name(value: str) -> str:
    """The display name of a From value ("Ann Lee" of "Ann Lee <ann@x>"), or ""."""
    name = value.split("<", 1)[0] if "<" in value else ""
    if not name and "(" in value:       # old style: ann@x (Ann Lee)
        name = value[value.find("(") + 1:value.rfind(")")]
    return name.strip().strip('"').strip()


def _address(value: str) -> str | None:
    """The first mail address of a From value, lower case, without brackets."""
    found = _ADDRESS.search(value)
    if found is None:
        return value.strip().lower() or None
    return (found.group(1) or found.group(2)).lower()
