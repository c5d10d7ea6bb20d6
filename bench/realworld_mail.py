"""Raw RFC 5322 messages as real clients and senders write them, for bench/realworld.py.

Small, explicit builders (no ``email`` generator: every byte of a part is chosen here, as a
client would): MIME parts and transfer encodings, people and organisations, dates and
Message-IDs in each client's style, HTML as Outlook, Outlook on the web, Gmail, Apple Mail
and Thunderbird write it, their reply and forward layouts, list footers, disclaimers and
external-mail banners, tiny signature logos, attachments (PDF, DOCX, XLSX, ZIP built from
corpus text) and ``text/calendar`` parts (icalendar).
"""

# ruff: noqa: E501  (template text: real URLs, header lines and markup kept whole)

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import email.header
import email.utils
import html
import io
import quopri
import random
import struct
import textwrap
import unicodedata
import uuid
import zipfile
import zlib
from dataclasses import dataclass, field
from zoneinfo import ZoneInfo

# -- MIME ----------------------------------------------------------------------------------


@dataclass
class Part:
    """A MIME entity: its header fields and either an encoded body or sub-parts."""

    headers: list[tuple[str, str]]
    body: bytes = b""
    parts: list[Part] | None = None
    boundary: str = ""
    preamble: str = ""

    def render(self) -> bytes:
        out = [f"{k}: {v}".encode() for k, v in self.headers]
        out.append(b"")
        if self.parts is None:
            return b"\n".join(out) + b"\n" + self.body
        pieces = [b"\n".join(out)]
        if self.preamble:
            pieces.append(self.preamble.encode() + b"\n")
        for sub in self.parts:
            pieces.append(f"--{self.boundary}".encode())
            pieces.append(sub.render())
        pieces.append(f"--{self.boundary}--".encode())
        return b"\n".join(pieces) + b"\n"


def encode_body(data: bytes, cte: str) -> bytes:
    if cte == "base64":
        return base64.encodebytes(data)
    if cte == "quoted-printable":
        encoded = quopri.encodestring(data)
        return encoded if encoded.endswith(b"\n") else encoded + b"\n"
    return data if data.endswith(b"\n") else data + b"\n"


def text_part(text: str, subtype: str = "plain", *, charset: str = "utf-8",
              cte: str | None = None, flowed: bool = False, extra: str = "") -> Part:
    """A text part; ``cte`` None: 7bit for ASCII, else quoted-printable."""
    data = text.encode(charset, errors="replace")
    if cte is None:
        cte = "7bit" if data.isascii() else "quoted-printable"
    if cte == "7bit" and not data.isascii():
        cte = "8bit"
    ctype = f"text/{subtype}; charset=\"{charset}\""
    if charset.lower() == "us-ascii" or subtype == "calendar":
        ctype = f"text/{subtype}; charset={charset}"
    if flowed:
        ctype += "; format=flowed"
    if extra:
        ctype += extra
    return Part([("Content-Type", ctype), ("Content-Transfer-Encoding", cte)],
                encode_body(data, cte))


def multipart(subtype: str, parts: list[Part], boundary: str, *, extra: str = "",
              preamble: str = "") -> Part:
    ctype = f"multipart/{subtype};\n\tboundary=\"{boundary}\"{extra}"
    return Part([("Content-Type", ctype)], parts=parts, boundary=boundary, preamble=preamble)


def attachment_part(data: bytes, ctype: str, filename: str, *, inline: bool = False,
                    cid: str | None = None, style: str = "outlook") -> Part:
    disposition = "inline" if inline else "attachment"
    headers = [("Content-Type", f"{ctype}; name=\"{filename}\"")]
    if style == "outlook":
        headers.append(("Content-Description", filename))
        headers.append(("Content-Disposition",
                        f"{disposition}; filename=\"{filename}\"; size={len(data)};\n"
                        f"\tcreation-date=\"Mon, 01 Dec 2025 09:00:00 GMT\";\n"
                        f"\tmodification-date=\"Mon, 01 Dec 2025 09:00:00 GMT\""))
    else:
        headers.append(("Content-Disposition", f"{disposition}; filename=\"{filename}\""))
    headers.append(("Content-Transfer-Encoding", "base64"))
    if cid:
        headers.append(("Content-ID", f"<{cid}>"))
    if style == "gmail" and not cid:
        headers.append(("X-Attachment-Id", f"f_{_hex(random.Random(filename), 9)}"))
    return Part(headers, base64.encodebytes(data))


def header_words(value: str, charset: str = "utf-8") -> str:
    """RFC 2047 when needed."""
    if value.isascii():
        return value
    return email.header.Header(value, charset).encode()


def address(name: str, addr: str, charset: str = "utf-8") -> str:
    if not name:
        return addr
    if name.isascii():
        return email.utils.formataddr((name, addr))
    return email.utils.formataddr((name, addr), charset=charset)


def render_message(headers: list[tuple[str, str]], body: Part, *, crlf: bool = False) -> bytes:
    lines = [f"{k}: {v}" for k, v in headers if v is not None]
    lines.append("MIME-Version: 1.0")
    raw = ("\n".join(lines) + "\n").encode("ascii", errors="replace") + body.render()
    if crlf:
        raw = raw.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
    return raw


# -- people, dates, identifiers ------------------------------------------------------------

FIRST = ("James Mary Robert Patricia John Jennifer Michael Linda David Elizabeth William "
         "Barbara Richard Susan Joseph Jessica Thomas Sarah Charles Karen Christopher Lisa "
         "Daniel Nancy Matthew Betty Anthony Sandra Mark Margaret Donald Ashley Steven Kimberly "
         "Andrew Emily Paul Donna Joshua Michelle Kenneth Carol Kevin Amanda Brian Melissa "
         "George Deborah Timothy Stephanie Ronald Rebecca Jason Sharon Edward Laura Jeffrey "
         "Cynthia Ryan Amy Jacob Angela Gary Anna Nicholas Ruth Eric Brenda Jonathan Pamela "
         "Priya Wei Hiroshi Aisha Omar Fatima Lars Ingrid Pieter Sanne Giulia Marco Chloé "
         "José Zoë Søren François Jürgen Łukasz Siobhán Ana Björn Noémie Raúl Mateo").split()
LAST = ("Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez Martinez Hernandez "
        "Lopez Gonzalez Wilson Anderson Thomas Taylor Moore Jackson Martin Lee Perez Thompson "
        "White Harris Sanchez Clark Ramirez Lewis Robinson Walker Young Allen King Wright Scott "
        "Torres Nguyen Hill Flores Green Adams Nelson Baker Hall Rivera Campbell Mitchell Carter "
        "Roberts Patel Shah Chen Wang Tanaka Kowalski Jensen Larsen de Vries Janssen Rossi "
        "Bianchi Dubois Müller Schmidt O'Brien Murphy Kelly Novak Horvat Ødegård Núñez Sørensen "
        "Fernández Lindqvist Moreau").split()
