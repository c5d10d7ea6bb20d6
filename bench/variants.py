"""Realistic variants of real messages, for measuring what the detector calls a duplicate.

Every generator is a pure function ``(raw, rng, style=None) -> bytes | None``: it rebuilds the
message with the standard library's ``email`` package (policy ``compat32``, which keeps odd
bytes and header text as they came) and returns the new raw message, or ``None`` when the
change does not apply to this message (no text part, nothing to re-wrap, ...), so that the
caller picks another one.  The outcome depends only on ``raw`` and the ``random.Random``'s
state.  ``style`` picks one sub-case of a kind (``STYLES`` lists them); ``None`` draws one.

Every variant, positive or negative, carries a fresh Message-ID, a new Date and one more
``Received`` line, as a copy that really travelled again would: the measurement is about
bodies, not about the Message-ID rule.

Positive kinds (``KINDS``): resent, list_footer, rewrap, qp, base64, html_alternative, crlf,
edited_words, inline_forward, truncated, changed_signature.  Negative kind: quoted_reply
(new text plus the whole original quoted with ``> ``, or the other ways clients quote).
"""

from __future__ import annotations

import base64
import codecs
import email
import email.errors
import email.message
import email.utils
import html
import quopri
import random
import re
import textwrap
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email import policy
from html.parser import HTMLParser

from mailfilter.message import parse

Message = email.message.Message
Transform = Callable[..., "bytes | None"]

_TEXT_TYPES = ("text/plain", "text/html")
# A word of prose that an editing person would change: letters only, standing alone (not a
# piece of a code such as "dlUl6l33", of a host name such as "example.com", of a URL or a
# path, or of an address).  Changing those is a change of data, which issue 13 wants
# treated as another message; the edited_words kind measures edits of prose.
_WORD = re.compile(r"(?<![\w./@:?=&%#~+-])[A-Za-z][A-Za-z']*[A-Za-z]"
                   r"(?![\w/@%=&#~+-]|[.:][\w/])")
_TAG_OR_TEXT = re.compile(r"(<[^>]*>|&[#a-zA-Z0-9]+;)")
_SIGNATURE = re.compile(r"^-- ?$")
_RULE = re.compile(r"^[-_=]{20,}\s*$")
_QUOTED = re.compile(r"^[ \t]*(>|\|>)")
# Lines a re-wrapping client leaves alone: rules (____, -----), attributions, separators.
_NOT_PROSE = re.compile(r"^[\W_]{3,}$|\b(wrote|writes)\s*:\s*$|original message", re.IGNORECASE)

LISTS = (
    ("Razor-users", "lists.sourceforge.net"), ("Exmh-workers", "redhat.com"),
    ("ILUG", "linux.ie"), ("Spamassassin-talk", "lists.sourceforge.net"),
    ("FoRK", "xent.com"), ("secprog", "securityfocus.com"), ("Zope", "zope.org"),
    ("gentoo-user", "gentoo.org"), ("debian-user", "lists.debian.org"),
    ("postfix-users", "postfix.org"), ("Python-list", "python.org"),
    ("freebsd-questions", "freebsd.org"), ("rpm-zzzlist", "freshrpms.net"),
)
NAMES = (
    ("Ann Lee", "ann.lee"), ("Bob Martin", "bob"), ("Carla Diaz", "cdiaz"),
    ("Dmitri Orlov", "dorlov"), ("Eve Nakamura", "eve.n"), ("Frank O'Neill", "frank"),
    ("Grace Huang", "ghuang"), ("Hugo Weber", "hweber"), ("Ines Costa", "ines"),
    ("Jack Murphy", "jmurphy"), ("Kate Novak", "kate"), ("Liam Byrne", "lbyrne"),
)
DOMAINS = ("example.org", "example.net", "example.com", "mail.example.ie",
           "corp.example.co.uk", "students.example.edu")
