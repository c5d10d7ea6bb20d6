# ruff: noqa: E501  (literal mail text: headers, links and notes read best unbroken)
"""Hold-out cases for the duplicate-mail filter, built from real mail formats.

Written by an outsider without reading the filter's rules or its own benchmarks: each
generator builds what a real mail host sees (client layouts of Outlook, Gmail, Apple Mail
and Thunderbird, security-gateway rewrites, newsletters, trackers, notices) from a seeded
RNG and real text paragraphs of the SpamAssassin corpus.  A case is an ordered list of
deliveries to mailboxes; the labelled ones carry the verdict a person would expect.
"""

from __future__ import annotations

import base64
import email
import email.policy
import hashlib
import html
import random
import re
import tarfile
import textwrap
import urllib.parse
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from email.message import EmailMessage
from email.utils import format_datetime
from pathlib import Path

POLICY = email.policy.default.clone(linesep="\n", max_line_length=78)

MUST_FLAG = [
    "forwarded_as_attachment",
    "gateway_rewritten_links",
    "resend_after_bounce",
    "note_over_original",
    "newsletter_resent_new_subject",
    "campaign_copies",
    "same_short_message_twice",
    "newsletter_two_addresses",
]
MUST_STAY_UNIQUE = [
    "tracker_status_updates",
    "subject_only_data",
    "disclaimer_short_notes",
    "templated_notices",
    "short_replies",
    "newsletter_issues",
]


@dataclass
class Delivery:
    """One message delivered to one mailbox (its envelope recipients)."""

    recipients: list[str]
    raw: bytes
    expect: str | None = None  # "duplicate", "unique" or None (not scored)


@dataclass
class Case:
    category: str
    index: int
    deliveries: list[Delivery]
    aliases: list[tuple[str, str]] = field(default_factory=list)  # (address, mailbox)
    # The first message as other mailboxes would get it (busy mode: 12 copies elsewhere).
    personalise: object = None  # callable(rng, Person) -> bytes

    @property
    def must_flag(self) -> bool:
        return self.category in MUST_FLAG


# --------------------------------------------------------------------------- corpus

def _body_text(msg: email.message.Message) -> str:
    for part in msg.walk():
        if part.get_content_type() == "text/plain" and not part.get_filename():
            try:
                payload = part.get_payload(decode=True) or b""
            except Exception:
                continue
            charset = part.get_content_charset() or "latin-1"
            try:
                return payload.decode(charset, "replace")
            except LookupError:
                return payload.decode("latin-1", "replace")
    return ""


_PARA_BAD = re.compile(r"(^>|^\s*[-_=*]{3,}|https?://|@|^\s*\w+:\s|\|)", re.M)


def _paragraphs(text: str) -> list[str]:
    out = []
    for block in re.split(r"\n\s*\n", text):
        lines = [ln.strip() for ln in block.strip().splitlines()]
        if not lines or any(_PARA_BAD.search(ln) for ln in lines):
            continue
        para = " ".join(lines)
        words = para.split()
        if not 25 <= len(words) <= 140:
            continue
        alpha = sum(c.isalpha() or c.isspace() for c in para) / max(1, len(para))
        if alpha < 0.9 or not para[0].isupper():
            continue
        out.append(para)
    return out


class Corpus:
    """The SpamAssassin corpus split in two: a quarter for case material, the rest for the
    busy store (so no case reuses a stored message or paragraph)."""

    def __init__(self, tarball: Path, root: Path):
        self.root = root / "spamassassin"
        if not self.root.exists():
            root.mkdir(parents=True, exist_ok=True)
            with tarfile.open(tarball) as tar:
                tar.extractall(root, filter="data")
        files = sorted(p for p in self.root.glob("*/*.txt"))
        self.case_files, self.store_files = [], []
        for p in files:
            h = hashlib.sha1(p.name.encode()).digest()[0]
            (self.case_files if h % 4 == 0 else self.store_files).append(p)
        self.paragraphs: list[str] = []
        self.ham_msgs: list[bytes] = []
        self.spam_bodies: list[tuple[str, str]] = []
        seen = set()
        for p in self.case_files:
            raw = read_corpus_message(p)
            msg = email.message_from_bytes(raw)
            text = _body_text(msg)
            if "spam" in p.parent.name:
                if 60 <= len(text.split()) <= 600 and msg.get_content_type() == "text/plain":
                    subj = re.sub(r"\s+\d{3,}$|\s+[\[(]?\w*\d\w*[\])]?$", "", " ".join(str(msg.get("Subject", "")).split()))
                    self.spam_bodies.append((subj or "Special offer", text))
                continue
            if msg.get_content_type() == "text/plain" and 40 <= len(text.split()) <= 800:
                self.ham_msgs.append(raw)
            for para in _paragraphs(text):
                key = para[:60]
                if key not in seen:
                    seen.add(key)
                    self.paragraphs.append(para)


def read_corpus_message(path: Path) -> bytes:
    raw = path.read_bytes()
    if raw.startswith(b"From "):
        raw = raw.split(b"\n", 1)[1]
    return raw


# --------------------------------------------------------------------------- people

FIRST = """James Mary Robert Patricia John Jennifer Michael Linda David Elizabeth William Barbara
Richard Susan Joseph Jessica Thomas Sarah Charles Karen Daniel Lisa Matthew Nancy Anthony
Sandra Mark Ashley Paul Emily Steven Donna Andrew Michelle Kenneth Carol Joshua Amanda Kevin
Melissa Brian Deborah George Stephanie Timothy Rebecca Ronald Laura Jason Helen Ryan Sharon
Jacob Cynthia Priya Rahul Wei Mei Hiroshi Yuki Lars Ingrid Sven Anna Pierre Claire Lukas
Sophie Marco Giulia Carlos Lucia Ahmed Fatima Olga Dmitri Aisha Kwame Sean Niamh Tomasz Zofia
Hannah Felix Maja Jonas Elif Mehmet Chloe Noah Isabel Mateo""".split()
LAST = """Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez Martinez Hernandez
Lopez Gonzalez Wilson Anderson Thomas Taylor Moore Jackson Martin Lee Perez Thompson White
Harris Sanchez Clark Ramirez Lewis Robinson Walker Young Allen King Wright Scott Torres Nguyen
Hill Flores Green Adams Nelson Baker Hall Rivera Campbell Mitchell Carter Roberts Patel Shah
Kumar Chen Wang Tanaka Sato Larsen Nilsson Dubois Moreau Schmidt Muller Weber Rossi Bianchi
Kowalski Novak Ivanova Okafor Mensah Murphy Kelly Byrne OBrien Fischer Becker Yilmaz Demir
Costa Silva Santos Jansen deVries""".split()
COMPANY_WORDS = """acme northwind contoso fabrikam globex initech umbrella stark wayne
tyrell cyberdyne soylent hooli vandelay pied massive wonka oscorp aperture blueharbor
redwood summit pinnacle horizon lakeside riverbend ironbridge silverline oakfield brightway
clearwater evergreen keystone meridian northstar bluepeak greenfield crestview highpoint""".split()
COMPANY_SUFFIX = ["", "group", "corp", "labs", "tech", "systems", "partners", "consulting", "logistics", "health"]
TLDS = ["com", "com", "com", "co.uk", "de", "io", "net", "org", "fr", "nl", "com.au", "ca"]
FREEMAIL = ["gmail.com", "outlook.com", "yahoo.com", "icloud.com", "hotmail.com", "gmx.de",
            "web.de", "proton.me", "aol.com", "yahoo.co.uk", "btinternet.com", "orange.fr"]
TITLES = ["Account Manager", "Project Manager", "Senior Software Engineer", "Head of Operations",
          "Finance Controller", "Office Manager", "Sales Director", "HR Business Partner",
          "Procurement Specialist", "IT Administrator", "Customer Success Lead", "Paralegal",
          "Marketing Coordinator", "Chief of Staff", "Research Associate"]


@dataclass
class Person:
    first: str
    last: str
    email: str
    company: str = ""
    title: str = ""

    @property
    def name(self) -> str:
        return f"{self.first} {self.last}"

    @property
    def header(self) -> str:
        return f"{self.name} <{self.email}>"


def company_domain(rng: random.Random) -> tuple[str, str]:
    w = rng.choice(COMPANY_WORDS)
    s = rng.choice(COMPANY_SUFFIX)
    dom = f"{w}{s}.{rng.choice(TLDS)}" if rng.random() < 0.6 else f"{w}-{s or 'inc'}.{rng.choice(TLDS)}"
    name = f"{w.capitalize()} {s.capitalize() if s else 'Inc.'}".strip()
    return dom, name


def person(rng: random.Random, domain: str | None = None, company: str = "") -> Person:
    first, last = rng.choice(FIRST), rng.choice(LAST)
    if domain is None:
        if rng.random() < 0.5:
            domain = rng.choice(FREEMAIL)
            local = rng.choice([f"{first}.{last}", f"{first}{last}{rng.randint(1, 99)}",
                                f"{first[0]}{last}", f"{first}_{last}{rng.randint(70, 99)}"])
        else:
            domain, company = company_domain(rng)
            local = rng.choice([f"{first}.{last}", f"{first[0]}{last}", f"{first}"])
    else:
        local = rng.choice([f"{first}.{last}", f"{first[0]}.{last}", f"{first}{last[0]}"])
    return Person(first, last, f"{local.lower()}@{domain}", company, rng.choice(TITLES))


# --------------------------------------------------------------------------- formats

CLIENTS = ["outlook", "gmail", "apple", "thunderbird"]


def rand_date(rng: random.Random) -> datetime:
    base = datetime(2025, 1, 6, 7, 0, tzinfo=UTC)
    return base + timedelta(days=rng.randint(0, 330), minutes=rng.randint(0, 12 * 60))