COMPANIES = (
    ("Contoso", "contoso.com"), ("Fabrikam", "fabrikam.com"),
    ("Northwind Traders", "northwindtraders.com"), ("Adventure Works", "adventure-works.com"),
    ("Tailspin Toys", "tailspintoys.com"), ("Wingtip Toys", "wingtiptoys.com"),
    ("Litware, Inc.", "litwareinc.com"), ("Woodgrove Bank", "woodgrovebank.com"),
    ("Proseware", "proseware.com"), ("Alpine Ski House", "alpineskihouse.com"),
    ("Lucerne Publishing", "lucernepublishing.com"), ("Margie's Travel", "margiestravel.com"),
    ("Trey Research", "treyresearch.net"), ("Fourth Coffee", "fourthcoffee.com"),
    ("Coho Winery", "cohowinery.com"), ("Blue Yonder Airlines", "blueyonderairlines.com"),
    ("Relecloud", "relecloud.com"), ("Wide World Importers", "wideworldimporters.com"),
    ("Humongous Insurance", "humongousinsurance.com"), ("VanArsdel", "vanarsdelltd.com"),
    ("Datum Corporation", "adatum.com"), ("Best For You Organics", "bestforyouorganics.com"),
    ("Consolidated Messenger", "consolidatedmessenger.com"),
    ("Graphic Design Institute", "graphicdesigninstitute.com"),
    ("Southridge Video", "southridgevideo.com"), ("Tasmanian Traders", "tasmaniantraders.com"),
    ("City Power & Light", "cpandl.com"), ("Lamna Healthcare", "lamnahealthcare.com"),
    ("Munson's Pickles and Preserves", "munsonspickles.com"), ("Bellows College", "bellowscollege.edu"),
    ("School of Fine Art", "fineartschool.net"), ("Northwind Health", "northwindhealth.org"),
)
FREEMAIL = ("gmail.com", "outlook.com", "yahoo.com", "icloud.com", "hotmail.com", "fastmail.com",
            "proton.me", "gmx.de", "web.de", "aol.com")
ZONES = ("America/New_York", "America/Chicago", "America/Denver", "America/Los_Angeles",
         "Europe/London", "Europe/Berlin", "Europe/Paris", "Europe/Amsterdam", "Asia/Tokyo",
         "Asia/Kolkata", "Australia/Sydney", "UTC")
WINDOWS_TZ = {"America/New_York": "Eastern Standard Time",
              "America/Chicago": "Central Standard Time",
              "America/Denver": "Mountain Standard Time",
              "America/Los_Angeles": "Pacific Standard Time",
              "Europe/London": "GMT Standard Time", "Europe/Berlin": "W. Europe Standard Time",
              "Europe/Paris": "Romance Standard Time",
              "Europe/Amsterdam": "W. Europe Standard Time",
              "Asia/Tokyo": "Tokyo Standard Time", "Asia/Kolkata": "India Standard Time",
              "Australia/Sydney": "AUS Eastern Standard Time", "UTC": "UTC"}


def _hex(rng: random.Random, n: int, upper: bool = False) -> str:
    text = "".join(rng.choice("0123456789abcdef") for _ in range(n))
    return text.upper() if upper else text


def _alnum(rng: random.Random, n: int, alphabet: str = "") -> str:
    alphabet = alphabet or "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    return "".join(rng.choice(alphabet) for _ in range(n))


def ascii_fold(text: str) -> str:
    text = text.replace("ø", "o").replace("Ø", "O").replace("ł", "l").replace("Ł", "L")
    text = text.replace("ß", "ss").replace("æ", "ae").replace("'", "").replace(" ", "")
    folded = unicodedata.normalize("NFKD", text)
    return folded.encode("ascii", "ignore").decode()


@dataclass(frozen=True)
class Person:
    name: str
    addr: str
    title: str = ""
    phone: str = ""

    @property
    def first(self) -> str:
        return self.name.split()[0]

    def header(self) -> str:
        return address(self.name, self.addr)

    def plain(self) -> str:
        return f"{self.name} <{self.addr}>"


@dataclass
class Org:
    name: str
    domain: str
    disclaimer: str = ""
    disclaimer_html: str = ""
    logo: bytes = b""
    address_line: str = ""
    people: list[Person] = field(default_factory=list)


TITLES = ("Account Manager", "Senior Software Engineer", "Project Manager", "Office Manager",
          "Finance Director", "Paralegal", "Associate", "Operations Lead", "HR Generalist",
          "Procurement Specialist", "Sales Executive", "Product Owner", "IT Support Analyst",
          "Partner", "Executive Assistant", "Marketing Coordinator", "Controller")
STREETS = ("Main Street", "Market Street", "High Street", "Park Avenue", "Oak Lane",
           "Harbour Road", "Station Road", "Elm Street", "King Street", "Riverside Drive")
CITIES = (("Seattle, WA 98101", "+1 206"), ("Redmond, WA 98052", "+1 425"),
          ("Austin, TX 78701", "+1 512"), ("Boston, MA 02110", "+1 617"),
          ("London EC2A 4NE", "+44 20"), ("Manchester M1 1AE", "+44 161"),
          ("10115 Berlin", "+49 30"), ("1012 AB Amsterdam", "+31 20"),
          ("Sydney NSW 2000", "+61 2"), ("Toronto, ON M5H 2N2", "+1 416"))


def make_name(rng: random.Random) -> str:
    return f"{rng.choice(FIRST)} {rng.choice(LAST)}"


def make_person(rng: random.Random, domain: str | None = None, name: str | None = None
                ) -> Person:
    name = name or make_name(rng)
    first, last = ascii_fold(name.split()[0]).lower(), ascii_fold(name.split()[-1]).lower()
    if domain is None:
        domain = rng.choice(FREEMAIL)
        local = rng.choice((f"{first}.{last}", f"{first}{last}{rng.randint(1, 99)}",
                            f"{first[0]}{last}", f"{first}_{last}", f"{last}.{first}"))
    else:
        local = rng.choice((f"{first}.{last}", f"{first[0]}{last}", f"{first}",
                            f"{first}.{last}", f"{first[0]}.{last}"))
    city, prefix = rng.choice(CITIES)
    phone = f"{prefix} {rng.randint(200, 999)} {rng.randint(1000, 9999)}"
    return Person(name, f"{local}@{domain}", rng.choice(TITLES), phone)