# Words an editor swaps in or inserts (common, so they do not stand out).
WORDS = (
    "also", "really", "just", "quite", "very", "still", "now", "then", "maybe", "always",
    "never", "often", "usually", "actually", "probably", "certainly", "simply", "already",
    "system", "server", "message", "problem", "version", "people", "thing", "time", "way",
    "work", "list", "file", "mail", "code", "change", "support", "question", "answer",
    "good", "new", "old", "small", "large", "quick", "easy", "hard", "same", "other",
    "make", "use", "find", "give", "take", "send", "read", "check", "try", "need", "want",
)
REPLY_LINES = (
    "Thanks, that fixed it for me.",
    "I see the same thing here with {n} machines.",
    "Did you try restarting the daemon after the upgrade?",
    "Agreed. We switched to it last {day} and have had no trouble since.",
    "Can you send the output of the debug run?",
    "This is not what I see on my box at all.",
    "Good point, I had not thought of that.",
    "Which version are you running? The {n}.x series had that bug.",
    "Please do not cross-post this to {n} lists.",
    "I will look into it over the weekend.",
    "Works for me, patch attached to the bug report as #{n}.",
    "Count me in for {day}.",
    "Interesting, but where is the source for that claim?",
    "That's exactly the problem I reported in bug {n}.",
    "Sorry, ignore my last mail - wrong list.",
    "Has anyone else seen this?",
    "Unsubscribe me please.",
    "LOL. Classic.",
    "Yes.",
    "No, it still fails with error {n}.",
)
FORWARD_LINES = (
    "FYI.", "See below.", "Thought you might find this interesting.",
    "Have a look at this one, {name}.", "Forwarding in case it helps.",
    "Any idea what this is about?", "This came in yesterday - is it legit?",
    "More of the same, see below.", "For the archive.",
    "Can you deal with this while I am away?", "Fun read.",
)
SIGNATURES = (
    ("{name}", "{title}, {company}"),
    ("{name} <{addr}>", "{company} | +353 1 {n}"),
    ("{name}", "{company}", "http://www.{domain}/"),
    ("Regards,", "{name}", "{title}", "{company}"),
    ("{name} -- {title}", "\"There is no place like 127.0.0.1\""),
    ("GPG key: 0x{hex}", "{name} <{addr}>", "{company}"),
)
TITLES = ("Systems Administrator", "Senior Engineer", "Developer", "IT Manager",
          "Network Operations", "Consultant")
COMPANIES = ("Acme Networks Ltd", "Example Hosting Inc.", "Widgets & Co", "NetNote Inc",
             "University of Example", "Blue Sky Software")


# -- small helpers ---------------------------------------------------------------------

def load(raw: bytes) -> Message:
    """Parse raw bytes with compat32 (an mbox ``From `` line becomes the unixfrom)."""
    return email.message_from_bytes(raw, policy=policy.compat32)


def dump(msg: Message) -> bytes:
    """Serialise without the mbox ``From `` line and without mangling ``From`` in bodies."""
    msg.set_unixfrom(None)
    return msg.as_bytes(unixfrom=False, policy=policy.compat32)


def _person(rng: random.Random) -> tuple[str, str]:
    name, local = rng.choice(NAMES)
    return name, f"{local}@{rng.choice(DOMAINS)}"


def _date(msg: Message | None, rng: random.Random) -> datetime:
    """A date some minutes to days after the original's (or somewhere in 2002)."""
    base = None
    if msg is not None:
        try:
            base = email.utils.parsedate_to_datetime(str(msg.get("date", "")))
        except (TypeError, ValueError, IndexError):
            base = None
    if base is None or base.tzinfo is None:
        base = datetime(2002, 1, 1, tzinfo=UTC) + timedelta(seconds=rng.randrange(365 * 86400))
    return base + timedelta(minutes=rng.randrange(3, 5 * 24 * 60))


def _message_id(rng: random.Random, tag: str) -> str:
    return f"<{rng.getrandbits(64):016x}.{tag}@{rng.choice(DOMAINS)}>"


def _set_header(msg: Message, name: str, value: str) -> None:
    if name in msg:
        msg.replace_header(name, value)
    else:
        msg[name] = value


def _prepend_header(msg: Message, name: str, value: str) -> None:
    """Put a header first (as an MTA does with Received), keeping the others' order."""
    items = msg.items()
    for key in {key.lower() for key, _ in items}:
        del msg[key]
    msg[name] = value
    for key, old in items:
        msg[key] = old


def fresh_headers(msg: Message, rng: random.Random, tag: str) -> None:
    """New Message-ID and Date, and one more Received line on top."""
    when = _date(msg, rng)
    stamp = email.utils.format_datetime(when)
    _set_header(msg, "Message-ID", _message_id(rng, tag))
    _set_header(msg, "Date", stamp)
    relay = f"relay{rng.randrange(1, 9)}.{rng.choice(DOMAINS)}"
    _prepend_header(msg, "Received", (
        f"from {relay} ({relay} [192.0.2.{rng.randrange(1, 255)}])\n"
        f"\tby mx.example.org (Postfix) with ESMTP id {rng.getrandbits(40):010X}\n"
        f"\tfor <user@example.org>; {stamp}"))


def _is_attachment(part: Message) -> bool:
    disposition = str(part.get("content-disposition", "")).lower()
    try:
        filename = part.get_filename()
    except Exception:  # noqa: BLE001 - RFC 2231 garbage
        filename = None
    return disposition.startswith("attachment") or (
        filename is not None and part.get_content_subtype() not in ("plain", "html"))


def _children(part: Message) -> list[Message]:
    payload = part.get_payload()
    return [c for c in payload if isinstance(c, Message)] if isinstance(payload, list) else []


