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

import xxhash

from mailfilter.boilerplate import split_boilerplate
from mailfilter.campaign import is_mass_mail, sending, without_campaign_tokens
from mailfilter.features import CalendarSummary, key64
from mailfilter.invitations import CALENDAR_TYPES, calendar_summary, is_calendar
from mailfilter.normalise import (
    HEADER_LINE,
    LINK,
    RESEND_CUES,
    address_of,
    display_name,
    first_values,
    gateway_link_is_whole,
    is_follow_up_note,
    is_forward_subject,
    is_reply_subject,
    is_resend_note,
    link_site,
    opens_with_resend_note,
    read_headers,
    site_of,
    thread_ids,
)
from mailfilter.quotes import has_attribution, split_reply, split_signoff, unquoted
from mailfilter.text import LineCursor, Pattern, Prepared, has_word, register
from mailfilter.values import Value, fill, init

__all__ = ["Attachment", "Message", "WholeBodyDigest", "decode_header_text", "decode_text",
           "first_look", "html_to_text", "parse", "raw_body", "read_headers", "site_of",
           "transfer_decode", "whole_body_digest"]

# A body separator exactly as chisto finds it: the first two consecutive LF bytes.
_CHISTO_SEPARATOR = b"\n\n"
_MBOX_FROM = Pattern(rb"\AFrom [^\n]*\n")
# Every byte that is not of the base64 alphabet (padding too: it is put back by count),
# deleted in one C pass (a substitution kept an object for each of a crafted body's
# millions of spaces, 400 MB at 4 MiB).
_NOT_BASE64 = bytes(sorted(set(range(256)) - set(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")))
_PARAM = Pattern(r";\s*([!#-'*+.0-9A-Z^-~-]+)\s*=\s*(\"[^\"]*\"|[^;\s]*)")
_HTML_DROP = "script, style, head, title, noscript, template"
_HTML_BREAKS = "hr, br, div, tr, li, h1, h2, h3, h4, h5, h6, p"
# "<br …>" or a closing block tag, then a line break in the source.  Attributes run to the
# next ">" without crossing a "<": an unclosed "<br" then scans to the next tag, not to
# the end of the text (which made this one call quadratic in the number of "<br").
_BREAK_THEN_NEWLINE = Pattern(
    r"(<br\b[^<>]*>|</(?:p|div|li|tr|h[1-6]|blockquote|table)\s*>)[ \t]*\r?\n", re.IGNORECASE)
_TAG = Pattern(r"<[^<>]*>")
# Opening and closing tags, for the nesting depth of a long HTML part: the HTML parser's
# work grows with the depth of the open elements at each tag (16,000 unclosed <div> took
# 0.4 s, 160,000 three minutes).  Elements that never nest or that the parser closes by
# itself are not counted.
_TAG_NAME = Pattern(r"<(/?)([a-zA-Z][a-zA-Z0-9]*)")
_NOT_NESTING = frozenset((
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
    "source", "track", "wbr", "p", "li", "dt", "dd", "tr", "td", "th", "option", "tbody",
    "thead", "tfoot", "colgroup", "caption"))
HTML_DEPTH_MAX = 400          # deeper (as counted): the part's tags are stripped instead
_HTML_DEPTH_FROM = 32 * 1024  # shorter parts cannot nest deep enough to cost much
# More tags than this (counted as "<"): the part's tags are stripped instead of parsed.
# The parser keeps about 270 bytes an element: 4 MiB of "<hr>" held 457 MB, and each
# became a line of its own in the text.  The corpus's largest message has 2,306.
HTML_TAGS_MAX = 100_000
_LINK_WORDS = register(("://", "www."))
# A gateway's link, or either half of it when a line break cut the wrapper's name:
_GATEWAY_WORDS = register(("safelinks.", "protection.outlook.com", "urldefense", "/v3/__",
                           "/v2/url?u=", "mimecast", "?domain="))
_WRAPPED_LINE = 60          # shorter lines were not wrapped by their client
_GATEWAY_LINES_MAX = 40     # lines one rewritten link may span
_FIRST_WORD = Pattern(r"[^\s>]\S*")
_VIA = Pattern(r"\s+via\s+\S.*$", re.IGNORECASE)
_LOCAL_PART_NAME = Pattern(r"[a-z]{2,}(?:[._-][a-z]{2,}){0,2}", re.IGNORECASE)
_LOCAL_PART_SEPARATORS = Pattern(r"[._-]")
_MAX_PARTS = 200
_MAX_DEPTH = 20
# Labels of codecs Python has that name no mail charset: decoding with them raises for
# most input (undefined, idna), takes time quadratic in the length (punycode), or reads
# escape sequences instead of characters.  Text so labelled is read as unlabelled text.
_NOT_CHARSETS = frozenset(("punycode", "idna", "undefined", "unicode-escape",
                           "raw-unicode-escape"))
_DECODING_ERRORS = (UnicodeError, LookupError, ValueError, TypeError)


class Attachment(Value):
    """A non-text part, decoded from its transfer encoding."""

    __slots__ = ("content_type", "filename", "data", "inline")

    def __init__(self, content_type: str, filename: str | None, data: bytes,
                 inline: bool = False) -> None:
        # inline: an image shown inside the HTML (Content-ID, or inline disposition): a
        # logo or a signature picture, part of the layout rather than a file sent.
        fill(self, content_type, filename, data, inline)


class Message(Value):
    """What the fingerprints see of a mail; header text is kept only where it is needed.

    message_id, date: as in the header.  raw_body: the bytes after the first LF LF,
    exactly what chisto counts (empty if there is none).  text: the new text of the body
    — decoded, HTML reduced to text, quotes, signature, footer, disclaimers and banners
    set aside, links turned into their sites.  quoted: what was set aside of it, the
    quoted earlier message(s) alone; boilerplate: its disclaimers and banners
    (mailfilter/boilerplate.py).  defects: what was odd about the input.  headers: every
    header field as (lowercased name, unfolded value), bounded, for policy rules.
    whole_body: when only a prefix of the body was fingerprinted, a digest of the whole
    body (see WholeBodyDigest), so that two huge messages that differ past the cap are
    not exact duplicates; None when the whole body was read.  sender (the From address,
    lower case, no brackets), sender_name, subject (encoded words decoded) and thread
    (the ids of In-Reply-To and References): for the rules that tell a message sent
    again from a new one that looks alike.  text_length: characters of the whole decoded
    text, quotes and boilerplate included.  calendar: the events of its text/calendar
    parts (mailfilter/invitations.py).  automated: sent by a program, not a person
    (Auto-Submitted, a cron job, a notifier's address): its reports and notices repeat
    their words and change their data.  forwarded_from: the display names and addresses
    of the writers of the messages it forwards (their header blocks' From:), those with
    text of their own.  attached: the raw messages it carries whole (message/rfc822
    parts, .eml attachments: a forward as an attachment), each fingerprinted on its own.
    notifier: a tracker's or a program's (mailfilter/campaign.py).  codes: the codes of
    letters and digits a label names as data ("Order: G28YEAUU"), whole, lower case.
    mass_mail: sent to a list of addresses by what it shows alone (campaign.is_mass_mail):
    a number or code at its subject's end is a campaign's per-copy token.  tracker: an
    issue tracker's or code host's (campaign.Sending); event: key64 of the comment ids its
    links carry (:func:`tracker_event`), 0 for none.
    """

    __slots__ = ("message_id", "date", "raw_body", "text", "quoted", "boilerplate",
                 "attachments", "defects", "headers", "whole_body", "sender", "sender_name",
                 "subject", "thread", "text_length", "calendar", "automated",
                 "forwarded_from", "attached", "resend_note", "notifier", "codes",
                 "mass_mail", "tracker", "event", "_prepared")

    def __init__(self, message_id: str | None, date: str | None, raw_body: bytes, text: str,
                 quoted: str = "", boilerplate: str = "",
                 attachments: tuple[Attachment, ...] = (), defects: tuple[str, ...] = (),
                 headers: tuple[tuple[str, str], ...] = (), whole_body: bytes | None = None,
                 sender: str | None = None, sender_name: str = "", subject: str = "",
                 thread: tuple[str, ...] = (), text_length: int = 0,
                 calendar: CalendarSummary | None = None, automated: bool = False,
                 forwarded_from: tuple[str, ...] = (), prepared: Prepared | None = None,
                 attached: tuple[bytes, ...] = (), resend_note: bool = False,
                 notifier: bool = False, codes: tuple[str, ...] = (),
                 mass_mail: bool = False, tracker: bool = False, event: int = 0) -> None:
        fill(self, message_id, date, raw_body, text, quoted, boilerplate, attachments,
             defects, headers, whole_body, sender, sender_name, subject, thread,
             text_length, calendar, automated, forwarded_from, attached, resend_note,
             notifier, codes, mass_mail, tracker, event, prepared)

    @property
    def prepared(self) -> Prepared:
        """``text`` prepared (mailfilter/text.py): its tokens, made once for the
        fingerprint and the identifiers alike."""
        prepared = getattr(self, "_prepared", None)
        if prepared is None or prepared.text is not self.text:
            prepared = Prepared(self.text)
            object.__setattr__(self, "_prepared", prepared)
        return prepared

    @property
    def is_forward(self) -> bool:
        return is_forward_subject(self.subject)

    @property
    def is_reply(self) -> bool:
        """It answers a message: it names one (In-Reply-To/References) or says Re:."""
        return bool(self.thread) or is_reply_subject(self.subject)


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
        cleaned = data.translate(None, _NOT_BASE64)
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


def known_charset(charset: str | None) -> str | None:
    """The codec name of a charset label, or None when Python knows no text encoding of
    that name or the codec is no mail charset (see _NOT_CHARSETS); never raises."""
    if not charset:
        return None
    try:
        info = codecs.lookup(charset.strip().strip('"').strip("'"))
    except _DECODING_ERRORS:
        return None
    name = info.name.replace("_", "-")
    if name in _NOT_CHARSETS or not getattr(info, "_is_text_encoding", True):
        return None
    return info.name


def decode_lenient(data: bytes, charset: str | None) -> str:
    """``data`` in ``charset`` with undecodable bytes replaced (UTF-8 for a label that
    names no mail charset); never raises."""
    for candidate in (known_charset(charset), "utf-8"):
        if candidate:
            try:
                return data.decode(candidate, "replace")
            except _DECODING_ERRORS:
                continue
    return data.decode("latin-1")


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
    for candidate in (known_charset(charset), "utf-8", "cp1252"):
        if candidate and candidate not in tried:
            tried.append(candidate)
            try:
                return data.decode(candidate)
            except _DECODING_ERRORS:
                continue
    if defects is not None and charset:
        defects.append(f"text does not decode as its charset {charset}")
    return data.decode("latin-1")


def _nesting_depth(html: str, limit: int) -> int:
    """How deep the elements of ``html`` nest, as its tags say (elements that never nest
    or close by themselves not counted); counting stops past ``limit``.  An end tag closes
    the nearest open element of its name and those opened inside it; one whose element is
    not open closes nothing, as a parser ignores it (stray ``</table>`` tags after each of
    24,000 unclosed ``<b>`` once counted as closing them: the parser nested them all and
    took 2.3 s on 1 MiB)."""
    opened: list[str] = []
    open_count: dict[str, int] = {}
    deepest = 0
    for closing, name in _TAG_NAME.get().findall(html):
        name = name.lower()
        if name in _NOT_NESTING:
            continue
        if closing:
            if open_count.get(name):
                while True:
                    inner = opened.pop()
                    open_count[inner] -= 1
                    if inner == name:
                        break
        else:
            opened.append(name)
            open_count[name] = open_count.get(name, 0) + 1
            if len(opened) > deepest:
                deepest = len(opened)
                if deepest > limit:
                    break
    return deepest


def html_to_text(html: str) -> str:
    """Visible text of an HTML part (Lexbor), blockquotes marked as quoted lines.

    A long part whose elements nest deeper than HTML_DEPTH_MAX is not parsed (the
    parser's work would grow with the square of its length), nor one of more than
    HTML_TAGS_MAX tags (its memory would grow past a daemon's): its tags are stripped."""
    from selectolax.lexbor import LexborHTMLParser  # HTML parts only
    try:
        # A source line break right after <br> or a closing block tag would double the
        # break inserted for the tag: every line of <br>-separated HTML would be followed
        # by a blank one, and line-based rules (quotes, reply headers) would read it
        # otherwise than the same text sent as plain text.
        # (Each match replaced by its tag: split gives the text between matches and the
        # tags, joined in one C call; a "\1" template costs a Python call a match.)
        html = "".join(_BREAK_THEN_NEWLINE.get().split(html))
        if len(html) > _HTML_DEPTH_FROM and (html.count("<") > HTML_TAGS_MAX or _nesting_depth(
                html, HTML_DEPTH_MAX) > HTML_DEPTH_MAX):
            return _TAG.get().sub(" ", html)
        tree = LexborHTMLParser(html)
        for node in tree.css(_HTML_DROP):
            node.decompose()
        # The outermost blockquotes only: each holds the ones inside it, whose lines its
        # own "> " marks (a nested one, replaced after it, was no longer in the document).
        for quote in tree.css("blockquote:not(blockquote blockquote)"):
            inner = quote.text(separator="\n")
            quote.replace_with("\n" + "\n".join("> " + line for line in inner.splitlines())
                               + "\n")
        # One pass over the elements that end a line (each change is at its own node, so
        # their order does not matter): a rule line for <hr> (Outlook's HTML reply
        # separator, among others), a blank line after <p>, a line break after the rest.
        for node in tree.css(_HTML_BREAKS):
            tag = node.tag
            if tag == "hr":
                node.replace_with("\n" + "_" * 32 + "\n")
            else:
                node.insert_after("\n\n" if tag == "p" else "\n")
        root = tree.body or tree.root
        return root.text(separator="") if root is not None else ""
    except Exception:  # noqa: BLE001 - a broken document is text-less, not fatal
        return _TAG.get().sub(" ", html)


class _Part:
    """One MIME entity: its header fields (first value of each name) and its raw body."""

    __slots__ = ("fields", "body")

    def __init__(self, fields: dict[str, str], body: bytes) -> None:
        self.fields = fields
        self.body = body

    @classmethod
    def split(cls, data: bytes) -> _Part:
        head, body = _split_entity(data)
        return cls(first_values(read_headers(head)), body)

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
    if HEADER_LINE.get().match(data):
        if defects is not None:
            defects.append("no header/body separator: all header, no body")
        return data, b""
    if defects is not None:
        defects.append("no header/body separator: read as body")
    return b"", data


def _split_multipart(body: bytes, boundary: str, defects: list[str],
                     limit: int = _MAX_PARTS + 1) -> list[bytes] | None:
    """The body parts between ``--boundary`` delimiter lines (RFC 2046), the first
    ``limit`` of them, or None if the boundary never starts a line.  Preamble and epilogue
    are dropped; a missing closing delimiter ends the last part at the end of the body."""
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
        if closing or len(parts) >= limit:
            return parts
        part_start = line_end + 1
        if search_from > len(body):
            break
    if part_start is None:
        return None
    parts.append(body[part_start:])
    defects.append("multipart without its closing boundary")
    return parts


_RFC2231_VALUE = Pattern(r"^[^']*'[^']*'")
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
    prefix_pattern = _RFC2231_VALUE.get()
    first, first_encoded = pieces[0]
    charset = "utf-8"
    if first_encoded:
        prefix = prefix_pattern.match(first)
        if prefix is not None:
            charset = prefix.group(0).split("'")[0] or "utf-8"
    raw = b"".join(
        unquote_to_bytes(prefix_pattern.sub("", piece) if number == 0 and encoded else piece)
        if encoded else piece.encode("latin-1", "replace")
        for number, (piece, encoded) in enumerate(pieces))
    return decode_lenient(raw, charset)


def _rfc2231(value: str) -> str:
    """One RFC 2231 value (``charset'language'percent-encoded``)."""
    from urllib.parse import unquote  # rare: not on every message's path
    prefix_pattern = _RFC2231_VALUE.get()
    prefix = prefix_pattern.match(value)
    charset = known_charset((prefix.group(0).split("'")[0] if prefix else "") or "utf-8")
    encoded = prefix_pattern.sub("", value)
    try:
        return unquote(encoded, encoding=charset or "utf-8", errors="replace")
    except _DECODING_ERRORS:
        return unquote(encoded, errors="replace")


# Attached messages fingerprinted on their own (see Message.attached), at most.
MAX_ATTACHED_MESSAGES = 4
# Parts that hold a whole message (a forward as an attachment; RFC 6532's UTF-8 form).
_MESSAGE_TYPES = frozenset(("message/rfc822", "message/global"))
_FIRST_FIELD = re.compile(rb"[!-9;-~]{1,76}:")


def _looks_like_message(data: bytes) -> bool:
    """``data`` starts with a header field and has a blank line ending its header."""
    return bool(_FIRST_FIELD.match(data)) and (b"\n\n" in data[:65536]
                                                or b"\r\n\r\n" in data[:65536])


class _Collector:
    """Walks a MIME tree once, collecting text (with alternatives chosen) and attachments."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.html_sources: list[bytes] = []
        self.attachments: list[Attachment] = []
        self.defects: list[str] = []
        self.parts = 0
        self.attached: list[bytes] = []     # the messages it carries whole

    def walk(self, part: _Part, depth: int = 0, default: str = "text/plain") -> None:
        self.parts += 1
        if self.parts > _MAX_PARTS or depth > _MAX_DEPTH:
            if "too many MIME parts or nesting too deep" not in self.defects:
                self.defects.append("too many MIME parts or nesting too deep")
            return
        media, params = part.media_type(default)
        if media.startswith("multipart/"):
            boundary = params.get("boundary")
            # (No more parts than may still be walked, and one to mark the cap: the
            # rest is never read — 600,000 empty parts took 1.5 s to split and read.)
            bodies = _split_multipart(part.body, boundary, self.defects,
                                      _MAX_PARTS - self.parts + 1) if boundary else None
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
        if media in _MESSAGE_TYPES:
            inner = transfer_decode(part.body, part.fields.get("content-transfer-encoding", ""),
                                    self.defects)
            self._attach(inner)
            self.walk(_Part.split(inner), depth + 1)
            return
        disposition = part.fields.get("content-disposition", "")
        filename = (disposition and _parameter(_media_type("x/x;" + disposition)[1],
                                               "filename")) or _parameter(params, "name")
        data = transfer_decode(part.body, part.fields.get("content-transfer-encoding", ""),
                               self.defects)
        if filename and filename.lower().endswith(".eml") and _looks_like_message(data):
            # A forward as an attachment that a client labelled by its file name only
            # (application/octet-stream, text/plain): a message all the same.
            self._attach(data)
            self.walk(_Part.split(data), depth + 1)
            return
        inline = media.startswith("image/") and (
            "content-id" in part.fields or disposition.lower().lstrip().startswith("inline"))
        self.leaf(media, known_charset(params.get("charset")), disposition, filename, data,
                  inline)

    def _attach(self, inner: bytes) -> None:
        if len(self.attached) < MAX_ATTACHED_MESSAGES:
            self.attached.append(inner)

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


def _media_type(value: str) -> tuple[str, dict[str, str]]:
    """(lowercased type/subtype, parameters) of a Content-Type value; text/plain if bad."""
    media = value.split(";", 1)[0].strip().lower()
    if "/" not in media:
        media = "text/plain"
    params = {key.lower(): val.strip('"') for key, val in _PARAM.get().findall(value[:4096])}
    return media, params


class Preview(Value):
    """What is known of a message before its body is read: its Message-ID and the digest
    of its whole body (as :class:`WholeBodyDigest`: CRs removed), so that a message whose
    analysis cannot finish in time can still be told by what it names and by its bytes."""

    __slots__ = ("message_id", "body_digest")

    def __init__(self, message_id: str | None, body_digest: bytes) -> None:
        init(self, message_id=message_id, body_digest=body_digest)


def first_look(raw: bytes) -> Preview:
    """The :class:`Preview` of ``raw``: its header read and its body hashed, nothing more
    (time linear in the length, a few milliseconds a megabyte); never raises."""
    data = _MBOX_FROM.get().sub(b"", bytes(raw), count=1)
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n")
    head, body = _split_entity(data)
    headers = first_values(read_headers(head))
    return Preview(headers.get("message-id") or None, whole_body_digest(body))


def parse(raw: bytes, *, max_body_bytes: int = 4 * 1024 * 1024,
          whole_body: bytes | None = None) -> Message:
    """Parse one message; never raises on bad input (see ``Message.defects``).

    MIME is walked here, without the standard library's ``email`` package (which took
    about 1 ms a multipart message, most of the cost of parsing one).  Only the first
    ``max_body_bytes`` of the body are parsed, so that huge mail costs bounded time and
    memory; ``raw_body`` is likewise capped.  The whole digest of a longer body goes into
    ``Message.whole_body``; a caller that itself kept only a prefix of the body (the
    milter) passes the :class:`WholeBodyDigest` of all it received as ``whole_body``.

    The steps, in order: the header; the MIME walk (text parts decoded, HTML reduced to
    text, attachments); the text's reply and forward layouts (:func:`_own_parts`); each
    part's disclaimers and sign-off (:func:`_cleaned`); links to their sites
    (:func:`_links_to_sites`); the calendar parts.  The text is prepared once
    (mailfilter/text.py) and each step reads that preparation while the text it holds
    is unchanged.
    """
    if not isinstance(raw, (bytes, bytearray, memoryview)):
        raise TypeError("parse() takes bytes")
    raw = bytes(raw)
    defects: list[str] = []
    chisto_body = raw_body(raw)[:max_body_bytes]
    data = _MBOX_FROM.get().sub(b"", raw, count=1)
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n")
    head, body = _split_entity(data, defects)
    fields = read_headers(head)
    headers = first_values(fields)
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
    sender_field, sender_name = _sender(headers)
    signer = _signer(sender_name, sender_field)
    full = _gateway_links_rejoined(Prepared(full_text))
    parts, writers, quoted, forwarded_from = _own_parts(full, subject, signer)
    prepared, boilerplate = _cleaned(parts, writers, full)
    prepared = _links_to_sites(prepared)
    sender = address_of(sender_field)
    automated = _automated(headers, sender)
    sent = sending(headers)
    notifier, bulk = automated or sent.notifier, sent.bulk
    codes: tuple[str, ...] = ()
    if not notifier:
        # Step: a campaign's per-copy codes and tracking ids are no data (campaign.py);
        # a tracker's or a program's ids are.
        prepared, codes = without_campaign_tokens(prepared, bulk)
    text = prepared.text
    # (A tracker's or a program's comment "Any update?" over the issue it quotes is news.)
    # A follow-up ("Any update?") only over a quote alone: over a forward, what it
    # forwards is its message.
    # (The resend pattern only where the text's keyword scan, when it has one already,
    # found one of its words: the scan is not made for it.)
    cue = prepared.maybe_any(RESEND_CUES)
    resend_note = bool(quoted) and not notifier and ((cue and is_resend_note(text)) or (
        not forwarded_from and is_follow_up_note(text)))
    if resend_note:
        # Only "resending: the first one bounced" above a quoted message: the message it
        # sends is the quoted one, and that is what it is compared as, cleaned as the
        # message was when it came alone (its writer's sign-off and disclaimers aside).
        original = unquoted(quoted)
        prepared = _links_to_sites(_cleaned([original], [signer], Prepared(original))[0])
        text = prepared.text
    else:
        # The note above the message it re-sends, pasted whole (a newsletter re-sent with
        # a correction, "sending this again" over one's own text): compared as it is, the
        # note marks it (rule resent-original).
        resend_note = not notifier and opens_with_resend_note(text, bool(forwarded_from), cue)
    calendar_parts = [a.data for a in collector.attachments
                      if is_calendar(a.content_type, a.filename)]
    calendar = calendar_summary(calendar_parts, defects) if calendar_parts else None
    if not has_word(text) and collector.html_sources and not collector.attachments:
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
        sender=sender,
        sender_name=sender_name,
        subject=subject,
        thread=thread_ids(headers.get("references", ""), headers.get("in-reply-to", "")),
        text_length=len(full_text),
        calendar=calendar,
        automated=automated,
        forwarded_from=forwarded_from,
        prepared=prepared,
        attached=tuple(collector.attached),
        resend_note=resend_note,
        notifier=notifier,
        codes=codes,
        mass_mail=not notifier and is_mass_mail(sent, full, sender),
        tracker=sent.tracker,
        # (read from the whole text: the footer holding the links is set aside)
        event=tracker_event(full.text) if sent.tracker else 0,
    )


# The id of a comment as trackers write it into the links of their notifications:
# GitHub's "#issuecomment-N", "#discussion_rN", "#pullrequestreview-N", GitLab's
# "#note_N", Jira's "focusedCommentId=N", Bugzilla's "#cN" (also URL-encoded, as a
# gateway that wraps links leaves them).
_COMMENT_ID = Pattern(r"(?:issuecomment-|discussion_r|pullrequestreview-|(?:#|%23)note_"
                      r"|focusedcommentid(?:=|%3d)|show_bug\.cgi\?id(?:=|%3d)\d+(?:#|%23)c)"
                      r"(\d{1,20})", re.IGNORECASE)


def tracker_event(text: str) -> int:
    """key64 of the comment ids in the links of a tracker's notification, sorted (0: none):
    the same words posted twice ("Assigning to the platform team.") are two comments
    with two ids, while the same notification delivered again links the same one."""
    if "://" not in text:
        return 0
    ids = sorted(set(_COMMENT_ID.get().findall(text)))
    return key64(",".join(ids)) if ids else 0


def _sender(headers: dict[str, str]) -> tuple[str, str]:
    """(From value, display name) of the writer.  A list that rewrote From for DMARC
    ("Ann via list <list@…>"): the writer is in X-Original-From (Google Groups, Mailman 3)
    or Reply-To when the list kept it."""
    sender_field = decode_header_text(headers.get("from", ""))
    sender_name = display_name(sender_field)
    via = _VIA.get()
    if via.search(sender_name):
        original = headers.get("x-original-from") or headers.get("x-original-sender") \
            or headers.get("reply-to")
        sender_name = via.sub("", sender_name)
        if original:
            sender_field = decode_header_text(original)
            sender_name = display_name(sender_field) or sender_name
        else:
            sender_field = ""
    return sender_field, sender_name


def _signer(sender_name: str, sender_field: str) -> str:
    """Whose sign-off to look for: the display name, else the address's local part
    ("ann.lee@…" signs "Ann"), so that a forward naming "Ann Lee" and her own message
    lose the same closing line."""
    if sender_name:
        return sender_name
    local = (address_of(sender_field) or "").partition("@")[0]
    if local.lower() not in _PROGRAMS and _LOCAL_PART_NAME.get().fullmatch(local):
        return _LOCAL_PART_SEPARATORS.get().sub(" ", local)
    return ""


def _own_parts(full: Prepared, subject: str, signer: str
               ) -> tuple[list[str], list[str], str, tuple[str, ...]]:
    """Step: the reply and forward layouts (mailfilter/quotes.py).  (the writer's own text
    and each message it forwards, who wrote each, the quoted text set aside, the writers
    of the forwarded messages with text of their own: name and address)."""
    full_text = full.text
    reply = split_reply(full_text, forward=is_forward_subject(subject), writer=signer,
                        prepared=full)
    if not any(map(has_word, reply.segments)) and has_word(full_text) \
            and not has_attribution(full_text, full):
        # All of it looked set aside (a forward quoted with ">", HTML inside <blockquote>),
        # yet nobody replied to anything: the whole text is the message.
        return [full_text], [signer], "", ()
    forwarded_from = tuple(
        who for value, part in zip(reply.from_values[1:], reply.segments[1:], strict=True)
        if value and has_word(part)
        for who in (display_name(value), address_of(value)) if who)
    return list(reply.segments), list(reply.writers), reply.quoted, forwarded_from


def _cleaned(parts: list[str], writers: list[str], full: Prepared) -> tuple[Prepared, str]:
    """Steps: disclaimers and banners (mailfilter/boilerplate.py), then the sign-off
    (quotes.split_signoff), each part on its own: a forwarder's name line must not take
    the forwarded message along.  (the parts joined, prepared; the boilerplate)."""
    cleaned: list[Prepared] = []
    boilerplate_parts = []
    for part, writer in zip(parts, writers, strict=True):
        prepared = full.of(part)
        kept, boilerplate = split_boilerplate(part, prepared)
        prepared = prepared.of(kept)
        kept = split_signoff(kept, writer, prepared)[0]
        cleaned.append(prepared.prefix(len(kept)))      # what it keeps is a prefix
        boilerplate_parts.append(boilerplate)
    boilerplate = "\n\n".join(part for part in boilerplate_parts if part)
    if len(cleaned) == 1:
        return cleaned[0], boilerplate
    return Prepared("\n\n".join(part.text for part in cleaned if part.text.strip())), \
        boilerplate


def _link_ending_line(text: str, start: int) -> re.Match[str] | None:
    """The last link of the line at ``start`` when it runs to the end of a line long
    enough to have been wrapped, else None."""
    line_end = text.find("\n", start)
    if line_end < 0 or line_end - start < _WRAPPED_LINE:
        return None
    last = None
    for last in LINK.get().finditer(text, start, line_end):   # noqa: B007 - the last one
        pass
    return last if last is not None and last.end() == line_end else None


class _LineLinks:
    """What :func:`_gateway_links_rejoined` reads of one line, each part once: the link
    that ends it, where its first word ends, the link that ends the line above."""

    __slots__ = ("text", "start", "ending", "opening_end", "_above", "_above_read")

    def __init__(self, text: str, start: int) -> None:
        self.text = text
        self.start = start
        self.ending = _link_ending_line(text, start)
        opening = _FIRST_WORD.get().match(text, start)
        self.opening_end = -1 if opening is None else opening.end()
        self._above: re.Match[str] | None = None
        self._above_read = False

    def above(self) -> re.Match[str] | None:
        if not self._above_read:
            self._above = _link_ending_line(self.text,
                                            self.text.rfind("\n", 0, self.start - 1) + 1)
            self._above_read = True
        return self._above


def _gateway_links_rejoined(full: Prepared) -> Prepared:
    """Step: a gateway's rewritten link (Safe Links, URL Defense, Mimecast) that the
    sender's client cut over lines when it wrapped them is made one line again, so that
    the link is read for the one it wraps and its pieces are not read as words.  Only
    where a wrapper's name (or, cut, one of its halves) occurs, on lines of at least
    ``_WRAPPED_LINE`` characters, and only until the wrapper's own end
    (:func:`gateway_link_is_whole`); each line is read once, however many of the words
    it holds (one long line of them was quadratic)."""
    if not full.any(_GATEWAY_WORDS) or not full.aligned:
        return full
    text = full.text
    first_word = _FIRST_WORD.get()
    pieces: list[str] = []
    last = done = 0
    lines = LineCursor(text)
    line: _LineLinks | None = None
    for at in full.starts(_GATEWAY_WORDS):
        if at < done:
            continue
        start = lines.line_start(at)
        if line is None or line.start != start:
            line = _LineLinks(text, start)      # (read once a line, at its first hit)
        link = line.ending
        if link is None or link.start() > at:
            if line.start == 0 or line.opening_end <= at:
                continue
            link = line.above()
            if link is None:
                continue            # the wrapper's name was cut: its link began above
        whole, line_end = link.group(0), link.end()
        for _ in range(_GATEWAY_LINES_MAX):
            word = first_word.match(text, line_end + 1)
            if word is None or gateway_link_is_whole(whole, word.group(0)):
                break
            pieces.append(text[last:line_end])      # the line break dropped
            last = line_end + 1
            whole += word.group(0)
            following = text.find("\n", word.end())
            following = len(text) if following < 0 else following
            if word.end() != following or following - last < _WRAPPED_LINE:
                line_end = word.end()               # the link ends on this line
                break
            line_end = following
        done = line_end
    if not pieces:
        return full
    pieces.append(text[last:])
    return Prepared("".join(pieces))


def _links_to_sites(prepared: Prepared) -> Prepared:
    """Step: a link counts by the site it leads to: its path and query carry tracking
    tokens, per-recipient unsubscribe codes and reset tokens, which differ between copies
    of one message and say nothing about it.  Only lines that hold a link word are
    rewritten (a link never spans lines)."""
    text = prepared.text
    if "://" not in text and "www." not in text:
        return prepared
    link = LINK.get()
    if not prepared.aligned:
        return Prepared(link.sub(link_site, text))
    pieces = []
    last = line_end = 0
    for at in prepared.starts(_LINK_WORDS):
        if at < line_end:
            continue
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        line_end = len(text) if end < 0 else end
        pieces.append(text[last:start])
        pieces.append(link.sub(link_site, text[start:line_end]))
        last = line_end
    pieces.append(text[last:])
    rewritten = "".join(pieces)
    return prepared if rewritten == text else Prepared(rewritten)


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


def decode_header_text(value: str) -> str:
    """A header value with RFC 2047 encoded words decoded (best effort, never raises); a
    word in an unknown charset is read as Latin-1, as raw 8-bit header bytes are."""
    if "=?" not in value:
        return value
    try:
        from email.header import decode_header  # only for encoded values

        pieces = []
        for data, charset in decode_header(value):
            if isinstance(data, str):
                pieces.append(data)
                continue
            try:
                pieces.append(data.decode(known_charset(charset) or "latin-1"))
            except _DECODING_ERRORS:
                pieces.append(data.decode("latin-1"))
        return "".join(pieces)
    except Exception:  # noqa: BLE001 - an undecodable word stays as it came
        return value