def make_org(rng: random.Random, disclaimers: bool = True) -> Org:
    name, domain = rng.choice(COMPANIES)
    city, _ = rng.choice(CITIES)
    org = Org(name, domain, address_line=f"{rng.randint(1, 999)} {rng.choice(STREETS)}, {city}")
    org.logo = tiny_png(rng)
    org.people = [make_person(rng, domain) for _ in range(8)]
    # One address, one person (an organisation never gives two people one mailbox):
    # a clash gets a number, without drawing from rng, so other cases stay as they were.
    taken: set[str] = set()
    for index, person in enumerate(org.people):
        local, _, host = person.addr.partition("@")
        address, number = person.addr, 1
        while address in taken:
            number += 1
            address = f"{local}{number}@{host}"
        org.people[index] = dataclasses.replace(person, addr=address)
        taken.add(address)
    return org


def when(rng: random.Random, year: int = 2025) -> dt.datetime:
    """A working-hours moment in a real zone (aware)."""
    zone = ZoneInfo(rng.choice(ZONES))
    day = dt.date(year, 1, 1) + dt.timedelta(days=rng.randrange(0, 360))
    if day.weekday() >= 5:
        day -= dt.timedelta(days=day.weekday() - 4)
    return dt.datetime(day.year, day.month, day.day, rng.randint(7, 18), rng.randrange(60),
                       rng.randrange(60), tzinfo=zone)


def rfc_date(moment: dt.datetime) -> str:
    return email.utils.format_datetime(moment)


def message_id(rng: random.Random, style: str, domain: str = "") -> str:
    """A Message-ID as the given software writes it."""
    if style in ("outlook", "owa", "outlook_ios"):
        server = f"{rng.choice(('DM6PR', 'BN8PR', 'SA1PR', 'PH0PR', 'MW4PR', 'AM9PR', 'DB9PR'))}" \
                 f"{rng.randint(10, 19)}MB{rng.randint(1000, 9999)}"
        region = rng.choice(("namprd11", "namprd04", "eurprd07", "namprd12", "apcprd06"))
        return f"<{server}{_hex(rng, 24, True)}@{server}.{region}.prod.outlook.com>"
    if style == "gmail":
        return f"<CA{_alnum(rng, 2)}{_alnum(rng, 44, 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+_=-')}@mail.gmail.com>"
    if style in ("apple", "iphone"):
        return f"<{str(uuid.UUID(int=rng.getrandbits(128))).upper()}@{domain or 'icloud.com'}>"
    if style == "thunderbird":
        return f"<{uuid.UUID(int=rng.getrandbits(128))}@{domain or 'example.org'}>"
    if style == "ses":
        return (f"<0100019{_hex(rng, 9)}-{_hex(rng, 8)}-{_hex(rng, 4)}-{_hex(rng, 4)}-"
                f"{_hex(rng, 4)}-{_hex(rng, 12)}-000000@email.amazonses.com>")
    if style == "sendgrid":
        return f"<{_alnum(rng, 22)}@geopod-ismtpd-{rng.randint(1, 40)}>"
    if style == "mailchimp":
        return f"<{_hex(rng, 32)}.{_hex(rng, 10)}.{rng.randint(10**8, 10**9)}@mail{rng.randint(10, 250)}.atl{rng.randint(11, 99)}.mcdlv.net>"
    if style == "postfix":
        return f"<{dt.datetime(2025, 1, 1).strftime('%Y%m%d')}{rng.randint(100000, 999999)}.{_hex(rng, 10, True)}@{domain}>"
    return f"<{_alnum(rng, 16)}.{rng.randint(10**6, 10**7)}@{domain or 'mail.example.net'}>"


def received(rng: random.Random, moment: dt.datetime, rcpt: str, helo: str = "") -> str:
    host = rng.choice(("mx1", "mx2", "mail", "smtp-in", "inbound"))
    mydomain = rcpt.split("@")[-1]
    ip = f"{rng.randint(11, 223)}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
    helo = helo or f"mail-{_alnum(rng, 6).lower()}.outbound.example.net"
    return (f"from {helo} ({helo} [{ip}])\n\tby {host}.{mydomain} (Postfix) with ESMTPS id "
            f"{_alnum(rng, 10, '0123456789ABCDEFGHJKLMNPQRSTVWXYZ')}\n\tfor <{rcpt}>; "
            f"{rfc_date(moment.astimezone(dt.UTC) + dt.timedelta(seconds=rng.randint(1, 40)))}")


def boundary(rng: random.Random, style: str) -> str:
    if style in ("outlook", "owa", "outlook_ios"):
        return f"_{rng.randint(0, 9):03d}_{_alnum(rng, 30, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789')}_"
    if style == "gmail":
        return f"000000000000{_hex(rng, 16)}"
    if style in ("apple", "iphone"):
        return f"Apple-Mail={_alnum(rng, 8)}-{_hex(rng, 4, True)}-{_hex(rng, 4, True)}-" \
               f"{_hex(rng, 4, True)}-{_hex(rng, 12, True)}"
    if style == "thunderbird":
        return f"------------{_alnum(rng, 24)}"
    return f"----=_Part_{rng.randint(10**5, 10**7)}_{rng.randint(10**8, 10**9)}.{rng.randint(10**12, 10**13)}"


# -- text layout ---------------------------------------------------------------------------

def wrap(paragraphs: list[str], width: int | None) -> str:
    if not width:
        return "\n\n".join(paragraphs)
    return "\n\n".join("\n".join(textwrap.fill(line, width, break_long_words=False,
                                             break_on_hyphens=False) if line else line
                                 for line in p.split("\n")) for p in paragraphs)


def quote_lines(text: str, prefix: str = "> ") -> str:
    return "\n".join((prefix + line) if line.strip() else prefix.rstrip() for line in
                     text.split("\n"))


def broken_rewrap(text: str, width: int = 72) -> str:
    """``>``-quoted text re-wrapped again at ``width``: overflow lines lose the ``>``."""
    out: list[str] = []
    for line in quote_lines(textwrap.fill(text.replace("\n\n", " \u2029 "), 70)
                            .replace(" \u2029 ", "\n\n")).split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        cut = line.rfind(" ", 0, width - 12)
        out.append(line[:cut])
        out.append(line[cut + 1:])
    return "\n".join(out)


def html_escape(text: str) -> str:
    return html.escape(text, quote=False)