def main_part(msg: Message) -> tuple[Message | None, Message] | None:
    """(parent, part) of the text part a reader sees first; ``parent`` None: the message.

    In ``multipart/alternative`` a non-empty ``text/plain`` is preferred, else the last
    other choice, as mail readers (and dupfilter's parser) do.
    """
    def visit(part: Message, parent: Message | None) -> tuple[Message | None, Message] | None:
        if part.is_multipart():
            children = _children(part)
            if part.get_content_type() == "multipart/alternative":
                plain = [c for c in children if c.get_content_type() == "text/plain"
                         and get_text(c)[0].strip()]
                children = plain + [c for c in reversed(children)
                                    if c.get_content_type() != "text/plain"]
            for child in children:
                found = visit(child, part)
                if found:
                    return found
            return None
        if part.get_content_type() in _TEXT_TYPES and not _is_attachment(part):
            return parent, part
        return None

    return visit(msg, None)


def text_parts(msg: Message) -> list[Message]:
    """Every inline text/plain and text/html leaf."""
    return [p for p in msg.walk() if not p.is_multipart()
            and p.get_content_type() in _TEXT_TYPES and not _is_attachment(p)]


def get_text(part: Message) -> tuple[str, str]:
    """(decoded text, codec that gives the same bytes back) of a leaf part."""
    data = part.get_payload(decode=True)
    if not isinstance(data, bytes):
        data = b""
    try:
        charset = part.get_content_charset()
    except Exception:  # noqa: BLE001
        charset = None
    codec = "ascii"
    if charset:
        try:
            codec = codecs.lookup(charset).name
        except LookupError:
            codec = "latin-1"
    try:
        return data.decode(codec), codec
    except (UnicodeDecodeError, LookupError):
        return data.decode("latin-1"), "latin-1"


def set_text(part: Message, text: str, codec: str, cte: str | None = None) -> None:
    """Replace a leaf's text, encoded with ``codec`` and transfer-encoded as ``cte``.

    ``cte`` None keeps the part's own transfer encoding (7bit becomes 8bit if needed).
    """
    data = text.encode(codec, "replace")
    current = str(part.get("content-transfer-encoding", "")).strip().lower()
    cte = (cte or current or "7bit").lower()
    if cte == "base64":
        payload = base64.encodebytes(data).decode("ascii")
    elif cte == "quoted-printable":
        payload = quopri.encodestring(data).decode("ascii")
    else:
        if cte not in ("7bit", "8bit", "binary"):
            cte = "8bit"
        if cte == "7bit" and not data.isascii():
            cte = "8bit"
        payload = data.decode("ascii", "surrogateescape")
    part.set_payload(payload)
    if cte != current and not (cte == "7bit" and not current):
        _set_header(part, "Content-Transfer-Encoding", cte)


def new_text_part(text: str, subtype: str = "plain", cte: str = "8bit") -> Message:
    """A fresh UTF-8 text leaf."""
    part = Message()
    part["Content-Type"] = f'text/{subtype}; charset="utf-8"'
    part["Content-Transfer-Encoding"] = "7bit" if text.isascii() and cte == "8bit" else cte
    set_text(part, text, "utf-8", part["Content-Transfer-Encoding"])
    return part


def copy_part(part: Message) -> Message:
    """A new part with ``part``'s Content-* headers and the same content (text re-encoded
    in its own transfer encoding; ``get_payload()`` would not give the raw bytes back)."""
    copy = Message()
    for key, value in part.items():
        if key.lower().startswith("content-"):
            copy[key] = value
    if part.is_multipart():
        copy.set_payload(list(_children(part)))
    else:
        text, codec = get_text(part)
        set_text(copy, text, codec)
    return copy


def _move_headers(source: Message, target: Message) -> None:
    """Copy the message headers (not Content-*/MIME-Version) from ``source`` to ``target``."""
    keep = [(k, v) for k, v in target.items()]
    for key in {k.lower() for k, _ in keep}:
        del target[key]
    for key, value in source.items():
        if not key.lower().startswith("content-") and key.lower() != "mime-version":
            target[key] = value
    target["MIME-Version"] = "1.0"
    for key, value in keep:
        if key.lower() != "mime-version":
            target[key] = value


def _container(subtype: str, parts: list[Message], rng: random.Random) -> Message:
    box = Message()
    box["Content-Type"] = f"multipart/{subtype}"
    box.set_boundary(f"=_variant_{rng.getrandbits(48):012x}")
    box.set_payload(parts)
    return box


def replace_part(msg: Message, parent: Message | None, old: Message,
                 new: Message) -> Message:
    """Put ``new`` where ``old`` was; returns the (possibly new) top-level message."""
    if parent is None:
        _move_headers(msg, new)
        return new
    payload = parent.get_payload()
    assert isinstance(payload, list)
    payload[[id(p) for p in payload].index(id(old))] = new
    return msg