def later(rng: random.Random, d: datetime, lo_min: int = 5, hi_min: int = 3 * 24 * 60) -> datetime:
    return d + timedelta(minutes=rng.randint(lo_min, hi_min), seconds=rng.randint(0, 59))


def rand_token(rng: random.Random, n: int, alphabet: str = "abcdefghijklmnopqrstuvwxyz0123456789") -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def msgid(rng: random.Random, client: str, domain: str) -> str:
    if client == "gmail":
        t = rand_token(rng, 40, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+_-=")
        return f"<CA{t}@mail.gmail.com>"
    if client == "outlook":
        a = rand_token(rng, 20, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        return f"<{a}@{rand_token(rng, 4, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ')}P{rng.randint(100, 999)}MB{rng.randint(1000, 9999)}.namprd{rng.randint(10, 22)}.prod.outlook.com>"
    if client == "apple":
        u = rand_token(rng, 8, "0123456789ABCDEF") + "-" + rand_token(rng, 4, "0123456789ABCDEF") + "-" + rand_token(rng, 4, "0123456789ABCDEF")
        return f"<{u}-{rand_token(rng, 12, '0123456789ABCDEF')}@{domain}>"
    if client == "thunderbird":
        return f"<{rand_token(rng, 8, '0123456789abcdef')}-{rand_token(rng, 4, '0123456789abcdef')}-{rand_token(rng, 4, '0123456789abcdef')}@{domain}>"
    return f"<{rand_token(rng, 16)}.{rng.randint(10**8, 10**9)}@{domain}>"


def client_headers(rng: random.Random, client: str) -> dict[str, str]:
    if client == "outlook":
        return {"X-Mailer": rng.choice(["Microsoft Outlook 16.0", "Microsoft Outlook 15.0"]),
                "Thread-Index": base64.b64encode(rng.randbytes(22)).decode(),
                "Content-Language": rng.choice(["en-US", "en-GB", "de-DE"]),
                "X-MS-Has-Attach": "", "X-MS-TNEF-Correlator": ""}
    if client == "apple":
        return {"X-Mailer": f"Apple Mail (2.{rng.choice(['3731.700.6', '3774.600.62', '3826.200.121'])})"}
    if client == "thunderbird":
        v = rng.choice(["115.12.2", "128.3.1", "102.15.1"])
        return {"User-Agent": f"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:{v.split('.')[0]}.0) Gecko/20100101 Thunderbird/{v}",
                "Content-Language": rng.choice(["en-US", "en-GB"])}
    return {}


def text_to_html(client: str, text: str) -> str:
    paras = text.split("\n\n")
    if client == "outlook":
        body = "".join(
            "".join(f'<p class="MsoNormal">{html.escape(line) or "&nbsp;"}<o:p></o:p></p>' for line in p.split("\n"))
            + '<p class="MsoNormal"><o:p>&nbsp;</o:p></p>' for p in paras)
        return ('<html xmlns:v="urn:schemas-microsoft-com:vml" xmlns:o="urn:schemas-microsoft-com:office:office" '
                'xmlns:w="urn:schemas-microsoft-com:office:word" xmlns="http://www.w3.org/TR/REC-html40">'
                '<head><meta http-equiv="Content-Type" content="text/html; charset=utf-8">'
                '<meta name="Generator" content="Microsoft Word 15 (filtered medium)"><style><!--\n'
                '/* Font Definitions */\n@font-face\n\t{font-family:"Cambria Math";}\n@font-face\n\t{font-family:Calibri;}\n'
                'p.MsoNormal, li.MsoNormal, div.MsoNormal\n\t{margin:0in;font-size:11.0pt;font-family:"Calibri",sans-serif;}\n'
                'span.EmailStyle17\n\t{mso-style-type:personal-compose;}\n--></style></head>'
                '<body lang="EN-US" link="#0563C1" vlink="#954F72" style="word-wrap:break-word">'
                f'<div class="WordSection1">{body}</div></body></html>')
    if client == "gmail":
        body = '<div><br></div>'.join(
            "<div>" + "<br>".join(html.escape(x) for x in p.split("\n")) + "</div>" for p in paras)
        return f'<div dir="ltr">{body}</div>'
    if client == "apple":
        body = '<div><br></div>'.join(
            "<div>" + "<br>".join(html.escape(x) for x in p.split("\n")) + "</div>" for p in paras)
        return ('<html><head><meta http-equiv="content-type" content="text/html; charset=utf-8"></head>'
                '<body style="overflow-wrap: break-word; -webkit-nbsp-mode: space; line-break: after-white-space;">'
                f'{body}</body></html>')
    body = "".join("<p>" + "<br>\n".join(html.escape(x) for x in p.split("\n")) + "</p>\n" for p in paras)
    return ('<!DOCTYPE html>\n<html>\n  <head>\n    <meta http-equiv="content-type" content="text/html; charset=UTF-8">\n'
            f'  </head>\n  <body>\n{body}  </body>\n</html>\n')


def wrap_text(client: str, text: str) -> str:
    if client != "thunderbird":
        return text
    out = []
    for line in text.split("\n"):
        if len(line) <= 72 or line.startswith(">"):
            out.append(line)
        else:
            out.extend(textwrap.wrap(line, 72, break_on_hyphens=False) or [""])
    return "\n".join(out)


def build(rng: random.Random, client: str, frm: Person | str, to: str | list[str], subject: str, text: str,
          date: datetime, *, html_body: str | None | bool = True, mid: str | None | bool = True,
          extra: dict[str, str] | None = None, attachments: list | None = None,
          in_reply_to: str | None = None) -> EmailMessage:
    """One message as `client` composes it: headers in its order, a text part, usually an
    HTML alternative, optional attachments (bytes with a name, or a message/rfc822)."""
    m = EmailMessage(policy=POLICY)
    from_h = frm.header if isinstance(frm, Person) else frm
    from_dom = re.search(r"@([\w.-]+)", from_h).group(1)
    m["From"] = from_h
    m["To"] = ", ".join(to) if isinstance(to, list) else to
    if extra and "Cc" in extra:
        m["Cc"] = extra.pop("Cc")
    m["Subject"] = subject
    m["Date"] = format_datetime(date.astimezone(timezone(timedelta(hours=rng.choice([-5, 0, 1, 2])))))
    if mid is True:
        m["Message-ID"] = msgid(rng, client, from_dom)
    elif mid:
        m["Message-ID"] = mid
    if in_reply_to:
        m["In-Reply-To"] = in_reply_to
        m["References"] = in_reply_to
    for k, v in client_headers(rng, client).items():
        m[k] = v
    for k, v in (extra or {}).items():
        m[k] = v
    m["MIME-Version"] = "1.0"
    text = wrap_text(client, text)
    cte = "quoted-printable" if client in ("outlook", "apple") or rng.random() < 0.3 else None
    if cte:
        m.set_content(text, cte=cte)
    else:
        m.set_content(text)
    if client == "thunderbird" and html_body is True and rng.random() < 0.5:
        html_body = None  # many Thunderbird users send plain text, format=flowed
    if client == "thunderbird" and html_body is None:
        m.set_param("format", "flowed")
    if html_body is True:
        html_body = text_to_html(client, text)
    if html_body:
        m.add_alternative(html_body, subtype="html", cte="quoted-printable" if client != "gmail" else None)
    for att in attachments or []:
        if isinstance(att, (EmailMessage, email.message.Message)):
            m.add_attachment(att)
        else:
            data, maintype, subtype, filename = att
            m.add_attachment(data, maintype=maintype, subtype=subtype, filename=filename)
    _drop_part_mime_version(m)
    return m


def _drop_part_mime_version(m: EmailMessage) -> None:
    """Clients write MIME-Version once, in the top header; the library repeats it in parts."""
    if m.is_multipart() and m.get_content_maintype() == "multipart":
        for part in m.iter_parts():
            del part["MIME-Version"]
            _drop_part_mime_version(part)


def deliver_bytes(rng: random.Random, msg: EmailMessage | bytes, rcpt: str, date: datetime) -> bytes:
    """What the mailbox's delivery agent sees: trace headers of this hop on top."""
    raw = msg if isinstance(msg, bytes) else msg.as_bytes(policy=POLICY)
    host = rng.choice(["mx1", "mx2", "mail", "smtp-in"]) + "." + rcpt.split("@")[1]
    qid = rand_token(rng, 10, "0123456789ABCDEF")
    ip = f"{rng.randint(20, 220)}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
    trace = (f"Return-Path: <bounce-{rand_token(rng, 8)}@{rcpt.split('@')[1]}>\n"
             f"Delivered-To: {rcpt}\n"
             f"Received: from relay.example.net (relay.example.net [{ip}])\n"
             f"\tby {host} (Postfix) with ESMTPS id {qid}\n"
             f"\tfor <{rcpt}>; {format_datetime(date)}\n")
    return trace.encode() + raw


def fmt_long_date(client: str, d: datetime) -> str:
    if client == "outlook":
        return d.strftime("%A, %B %-d, %Y %-I:%M %p")
    if client == "gmail":
        return d.strftime("%a, %b %-d, %Y at %-I:%M %p")
    if client == "apple":
        return d.strftime("%-d %B %Y at %H:%M:%S GMT")
    return format_datetime(d)


def quote_block(client: str, orig_from: Person, orig_to: str, subject: str, d: datetime, text: str,
                style: str) -> str:
    """The original below a note, as each client lays out a reply ("reply") or an inline
    forward ("forward")."""
    if client == "outlook":
        sep = "________________________________" if style == "forward" or d.year > 2024 else "-----Original Message-----"
        return (f"{sep}\nFrom: {orig_from.header}\nSent: {fmt_long_date(client, d)}\n"
                f"To: {orig_to}\nSubject: {subject}\n\n{text}")
    if client == "gmail":
        if style == "forward":
            return (f"---------- Forwarded message ---------\nFrom: {orig_from.header}\n"
                    f"Date: {fmt_long_date(client, d)}\nSubject: {subject}\nTo: <{orig_to}>\n\n\n{text}")
        return f"On {fmt_long_date(client, d)} {orig_from.header} wrote:\n\n" + _gt(text)
    if client == "apple":
        if style == "forward":
            return (f"Begin forwarded message:\n\nFrom: {orig_from.header}\nSubject: {subject}\n"
                    f"Date: {fmt_long_date(client, d)}\nTo: {orig_to}\n\n{text}")
        return _gt(f"On {d.strftime('%-d %b %Y')}, at {d.strftime('%H:%M')}, {orig_from.header} wrote:\n\n{text}")
    if style == "forward":
        return (f"-------- Forwarded Message --------\nSubject: \t{subject}\nDate: \t{format_datetime(d)}\n"
                f"From: \t{orig_from.header}\nTo: \t{orig_to}\n\n{text}")
    return f"On {d.strftime('%d/%m/%Y %H:%M')}, {orig_from.name} wrote:\n" + _gt(text, wrap=72)


def _gt(text: str, wrap: int = 0) -> str:
    lines = []
    for line in text.split("\n"):
        if wrap and len(line) > wrap:
            lines.extend("> " + x for x in textwrap.wrap(line, wrap - 2))
        else:
            lines.append(("> " + line) if line else ">")
    return "\n".join(lines)


def quote_html(client: str, orig_from: Person, orig_to: str, subject: str, d: datetime, text: str, style: str) -> str:
    inner = "".join("<div>" + html.escape(p).replace("\n", "<br>") + "</div><div><br></div>" for p in text.split("\n\n"))
    if client == "outlook":
        return ('<div style="border:none;border-top:solid #E1E1E1 1.0pt;padding:3.0pt 0in 0in 0in">'
                f'<p class="MsoNormal"><b>From:</b> {html.escape(orig_from.header)}<br><b>Sent:</b> {fmt_long_date(client, d)}<br>'
                f'<b>To:</b> {html.escape(orig_to)}<br><b>Subject:</b> {html.escape(subject)}<o:p></o:p></p></div>'
                + inner)
    if client == "gmail":
        if style == "forward":
            return ('<div class="gmail_quote"><div dir="ltr" class="gmail_attr">---------- Forwarded message ---------<br>'
                    f'From: <strong class="gmail_sendername" dir="auto">{html.escape(orig_from.name)}</strong> '
                    f'<span dir="auto">&lt;<a href="mailto:{orig_from.email}">{orig_from.email}</a>&gt;</span><br>'
                    f'Date: {fmt_long_date(client, d)}<br>Subject: {html.escape(subject)}<br>To: &lt;{orig_to}&gt;<br></div><br><br>'
                    f'<div dir="ltr">{inner}</div></div>')
        return ('<div class="gmail_quote"><div dir="ltr" class="gmail_attr">On '
                f'{fmt_long_date(client, d)} {html.escape(orig_from.header)} wrote:<br></div>'
                '<blockquote class="gmail_quote" style="margin:0px 0px 0px 0.8ex;border-left:1px solid rgb(204,204,204);padding-left:1ex">'
                f'<div dir="ltr">{inner}</div></blockquote></div>')
    if client == "apple":
        head = (f'<div><br><blockquote type="cite"><div>Begin forwarded message:</div><br>'
                f'<div><b>From: </b>{html.escape(orig_from.header)}<br><b>Subject: </b>{html.escape(subject)}<br>'
                f'<b>Date: </b>{fmt_long_date(client, d)}<br><b>To: </b>{html.escape(orig_to)}<br></div><br>'
                if style == "forward" else
                f'<div><br><blockquote type="cite"><div>On {d.strftime("%-d %b %Y")}, at {d.strftime("%H:%M")}, '
                f'{html.escape(orig_from.header)} wrote:</div><br>')
        return head + inner + "</blockquote></div>"
    if style == "forward":
        return ('<div class="moz-forward-container"><br><br>-------- Forwarded Message --------\n'
                '<table class="moz-email-headers-table" border="0" cellpadding="0" cellspacing="0"><tbody>'
                f'<tr><th align="RIGHT" valign="BASELINE" nowrap>Subject: </th><td>{html.escape(subject)}</td></tr>'
                f'<tr><th align="RIGHT" valign="BASELINE" nowrap>Date: </th><td>{format_datetime(d)}</td></tr>'
                f'<tr><th align="RIGHT" valign="BASELINE" nowrap>From: </th><td>{html.escape(orig_from.header)}</td></tr>'
                f'<tr><th align="RIGHT" valign="BASELINE" nowrap>To: </th><td>{html.escape(orig_to)}</td></tr>'
                f'</tbody></table><br>{inner}</div>')
    return (f'<div class="moz-cite-prefix">On {d.strftime("%d/%m/%Y %H:%M")}, {html.escape(orig_from.name)} wrote:<br></div>'
            f'<blockquote type="cite" cite="mid:x">{inner}</blockquote>')


def note_with_original(rng, client, sender, rcpt, subject, note, orig, style) -> tuple[str, str]:
    """(text, html) of a note above the original message (orig: dict of its parts)."""
    block = quote_block(client, orig["from"], orig["to"], orig["subject"], orig["date"], orig["text"], style)
    sig = signoff(rng, sender, short=True)
    text = f"{note}\n\n{sig}\n\n{block}\n"
    hnote = text_to_html(client, note + "\n\n" + sig)
    hq = quote_html(client, orig["from"], orig["to"], orig["subject"], orig["date"], orig["text"], style)
    if "</body>" in hnote:
        h = hnote.replace("</body>", hq + "</body>")
    else:
        h = hnote + "<br>" + hq
    return text, h


# --------------------------------------------------------------------------- content

GREETINGS = ["Hi {f},", "Hello {f},", "Dear {f},", "Hi {f} -", "{f},", "Good morning {f},", "Hey {f},"]
CLOSINGS = ["Best regards,", "Kind regards,", "Thanks,", "Best,", "Cheers,", "Many thanks,", "Regards,", "Thank you,"]


def signoff(rng: random.Random, p: Person, short: bool = False) -> str:
    if short:
        return rng.choice(["Thanks,", "Best,", "Cheers,", "Regards,"]) + "\n" + p.first
    lines = [rng.choice(CLOSINGS), p.first, "", p.name]
    if p.company:
        lines += [p.title, p.company]
        if rng.random() < 0.7:
            lines.append(f"T: +{rng.randint(1, 49)} {rng.randint(100, 999)} {rng.randint(100, 999)} {rng.randint(1000, 9999)}")
    return "\n".join(lines)


SUBJECTS = ["Q{q} budget review", "Draft agreement for {c}", "Meeting notes - {d}", "Re: server migration plan",
            "Proposal for the {c} project", "Updated timeline", "Question about invoice {n}", "Onboarding checklist",
            "Follow-up from our call", "Site visit next week", "Contract renewal {y}", "Feedback on the draft",
            "Data export request", "Travel arrangements for {d}", "Vendor comparison", "Release planning {y}.{q}",
            "Board pack comments", "Training schedule", "Access request for {c} portal", "Minutes from Tuesday"]


def subject_line(rng: random.Random) -> str:
    return rng.choice(SUBJECTS).format(q=rng.randint(1, 4), c=rng.choice(COMPANY_WORDS).capitalize(),
                                       d=rng.choice(["Monday", "the offsite", "March 12", "the 4th"]),
                                       n=rng.randint(10000, 99999), y=rng.choice([2025, 2026]))


def business_text(rng: random.Random, corpus: Corpus, sender: Person, rcpt: Person, n_par: tuple[int, int] = (1, 3)) -> str:
    paras = rng.sample(corpus.paragraphs, rng.randint(*n_par))
    return (rng.choice(GREETINGS).format(f=rcpt.first) + "\n\n" + "\n\n".join(paras)
            + "\n\n" + signoff(rng, sender))


def original_message(rng, corpus, sender, rcpt, client=None, n_par=(1, 3)):
    client = client or rng.choice(CLIENTS)
    d = rand_date(rng)
    subj = subject_line(rng)
    text = business_text(rng, corpus, sender, rcpt, n_par)
    msg = build(rng, client, sender, rcpt.header if rng.random() < 0.6 else rcpt.email, subj, text, d)
    return msg, {"from": sender, "to": rcpt.email, "subject": subj, "date": d, "text": text, "client": client}


# --------------------------------------------------------------------------- categories

def _mailbox(rng) -> Person:
    return person(rng)


def cat_forwarded_as_attachment(rng, corpus, idx):
    rcpt = _mailbox(rng)
    if rng.random() < 0.4 and corpus.ham_msgs:
        # a real list message the recipient had, later forwarded to them as an attachment
        raw = rng.choice(corpus.ham_msgs)
        orig = email.message_from_bytes(raw, policy=POLICY)
        d0 = rand_date(rng)
        first = raw
        subj = " ".join(str(orig.get("Subject", "(no subject)")).split())
    else:
        sender = person(rng)
        msg, info = original_message(rng, corpus, sender, rcpt)
        d0 = info["date"]
        first = msg.as_bytes(policy=POLICY)
        subj = info["subject"]
    fwd_from = person(rng, rcpt.email.split("@")[1] if rng.random() < 0.5 else None)
    client = rng.choice(CLIENTS)
    note = rng.choice(["", "FYI", "See attached.", "Forwarding this as requested - the original is attached.",
                       "Not sure you got this one, attaching it here.",
                       "Can you have a look at the attached? It came in last week.",
                       "Please see the message below/attached and let me know what you think."])
    cover = (note + "\n\n" + signoff(rng, fwd_from, short=True)) if note else ""
    d1 = later(rng, d0)
    inner = email.message_from_bytes(first, policy=POLICY)
    as_eml = rng.random() < 0.4
    atts = [(first, "application", "octet-stream", re.sub(r"[^\w .-]", "", subj)[:60].strip() + ".eml")] if as_eml else [inner]
    fwd_subj = rng.choice(["Fwd: ", "FW: ", "Fw: "]) + subj
    m = build(rng, client, fwd_from, rcpt.email, fwd_subj, cover or "\n", d1,
              html_body=True if cover else None, attachments=atts)
    return Case("forwarded_as_attachment", idx, [
        Delivery([rcpt.email], deliver_bytes(rng, first, rcpt.email, d0)),
        Delivery([rcpt.email], deliver_bytes(rng, m, rcpt.email, d1), "duplicate")],
        personalise=lambda r, p: deliver_bytes(r, first, p.email, d0))


LINK_SITES = ["https://www.{c}.com/events/2025/annual-summit", "https://docs.google.com/document/d/{t}/edit",
              "https://{c}.sharepoint.com/sites/Finance/Shared%20Documents/Q3-report.xlsx?web=1",
              "https://www.{c}.com/blog/{s}", "https://zoom.us/j/{n}?pwd={t}", "https://calendly.com/{f}/30min",
              "https://github.com/{c}/{s}/pull/{n4}", "https://portal.{c}.io/login?next=%2Fdashboard",
              "https://www.linkedin.com/company/{c}/", "https://forms.office.com/r/{t}",
              "https://{c}.atlassian.net/wiki/spaces/OPS/pages/{n}/Runbook", "https://www.{c}.com/pricing?utm_source=email&utm_medium=partner"]


def rand_link(rng):
    return rng.choice(LINK_SITES).format(c=rng.choice(COMPANY_WORDS), t=rand_token(rng, 12, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz0123456789"),
                                         s=rng.choice(["roadmap", "release-notes", "new-pricing", "security-update"]),
                                         n=rng.randint(10**9, 10**10), n4=rng.randint(100, 9999), f=rng.choice(FIRST).lower())


def safelinks(rng, url, rcpt):
    region = rng.choice(["nam12", "nam10", "nam02", "eur01", "eur03", "gbr01", "apc01", "can01"])
    data = "%7C".join(["05", "02", urllib.parse.quote(rcpt, safe=""), rand_token(rng, 32, "0123456789abcdef"),
                       "-".join(rand_token(rng, n, "0123456789abcdef") for n in (8, 4, 4, 4, 12)), "0", "0",
                       str(rng.randint(10**17, 10**18)), "Unknown",
                       "TWFpbGZsb3d8eyJFbXB0eU1hcGkiOnRydWUsIlYiOiIwLjAuMDAwMCIsIlAiOiJXaW4zMiIsIkFOIjoiTWFpbCIsIldUIjoyfQ%3D%3D",
                       "0", "", "", ""])
    sdata = urllib.parse.quote(base64.b64encode(rng.randbytes(30)).decode(), safe="")
    return f"https://{region}.safelinks.protection.outlook.com/?url={urllib.parse.quote(url, safe='')}&data={data}&sdata={sdata}&reserved=0"


def proofpoint_v2(rng, url):
    enc = urllib.parse.quote(url, safe="").replace("%", "-").replace("_", "_5F").replace("-2F", "_")
    b = lambda n: rand_token(rng, n, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")  # noqa: E731
    return f"https://urldefense.proofpoint.com/v2/url?u={enc}&d=DwMFaQ&c={b(22)}&r={b(43)}&m={b(43)}&s={b(43)}&e="


def proofpoint_v3(rng, url):
    b = rand_token(rng, 10, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
    tail = rand_token(rng, 60, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    return f"https://urldefense.com/v3/__{url}__;!!{b}!{tail}$"


def mimecast(rng, url):
    host = urllib.parse.urlsplit(url).hostname
    return f"https://protect-{rng.choice(['eu', 'us', 'au', 'za'])}.mimecast.com/s/{rand_token(rng, 22, 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789')}?domain={host}"


BANNERS = [
    "[EXTERNAL] This email originated from outside of the organization. Do not click links or open attachments unless you recognize the sender and know the content is safe.",
    "CAUTION: This email originated from outside your organization. Exercise caution when opening attachments or clicking links, especially from unknown senders.",
    "[EXTERNAL EMAIL] DO NOT CLICK links or attachments unless you recognize the sender and know the content is safe.",
    "You don't often get email from {s}. Learn why this is important at https://aka.ms/LearnAboutSenderIdentification",
]


def cat_gateway_rewritten_links(rng, corpus, idx):
    rcpt = _mailbox(rng)
    sender = person(rng)
    client = rng.choice(CLIENTS)
    d0 = rand_date(rng)
    links = [rand_link(rng) for _ in range(rng.randint(1, 4))]
    paras = rng.sample(corpus.paragraphs, rng.randint(1, 3))
    intro = rng.choice(GREETINGS).format(f=rcpt.first)
    body_parts = [intro]
    for i, p in enumerate(paras):
        body_parts.append(p)
        if i < len(links):
            body_parts.append(rng.choice(["Details here: ", "Link: ", "You can find it at ", "See "]) + "{L" + str(i) + "}")
    for j in range(len(paras), len(links)):
        body_parts.append("Also: {L" + str(j) + "}")
    body_parts.append(signoff(rng, sender))
    tmpl = "\n\n".join(body_parts)
    subj = subject_line(rng)
    mid = msgid(rng, client, sender.email.split("@")[1])
    kind = rng.choice(["safelinks", "pp2", "pp3", "mimecast"])

    def render(rewrite, banner):
        lk = {f"L{i}": (rewrite(u) if rewrite else u) for i, u in enumerate(links)}
        text = tmpl
        for k, v in lk.items():
            text = text.replace("{" + k + "}", v)
        htm = text_to_html(client, tmpl)
        for k, v in lk.items():
            orig = links[int(k[1:])]
            htm = htm.replace("{" + k + "}", f'<a href="{html.escape(v)}">{html.escape(orig)}</a>')
        if banner:
            text = banner + "\n\n" + text
            bhtml = ('<table border="0" cellspacing="0" cellpadding="0" width="100%" style="background:#FFEB9C">'
                     f'<tr><td style="padding:4pt"><span style="font-size:9pt">{html.escape(banner)}</span></td></tr></table>')
            htm = htm.replace("<body", "<body", 1)
            htm = re.sub(r"(<body[^>]*>)", r"\1" + bhtml.replace("\\", "\\\\"), htm, count=1) if "<body" in htm else bhtml + htm
        return text, htm

    rewriter = {"safelinks": lambda u: safelinks(rng, u, rcpt.email), "pp2": lambda u: proofpoint_v2(rng, u),
                "pp3": lambda u: proofpoint_v3(rng, u), "mimecast": lambda u: mimecast(rng, u)}[kind]
    banner = rng.choice(BANNERS).format(s=sender.email) if rng.random() < 0.6 else None
    t0, h0 = render(None, None)
    t1, h1 = render(rewriter, banner)
    keep_mid = rng.random() < 0.35
    subj1 = ("[EXTERNAL] " + subj) if banner and rng.random() < 0.4 else subj
    m0 = build(rng, client, sender, rcpt.email, subj, t0, d0, html_body=h0, mid=mid)
    m1 = build(rng, client, sender, rcpt.email, subj1, t1, later(rng, d0, 1, 600), html_body=h1,
               mid=mid if keep_mid else True)
    first, second = (m0, m1) if rng.random() < 0.6 else (m1, m0)
    return Case("gateway_rewritten_links", idx, [
        Delivery([rcpt.email], deliver_bytes(rng, first, rcpt.email, d0)),
        Delivery([rcpt.email], deliver_bytes(rng, second, rcpt.email, later(rng, d0)), "duplicate")],
        personalise=lambda r, p: deliver_bytes(r, build(r, client, sender, p.email, subj,
                                                         t0.replace(intro, rng.choice(GREETINGS).format(f=p.first)),
                                                         d0, html_body=h0, mid=True), p.email, d0))


RESEND_NOTES = [
    "Resending - my first email bounced back. Apologies if you get it twice.",
    "Sorry, resending this as I got a delivery failure notice. Apologies if it reaches you twice.",
    "Re-sending, the first one bounced (mailbox full?). Ignore if you already have it.",
    "My previous email came back undelivered, so here it is again. Sorry for any duplicate.",
    "Trying again - got a bounce from your server on the original. Apologies if this is a duplicate.",
    "Erneut gesendet - meine erste E-Mail kam als unzustellbar zurück. Entschuldigung, falls sie doppelt ankommt.",
    "Je vous renvoie ce message, le premier m'est revenu en erreur. Désolé si vous le recevez deux fois.",
    "Reenvío este correo porque el primero fue rechazado. Disculpa si te llega dos veces.",
    "Opnieuw verstuurd - mijn eerste mail kwam onbestelbaar terug. Excuses als je hem twee keer krijgt.",
    "Reinvio la mail, la prima mi è tornata indietro. Scusa se ti arriva due volte.",
]


def _note_case(rng, corpus, idx, category, notes, new_subject):
    rcpt = _mailbox(rng)
    sender = person(rng)
    client = rng.choice(CLIENTS)
    msg, info = original_message(rng, corpus, sender, rcpt, client)
    d1 = later(rng, info["date"], 30, 10 * 24 * 60)
    style = rng.choice(["reply", "forward"])
    note = rng.choice(notes)
    text, htm = note_with_original(rng, client, sender, rcpt, None, note, info, style)
    subj = new_subject(rng, info["subject"])
    m = build(rng, client, sender, rcpt.email, subj, text, d1, html_body=htm if client != "thunderbird" or rng.random() < 0.5 else None)
    first = msg.as_bytes(policy=POLICY)
    return Case(category, idx, [
        Delivery([rcpt.email], deliver_bytes(rng, first, rcpt.email, info["date"])),
        Delivery([rcpt.email], deliver_bytes(rng, m, rcpt.email, d1), "duplicate")],
        personalise=lambda r, p: deliver_bytes(r, build(r, client, sender, p.email, info["subject"],
                                                         info["text"].replace(f"{rcpt.first}", p.first, 1),
                                                         info["date"]), p.email, info["date"]))


def cat_resend_after_bounce(rng, corpus, idx):
    return _note_case(rng, corpus, idx, "resend_after_bounce", RESEND_NOTES,
                      lambda r, s: r.choice(["", "Fwd: ", "FW: ", "Re: ", "Resending: ", "RESEND: "]) + s)


FOLLOWUP_NOTES = [
    "In case this got lost - see below.",
    "In case this got lost - see below. Could you let me know by Friday whether this works for you?",
    "Just bumping this to the top of your inbox, no rush but would be good to close it out this week.",
    "Following up on the note below - any thoughts? Happy to jump on a quick call if easier.",
    "Gentle reminder on the below. We need an answer before the end of the month to keep the schedule.",
    "Circling back on this one. Let me know if anything is unclear or if you need more detail from our side.",
    "Did you have a chance to look at this? I have copied the original below for convenience.",
    "Not sure this reached you last week, so sending it again with the full text below. Thanks for checking.",
]


def cat_note_over_original(rng, corpus, idx):
    return _note_case(rng, corpus, idx, "note_over_original", FOLLOWUP_NOTES,
                      lambda r, s: r.choice(["Following up", "Quick nudge: " + s, "Re: " + s, "Any update?",
                                             "Checking in", "Still open: " + s, "Reminder - " + s.lower()]))


# newsletters ---------------------------------------------------------------

NEWSLETTERS = [("The Morning Brief", "news"), ("Product Updates", "updates"), ("Weekly Digest", "digest"),
               ("Community Roundup", "community"), ("Inside {C}", "inside"), ("{C} Insider", "insider"),
               ("Tech Notes", "technotes"), ("The Friday Five", "friday")]
ESPS = [("Mailchimp", "mcsv.net", "list-manage.com"), ("SendGrid", "sendgrid.net", "ct.sendgrid.net"),
        ("HubSpot", "hubspotemail.net", "hubspotlinks.com"), ("Campaign Monitor", "cmail20.com", "createsend1.com"),
        ("Substack", "substack.com", "substack.com")]


@dataclass
class Newsletter:
    name: str
    org: str
    domain: str
    esp: tuple
    color: str
    about: str
    sender_local: str

    def postal_address(self) -> str:
        """The sender's postal address (CAN-SPAM): one per newsletter, the same in every copy."""
        number = int(hashlib.md5(self.domain.encode()).hexdigest()[:8], 16)
        return f"{number % 999 + 1} Market Street, Suite {number // 999 % 900 + 100}, San Francisco, CA 94105"

    def render(self, rng, sub: Person, subject: str, items: list[tuple[str, str]], issue: int,
               date: datetime, added_line: str = "", greet: bool = True, send: int = 0) -> EmailMessage:
        """One subscriber's copy of one send: the campaign id is the send's, the subscriber id
        and every link's click token are this copy's own."""
        tr = random.Random(rng.random())
        sub_id = hashlib.md5(sub.email.encode()).hexdigest()[:10]
        camp = hashlib.md5(f"{self.domain}:{issue}:{send}".encode()).hexdigest()[:10]

        def track(u):
            return f"https://{rand_token(tr, 5)}.{self.esp[2]}/track/click?u={sub_id}&id={camp}&e={rand_token(tr, 10, '0123456789abcdef')}&url={urllib.parse.quote(u, safe='')}"

        greet_line = f"Hi {sub.first}," if greet else ""
        tparts = [f"{self.name} - Issue #{issue}", f"View this email in your browser: https://{self.domain}/newsletter/{issue}?u={sub_id}"]
        if added_line:
            tparts.insert(0, added_line)
        if greet_line:
            tparts.append(greet_line)
        hitems = []
        for head, body in items:
            url = f"https://www.{self.domain}/{re.sub(r'[^a-z0-9]+', '-', head.lower()).strip('-')[:40]}"
            tparts.append(f"{head.upper()}\n\n{body}\n\nRead more: {track(url)}")
            hitems.append(f'<tr><td style="padding:16px 24px;font-family:Arial,sans-serif"><h2 style="color:{self.color};font-size:20px">{html.escape(head)}</h2>'
                          f'<p style="font-size:15px;line-height:1.5">{html.escape(body)}</p>'
                          f'<a href="{track(url)}" style="color:{self.color}">Read more &rarr;</a></td></tr>')
        unsub = f"https://{self.domain}/unsubscribe?u={sub_id}&e={rand_token(tr, 16, '0123456789abcdef')}"
        footer = (f"{self.about}\n\nYou are receiving this email because {sub.email} subscribed to {self.name}.\n"
                  f"Update your preferences: https://{self.domain}/preferences?u={sub_id}\nUnsubscribe: {unsub}\n\n"
                  f"{self.org}, {self.postal_address()}")
        tparts.append(footer)
        text = "\n\n".join(tparts)
        hhead = (f'<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN" "http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">'
                 f'<html><head><meta charset="utf-8"><title>{html.escape(subject)}</title></head><body style="margin:0;background:#f4f4f4">'
                 + (f'<div style="display:none;font-size:1px;color:#fff">{html.escape(added_line)}</div>' if added_line else "")
                 + f'<table role="presentation" width="100%" cellpadding="0" cellspacing="0"><tr><td align="center">'
                 f'<table width="600" style="background:#ffffff"><tr><td style="background:{self.color};padding:20px;color:#fff;font-family:Georgia,serif;font-size:28px">'
                 f'{html.escape(self.name)}<br><span style="font-size:13px">Issue #{issue} &middot; {date.strftime("%B %-d, %Y")}</span></td></tr>'
                 + (f'<tr><td style="padding:16px 24px;font-weight:bold">{html.escape(added_line)}</td></tr>' if added_line else "")
                 + (f'<tr><td style="padding:16px 24px">{html.escape(greet_line)}</td></tr>' if greet_line else ""))
        hfoot = (f'<tr><td style="padding:24px;font-size:12px;color:#888">{html.escape(self.about)}<br><br>'
                 f'You are receiving this email because {html.escape(sub.email)} subscribed to {html.escape(self.name)}.<br>'
                 f'<a href="https://{self.domain}/preferences?u={sub_id}">Update preferences</a> | <a href="{unsub}">Unsubscribe</a>'
                 f'<img src="https://{self.esp[2]}/open/{camp}/{sub_id}.gif" width="1" height="1" alt=""></td></tr></table></td></tr></table></body></html>')
        htm = hhead + "".join(hitems) + hfoot
        frm = f'{self.name} <{self.sender_local}@{self.domain}>'
        m = build(rng, "esp", frm, sub.email, subject, text, date, html_body=htm,
                  mid=f"<{rand_token(tr, 24, '0123456789abcdef')}@{self.esp[1]}>",
                  extra={"List-Unsubscribe": f"<{unsub}>, <mailto:unsubscribe-{sub_id}@{self.esp[1]}>",
                         "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
                         "List-Id": f"{self.name} <{camp}.{self.domain}>",
                         "X-Campaign-Id": camp, "Precedence": "bulk",
                         "Feedback-ID": f"{rng.randint(10**6, 10**7)}:{self.esp[0].replace(' ', '').lower()}"})
        return m


def newsletter(rng) -> Newsletter:
    dom, org = company_domain(rng)
    name, local = rng.choice(NEWSLETTERS)
    name = name.format(C=org.split()[0])
    color = rng.choice(["#0b5394", "#cc0000", "#38761d", "#674ea7", "#e69138", "#134f5c", "#222222"])
    about = rng.choice([f"{org} helps teams ship better software, faster.",
                        f"{name} is written by the team at {org}. Reply to this email to reach us - we read everything.",
                        f"Copyright (C) 2025 {org}. All rights reserved. Our mailing address is available on request.",
                        f"{org} is an independent publisher covering technology, business and policy."])
    return Newsletter(name, org, dom, rng.choice(ESPS), color, about, rng.choice(["newsletter", "hello", "news", "team", "digest"]))


HEADLINES = ["What we shipped this month", "A closer look at {w}", "Five lessons from {w}", "Event recap: {w} summit",
             "Ask the expert: {w}", "Customer story: {w}", "Why {w} matters now", "New in the app: {w} mode",
             "Our roadmap for {w}", "The numbers behind {w}", "Reader mailbag", "Upcoming webinars"]


def news_items(rng, corpus, n):
    return [(rng.choice(HEADLINES).format(w=rng.choice(COMPANY_WORDS).capitalize()), rng.choice(corpus.paragraphs)) for _ in range(n)]


def cat_newsletter_resent_new_subject(rng, corpus, idx):
    nl = newsletter(rng)
    sub = _mailbox(rng)
    items = news_items(rng, corpus, rng.randint(2, 4))
    issue = rng.randint(12, 240)
    d0 = rand_date(rng)
    subj = rng.choice([f"{nl.name} #{issue}: {items[0][0]}", items[0][0], f"{nl.name}: {items[0][0]} and more"])
    subj2 = rng.choice([f"[Reminder] {subj}", f"Last chance: {items[0][0]}", f"In case you missed it: {items[0][0]}",
                        f"Don't miss this: {items[0][0].lower()}", f"{items[1][0]} (and {items[0][0].lower()})", f"RE-SEND: {subj}"])
    added = rng.choice(["", "", "In case you missed it earlier this week:", "Resending - the first send had a broken link.",
                        "Only 48 hours left to register!"])
    m0 = nl.render(rng, sub, subj, items, issue, d0)
    d1 = later(rng, d0, 24 * 60, 7 * 24 * 60)
    m1 = nl.render(rng, sub, subj2, items, issue, d1, added_line=added, send=1)
    return Case("newsletter_resent_new_subject", idx, [
        Delivery([sub.email], deliver_bytes(rng, m0, sub.email, d0)),
        Delivery([sub.email], deliver_bytes(rng, m1, sub.email, d1), "duplicate")],
        personalise=lambda r, p: deliver_bytes(r, nl.render(r, p, subj, items, issue, d0), p.email, d0))


def cat_newsletter_two_addresses(rng, corpus, idx):
    nl = newsletter(rng)
    p = _mailbox(rng)
    dom, _ = company_domain(rng)
    a1 = p.email
    a2 = f"{p.first[0].lower()}{p.last.lower()}@{dom}" if rng.random() < 0.5 else f"{p.first.lower()}.{p.last.lower()}{rng.randint(1, 99)}@{rng.choice(FREEMAIL)}"
    mbox = f"{p.first.lower()}.{p.last.lower()}.{idx}@mailbox.invalid"
    items = news_items(rng, corpus, rng.randint(2, 4))
    issue = rng.randint(12, 240)
    d0 = rand_date(rng)
    subj = rng.choice([f"{nl.name} #{issue}: {items[0][0]}", items[0][0]])
    p2 = Person(p.first, p.last, a2)
    m0 = nl.render(rng, p, subj, items, issue, d0)
    d1 = later(rng, d0, 0, 20)
    m1 = nl.render(rng, p2, subj, items, issue, d1)
    return Case("newsletter_two_addresses", idx, [
        Delivery([a1], deliver_bytes(rng, m0, a1, d0)),
        Delivery([a2], deliver_bytes(rng, m1, a2, d1), "duplicate")],
        aliases=[(a1, mbox), (a2, mbox)],
        personalise=lambda r, q: deliver_bytes(r, nl.render(r, q, subj, items, issue, d0), q.email, d0))


SPAM_SUBJECTS = ["Be Your Own Boss!!", "Lose 20 lbs in 30 days", "Your account has been selected", "Refinance now - rates at record lows",
                 "Make money from home", "Limited time offer - 80% off", "You have won a $500 gift card", "Cheap meds online",
                 "Get out of debt fast", "Exclusive invitation for you", "Re: your order", "Meet singles in your area"]


def cat_campaign_copies(rng, corpus, idx):
    rcpt = _mailbox(rng)
    subj = rng.choice(SPAM_SUBJECTS)
    if rng.random() < 0.6 and corpus.spam_bodies:
        subj, body = rng.choice(corpus.spam_bodies)  # a real campaign's text, its subject without its token
    else:
        dom, org = company_domain(rng)
        body = ("\n\n".join(rng.sample(corpus.paragraphs, 2)) + f"\n\nCLICK HERE: http://www.{dom}/offer\n\n"
                f"To be removed from our list reply with REMOVE in the subject.")
    sdom = rng.choice(["gotmail.ru", "offers-daily.biz", "mail-promo.info", f"{rng.choice(COMPANY_WORDS)}deals.com"])
    variant = rng.choice(["subject_token", "sender", "tracking", "all"])
    d0 = rand_date(rng)

    def copy(r, to, d):
        s = subj
        if variant in ("subject_token", "all"):
            s = f"{subj} {r.randint(10000, 99999)}" if r.random() < 0.7 else f"{subj} [{rand_token(r, 6)}]"
        local = rand_token(r, r.randint(5, 10)) if variant in ("sender", "all") else "offers"
        b = body
        if variant in ("tracking", "all"):
            b = (f"{b.rstrip()}\n\nref:{rand_token(r, 10, 'ABCDEFGHJKLMNPQRSTUVWXYZ23456789')}\n"
                 f"http://track.{sdom}/c/{rand_token(r, 16)}?id={r.randint(10**6, 10**8)}\n")
        client = "bulk"
        return build(r, client, f"{local}@{sdom}", to, s, b, d, html_body=None if r.random() < 0.5 else True,
                     extra={"X-Mailer": r.choice(["Microsoft Outlook Express 6.00.2600.0000", "The Bat! (v3.0)", "PHPMailer 6.1.4"])})

    d1 = later(rng, d0, 1, 2 * 24 * 60)
    return Case("campaign_copies", idx, [
        Delivery([rcpt.email], deliver_bytes(rng, copy(rng, rcpt.email, d0), rcpt.email, d0)),
        Delivery([rcpt.email], deliver_bytes(rng, copy(rng, rcpt.email, d1), rcpt.email, d1), "duplicate")],
        personalise=lambda r, p: deliver_bytes(r, copy(r, p.email, d0), p.email, d0))


SHORT_MSGS = ["Running 10 min late, start without me.", "Can you call me when you get a sec?", "Door code is 4471.",
              "Lunch at noon?", "Meeting moved to 3pm.", "Left my keys at your desk.", "Server is back up.",
              "Please sign the form today.", "Parking lot is full, use level 2.", "On my way.",
              "Reminder: timesheets due Friday.", "Printer on 4th floor is fixed."]


def cat_same_short_message_twice(rng, corpus, idx):
    rcpt = _mailbox(rng)
    sender = person(rng, rcpt.email.split("@")[1] if rng.random() < 0.5 else None)
    text = rng.choice(SHORT_MSGS)
    subj = rng.choice([text.split(".")[0][:30], "quick one", "FYI", "(no subject)", "heads up"])
    d0 = rand_date(rng)
    client = rng.choice(["bulk", "thunderbird", "apple"])
    raw = build(rng, client, sender, rcpt.email, subj, text + ("\n\n-- \nSent from my phone" if rng.random() < 0.3 else ""),
                d0, html_body=None, mid=None).as_bytes(policy=POLICY)
    return Case("same_short_message_twice", idx, [
        Delivery([rcpt.email], deliver_bytes(rng, raw, rcpt.email, d0)),
        Delivery([rcpt.email], deliver_bytes(rng, raw, rcpt.email, later(rng, d0, 1, 90)), "duplicate")],
        personalise=lambda r, p: deliver_bytes(r, raw.replace(rcpt.email.encode(), p.email.encode()), p.email, d0))


# must stay unique ----------------------------------------------------------

def cat_tracker_status_updates(rng, corpus, idx):
    rcpt = _mailbox(rng)
    kind = rng.choice(["jira", "github", "bugzilla"])
    desc = "\n\n".join(rng.sample(corpus.paragraphs, rng.randint(1, 3)))
    title = rng.choice(["Login fails after password change", "Export to CSV drops non-ASCII names", "Dashboard times out on large projects",
                        "Memory leak in worker process", "Add SSO support for Okta", "Search results ignore date filter",
                        "Crash when attachment exceeds 25 MB", "Billing page shows wrong currency"])
    d = rand_date(rng)
    people = [person(rng) for _ in range(4)]
    statuses = ["Open", "In Progress", "In Review", "Blocked", "Resolved", "Closed", "Reopened"]
    n_upd = rng.randint(2, 4)
    deliveries = []
    dom, org = company_domain(rng)
    proj = rng.choice(["OPS", "WEB", "CORE", "API", "INFRA", "BILL", "MOB"])
    key = f"{proj}-{rng.randint(100, 9999)}"
    repo = f"{rng.choice(COMPANY_WORDS)}/{rng.choice(['api', 'frontend', 'worker', 'cli', 'docs'])}"
    num = rng.randint(100, 9999)
    bug = rng.randint(100000, 1999999)
    st = 0
    ncomment = 0
    msgs = []
    for u in range(n_upd + 1):
        actor = rng.choice(people)
        d = later(rng, d, 20, 2 * 24 * 60)
        if u == 0:
            change = "created"
        elif rng.random() < 0.5:
            nst = rng.choice([i for i in range(len(statuses)) if i != st])
            change = ("status", statuses[st], statuses[nst])
            st = nst
        else:
            ncomment += 1
            change = ("comment", rng.choice(corpus.paragraphs) if rng.random() < 0.6 else rng.choice(
                ["Can reproduce on staging.", "Fixed in the latest build, please verify.", "Any update on this?",
                 "Assigning to the platform team.", "This is blocking the release, raising priority.",
                 f"Attached logs from {rng.choice(['prod', 'staging'])}, see lines {rng.randint(100, 900)}-{rng.randint(901, 2000)}."]))
        if kind == "jira":
            subj = f"[JIRA] ({key}) {title}"
            if change == "created":
                head = f"{actor.name} created an issue\n\n{org} / {key}\n{title}\n\nIssue Type: Bug\nAssignee: {people[1].name}\nPriority: {rng.choice(['Major', 'Minor', 'Critical'])}"
            elif change[0] == "status":
                head = f"{actor.name} changed the status to {change[2]}\n\n{org} / {key}\n{title}\n\nChange By: {actor.name}\nStatus: {change[1]} -> {change[2]}"
            else:
                head = f"{actor.name} commented on {key}\n\nRe: {title}\n\n{change[1]}"
            text = (f"{head}\n\nDescription:\n\n{desc}\n\nView issue: https://{dom.split('.')[0]}.atlassian.net/browse/{key}\n\n"
                    f"This message was sent by Atlassian Jira (v1001.0.0-SNAPSHOT#100247-sha1:{rand_token(rng, 7, '0123456789abcdef')})")
            frm = f"{actor.name} (Jira) <jira@{dom.split('.')[0]}.atlassian.net>"
            extra = {"X-JIRA-FingerPrint": rand_token(rng, 32, "0123456789abcdef"), "Auto-Submitted": "auto-generated"}
        elif kind == "github":
            subj = (f"[{repo}] {title} (Issue #{num})" if change == "created" else f"Re: [{repo}] {title} (Issue #{num})")
            url = f"https://github.com/{repo}/issues/{num}"
            if change == "created":
                head = desc
            elif change[0] == "status":
                head = {"Closed": f"Closed #{num} as completed via #{rng.randint(num + 1, num + 400)}.",
                        "Resolved": f"Closed #{num} as completed.", "Reopened": f"Reopened #{num}."}.get(
                    change[2], f"@{actor.first.lower()}{actor.last.lower()} added the `{change[2].lower().replace(' ', '-')}` label.")
            else:
                head = change[1]
            text = (f"{head}\n\n\u2014\nReply to this email directly, view it on GitHub:\n{url}#issuecomment-{rng.randint(10**9, 3 * 10**9)}\n"
                    f"You are receiving this because you {rng.choice(['are subscribed to this thread', 'were mentioned', 'authored the thread'])}.\n\n"
                    f"Message ID: <{repo}/issues/{num}/{rng.randint(10**9, 3 * 10**9)}@github.com>")
            if change != "created":
                text = text + f"\n\n> {desc[:400]}"
            frm = f"{actor.first.lower()}{actor.last.lower()} <notifications@github.com>"
            extra = {"X-GitHub-Reason": "subscribed", "X-GitHub-Sender": actor.first.lower() + actor.last.lower(),
                     "List-ID": f"{repo} <{repo.split('/')[1]}.{repo.split('/')[0]}.github.com>",
                     "Precedence": "list"}
        else:
            subj = f"[Bug {bug}] {title}" if change == "created" else f"[Bug {bug}] {title}"
            url = f"https://bugzilla.{dom}/show_bug.cgi?id={bug}"
            if change == "created":
                head = f"            Bug ID: {bug}\n           Summary: {title}\n           Product: {org}\n            Status: NEW\n          Reporter: {actor.email}\n\n{desc}"
            elif change[0] == "status":
                head = (f"{actor.name} <{actor.email}> changed:\n\n           What    |Removed                     |Added\n"
                        f"----------------------------------------------------------------------------\n"
                        f"            Status|{change[1].upper():<28}|{change[2].upper()}")
            else:
                head = f"--- Comment #{ncomment} from {actor.name} <{actor.email}> ---\n(In reply to comment #0)\n{_gt(desc[:600])}\n\n{change[1]}"
            text = f"{url}\n\n{head}\n\n-- \nYou are receiving this mail because:\nYou are watching the assignee of the bug."
            frm = f"bugzilla-daemon@{dom}"
            extra = {"X-Bugzilla-Product": org, "X-Bugzilla-Status": statuses[st].upper(), "Auto-Submitted": "auto-generated"}
        m = build(rng, "esp", frm, rcpt.email, subj, text, d, html_body=True if kind != "bugzilla" else None, extra=extra)
        msgs.append((m, d))
        deliveries.append(Delivery([rcpt.email], deliver_bytes(rng, m, rcpt.email, d), None if u == 0 else "unique"))
    m0, d00 = msgs[0]
    return Case("tracker_status_updates", idx, deliveries,
                personalise=lambda r, p: deliver_bytes(r, m0.as_bytes(policy=POLICY).replace(rcpt.email.encode(), p.email.encode()), p.email, d00))


def cat_subject_only_data(rng, corpus, idx):
    rcpt = _mailbox(rng)
    dom, org = company_domain(rng)
    kind = rng.choice(["build", "disk", "order", "backup", "cert", "queue"])
    host = f"{rng.choice(['web', 'db', 'app', 'cache', 'mq'])}{rng.randint(1, 40):02d}.{dom}"
    if kind == "build":
        n = rng.randint(1000, 9000)
        job = rng.choice(["main", "release", "nightly", "deploy-prod"])
        subs = [f"[Jenkins] Build #{n + i} of {job}-pipeline: SUCCESS" for i in range(0, rng.randint(2, 3))]
        body = "The build completed successfully.\n\nSee the console output and test results on the build server dashboard.\n\n-- \nJenkins"
        frm = f"Jenkins <jenkins@{dom}>"
    elif kind == "disk":
        base = rng.randint(85, 92)
        subs = [f"[ALERT] Disk usage {base + i * rng.randint(1, 3)}% on {host}:/var" for i in range(rng.randint(2, 3))]
        body = "This is an automated message from the monitoring system.\n\nThe threshold for this check has been exceeded. Please investigate.\n\nDo not reply to this email."
        frm = f"Nagios <nagios@{dom}>"
    elif kind == "order":
        subs = [f"Order #{rng.randint(100000, 999999)} confirmed" for _ in range(rng.randint(2, 3))]
        body = (f"Thank you for shopping with {org}!\n\nWe have received your order and will let you know when it ships.\n\n"
                f"Questions? Visit https://www.{dom}/help\n\n{org}")
        frm = f"{org} <orders@{dom}>"
    elif kind == "backup":
        day = rand_date(rng)
        subs = [f"Backup job 'nightly-{host.split('.')[0]}' completed - {(day + timedelta(days=i)).strftime('%Y-%m-%d')}" for i in range(rng.randint(2, 3))]
        body = "The scheduled backup job completed without errors.\n\nThis report was generated automatically by Veeam Backup & Replication."
        frm = f"Veeam <backup@{dom}>"
    elif kind == "cert":
        subs = [f"Certificate for {rng.choice(['www', 'api', 'mail', 'vpn'])}.{dom} expires in {d} days" for d in rng.sample([30, 14, 7, 3, 1], rng.randint(2, 3))]
        body = "A TLS certificate monitored by this service is approaching its expiry date.\n\nRenew it before it expires to avoid outages."
        frm = f"Cert Monitor <certs@{dom}>"
    else:
        subs = [f"Queue depth {rng.randint(1000, 50000)} on {host}" for _ in range(rng.randint(2, 3))]
        body = "The message queue depth is above the configured limit.\n\nThis alert will repeat every 15 minutes while the condition persists."
        frm = f"Alertmanager <alerts@{dom}>"
    d = rand_date(rng)
    deliveries = []
    raws = []
    for i, s in enumerate(subs):
        d = later(rng, d, 15, 24 * 60)
        m = build(rng, "esp", frm, rcpt.email, s, body, d, html_body=None, extra={"Auto-Submitted": "auto-generated"})
        raws.append((m.as_bytes(policy=POLICY), d))
        deliveries.append(Delivery([rcpt.email], deliver_bytes(rng, m, rcpt.email, d), None if i == 0 else "unique"))
    r0, d0 = raws[0]
    return Case("subject_only_data", idx, deliveries,
                personalise=lambda r, p: deliver_bytes(r, r0.replace(rcpt.email.encode(), p.email.encode()), p.email, d0))


DISCLAIMER_BITS = [
    "CONFIDENTIALITY NOTICE: This e-mail message, including any attachments, is for the sole use of the intended recipient(s) and may contain confidential and privileged information.",
    "Any unauthorized review, use, disclosure or distribution is prohibited. If you are not the intended recipient, please contact the sender by reply e-mail and destroy all copies of the original message.",
    "{org} accepts no liability for any damage caused by any virus transmitted by this email. E-mail transmission cannot be guaranteed to be secure or error-free as information could be intercepted, corrupted, lost, destroyed, arrive late or incomplete, or contain viruses.",
    "{org} is a company registered in England and Wales with company number {n}. Registered office: {a}.",
    "This message and any attachments are confidential and may be legally privileged. The information is intended solely for the addressee. Access to this email by anyone else is unauthorised.",
    "Please consider the environment before printing this e-mail.",
    "Nothing in this email shall be deemed to create a binding contract to purchase or sell goods or services unless confirmed in writing by an authorised signatory of {org}.",
    "For information about how we process personal data and monitor communications, please see our Privacy Notice at https://www.{dom}/privacy.",
]

SHORT_NOTES = [
    "Can we move tomorrow's call to 2pm? Something came up in the morning.",
    "Attached is the signed copy. Let me know if you need the original posted.",
    "I'll be out of office Thursday and Friday. Ping {o} if anything urgent comes up.",
    "Thanks for the quick turnaround on this, much appreciated. I'll review tonight and come back with comments.",
    "Quick question - did the purchase order go out yet? Finance is asking for the number.",
    "Please hold off on sending the invoice until we've confirmed the final quantities on our side.",
    "Great meeting today. As agreed, we'll send over the revised proposal by the end of next week.",
    "Could you send me the latest version of the floor plan? The one I have is from March.",
    "Confirming receipt. We will process the refund within five working days.",
    "Just checked with legal and they're happy with clause 7 as drafted. Good to proceed.",
    "The courier is booked for Tuesday morning between 9 and 12. Someone needs to be on site to sign.",
    "Sorry, I missed your call. I'm free after four today if you want to try again.",
    "Looping in {o}, who owns the budget for this. {o}, see the thread below for context.",
    "Reminder that the office is closed on Monday for the bank holiday. Deliveries will resume Tuesday.",
    "Can you add me to the distribution list for the weekly report? I don't seem to be getting it.",
    "We've had a power cut at the warehouse, so today's shipments will go out tomorrow instead.",
]


def cat_disclaimer_short_notes(rng, corpus, idx):
    rcpt = _mailbox(rng)
    dom, org = company_domain(rng)
    sender = person(rng, dom, org)
    other = rng.choice(FIRST)
    disc = "\n\n".join(b.format(org=org, n=rng.randint(10**6, 10**7), a=f"{rng.randint(1, 200)} High Street, London EC{rng.randint(1, 4)}A {rng.randint(1, 9)}BB", dom=dom)
                       for b in rng.sample(DISCLAIMER_BITS, rng.randint(3, 6)))
    banner = rng.choice(BANNERS[:3]) if rng.random() < 0.6 else None
    client = rng.choice(["outlook", "outlook", "gmail", "apple"])
    notes = rng.sample(SHORT_NOTES, 2)
    same_subject = rng.random() < 0.5
    subj0 = subject_line(rng)
    d = rand_date(rng)
    deliveries, built = [], []
    for i, n in enumerate(notes):
        d = later(rng, d, 30, 5 * 24 * 60)
        text = f"{rng.choice(GREETINGS).format(f=rcpt.first)}\n\n{n.format(o=other)}\n\n{signoff(rng, sender)}\n\n{disc}"
        if banner:
            text = banner + "\n\n" + text
        subj = subj0 if same_subject else subject_line(rng)
        m = build(rng, client, sender, rcpt.email, subj, text, d)
        built.append((text, subj, d))
        deliveries.append(Delivery([rcpt.email], deliver_bytes(rng, m, rcpt.email, d), None if i == 0 else "unique"))
    t0, s0, d0 = built[0]
    return Case("disclaimer_short_notes", idx, deliveries,
                personalise=lambda r, p: deliver_bytes(r, build(r, client, sender, p.email, s0, t0.replace(rcpt.first, p.first, 1), d0), p.email, d0))


def cat_templated_notices(rng, corpus, idx):
    rcpt = _mailbox(rng)
    dom, org = company_domain(rng)
    kind = rng.choice(["reset", "shipping", "invoice", "otp", "appointment"])
    n = rng.randint(2, 3)
    d = rand_date(rng)

    def render(r, to: Person, dd):
        if kind == "reset":
            code = r.randint(100000, 999999)
            tok = rand_token(r, 32)
            subj = f"Reset your {org} password"
            text = (f"Hi {to.first},\n\nWe received a request to reset the password for your {org} account ({to.email}).\n\n"
                    f"Your verification code is: {code}\n\nOr click the link below to choose a new password:\n"
                    f"https://account.{dom}/reset?token={tok}\n\nThis link expires in 30 minutes. If you did not request a password reset, "
                    f"you can ignore this email - your password will not change.\n\nThe {org} Team")
        elif kind == "otp":
            code = r.randint(100000, 999999)
            subj = r.choice([f"Your {org} sign-in code", "Your verification code"])
            text = (f"Use this code to sign in to {org}:\n\n{code}\n\nThe code is valid for 10 minutes. Never share this code with anyone, "
                    f"including {org} staff.\n\nIf you didn't try to sign in, secure your account at https://{dom}/security.")
        elif kind == "shipping":
            trk = r.choice([f"1Z{rand_token(r, 16, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789')}", f"{r.randint(10**11, 10**12)}",
                            f"JD{r.randint(10**15, 10**16)}GB"])
            order = r.randint(10**6, 10**7)
            subj = r.choice([f"Your {org} order has shipped", f"Your order #{order} is on its way"])
            text = (f"Hi {to.first},\n\nGood news - your order #{order} has shipped!\n\nCarrier: {r.choice(['UPS', 'FedEx', 'DHL', 'Royal Mail', 'USPS'])}\n"
                    f"Tracking number: {trk}\nEstimated delivery: {(dd + timedelta(days=r.randint(1, 5))).strftime('%A, %B %-d')}\n\n"
                    f"Track your package: https://www.{dom}/track/{trk}\n\nItems in this shipment:\n"
                    f"  {r.randint(1, 3)} x {r.choice(['USB-C cable 2m', 'Wireless mouse', 'Notebook A5 (3-pack)', 'Coffee beans 1kg', 'Running socks'])}\n\n"
                    f"Thanks for shopping with {org}.")
        elif kind == "invoice":
            amt = f"{r.randint(20, 4000)}.{r.randint(0, 99):02d}"
            inv = f"INV-{r.randint(10000, 99999)}"
            subj = r.choice([f"Invoice {inv} from {org}", f"Your {org} invoice is available"])
            text = (f"Dear customer,\n\nPlease find your invoice {inv} attached.\n\nAmount due: ${amt}\nDue date: "
                    f"{(dd + timedelta(days=30)).strftime('%d %B %Y')}\nAccount: {r.randint(10**7, 10**8)}\n\n"
                    f"You can pay online at https://billing.{dom}/pay/{inv}\n\nThank you for your business.\n{org} Accounts Receivable")
        else:
            when = dd + timedelta(days=r.randint(2, 20), hours=r.randint(0, 8))
            subj = f"Appointment confirmation - {when.strftime('%a %d %b')}"
            text = (f"Dear {to.first},\n\nThis confirms your appointment at {org} on {when.strftime('%A %d %B %Y at %H:%M')}.\n\n"
                    f"Reference: {rand_token(r, 8, 'ABCDEFGHJKLMNPQRSTUVWXYZ23456789')}\n\nPlease arrive 10 minutes early. To reschedule or cancel, visit https://{dom}/appointments "
                    f"or call us at least 24 hours in advance.\n\nKind regards,\n{org}")
        return build(r, "esp", f"{org} <no-reply@{dom}>", to.email, subj, text, dd)

    deliveries, first = [], None
    for i in range(n):
        d = later(rng, d, 3, 20 * 24 * 60)
        m = render(rng, rcpt, d)
        if i == 0:
            first = d
        deliveries.append(Delivery([rcpt.email], deliver_bytes(rng, m, rcpt.email, d), None if i == 0 else "unique"))
    return Case("templated_notices", idx, deliveries,
                personalise=lambda r, p: deliver_bytes(r, render(r, p, first), p.email, first))


SHORT_REPLIES = ["Thanks!", "+1", "Sounds good", "Thank you!", "Great, thanks.", "Works for me.", "Sounds good, thanks!",
                 "Perfect, thank you", "Got it, thanks.", "Agreed.", "Thanks, will do.", "Noted, thanks", "👍", "Ok"]


def cat_short_replies(rng, corpus, idx):
    rcpt = _mailbox(rng)
    mode = rng.choice(["people", "threads", "both"])
    reply = rng.choice(SHORT_REPLIES)
    dom, org = company_domain(rng)
    r1 = person(rng, dom, org)
    r2 = person(rng, dom, org) if mode in ("people", "both") else r1
    # the thread(s) being answered: messages the mailbox owner sent
    owner = Person(rcpt.first, rcpt.last, rcpt.email)
    threads = []
    for _ in range(1 if mode == "people" else 2):
        subj = subject_line(rng)
        text = business_text(rng, corpus, owner, r1, (1, 2))
        threads.append({"from": owner, "to": r1.email, "subject": subj, "date": rand_date(rng), "text": text,
                        "mid": msgid(rng, "outlook", rcpt.email.split("@")[1])})
    deliveries, first_args = [], None
    for i, who in enumerate([r1, r2]):
        th = threads[min(i, len(threads) - 1)]
        client = rng.choice(CLIENTS)
        d = later(rng, th["date"], 10, 3 * 24 * 60)
        if rng.random() < 0.6:
            text, htm = note_with_original(rng, client, who, rcpt, None, reply, th, "reply")
        else:
            text = reply + ("\n\nSent from my iPhone" if rng.random() < 0.4 else f"\n\n{who.first}")
            htm = True
        cc = [x.email for x in (r1, r2) if x is not who]
        m = build(rng, client, who, rcpt.email, "Re: " + th["subject"], text, d, html_body=htm, in_reply_to=th["mid"],
                  extra={"Cc": ", ".join(cc)} if cc else None)
        if i == 0:
            first_args = (client, who, th, text, htm, d)
        deliveries.append(Delivery([rcpt.email], deliver_bytes(rng, m, rcpt.email, d), None if i == 0 else "unique"))
    c0, w0, th0, t0, h0, d0 = first_args
    return Case("short_replies", idx, deliveries,
                personalise=lambda r, p: deliver_bytes(r, build(r, c0, w0, p.email, "Re: " + th0["subject"], t0, d0, html_body=h0,
                                                                in_reply_to=th0["mid"]), p.email, d0))


def cat_newsletter_issues(rng, corpus, idx):
    nl = newsletter(rng)
    sub = _mailbox(rng)
    issue = rng.randint(12, 240)
    d = rand_date(rng)
    recurring = news_items(rng, corpus, 1) if rng.random() < 0.4 else []
    deliveries, first = [], None
    for i in range(rng.randint(2, 3)):
        items = news_items(rng, corpus, rng.randint(2, 4)) + recurring
        subj = rng.choice([f"{nl.name} #{issue + i}: {items[0][0]}", items[0][0], f"{nl.name} - {d.strftime('%B %-d')}"])
        m = nl.render(rng, sub, subj, items, issue + i, d)
        if i == 0:
            first = (subj, items, d)
        deliveries.append(Delivery([sub.email], deliver_bytes(rng, m, sub.email, d), None if i == 0 else "unique"))
        d = later(rng, d, 6 * 24 * 60, 8 * 24 * 60)
    s0, i0, d0 = first
    return Case("newsletter_issues", idx, deliveries,
                personalise=lambda r, p: deliver_bytes(r, nl.render(r, p, s0, i0, issue, d0), p.email, d0))


GENERATORS = {name: globals()["cat_" + name] for name in MUST_FLAG + MUST_STAY_UNIQUE}


def make_cases(corpus: Corpus, seed: int, n: int, categories: list[str] | None = None) -> list[Case]:
    """n cases per category; each category has its own RNG stream so that adding one does not
    change the others."""
    out = []
    for cat in categories or list(GENERATORS):
        rng = random.Random(f"{seed}:{cat}")
        for i in range(n):
            out.append(GENERATORS[cat](rng, corpus, i))
    return out


def busy_traffic(corpus: Corpus, seed: int, n_messages: int, n_mailboxes: int) -> tuple[list[bytes], list[str]]:
    """The busy host's earlier traffic: corpus messages (the store's share) to a few hundred
    mailboxes, each message to one to five of them (a list or a group address)."""
    rng = random.Random(f"{seed}:busy")
    boxes = sorted({person(rng).email for _ in range(n_mailboxes)})
    files = rng.sample(corpus.store_files, min(n_messages, len(corpus.store_files)))
    msgs = []
    for p in files:
        raw = read_corpus_message(p)
        rc = rng.sample(boxes, rng.choice([1, 1, 1, 2, 3, 5]))
        msgs.append(deliver_bytes(rng, raw, rc[0], rand_date(rng)))
    return msgs, boxes