OUTLOOK_HEAD = """<html xmlns:v="urn:schemas-microsoft-com:vml" xmlns:o="urn:schemas-microsoft-com:office:office" xmlns:w="urn:schemas-microsoft-com:office:word" xmlns:m="http://schemas.microsoft.com/office/2004/12/omml" xmlns="http://www.w3.org/TR/REC-html40">
<head>
<meta http-equiv="Content-Type" content="text/html; charset=utf-8">
<meta name="Generator" content="Microsoft Word 15 (filtered medium)">
<style><!--
/* Font Definitions */
@font-face
\t{font-family:"Cambria Math";
\tpanose-1:2 4 5 3 5 4 6 3 2 4;}
@font-face
\t{font-family:Calibri;
\tpanose-1:2 15 5 2 2 2 4 3 2 4;}
@font-face
\t{font-family:Aptos;}
/* Style Definitions */
p.MsoNormal, li.MsoNormal, div.MsoNormal
\t{margin:0in;
\tfont-size:11.0pt;
\tfont-family:"Aptos",sans-serif;
\tmso-ligatures:standardcontextual;}
a:link, span.MsoHyperlink
\t{mso-style-priority:99;
\tcolor:#467886;
\ttext-decoration:underline;}
span.EmailStyle17
\t{mso-style-type:personal-compose;
\tfont-family:"Aptos",sans-serif;
\tcolor:windowtext;}
.MsoChpDefault
\t{mso-style-type:export-only;
\tfont-size:10.0pt;
\tmso-ligatures:none;}
@page WordSection1
\t{size:8.5in 11.0in;
\tmargin:1.0in 1.0in 1.0in 1.0in;}
div.WordSection1
\t{page:WordSection1;}
--></style><!--[if gte mso 9]><xml>
<o:shapedefaults v:ext="edit" spidmax="1026" />
</xml><![endif]--><!--[if gte mso 9]><xml>
<o:shapelayout v:ext="edit">
<o:idmap v:ext="edit" data="1" />
</o:shapelayout></xml><![endif]-->
</head>
<body lang="EN-US" link="#467886" vlink="#96607D" style="word-wrap:break-word">
<div class="WordSection1">
"""


def html_body(style: str, paragraphs: list[str], tail_html: str = "", top_html: str = "") -> str:
    """The HTML a client writes for ``paragraphs`` (plus raw HTML after or before)."""
    esc = [html_escape(p).replace("\n", "<br>\n") for p in paragraphs]
    if style in ("outlook", "outlook_ios"):
        inner = "\n".join(f"<p class=\"MsoNormal\">{p}<o:p></o:p></p>\n"
                          f"<p class=\"MsoNormal\"><o:p>&nbsp;</o:p></p>" for p in esc)
        return f"{OUTLOOK_HEAD}{top_html}{inner}\n{tail_html}\n</div>\n</body>\n</html>\n"
    if style == "owa":
        inner = "\n".join(
            f"<div class=\"elementToProof\" style=\"font-family: Aptos, Aptos_EmbeddedFont, "
            f"Aptos_MSFontService, Calibri, Helvetica, sans-serif; font-size: 12pt; color: "
            f"rgb(0, 0, 0);\">\n{p}</div>\n<div class=\"elementToProof\" style=\"font-family: "
            f"Aptos, Aptos_EmbeddedFont, Aptos_MSFontService, Calibri, Helvetica, sans-serif; "
            f"font-size: 12pt; color: rgb(0, 0, 0);\">\n<br>\n</div>" for p in esc)
        return ("<html>\n<head>\n<meta http-equiv=\"Content-Type\" content=\"text/html; "
                "charset=utf-8\">\n<style type=\"text/css\" style=\"display:none;\"> P "
                "{margin-top:0;margin-bottom:0;} </style>\n</head>\n<body dir=\"ltr\">\n"
                f"{top_html}{inner}\n{tail_html}\n</body>\n</html>\n")
    if style == "gmail":
        inner = "<div><br></div>".join(f"<div>{p}</div>" for p in esc)
        return f"{top_html}<div dir=\"ltr\">{inner}{tail_html}</div>\n"
    if style in ("apple", "iphone"):
        inner = "<div><br></div>".join(f"<div>{p}</div>" for p in esc)
        return ("<html><head><meta http-equiv=\"content-type\" content=\"text/html; "
                "charset=utf-8\"></head><body style=\"overflow-wrap: break-word; "
                "-webkit-nbsp-mode: space; line-break: after-white-space;\">"
                f"{top_html}{inner}{tail_html}</body></html>")
    inner = "\n".join(f"    <p>{p}</p>" for p in esc)
    return ("<!DOCTYPE html>\n<html>\n  <head>\n    <meta http-equiv=\"Content-Type\" "
            "content=\"text/html; charset=UTF-8\">\n  </head>\n  <body>\n"
            f"{top_html}{inner}\n{tail_html}\n  </body>\n</html>\n")


# -- clients -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Client:
    """A mail program: how it names, wraps, writes HTML and quotes."""

    name: str          # outlook, owa, outlook_ios, gmail, apple, iphone, thunderbird
    html: bool
    wrap: int | None
    agent: tuple[tuple[str, str], ...] = ()
    tagline: str = ""

    def headers(self) -> list[tuple[str, str]]:
        return list(self.agent)


CLIENTS = {
    "outlook": Client("outlook", True, None, (
        ("X-Mailer", "Microsoft Outlook 16.0"), ("Thread-Index", "AdtK3kZ1n9cR0m5TQ6qYc2b7mF1nVw=="),
        ("Content-Language", "en-us"), ("X-MS-Has-Attach", ""),
        ("X-MS-TNEF-Correlator", ""))),
    "owa": Client("owa", True, None, (
        ("Thread-Index", "AQHbSz1xk2cT8mE0RkCZ3n1w9aB6sQ=="), ("Content-Language", "en-US"),
        ("X-MS-Has-Attach", ""), ("msip_labels", ""))),
    "outlook_ios": Client("outlook_ios", True, None, (
        ("X-MS-Has-Attach", ""), ("Content-Language", "en-US")),
        "Get Outlook for iOS<https://aka.ms/o0ukef>"),
    "gmail": Client("gmail", True, None),
    "apple": Client("apple", True, None, (("X-Mailer", "Apple Mail (2.3826.300.87.4.3)"),)),
    "iphone": Client("iphone", True, None, (("X-Mailer", "iPhone Mail (22C152)"),),
                     "Sent from my iPhone"),
    "thunderbird": Client("thunderbird", False, 72, (
        ("User-Agent", "Mozilla Thunderbird"), ("Content-Language", "en-US"))),
    "mutt": Client("mutt", False, 72, (("User-Agent", "NeoMutt/20231103"),)),
}


def client(rng: random.Random, names: tuple[str, ...] = ()) -> Client:
    return CLIENTS[rng.choice(names or tuple(CLIENTS))]