def html_text(markup: str) -> str:
    """Rough visible text of HTML (stdlib parser): what a mail client quotes or forwards."""

    class _Text(HTMLParser):
        def __init__(self) -> None:
            super().__init__(convert_charrefs=True)
            self.out: list[str] = []
            self.skip = 0

        def handle_starttag(self, tag: str, attrs: object) -> None:
            if tag in ("script", "style", "head", "title"):
                self.skip += 1
            elif tag in ("br", "p", "div", "tr", "li", "h1", "h2", "h3"):
                self.out.append("\n")

        def handle_endtag(self, tag: str) -> None:
            if tag in ("script", "style", "head", "title"):
                self.skip = max(0, self.skip - 1)

        def handle_data(self, data: str) -> None:
            if not self.skip:
                self.out.append(data)

    parser = _Text()
    try:
        parser.feed(markup)
        parser.close()
    except Exception:  # noqa: BLE001 - broken markup: strip tags crudely
        return re.sub(r"<[^>]*>", " ", markup)
    lines = [" ".join(line.split()) for line in "".join(parser.out).splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip() + "\n"


def readable_text(msg: Message) -> tuple[str, bool] | None:
    """(text of the main part, was it HTML) or None when there is no text part."""
    found = main_part(msg)
    if found is None:
        return None
    text, _ = get_text(found[1])
    is_html = found[1].get_content_type() == "text/html"
    return (html_text(text) if is_html else text), is_html


def _pick(rng: random.Random, style: str | None, kind: str) -> str:
    return style if style is not None else rng.choice(STYLES[kind])


def _fill(template: str, rng: random.Random) -> str:
    name, addr = _person(rng)
    return template.format(
        n=rng.randrange(2, 999), day=rng.choice(("Monday", "Tuesday", "week", "month")),
        name=name, addr=addr, title=rng.choice(TITLES), company=rng.choice(COMPANIES),
        domain=rng.choice(DOMAINS), hex=f"{rng.getrandbits(32):08X}")


def _footer_start(lines: list[str]) -> int:
    """Where a list footer (or sponsor block) that a list appended starts, else len.

    The first rule line (``____``, ``----``, ``====``) among the last 15 lines.
    """
    start = max(0, len(lines) - 15)
    return next((i for i in range(start, len(lines)) if _RULE.match(lines[i])), len(lines))


def _body_lines(text: str) -> tuple[list[str], int]:
    """Lines of ``text`` and the index where a ``-- `` signature starts (or len)."""
    lines = text.split("\n")
    end = next((i for i, line in enumerate(lines) if _SIGNATURE.match(line.rstrip())),
               len(lines))
    return lines, end


# -- positive kinds --------------------------------------------------------------------

def resent(raw: bytes, rng: random.Random, style: str | None = None) -> bytes | None:
    """The same message delivered again: new Message-ID, Date, Received; same body.

    ``redelivered``: only those headers change; ``resent``: Resent-* headers are added too.
    """
    style = _pick(rng, style, "resent")
    msg = load(raw)
    fresh_headers(msg, rng, "resent")
    if style == "resent":
        name, addr = _person(rng)
        msg["Resent-From"] = f"{name} <{addr}>"
        msg["Resent-Date"] = str(msg["Date"])
        msg["Resent-Message-ID"] = _message_id(rng, "resent")
    return dump(msg)


def _footer(style: str, rng: random.Random) -> tuple[str, str]:
    """(list name, footer text) for a list_footer style."""
    name, domain = rng.choice(LISTS)
    low = name.lower()
    if style == "mailman":
        lines = ["_" * 47, f"{name} mailing list", f"{name}@{domain}",
                 f"http://{domain}/mailman/listinfo/{low}"]
        if rng.random() < 0.5:
            lines.append(f"Archives: http://{domain}/pipermail/{low}/")
    elif style == "ezmlm":
        lines = ["-" * 69, f"To unsubscribe, e-mail: {low}-unsubscribe@{domain}",
                 f"For additional commands, e-mail: {low}-help@{domain}",
                 f"List archive: http://{domain}/archives/{low}/"]
    elif style == "dashdash":
        lines = [rng.choice(("--", "-- ")),
                 f"To unsubscribe, send a message with 'unsubscribe {low}' in the body",
                 f"to majordomo@{domain}.  Archive: http://{domain}/lists/{low}/",
                 f"List maintainer: listmaster@{domain}"]
    elif style == "yahoo":
        lines = ["", "To unsubscribe from this group, send an email to:",
                 f"{low}-unsubscribe@yahoogroups.com", "",
                 "Your use of Yahoo! Groups is subject to http://docs.yahoo.com/info/terms/"]
    else:
        raise ValueError(f"unknown list_footer style {style!r}")
    return name, "\n".join(lines) + "\n"


def list_footer(raw: bytes, rng: random.Random, style: str | None = None) -> bytes | None:
    """Through a mailing list: a 4–6 line footer, ``[list]`` subject tag, List-* headers.

    Like Mailman, a plain single-part message gets the footer appended to its text;
    anything else gets it as a text/plain part at the end of a multipart/mixed.
    """
    style = _pick(rng, style, "list_footer")
    msg = load(raw)
    if main_part(msg) is None:
        return None
    name, footer = _footer(style, rng)
    fresh_headers(msg, rng, "list")
    subject = str(msg.get("subject", ""))
    if f"[{name}]".lower() not in subject.lower():
        _set_header(msg, "Subject", f"[{name}] {subject}".rstrip())
    msg["List-Id"] = f"<{name.lower()}.lists.example.org>"
    msg["Precedence"] = "list"
    if not msg.is_multipart() and msg.get_content_type() == "text/plain":
        text, codec = get_text(msg)
        set_text(msg, text.rstrip("\n") + "\n\n" + footer, codec)
        return dump(msg)
    part = new_text_part(footer)
    if msg.get_content_type() == "multipart/mixed":
        payload = msg.get_payload()
        assert isinstance(payload, list)
        payload.append(part)
        return dump(msg)
    box = _container("mixed", [copy_part(msg), part], rng)
    return dump(replace_part(msg, None, msg, box))


def rewrap(raw: bytes, rng: random.Random, style: str | None = None) -> bytes | None:
    """Prose paragraphs re-wrapped to another width (style: the width).

    Quoted and indented lines, rules, attribution lines and the signature are left alone,
    as a client that re-flows text leaves them."""
    style = _pick(rng, style, "rewrap")
    width = int(style)
    msg = load(raw)
    found = main_part(msg)
    if found is None or found[1].get_content_type() != "text/plain":
        return None
    part = found[1]
    text, codec = get_text(part)
    lines, end = _body_lines(text)
    out: list[str] = []
    paragraph: list[str] = []
    changed = False

    def flush() -> None:
        nonlocal changed
        if not paragraph:
            return
        prose = all(line.strip() and not line[:1].isspace() and not _QUOTED.match(line)
                    and not _NOT_PROSE.search(line) for line in paragraph)
        if prose and sum(len(line.split()) for line in paragraph) >= 6:
            filled = textwrap.wrap(" ".join(line.strip() for line in paragraph), width=width,
                                   break_long_words=False, break_on_hyphens=False)
            changed = changed or filled != [line.rstrip() for line in paragraph]
            out.extend(filled)
        else:
            out.extend(paragraph)
        paragraph.clear()

    for line in lines[:end]:
        if line.strip():
            paragraph.append(line)
        else:
            flush()
            out.append(line)
    flush()
    if not changed:
        return None
    set_text(part, "\n".join(out + lines[end:]), codec)
    fresh_headers(msg, rng, "rewrap")
    return dump(msg)


def _reencode(raw: bytes, rng: random.Random, cte: str) -> bytes | None:
    msg = load(raw)
    parts = text_parts(msg)
    if not parts:
        return None
    for part in parts:
        text, codec = get_text(part)
        set_text(part, text, codec, cte)
    fresh_headers(msg, rng, cte[:2])
    return dump(msg)


def qp(raw: bytes, rng: random.Random, style: str | None = None) -> bytes | None:
    """Every inline text part re-encoded as quoted-printable (an MTA's 8bit → 7bit)."""
    return _reencode(raw, rng, "quoted-printable")


def b64(raw: bytes, rng: random.Random, style: str | None = None) -> bytes | None:
    """Every inline text part re-encoded as base64."""
    return _reencode(raw, rng, "base64")


def _to_html(text: str, style: str) -> str:
    """An HTML rendering of plain text, as a mail client composes it."""
    if style == "html_only_p":
        paragraphs = [p for p in re.split(r"\n[ \t]*\n", text) if p.strip()]
        body = "\n".join("<p>" + "<br>\n".join(html.escape(line) for line in p.split("\n"))
                         + "</p>" for p in paragraphs)
    elif style == "html_only_div":
        body = "\n".join(f"<div>{html.escape(line) or '<br>'}</div>"
                         for line in text.split("\n"))
    else:
        body = "<br>\n".join(html.escape(line).replace("  ", " &nbsp;")
                             for line in text.split("\n"))
    return ("<html><head><meta http-equiv=\"Content-Type\" content=\"text/html; "
            "charset=utf-8\"><style>p { margin: 0 }</style></head>\n"
            f"<body style=\"font-family: Arial\">\n{body}\n</body></html>\n")


def html_alternative(raw: bytes, rng: random.Random, style: str | None = None
                     ) -> bytes | None:
    """Plain text turned into multipart/alternative with an HTML version, or HTML only."""
    style = _pick(rng, style, "html_alternative")
    msg = load(raw)
    found = main_part(msg)
    if found is None or found[1].get_content_type() != "text/plain":
        return None
    parent, part = found
    if parent is not None and parent.get_content_type() == "multipart/alternative":
        return None
    text, _ = get_text(part)
    if not text.strip():
        return None
    markup = new_text_part(_to_html(text, style), "html",
                           rng.choice(("quoted-printable", "8bit")))
    if style == "alternative":
        new = _container("alternative", [copy_part(part), markup], rng)
    else:
        new = markup
    msg = replace_part(msg, parent, part, new)
    fresh_headers(msg, rng, "html")
    return dump(msg)


def crlf(raw: bytes, rng: random.Random, style: str | None = None) -> bytes | None:
    """Every line ending LF → CRLF (as on the wire, or saved by a Windows client)."""
    msg = load(raw)
    fresh_headers(msg, rng, "crlf")
    return dump(msg).replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")


def _word_spans(text: str, is_html: bool) -> list[tuple[int, int]]:
    """Editable words: in unquoted lines before the signature, not in an attribution
    ("On Tue, 13 Aug 2002, Ann wrote:": "wrote" edited away turned a reply's quote into
    new text) or a rule; in HTML, outside tags."""
    lines, end = _body_lines(text)
    limit = sum(len(line) + 1 for line in lines[:end])
    spans: list[tuple[int, int]] = []
    if is_html:
        skip = re.compile(r"<(script|style|head)\b.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
        hidden = [(m.start(), m.end()) for m in skip.finditer(text)]
        hidden += [(m.start(), m.end()) for m in _TAG_OR_TEXT.finditer(text)]
        hidden.sort()
        position = 0
        for start, stop in hidden + [(len(text), len(text))]:
            if start > position:
                spans.extend((position + m.start(), position + m.end())
                             for m in _WORD.finditer(text[position:start]))
            position = max(position, stop)
        return [s for s in spans if s[0] < limit]
    offset = 0
    for line in lines[:end]:
        if not _QUOTED.match(line) and not _NOT_PROSE.search(line):
            spans.extend((offset + m.start(), offset + m.end()) for m in _WORD.finditer(line))
        offset += len(line) + 1
    return spans


def edited_words(raw: bytes, rng: random.Random, style: str | None = None) -> bytes | None:
    """2–4 words replaced, inserted or deleted (the style is how many).  None when the
    edited part did not come back with as many words give or take the edits (a body
    whose re-encoding the email package got wrong), and for mail a
    tracker or another program sent (X-Bugzilla-*, X-GitHub-*, Auto-Submitted, cron …):
    nobody edits a program's notification, and its other words are its next event (rule
    notifier), not an edited copy."""
    count = int(_pick(rng, style, "edited_words"))
    source = parse(raw)
    if source.notifier:
        return None
    msg = load(raw)
    found = main_part(msg)
    if found is None:
        return None
    part = found[1]
    text, codec = get_text(part)
    spans = _word_spans(text, part.get_content_type() == "text/html")
    if len(spans) < count + 1:
        return None
    chosen = sorted(rng.sample(spans, count), reverse=True)
    for start, stop in chosen:
        operation = rng.choice(("replace", "insert", "delete"))
        word = text[start:stop]
        if operation == "replace":
            new = rng.choice([w for w in WORDS if w != word.lower()])
            if word[:1].isupper():
                new = new.capitalize()
            text = text[:start] + new + text[stop:]
        elif operation == "insert":
            text = text[:start] + rng.choice(WORDS) + " " + text[start:]
        else:
            if stop < len(text) and text[stop] == " ":
                stop += 1
            elif start > 0 and text[start - 1] == " ":
                start -= 1
            text = text[:start] + text[stop:]
    set_text(part, text, codec)
    fresh_headers(msg, rng, "edit")
    edited = dump(msg)
    if abs(len(parse(edited).text.split()) - len(source.text.split())) > count:
        return None     # the part did not survive re-encoding: no edit of its words
    return edited


def _forward_block(style: str, msg: Message) -> list[str]:
    def h(name: str) -> str:
        return " ".join(str(msg.get(name, "")).split())

    if style == "gmail":
        return ["---------- Forwarded message ---------", f"From: {h('from')}",
                f"Date: {h('date')}", f"Subject: {h('subject')}", f"To: {h('to')}", ""]
    if style == "thunderbird":
        return ["-------- Forwarded Message --------", f"Subject: \t{h('subject')}",
                f"Date: \t{h('date')}", f"From: \t{h('from')}", f"To: \t{h('to')}", ""]
    if style == "apple":
        return ["Begin forwarded message:", "", f"From: {h('from')}",
                f"Subject: {h('subject')}", f"Date: {h('date')}", f"To: {h('to')}", ""]
    if style == "outlook":
        return ["-----Original Message-----", f"From: {h('from')}", f"Sent: {h('date')}",
                f"To: {h('to')}", f"Subject: {h('subject')}", ""]
    raise ValueError(f"unknown inline_forward style {style!r}")


def inline_forward(raw: bytes, rng: random.Random, style: str | None = None
                   ) -> bytes | None:
    """A new message: a line or two of new text, a forward header block, the original body.

    The original's text goes in unquoted (HTML stays HTML); its attachments come along.
    Styles: ``gmail``, ``thunderbird``, ``apple`` and ``outlook`` (whose inline forward
    uses the same ``-----Original Message-----`` separator as its replies).
    """
    style = _pick(rng, style, "inline_forward")
    original = load(raw)
    found = main_part(original)
    if found is None:
        return None
    body, _ = get_text(found[1])
    if not body.strip():
        return None
    is_html = found[1].get_content_type() == "text/html"
    intro = [_fill(rng.choice(FORWARD_LINES), rng) for _ in range(rng.randint(1, 2))]
    block = _forward_block(style, original)
    if is_html:
        head = "".join(f"<div>{html.escape(line) or '<br>'}</div>\n"
                       for line in intro + [""] + block)
        part = new_text_part(f"<html><body>\n{head}<br>\n{body}\n</body></html>\n", "html",
                             "quoted-printable")
    else:
        part = new_text_part("\n".join(intro + [""] + block) + "\n" + body,
                             "plain", rng.choice(("8bit", "quoted-printable")))
    attachments = [p for p in original.walk() if not p.is_multipart() and _is_attachment(p)]
    new = _container("mixed", [part, *attachments], rng) if attachments else part
    name, addr = _person(rng)
    new["From"] = f"{name} <{addr}>"
    new["To"] = f"{_person(rng)[1]}"
    new["Subject"] = f"{'FW' if style == 'outlook' else 'Fwd'}: {original.get('subject', '')}"
    new["MIME-Version"] = "1.0"
    fresh_headers(new, rng, "fwd")
    _set_header(new, "Date", email.utils.format_datetime(_date(original, rng)))
    return dump(new)


def truncated(raw: bytes, rng: random.Random, style: str | None = None) -> bytes | None:
    """The ending of the main text cut off: the last 10–30% (style ``10-20`` or ``20-30``).

    The share is of the text's characters, cut at the line break nearest to it (so, for
    ordinary text, the last 10–30% of its lines); where no line break falls in the range,
    as in HTML written on a few very long lines, the cut is at a space (mid-line).
    """
    style = _pick(rng, style, "truncated")
    low, high = (int(x) / 100 for x in style.split("-"))
    msg = load(raw)
    found = main_part(msg)
    if found is None:
        return None
    part = found[1]
    text, codec = get_text(part)
    text = text.rstrip()
    size = len(text)
    if size < 40:
        return None
    target = size * (1 - rng.uniform(low, high))
    first, last = size * (1 - high), size * (1 - low)
    cut = None
    for separator in ("\n", " "):
        places = [m.start() for m in re.finditer(separator, text) if first <= m.start() <= last]
        if places:
            cut = min(places, key=lambda p: abs(p - target))
            break
    if cut is None:
        return None
    set_text(part, text[:cut].rstrip() + "\n", codec)
    fresh_headers(msg, rng, "trunc")
    return dump(msg)


def changed_signature(raw: bytes, rng: random.Random, style: str | None = None
                      ) -> bytes | None:
    """A ``-- `` signature replaced (or added) with a 2–4 line one; ``plain`` style: a
    sign-off of 2–4 lines without the ``-- `` delimiter appended instead.

    Both go above a footer or sponsor block that a mailing list appended, where the
    sender's own signature was."""
    style = _pick(rng, style, "changed_signature")
    msg = load(raw)
    found = main_part(msg)
    if found is None:
        return None
    part = found[1]
    text, codec = get_text(part)
    is_html = part.get_content_type() == "text/html"
    signature = [_fill(line, rng) for line in rng.choice(SIGNATURES)]
    if is_html:
        block = ("<br>-- <br>" if style != "plain" else "<br><br>") + "<br>".join(
            html.escape(line) for line in signature) + "<br>\n"
        closings = list(re.finditer(r"</body\s*>", text, re.IGNORECASE))
        at = closings[-1].start() if closings else len(text)
        set_text(part, text[:at] + block + text[at:], codec)
    else:
        lines = text.rstrip("\n").split("\n")
        footer = _footer_start(lines)
        lines, tail = lines[:footer], lines[footer:]
        while lines and not lines[-1].strip():
            lines.pop()
        tail = [""] + tail if tail else tail
        end = next((i for i, line in enumerate(lines) if _SIGNATURE.match(line.rstrip())),
                   len(lines))
        if style == "plain":
            new = lines + [""] + signature
        else:
            new = lines[:end] + ["-- "] + signature
        set_text(part, "\n".join(new + tail) + "\n", codec)
    fresh_headers(msg, rng, "sig")
    return dump(msg)


# -- negative kind ---------------------------------------------------------------------

def quoted_reply(raw: bytes, rng: random.Random, style: str | None = None) -> bytes | None:
    """A reply: 1–5 lines of new text and the whole original quoted.

    ``bottom``: attribution, the original with every line prefixed ``> ``, then the new
    text; ``top``: new text above the attribution and quote; ``outlook``: new text, then
    ``-----Original Message-----``, a header block and the original unquoted;
    ``html``: an HTML reply with the original in a ``<blockquote type="cite">``.
    """
    style = _pick(rng, style, "quoted_reply")
    original = load(raw)
    readable = readable_text(original)
    if readable is None or not readable[0].strip():
        return None
    body = readable[0].rstrip("\n")
    new_lines = [_fill(rng.choice(REPLY_LINES), rng) for _ in range(rng.randint(1, 5))]
    when = _date(original, rng)
    author = " ".join(str(original.get("from", "someone")).split()) or "someone"
    stamp = email.utils.format_datetime(_date(original, rng) - timedelta(hours=1))
    attribution = rng.choice((f"On {stamp}, {author} wrote:",
                              f"{author} wrote:", f"On {stamp} {author} wrote:"))
    quoted = [("> " + line) if line.strip() else ">" for line in body.split("\n")]
    if style == "bottom":
        part = new_text_part("\n".join([attribution, *quoted, "", *new_lines]) + "\n")
    elif style == "top":
        part = new_text_part("\n".join([*new_lines, "", attribution, *quoted]) + "\n")
    elif style == "outlook":
        block = _forward_block("outlook", original)
        part = new_text_part("\n".join([*new_lines, "", *block, body]) + "\n")
    elif style == "html":
        markup = ("<html><body>\n" + "".join(f"<div>{html.escape(x)}</div>\n"
                                             for x in new_lines)
                  + f"<div>{html.escape(attribution)}</div>\n<blockquote type=\"cite\">"
                  + "<br>\n".join(html.escape(line) for line in body.split("\n"))
                  + "</blockquote>\n</body></html>\n")
        part = new_text_part(markup, "html", "quoted-printable")
    else:
        raise ValueError(f"unknown quoted_reply style {style!r}")
    name, addr = _person(rng)
    part["From"] = f"{name} <{addr}>"
    part["To"] = author
    subject = str(original.get("subject", ""))
    part["Subject"] = subject if subject.lower().startswith("re:") else f"Re: {subject}"
    original_id = original.get("message-id")
    if original_id:
        part["In-Reply-To"] = str(original_id)
        part["References"] = str(original_id)
    part["MIME-Version"] = "1.0"
    fresh_headers(part, rng, "reply")
    _set_header(part, "Date", email.utils.format_datetime(when))
    return dump(part)


STYLES: dict[str, tuple[str, ...]] = {
    "resent": ("redelivered", "resent"),
    "list_footer": ("mailman", "ezmlm", "dashdash", "yahoo"),
    "rewrap": ("60", "100", "45"),
    "qp": ("qp",),
    "base64": ("base64",),
    "html_alternative": ("alternative", "html_only_br", "html_only_p", "html_only_div"),
    "crlf": ("crlf",),
    "edited_words": ("2", "3", "4"),
    "inline_forward": ("gmail", "thunderbird", "apple", "outlook"),
    "truncated": ("10-20", "20-30"),
    "changed_signature": ("dashdash", "plain"),
    "quoted_reply": ("bottom", "top", "outlook", "html"),
}

KINDS: dict[str, Transform] = {
    "resent": resent,
    "list_footer": list_footer,
    "rewrap": rewrap,
    "qp": qp,
    "base64": b64,
    "html_alternative": html_alternative,
    "crlf": crlf,
    "edited_words": edited_words,
    "inline_forward": inline_forward,
    "truncated": truncated,
    "changed_signature": changed_signature,
}
NEGATIVE_KINDS: dict[str, Transform] = {"quoted_reply": quoted_reply}


def make(kind: str, raw: bytes, rng: random.Random, style: str | None = None
         ) -> tuple[bytes, str] | None:
    """(variant, style) of ``kind`` for ``raw``, or None if the kind does not apply.

    Any exception from the ``email`` package on a broken original also counts as "does
    not apply": the harness then uses another message.
    """
    transform = KINDS.get(kind) or NEGATIVE_KINDS[kind]
    chosen = _pick(rng, style, kind)
    try:
        result = transform(raw, rng, chosen)
    except (LookupError, ValueError, TypeError, AssertionError, UnicodeError,
            email.errors.MessageError):
        return None
    return (result, chosen) if result is not None else None