def body_for(cl: Client, rng: random.Random, plain: str, html_text: str | None,
             extra_parts: list[Part] | None = None) -> Part:
    """The body a client sends: plain only, or plain + HTML alternative, plus parts."""
    if cl.html and html_text is not None:
        charset = "utf-8"
        cte_plain = "quoted-printable" if cl.name in ("outlook", "owa", "outlook_ios",
                                                      "apple", "iphone") else None
        cte_html = "quoted-printable" if cl.name != "gmail" else None
        if cl.name in ("outlook", "owa", "outlook_ios"):
            charset = "utf-8" if not plain.isascii() else rng.choice(("us-ascii", "utf-8"))
        body = multipart("alternative", [
            text_part(plain, charset=charset, cte=cte_plain),
            text_part(html_text, "html", charset="utf-8" if not html_text.isascii()
                      else charset, cte=cte_html)], boundary(rng, cl.name))
    else:
        body = text_part(plain, flowed=cl.name == "thunderbird" and rng.random() < 0.5,
                         cte=None)
    if extra_parts:
        inline = all(any(k == "Content-ID" for k, _ in p.headers) for p in extra_parts)
        kind = "related" if inline and cl.html and html_text is not None else "mixed"
        body = multipart(kind, [body, *extra_parts], boundary(rng, cl.name),
                         extra="; type=\"multipart/alternative\"" if kind == "related" else "")
    return body


def signature(person: Person, org: Org | None, rng: random.Random, style: int | None = None
              ) -> str:
    style = rng.randrange(5) if style is None else style
    if style == 0:
        return person.first
    if style == 1:
        return f"{person.name}\n{person.title}" + (f" | {org.name}" if org else "")
    if style == 2 and org:
        return f"Best regards,\n\n{person.name}\n{person.title}\n{org.name}\n{org.address_line}\n" \
               f"T: {person.phone}\nwww.{org.domain}"
    if style == 3:
        return f"-- \n{person.name}\n{person.phone}"
    return f"Thanks,\n{person.first}"


# -- replies and forwards ------------------------------------------------------------------

@dataclass
class Original:
    """What a reply or forward shows of the message it answers."""

    sender: Person
    to: list[Person]
    moment: dt.datetime
    subject: str
    text: str                  # plain text as its client sent it
    cc: list[Person] = field(default_factory=list)
    message_id: str = ""
    references: str = ""


def _names(people: list[Person], style: str) -> str:
    if style == "outlook":
        return "; ".join(f"{p.name} <{p.addr}>" for p in people)
    return ", ".join(f"{p.name} <{p.addr}>" for p in people)


def outlook_sent(moment: dt.datetime) -> str:
    return moment.strftime("%A, %B ") + f"{moment.day}, {moment.year} " + \
        moment.strftime("%I:%M %p").lstrip("0")


def attribution(style: str, o: Original, rng: random.Random) -> str:
    m = o.moment
    if style == "gmail":
        if rng.random() < 0.5:
            return (f"On {m.strftime('%a, %b')} {m.day}, {m.year} at "
                    f"{m.strftime('%I:%M %p').lstrip('0')} {o.sender.name} <{o.sender.addr}> wrote:")
        return f"On {m.strftime('%a')}, {m.day} {m.strftime('%b')} {m.year} at " \
               f"{m.strftime('%H:%M')}, {o.sender.name} <{o.sender.addr}> wrote:"
    if style in ("apple", "iphone"):
        if rng.random() < 0.5:
            return f"On {m.strftime('%b')} {m.day}, {m.year}, at " \
                   f"{m.strftime('%I:%M %p').lstrip('0')}, {o.sender.name} <{o.sender.addr}> wrote:"
        return f"On {m.day} {m.strftime('%b')} {m.year}, at {m.strftime('%H:%M')}, " \
               f"{o.sender.name} <{o.sender.addr}> wrote:"
    if style in ("thunderbird", "mutt"):
        if rng.random() < 0.5:
            return f"On {m.month}/{m.day}/{m.strftime('%y')} {m.strftime('%I:%M %p').lstrip('0')}, " \
                   f"{o.sender.name} wrote:"
        return f"On {m.strftime('%d.%m.%y %H:%M')}, {o.sender.name} wrote:"
    return f"{o.sender.name} <{o.sender.addr}> wrote:"


def outlook_header_block(o: Original, style: str, forward: bool = False) -> str:
    """The From:/Sent:/To:/Subject: block of Outlook ("modern", "original" or OWA)."""
    lines = []
    if style == "original":
        lines.append("-----Original Message-----")
        lines.append(f"From: {o.sender.name} [mailto:{o.sender.addr}] ")
        lines.append(f"Sent: {o.moment.strftime('%A, %B %d, %Y %I:%M %p')}")
    else:
        if style == "owa":
            lines.append("________________________________")
        lines.append(f"From: {o.sender.name} <{o.sender.addr}>")
        lines.append(f"Sent: {outlook_sent(o.moment)}")
    lines.append(f"To: {_names(o.to, 'outlook')}")
    if o.cc:
        lines.append(f"Cc: {_names(o.cc, 'outlook')}")
    lines.append(f"Subject: {o.subject}")
    return "\n".join(lines)


def forward_block(style: str, o: Original) -> str:
    m = o.moment
    if style == "gmail":
        return ("---------- Forwarded message ---------\n"
                f"From: {o.sender.name} <{o.sender.addr}>\n"
                f"Date: {m.strftime('%a, %b')} {m.day}, {m.year} at "
                f"{m.strftime('%I:%M %p').lstrip('0')}\n"
                f"Subject: {o.subject}\nTo: {', '.join(f'<{p.addr}>' for p in o.to)}\n")
    if style in ("apple", "iphone"):
        return ("Begin forwarded message:\n\n"
                f"From: {o.sender.name} <{o.sender.addr}>\nSubject: {o.subject}\n"
                f"Date: {m.strftime('%B')} {m.day}, {m.year} at "
                f"{m.strftime('%I:%M:%S %p').lstrip('0')} {m.tzname()}\n"
                f"To: {', '.join(f'{p.name} <{p.addr}>' for p in o.to)}\n")
    if style in ("thunderbird", "mutt"):
        return ("-------- Forwarded Message --------\n"
                f"Subject: \t{o.subject}\nDate: \t{rfc_date(m)}\n"
                f"From: \t{o.sender.name} <{o.sender.addr}>\n"
                f"To: \t{', '.join(p.addr for p in o.to)}\n")
    return outlook_header_block(o, "owa" if style in ("owa", "outlook_ios") else "modern")


def reply_text(style: str, new_text: str, o: Original, rng: random.Random,
               sig: str = "") -> tuple[str, str | None]:
    """Plain text and HTML of a reply in ``style`` quoting the whole original."""
    new_block = new_text + (f"\n\n{sig}" if sig else "")
    orig_plain = o.text.rstrip("\n")
    orig_html = "<br>\n".join(html_escape(line) for line in orig_plain.split("\n"))
    new_html = "<br>\n".join(html_escape(line) for line in new_block.split("\n"))
    if style in ("outlook", "owa", "outlook_ios", "outlook_original"):
        kind = {"outlook": rng.choice(("modern", "owa")), "owa": "owa",
                "outlook_ios": "owa", "outlook_original": "original"}[style]
        block = outlook_header_block(o, kind)
        tag = "\n\n" + CLIENTS["outlook_ios"].tagline if style == "outlook_ios" else ""
        plain = f"{new_block}{tag}\n\n{block}\n\n{orig_plain}\n"
        block_html = "<br>\n".join(
            f"<b>{html_escape(line.split(':', 1)[0])}:</b>{html_escape(line.split(':', 1)[1])}"
            if ":" in line and not line.startswith("_") and not line.startswith("-----")
            else html_escape(line) for line in block.split("\n"))
        sep = ("<div style=\"border:none;border-top:solid #E1E1E1 1.0pt;padding:3.0pt 0in "
               "0in 0in\">" if kind == "modern" else "<hr style=\"display:inline-block;"
               "width:98%\" tabindex=\"-1\"><div id=\"divRplyFwdMsg\" dir=\"ltr\">")
        html_text = html_body("outlook" if style != "owa" else "owa", new_text.split("\n\n"),
                              tail_html=(f"<p class=\"MsoNormal\">{html_escape(sig)}</p>"
                                         if sig else "") + f"\n{sep}<p class=\"MsoNormal\">"
                              f"<span style=\"font-size:11.0pt\">{block_html}</span></p></div>\n"
                              f"<p class=\"MsoNormal\">{orig_html}</p>")
        return plain, html_text
    if style in ("gmail", "apple", "iphone"):
        attr = attribution(style, o, rng)
        tag = "\n\nSent from my iPhone" if style == "iphone" else ""
        if style == "gmail":
            plain = f"{new_block}\n\n{attr}\n\n{quote_lines(orig_plain)}\n"
            html_text = (f"<div dir=\"ltr\">{new_html}</div><br><div class=\"gmail_quote\">"
                         f"<div dir=\"ltr\" class=\"gmail_attr\">{html_escape(attr)}<br></div>"
                         "<blockquote class=\"gmail_quote\" style=\"margin:0px 0px 0px 0.8ex;"
                         "border-left:1px solid rgb(204,204,204);padding-left:1ex\">"
                         f"{orig_html}</blockquote></div>\n")
        else:
            plain = f"{new_block}{tag}\n\n> {attr}\n> \n{quote_lines(orig_plain)}\n"
            html_text = html_body("apple", [], top_html=f"<div>{new_html}</div>"
                                  + ("<div><br><div>Sent from my iPhone</div></div>"
                                     if tag else "")
                                  + f"<div><br><blockquote type=\"cite\"><div>"
                                  f"{html_escape(attr)}</div><br class=\"Apple-interchange-"
                                  f"newline\"><div>{orig_html}</div></blockquote></div>")
        return plain, html_text
    if style == "inline":
        attr = attribution("thunderbird", o, rng)
        paragraphs = [p for p in orig_plain.split("\n\n") if p.strip()]
        answers = [line for line in new_text.split("\n") if line.strip()] or [new_text]
        out = [attr]
        for i, para in enumerate(paragraphs):
            out.append(quote_lines(para))
            if i < len(answers):
                out.append(answers[i])
        if len(answers) > len(paragraphs):
            out.extend(answers[len(paragraphs):])
        if sig:
            out.append(sig)
        return "\n\n".join(out) + "\n", None
    if style == "rewrapped":
        attr = attribution("gmail", o, rng)
        return f"{new_block}\n\n{attr}\n{broken_rewrap(orig_plain)}\n", None
    if style == "bottom":
        attr = attribution("thunderbird", o, rng)
        return f"{attr}\n{quote_lines(orig_plain)}\n\n{new_block}\n", None
    attr = attribution("thunderbird", o, rng)
    return f"{new_block}\n\n{attr}\n{quote_lines(orig_plain)}\n", None


# -- footers, disclaimers, banners ---------------------------------------------------------

DISCLAIMERS = (
    "CONFIDENTIALITY NOTICE: This e-mail message, including any attachments, is for the sole "
    "use of the intended recipient(s) and may contain confidential and privileged information. "
    "Any unauthorized review, use, disclosure or distribution is prohibited. If you are not the "
    "intended recipient, please contact the sender by reply e-mail and destroy all copies of "
    "the original message.",
    "This email and any files transmitted with it are confidential and intended solely for the "
    "use of the individual or entity to whom they are addressed. If you have received this "
    "email in error please notify the system manager. This message contains confidential "
    "information and is intended only for the individual named. If you are not the named "
    "addressee you should not disseminate, distribute or copy this e-mail. Please notify the "
    "sender immediately by e-mail if you have received this e-mail by mistake and delete this "
    "e-mail from your system. If you are not the intended recipient you are notified that "
    "disclosing, copying, distributing or taking any action in reliance on the contents of "
    "this information is strictly prohibited.",
    "{org} is a limited liability partnership registered in England and Wales with registered "
    "number OC{num} and is authorised and regulated by the Solicitors Regulation Authority. A "
    "list of members is open to inspection at our registered office, {address}. This email is "
    "confidential and may be privileged. If you have received it in error, please notify us "
    "immediately by reply email and then delete it from your system; you must not copy it or "
    "disclose its contents to any person. We do not accept service by email. Beware of cyber "
    "fraud: we will never change our bank details by email. Please always call us to verify "
    "any request to transfer money.",
    "IMPORTANT: The contents of this email and any attachments are confidential. They are "
    "intended for the named recipient(s) only. If you have received this email by mistake, "
    "please notify the sender immediately and do not disclose the contents to anyone or make "
    "copies thereof. {org} accepts no liability for any damage caused by any virus "
    "transmitted by this email. E-mail transmission cannot be guaranteed to be secure or "
    "error-free as information could be intercepted, corrupted, lost, destroyed, arrive late "
    "or incomplete, or contain viruses. The sender therefore does not accept liability for any "
    "errors or omissions in the contents of this message, which arise as a result of e-mail "
    "transmission.",
    "This message is for information purposes only, it is not a recommendation, advice, offer "
    "or solicitation to buy or sell a product or service nor an official confirmation of any "
    "transaction. It is directed at persons who are professionals and is not intended for "
    "retail customer use. Intended for recipient only. This message is subject to the terms "
    "at: www.{domain}/emaildisclaimer. For important disclosures, please see "
    "www.{domain}/disclosures, including a description of our conflicts management policy. "
    "Please consider the environment before printing this e-mail.",
    "HIPAA CONFIDENTIALITY NOTICE: This message, including any attachments, may contain "
    "protected health information (PHI) that is privileged and confidential under applicable "
    "law, including the Health Insurance Portability and Accountability Act. It is intended "
    "only for the use of the individual or entity named above. If you are not the intended "
    "recipient, you are hereby notified that any dissemination, distribution, or copying of "
    "this communication is strictly prohibited. If you received this message in error, "
    "please notify the sender immediately by telephone at {phone} and destroy the original "
    "message and all copies.",
    "Diese E-Mail enthält vertrauliche und/oder rechtlich geschützte Informationen. Wenn Sie "
    "nicht der richtige Adressat sind oder diese E-Mail irrtümlich erhalten haben, informieren "
    "Sie bitte sofort den Absender und vernichten Sie diese Mail. Das unerlaubte Kopieren "
    "sowie die unbefugte Weitergabe dieser Mail ist nicht gestattet.\n\nThis e-mail may "
    "contain confidential and/or privileged information. If you are not the intended "
    "recipient (or have received this e-mail in error) please notify the sender immediately "
    "and destroy this e-mail. Any unauthorised copying, disclosure or distribution of the "
    "material in this e-mail is strictly forbidden.\n\n{org} GmbH, Sitz der Gesellschaft: "
    "Berlin, Amtsgericht Charlottenburg HRB {num} B, Geschäftsführer: {ceo}",
)
BANNERS = (
    ("CAUTION: This email originated from outside of the organization. Do not click links or "
     "open attachments unless you recognize the sender and know the content is safe."),
    ("[EXTERNAL EMAIL] DO NOT CLICK links or attachments unless you recognize the sender and "
     "know the content is safe."),
    ("This Message Is From an External Sender\nThis message came from outside your "
     "organization."),
    ("You don't often get email from {addr}. Learn why this is important "
     "<https://aka.ms/LearnAboutSenderIdentification>"),
    ("EXTERNAL: This email originated outside of {org}. Use caution when clicking links or "
     "opening attachments. Report suspicious emails using the Report Phishing button."),
)


def disclaimer_text(rng: random.Random, org: Org) -> str:
    parts = rng.sample(DISCLAIMERS, rng.choice((1, 1, 2)))
    text = "\n\n".join(parts)
    return text.format(org=org.name, num=rng.randint(100000, 999999), address=org.address_line,
                       domain=org.domain, phone=f"+1 800 {rng.randint(200, 999)} "
                       f"{rng.randint(1000, 9999)}", ceo=make_name(rng))


def banner_text(rng: random.Random, org_name: str, sender_addr: str, which: int | None = None
                ) -> str:
    choice = BANNERS[rng.randrange(len(BANNERS)) if which is None else which]
    return choice.format(org=org_name, addr=sender_addr)


def banner_html(text: str) -> str:
    first, _, rest = text.partition("\n")
    return ("<table border=\"0\" cellspacing=\"0\" cellpadding=\"0\" width=\"100%\" "
            "style=\"width:100.0%;background:#FFEB9C;border:solid #9C6500 1.0pt\"><tr><td "
            "style=\"padding:3.75pt\"><p class=\"MsoNormal\"><b><span style=\"font-size:10.0pt;"
            f"color:#9C6500\">{html_escape(first)}</span></b>"
            + (f"<br><span style=\"font-size:9.0pt\">{html_escape(rest)}</span>" if rest else "")
            + "</p></td></tr></table>\n")


# -- binary payloads -----------------------------------------------------------------------

def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def tiny_png(rng: random.Random, size: int = 24) -> bytes:
    """A real PNG signature logo under 1 KB."""
    for _ in range(10):
        color = [rng.randrange(256) for _ in range(3)]
        rows = b""
        for y in range(size):
            row = bytearray([0])
            for x in range(size):
                on = (x - size // 2) ** 2 + (y - size // 2) ** 2 < (size // 2 - 2) ** 2
                row += bytes(color if on else (255, 255, 255)) if rng.random() > 0.08 else \
                    bytes(rng.randrange(256) for _ in range(3))
            rows += bytes(row)
        data = (b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8,
                                                                        2, 0, 0, 0))
                + _png_chunk(b"IDAT", zlib.compress(rows, 9)) + _png_chunk(b"IEND", b""))
        if len(data) < 1000:
            return data
        size -= 4
    return data


def logo_part(png: bytes, cid: str) -> Part:
    return Part([("Content-Type", "image/png; name=\"image001.png\""),
                 ("Content-Description", "image001.png"),
                 ("Content-Disposition", f"inline; filename=\"image001.png\"; size={len(png)}"),
                 ("Content-ID", f"<{cid}>"), ("Content-Transfer-Encoding", "base64")],
                base64.encodebytes(png))


def pdf_bytes(rng: random.Random, text: str, target: int) -> bytes:
    """A real (simple) PDF: pages of text in Flate streams, about ``target`` bytes."""
    objects: list[bytes] = []
    pages: list[int] = []
    words = text.split()
    position = 0
    body = b""
    n_pages = 0
    while len(body) < target or n_pages == 0:
        chunk = words[position:position + 450] or words[:450]
        position = (position + 450) % max(1, len(words) - 450)
        lines = textwrap.wrap(" ".join(chunk), 90)
        stream = "BT /F1 10 Tf 50 780 Td 12 TL\n" + "\n".join(
            "(" + line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ") '"
            for line in lines) + "\nET"
        raw_stream = zlib.compress(stream.encode("latin-1", "replace"), 6)
        if rng.random() < 0.3:  # an embedded image-like stream, as scans and charts have
            raw_stream += rng.randbytes(rng.randint(2000, 9000))
        objects.append(b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(raw_stream)
                       + raw_stream + b"\nendstream")
        pages.append(len(objects))
        body += raw_stream
        n_pages += 1
        if n_pages > 4000:
            break
    out = io.BytesIO()
    out.write(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    count = len(objects)
    catalog, pages_obj, font = count + 1, count + 2, count + 3
    page_ids = []
    all_objects = list(objects)
    for content in pages:
        all_objects.append(b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] /Contents %d"
                           b" 0 R /Resources << /Font << /F1 %d 0 R >> >> >>"
                           % (pages_obj, content, font))
        page_ids.append(len(all_objects) + 3)
    kids = b" ".join(b"%d 0 R" % (i) for i in page_ids)
    head = [b"<< /Type /Catalog /Pages %d 0 R >>" % pages_obj,
            b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, len(pages)),
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    ordered = all_objects[:count] + head + all_objects[count:]
    for number, obj in enumerate(ordered, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + obj + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(ordered) + 1))
    for off in offsets:
        out.write(b"%010d 00000 n \n" % off)
    out.write(b"trailer\n<< /Size %d /Root %d 0 R /ID [<%s><%s>] >>\nstartxref\n%d\n%%%%EOF\n"
              % (len(ordered) + 1, catalog, _hex(rng, 32).encode(), _hex(rng, 32).encode(), xref))
    return out.getvalue()


def _zip(files: list[tuple[str, bytes]]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files:
            info = zipfile.ZipInfo(name, date_time=(2025, 3, 4, 10, 20, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return out.getvalue()


def docx_bytes(rng: random.Random, text: str, target: int) -> bytes:
    paragraphs = [p for p in text.split("\n") if p.strip()] or [text]
    body = []
    size = 0
    i = 0
    while size < target * 3:
        p = html_escape(paragraphs[i % len(paragraphs)])
        body.append(f"<w:p><w:r><w:t xml:space=\"preserve\">{p}</w:t></w:r></w:p>")
        size += len(p)
        i += 1
    document = ("<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<w:document "
                "xmlns:w=\"http://schemas.openxmlformats.org/wordprocessingml/2006/main\">"
                f"<w:body>{''.join(body)}</w:body></w:document>")
    media = rng.randbytes(max(0, target // 3))
    return _zip([
        ("[Content_Types].xml", b"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Types xmlns=\"http://"
         b"schemas.openxmlformats.org/package/2006/content-types\"><Default Extension=\"xml\" "
         b"ContentType=\"application/xml\"/></Types>"),
        ("_rels/.rels", b"<?xml version=\"1.0\"?><Relationships/>"),
        ("word/document.xml", document.encode()),
        ("word/media/image1.jpeg", media),
        ("docProps/core.xml", f"<cp:coreProperties><dc:creator>{make_name(rng)}</dc:creator>"
                              f"</cp:coreProperties>".encode())])


def xlsx_bytes(rng: random.Random, text: str, target: int) -> bytes:
    words = text.split()
    rows = []
    size = 0
    r = 1
    while size < target * 4:
        cells = "".join(f"<c r=\"{chr(65 + c)}{r}\" t=\"inlineStr\"><is><t>{html_escape(rng.choice(words))}</t></is></c>"
                        if c == 0 else f"<c r=\"{chr(65 + c)}{r}\"><v>{rng.randint(0, 99999) / 100}</v></c>"
                        for c in range(8))
        row = f"<row r=\"{r}\">{cells}</row>"
        rows.append(row)
        size += len(row)
        r += 1
    sheet = f"<worksheet><sheetData>{''.join(rows)}</sheetData></worksheet>"
    return _zip([("[Content_Types].xml", b"<Types/>"), ("xl/workbook.xml", b"<workbook/>"),
                 ("xl/worksheets/sheet1.xml", sheet.encode())])


def zip_bytes(rng: random.Random, text: str, target: int) -> bytes:
    files = [(f"scans/IMG_{rng.randint(1000, 9999)}.jpg",
              rng.randbytes(max(1000, target // 3)))
             for _ in range(2)]
    files.append(("notes.txt", text.encode("utf-8")))
    return _zip(files)


ATTACHMENT_KINDS = (
    ("pdf", "application/pdf", pdf_bytes),
    ("docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
     docx_bytes),
    ("xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", xlsx_bytes),
    ("zip", "application/zip", zip_bytes),
)


# -- calendar ------------------------------------------------------------------------------

def ics(method: str, uid: str, sequence: int, summary: str, start: dt.datetime,
        end: dt.datetime, organizer: Person, attendees: list[tuple[Person, str]],
        description: str, location: str, prodid: str, tzid: str, stamp: dt.datetime,
        status: str = "CONFIRMED", windows_tz: bool = False) -> str:
    """A VCALENDAR (icalendar) as Outlook/Exchange, Google, Zoom or Apple write one."""
    import icalendar

    cal = icalendar.Calendar()
    cal.add("prodid", prodid)
    cal.add("version", "2.0")
    cal.add("method", method)
    if windows_tz:
        cal.add_component(_vtimezone(tzid, start))
    event = icalendar.Event()
    event.add("organizer", f"mailto:{organizer.addr}", parameters={"CN": organizer.name})
    for person, partstat in attendees:
        params = {"ROLE": "REQ-PARTICIPANT", "PARTSTAT": partstat, "CN": person.name}
        if method == "REQUEST":
            params["RSVP"] = "TRUE"
        event.add("attendee", f"mailto:{person.addr}", parameters=params)
    if description:
        event.add("description", description)
    event.add("uid", uid)
    event.add("summary", summary)
    naive_start = start.replace(tzinfo=None)
    naive_end = end.replace(tzinfo=None)
    event.add("dtstart", naive_start, parameters={"TZID": tzid})
    event.add("dtend", naive_end, parameters={"TZID": tzid})
    event.add("class", "PUBLIC")
    event.add("priority", 5)
    event.add("dtstamp", stamp.astimezone(dt.UTC))
    event.add("transp", "OPAQUE")
    event.add("status", status)
    event.add("sequence", sequence)
    if location:
        event.add("location", location)
    if method == "REQUEST":
        alarm = icalendar.Alarm()
        alarm.add("action", "DISPLAY")
        alarm.add("description", "REMINDER")
        alarm.add("trigger", dt.timedelta(minutes=-15))
        event.add_component(alarm)
    cal.add_component(event)
    return cal.to_ical().decode("utf-8").replace("\r\n", "\n")


def _vtimezone(tzid: str, moment: dt.datetime) -> object:
    """A VTIMEZONE in Exchange's style (year 1601 rules) with the zone's real offsets."""
    import icalendar

    zone = moment.tzinfo
    year = moment.year
    winter = dt.datetime(year, 1, 15, tzinfo=zone).utcoffset() or dt.timedelta()
    summer = dt.datetime(year, 7, 15, tzinfo=zone).utcoffset() or dt.timedelta()
    tz = icalendar.Timezone()
    tz.add("tzid", tzid)
    standard, daylight = (winter, summer) if winter <= summer else (summer, winter)
    north = winter <= summer
    std = icalendar.TimezoneStandard()
    std.add("dtstart", dt.datetime(1601, 1, 1, 0, 0, 0) if standard == daylight else
            dt.datetime(1601, 1, 1, 2, 0, 0))
    if standard != daylight:
        std.add("rrule", {"freq": "yearly", "bymonth": 10 if north else 4, "byday": "-1SU"})
    std.add("tzoffsetfrom", daylight)
    std.add("tzoffsetto", standard)
    tz.add_component(std)
    if standard != daylight:
        day = icalendar.TimezoneDaylight()
        day.add("dtstart", dt.datetime(1601, 1, 1, 2, 0, 0))
        day.add("rrule", {"freq": "yearly", "bymonth": 3 if north else 10, "byday": "-1SU"})
        day.add("tzoffsetfrom", standard)
        day.add("tzoffsetto", daylight)
        tz.add_component(day)
    return tz
