"""The categories of bench/realworld.py: one function per category, each returning cases.

A :class:`Case` is an ordered sequence of :class:`Delivery` (raw message, envelope sender,
envelope recipients, expectation) delivered to a fresh store.  Expectations: ``"unique"``
(must not be called a duplicate or near-duplicate), ``"flag"`` (must be called one) or
``None`` (not judged: the first message of a case, or context).  Every case is built from
its own ``random.Random(f"{seed}:{category}:{index}")``, so adding cases or categories does
not change the others.

To add a category: write ``def my_category(ctx: Context, count: int) -> list[Case]`` and
register it in :data:`CATEGORIES` with its target (``"unique"`` or ``"flag"``).
"""

from __future__ import annotations

import datetime as dt
import random
import re
import textwrap
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import realworld_mail as rm
import realworld_news as rn  # its categories (it reads this module's helpers when run)
import realworld_templates as rt
from realworld_corpus import TextPool

UNIQUE, FLAG = "unique", "flag"


@dataclass
class Delivery:
    raw: bytes
    sender: str
    recipients: list[str]
    expect: str | None
    note: str = ""


@dataclass
class Case:
    category: str
    index: int
    format: str
    deliveries: list[Delivery]
    # ALIAS-ADDRESS -> MAILBOX-ADDRESS lines of a Postfix virtual(5)-like map
    aliases: list[tuple[str, str]] = field(default_factory=list)
    # settings this category is defined with (section.key -> value), e.g. recipient scope
    settings: dict[str, object] = field(default_factory=dict)


@dataclass
class Context:
    pool: TextPool
    seed: int = 1

    def rng(self, category: str, index: int) -> random.Random:
        return random.Random(f"{self.seed}:{category}:{index}")

    def rotate(self, category: str, index: int, items: Sequence[str]) -> str:
        """Formats in turn (all of them every len(items) cases), offset by the seed."""
        offset = random.Random(f"{self.seed}:{category}:offset").randrange(len(items))
        return items[(index + offset) % len(items)]


# -- composing -----------------------------------------------------------------------------

def compose(rng: random.Random, *, sender: rm.Person, to: Sequence[rm.Person], subject: str,
            moment: dt.datetime, body: rm.Part, mid: str, rcpt: str, envelope: str,
            cc: Sequence[rm.Person] = (), client: rm.Client | None = None,
            in_reply_to: str | None = None, references: str | None = None,
            extra: Sequence[tuple[str, str]] = (), crlf: bool = False,
            received: Sequence[str] | None = None) -> bytes:
    """One delivered message: trace fields, originator fields, MIME body."""
    headers: list[tuple[str, str]] = [("Return-Path", f"<{envelope}>")]
    if received is None:
        received = [rm.received(rng, moment, rcpt)]
    headers.extend(("Received", r) for r in received)
    headers.append(("From", sender.header()))
    headers.append(("To", ", ".join(p.header() for p in to) if to else "undisclosed-recipients:;"))
    if cc:
        headers.append(("Cc", ", ".join(p.header() for p in cc)))
    headers.append(("Subject", rm.header_words(subject)))
    headers.append(("Date", rm.rfc_date(moment)))
    headers.append(("Message-ID", mid))
    if in_reply_to:
        headers.append(("In-Reply-To", in_reply_to))
    if references:
        headers.append(("References", references))
    if client is not None:
        headers.extend(client.headers())
    headers.extend(extra)
    return rm.render_message(headers, body, crlf=crlf)


def from_rendered(rng: random.Random, r: rt.Rendered, me: rm.Person, *, rcpt: str | None = None,
                  to: rm.Person | None = None, mid: str | None = None,
                  moment: dt.datetime | None = None, crlf: bool = False) -> tuple[bytes, str]:
    """A template mailing as delivered to ``me``: raw bytes and envelope sender."""
    moment = moment or r.moment or rm.when(rng)
    if r.html is not None and r.plain is not None:
        body = rm.multipart("alternative", [rm.text_part(r.plain, cte="quoted-printable"
                                                         if not r.plain.isascii() else None),
                                            rm.text_part(r.html, "html", cte="quoted-printable")],
                            rm.boundary(rng, "esp"))
    elif r.html is not None:
        body = rm.text_part(r.html, "html", cte="quoted-printable")
    else:
        body = rm.text_part(r.plain or "", charset="utf-8" if not (r.plain or "").isascii()
                            else "us-ascii", cte="8bit" if not (r.plain or "").isascii() else None)
    envelope = r.envelope or r.sender.addr
    raw = compose(rng, sender=r.sender, to=[to or me], subject=r.subject, moment=moment,
                  body=body,
                  mid=mid or rm.message_id(rng, r.mid_style, r.sender.addr.split("@")[-1]),
                  rcpt=rcpt or me.addr, envelope=envelope, extra=r.headers, crlf=crlf)
    return raw, envelope


def personal_body(rng: random.Random, cl: rm.Client, paragraphs: list[str], *,
                  sig: str = "", top: str = "", tail: str = "", logo: bytes = b"",
                  attachments: Sequence[rm.Part] = ()) -> rm.Part:
    """A person's message body as ``cl`` writes it (plain, HTML alternative, logo, files)."""
    texts = ([top] if top else []) + paragraphs + ([sig] if sig else []) + \
        ([cl.tagline] if cl.tagline else []) + ([tail] if tail else [])
    plain = rm.wrap(texts, cl.wrap) + "\n"
    parts: list[rm.Part] = []
    logo_html = ""
    if logo and cl.html:
        cid = f"image001.png@01DB{rm._hex(rng, 4, True)}.{rm._hex(rng, 8, True)}"
        logo_html = f"<p class=\"MsoNormal\"><img width=\"24\" height=\"24\" src=\"cid:{cid}\"></p>"
        parts.append(rm.logo_part(logo, cid))
    html_text = None
    if cl.html:
        top_html = rm.banner_html(top) if top else ""
        tail_html = (f"<p class=\"MsoNormal\">{rm.html_escape(sig).replace(chr(10), '<br>')}</p>"
                     if sig else "") + logo_html + (
            f"<p class=\"MsoNormal\" style=\"font-size:8pt;color:gray\">"
            f"{rm.html_escape(tail).replace(chr(10), '<br>')}</p>" if tail else "")
        html_text = rm.html_body(cl.name, paragraphs, tail_html=tail_html, top_html=top_html)
    body = rm.body_for(cl, rng, plain, html_text, parts or None)
    if attachments:
        body = rm.multipart("mixed", [body, *attachments], rm.boundary(rng, cl.name))
    return body


def greeting(rng: random.Random, person: rm.Person | None) -> str:
    if person is None or rng.random() < 0.3:
        return rng.choice(("Hi all,", "Hello,", "Hi team,", "Good morning,", ""))
    return rng.choice((f"Hi {person.first},", f"Hello {person.first},", f"{person.first},",
                       f"Dear {person.first},", f"Hey {person.first},"))


def clean(paragraphs: list[str]) -> list[str]:
    return [p for p in paragraphs if p]


def reply_subject(subject: str, style: str) -> str:
    if style.startswith("outlook") or style == "owa":
        return f"RE: {subject}"
    return f"Re: {subject}"


# -- 1. calendar invitations ---------------------------------------------------------------

MEETINGS = ("Weekly sync", "Project kickoff", "Quarterly business review", "Budget review",
            "Sprint planning", "Sprint retrospective", "Design review", "1:1", "Interview",
            "Roadmap discussion", "Vendor call", "All hands", "Customer onboarding",
            "Security review", "Offsite planning", "Board prep", "Hiring debrief",
            "Release go/no-go", "Lunch and learn", "Architecture review", "Contract review")
ROOMS = ("Conference Room 4B", "Boardroom (12th floor)", "Room 2.14 - Harbour", "Huddle Room 3",
         "Training Room A", "Meeting room Amsterdam", "Cafe area, ground floor")
CAL_FORMATS = ("outlook_teams", "outlook_teams_new", "outlook_zoom", "outlook_room",
               "google_meet", "google_zoom", "outlook_webex")
CAL_KINDS = ("different_meetings", "update", "cancel", "replies", "update_then_cancel")


@dataclass
class Meeting:
    uid: str
    summary: str
    start: dt.datetime
    end: dt.datetime
    organizer: rm.Person
    attendees: list[rm.Person]
    description: list[str]
    platform: str
    system: str
    location: str
    conf: dict
    sequence: int = 0
    when_block: bool = False     # Exchange's "When:/Where:" lines above the body


def _teams_conf(rng: random.Random) -> dict:
    return {"id": " ".join(str(rng.randint(100, 999)) for _ in range(4)),
            "pass": rm._alnum(rng, 6), "thread": rm._alnum(rng, 48),
            "conf": f"{rng.randint(100, 999)} {rng.randint(100, 999)} {rng.randint(100, 999)}#",
            "vtc": f"{rng.randint(100, 999)} {rng.randint(100, 999)} {rng.randint(100, 999)} "
                   f"{rng.randint(0, 9)}"}


def _zoom_conf(rng: random.Random) -> dict:
    n = f"{rng.randint(8, 9)}{rng.randint(10**9, 10**10 - 1)}"
    return {"id": f"{n[:3]} {n[3:7]} {n[7:]}", "n": n, "pass": f"{rng.randint(0, 999999):06d}",
            "pwd": rm._alnum(rng, 32), "host": rng.choice(("us02web", "us06web", "zoom"))}


def _meet_conf(rng: random.Random) -> dict:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return {"code": f"{rm._alnum(rng, 3, letters)}-{rm._alnum(rng, 4, letters)}-"
                    f"{rm._alnum(rng, 3, letters)}",
            "pin": f"{rng.randint(100, 999)} {rng.randint(100, 999)} {rng.randint(100, 999)}#",
            "eid": rm._alnum(rng, 64)}


def _webex_conf(rng: random.Random) -> dict:
    n = f"2{rng.randint(10**9, 10**10 - 1)}"
    return {"n": n, "id": f"{n[:4]} {n[4:7]} {n[7:]}", "pass": rm._alnum(rng, 11),
            "mtid": rm._hex(rng, 32), "site": rng.choice(("acme", "corp", "meetings", "eu"))}


def linkify(escaped: str) -> str:
    """Outlook's plain ``Text<https://...>`` links back to anchors in the HTML part."""
    def anchor(match: re.Match[str]) -> str:
        text = match.group(1)
        stripped = text.lstrip()
        return f"{text[:len(text) - len(stripped)]}<a href=\"{match.group(2)}\">{stripped}</a>"
    return re.sub(r"([^\n<>;|]+?)&lt;((?:https?|tel):[^\s&]*(?:&amp;[^\s&]*)*)&gt;", anchor,
                  escaped)


def _conf_block(m: Meeting, tenant: dict, me: rm.Person) -> str:
    c = m.conf
    if m.platform == "webex":
        site = c["site"]
        return ("-- Do not delete or change any of the following text. --\n\nWhen it's time, "
                f"join the Webex meeting here.\n\nMeeting number (access code): {c['id']}\n"
                f"Meeting password: {c['pass']}\n\nJoin meeting<https://{site}.webex.com/{site}/"
                f"j.php?MTID=m{c['mtid']}>\n\nTap to join from a mobile device (attendees "
                f"only)\n+1-408-525-6800,,{c['n']}## United States Toll\n+1-866-432-9903,,"
                f"{c['n']}## United States Toll Free\n\nJoin by phone\n+1-408-525-6800 United "
                f"States Toll\n+1-866-432-9903 United States Toll Free\nGlobal call-in numbers<"
                f"https://{site}.webex.com/{site}/globalcallin.php?MTID=m{c['mtid'][::-1]}>  |  "
                f"Toll-free calling restrictions<https://www.webex.com/pdf/tollfree_restrictions"
                f".pdf>\n\nJoin from a video system or application\nDial {c['n']}@{site}.webex."
                f"com\nYou can also dial 173.243.2.68 and enter your meeting number.\n\nJoin "
                f"using Microsoft Lync or Microsoft Skype for Business\nDial {c['n']}.{site}@lync"
                f".webex.com\n\nIf you are a host, click here<https://{site}.webex.com/{site}/j."
                f"php?MTID=m{c['mtid'][3:] + c['mtid'][:3]}> to view host information.\n\nNeed "
                "help? Go to https://help.webex.com\n")
    if m.platform == "teams":
        return ("_" * 80 + "\nMicrosoft Teams meeting\nJoin on your computer, mobile app or room "
                "device\nClick here to join the meeting<https://teams.microsoft.com/l/meetup-join/"
                f"19%3ameeting_{c['thread']}%40thread.v2/0?context=%7b%22Tid%22%3a%22"
                f"{tenant['tid']}%22%2c%22Oid%22%3a%22{tenant['oid']}%22%7d>\nMeeting ID: "
                f"{c['id']}\nPasscode: {c['pass']}\nDownload Teams<https://www.microsoft.com/en-us/"
                "microsoft-teams/download-app> | Join on the web<https://www.microsoft.com/"
                "microsoft-teams/join-a-meeting>\nJoin with a video conferencing device\n"
                f"{tenant['vtc']}@t.plcm.vc\nVideo Conference ID: {c['vtc']}\nAlternate VTC "
                "instructions<https://dialin.plcm.vc/teams/?key=" + tenant['vtc'] + "&conf="
                + c['vtc'].replace(" ", "") + ">\nOr call in (audio only)\n"
                f"{tenant['phone']},,{c['conf'].replace(' ', '')}<tel:"
                f"{tenant['phone'].replace(' ', '').replace('-', '')},,"
                f"{c['conf'].replace(' ', '')}>   {tenant['city']}\nPhone Conference ID: "
                f"{c['conf']}\nFind a local number<https://dialin.teams.microsoft.com/"
                f"{tenant['tid']}?id={c['conf'][:-1].replace(' ', '')}> | Reset PIN<https://"
                "dialin.teams.microsoft.com/usp/pstnconferencing>\nLearn More<https://aka.ms/"
                "JoinTeamsMeeting> | Meeting options<https://teams.microsoft.com/meetingOptions/?"
                f"organizerId={tenant['oid']}&tenantId={tenant['tid']}&threadId=19_meeting_"
                f"{c['thread']}@thread.v2&messageId=0&language=en-US>\n" + "_" * 80)
    if m.platform == "teams_new":
        return ("_" * 80 + "\nMicrosoft Teams Need help?<https://aka.ms/JoinTeamsMeeting?omkt="
                "en-US>\nJoin the meeting now<https://teams.microsoft.com/l/meetup-join/19%3a"
                f"meeting_{c['thread']}%40thread.v2/0?context=%7b%22Tid%22%3a%22{tenant['tid']}"
                f"%22%2c%22Oid%22%3a%22{tenant['oid']}%22%7d>\nMeeting ID: {c['id']}\nPasscode: "
                f"{c['pass']}\n" + "_" * 32 + "\nDial in by phone\n"
                f"{tenant['phone']},,{c['conf'].replace(' ', '')} {tenant['city']}\n"
                f"Find a local number<https://dialin.teams.microsoft.com/{tenant['tid']}>\n"
                f"Phone conference ID: {c['conf']}\nFor organizers: Meeting options<https://"
                f"teams.microsoft.com/meetingOptions/?organizerId={tenant['oid']}> | Reset "
                "dial-in PIN<https://dialin.teams.microsoft.com/usp/pstnconferencing>\n"
                + "_" * 80)
    if m.platform == "zoom":
        url = f"https://{c['host']}.zoom.us/j/{c['n']}?pwd={c['pwd']}.1"
        dial = "\n".join(f"• {p}" for p in tenant["zoom_numbers"])
        return (f"{m.organizer.name} is inviting you to a scheduled Zoom meeting.\n\nJoin Zoom "
                f"Meeting\n{url}\n\nMeeting ID: {c['id']}\nPasscode: {c['pass']}\n\n---\n\nOne "
                f"tap mobile\n+16694449171,,{c['n']}#,,,,*{c['pass']}# US\n+16699006833,,"
                f"{c['n']}#,,,,*{c['pass']}# US (San Jose)\n\n---\n\nDial by your location\n"
                f"{dial}\n\nMeeting ID: {c['id']}\nPasscode: {c['pass']}\n\nFind your local "
                f"number: https://{c['host']}.zoom.us/u/{tenant['zoom_u']}\n\n---\n\nJoin by SIP"
                f"\n• {c['n']}@zoomcrc.com\n\n---\n\nJoin by H.323\n• 144.195.19.161 (US West)"
                f"\n• 206.247.11.121 (US East)\n\nMeeting ID: {c['id']}\nPasscode: {c['pass']}\n")
    if m.platform == "meet":
        return (f"Join with Google Meet\nhttps://meet.google.com/{c['code']}\n\nJoin by phone\n"
                f"(US) {tenant['phone']} PIN: {c['pin']}\n\nMore phone numbers\nhttps://tel.meet/"
                f"{c['code']}?pin={c['pin'][:-1].replace(' ', '')}")
    return ""


def _google_footer(m: Meeting, me: rm.Person, rng: random.Random) -> str:
    eid = m.conf.get("eid") or rm._alnum(rng, 64)
    tok = rm._alnum(rng, 60)
    base = "https://calendar.google.com/calendar/event?action="
    tz = "America%2FNew_York"
    return (f"View all guest info {base}VIEW&eid={eid}&tok={tok}&ctz={tz}&hl=en&es=0\n\n"
            f"Reply for {me.addr}\n\nYes\n{base}RESPOND&eid={eid}&rst=1&tok={tok}&ctz={tz}&hl=en"
            f"&es=0\n\nNo\n{base}RESPOND&eid={eid}&rst=2&tok={tok}&ctz={tz}&hl=en&es=0\n\nMaybe\n"
            f"{base}RESPOND&eid={eid}&rst=3&tok={tok}&ctz={tz}&hl=en&es=0\n\nMore options "
            f"{base}VIEW&eid={eid}&tok={tok}&ctz={tz}&hl=en&es=0\n\nInvitation from Google "
            "Calendar: https://calendar.google.com/calendar/\n\nYou are receiving this email "
            "because you are an attendee on the event. To stop receiving future updates for "
            "this event, decline this event.\n\nForwarding this invitation could allow any "
            "recipient to send a response to the organizer, be added to the guest list, invite "
            "others regardless of their own invitation status, or modify your RSVP. Learn more "
            "https://support.google.com/calendar/answer/37135#forwarding\n")


def _google_when(m: Meeting) -> str:
    s, e = m.start, m.end

    def hm(x: dt.datetime) -> str:
        text = x.strftime("%I:%M%p").lstrip("0").lower().replace(":00", "")
        return text
    return f"{s.strftime('%a %b')} {s.day}, {s.year} {hm(s)} - {hm(e)} ({s.tzname()})"


def _outlook_when(m: Meeting) -> str:
    s, e = m.start, m.end
    off = s.utcoffset() or dt.timedelta()
    hours = int(off.total_seconds() // 3600)
    return (f"{s.strftime('%A, %B')} {s.day}, {s.year} {s.strftime('%I:%M %p').lstrip('0')}-"
            f"{e.strftime('%I:%M %p').lstrip('0')} (UTC{hours:+03d}:00) "
            f"{rm.WINDOWS_TZ.get(str(s.tzinfo), 'UTC').replace(' Standard Time', ' Time')}.")


def _uid(rng: random.Random, system: str) -> str:
    if system == "google":
        return f"{rm._alnum(rng, 26, 'abcdefghijklmnopqrstuvwxyz0123456789')}@google.com"
    return "040000008200E00074C5B7101A82E00800000000" + rm._hex(rng, 16, True) + \
        "00000000000000001000000" + rm._hex(rng, 32, True)


def _invite(rng: random.Random, m: Meeting, me: rm.Person, tenant: dict, method: str, *,
            rcpt: rm.Person, moment: dt.datetime, replier: rm.Person | None = None,
            partstat: str = "ACCEPTED", changed: bool = False) -> bytes:
    """One calendar message (REQUEST, CANCEL or REPLY) as Exchange or Google sends it."""
    google = m.system == "google"
    tzid = str(m.start.tzinfo) if google else rm.WINDOWS_TZ.get(str(m.start.tzinfo), "UTC")
    prodid = "-//Google Inc//Google Calendar 70.9054//EN" if google else \
        "Microsoft Exchange Server 2010"
    sender = replier or m.organizer
    if method == "REPLY":
        attendees = [(replier, partstat)]
        verb = {"ACCEPTED": "Accepted", "TENTATIVE": "Tentative", "DECLINED": "Declined"}[partstat]
        if google:
            subject = f"{verb}: {m.summary} @ {_google_when(m)} ({m.organizer.addr})"
            verbs = {"ACCEPTED": "has accepted", "TENTATIVE": "has tentatively accepted",
                     "DECLINED": "has declined"}[partstat]
            plain = f"{replier.name} {verbs} this invitation.\n\n{m.summary}\n{_google_when(m)}" \
                    f"\n\nInvitation from Google Calendar: https://calendar.google.com/calendar/\n"
        else:
            subject = f"{verb}: {m.summary}"
            note = rng.choice(("", "", "See you there.", "I might be a few minutes late.",
                               "Thanks for setting this up."))
            plain = (note + "\n" if note else "") + "\n"
    elif method == "CANCEL":
        attendees = [(p, "NEEDS-ACTION") for p in m.attendees]
        if google:
            subject = f"Canceled event: {m.summary} @ {_google_when(m)} ({rcpt.addr})"
            plain = (f"This event has been canceled.\n\n{m.summary}\n{_google_when(m)}\n\n"
                     f"Organizer\n{m.organizer.name}\n{m.organizer.addr}\n\n"
                     + _google_footer(m, rcpt, rng))
        else:
            subject = f"Canceled: {m.summary}"
            plain = rm.wrap(m.description or ["The meeting has been cancelled."], None) + "\n\n" \
                + _conf_block(m, tenant, rcpt) + "\n"
    else:
        attendees = [(p, "NEEDS-ACTION") for p in m.attendees]
        if google:
            prefix = "Updated invitation" if m.sequence else "Invitation"
            subject = f"{prefix}: {m.summary} @ {_google_when(m)} ({rcpt.addr})"
            head = "This event has been updated\nChanged: time\n\n" if changed else ""
            plain = (f"{head}{m.summary}\n{_google_when(m)}\n\n" +
                     (rm.wrap(m.description, None) + "\n\n" if m.description else "") +
                     _conf_block(m, tenant, rcpt) + "\n\nOrganizer\n" +
                     f"{m.organizer.name}\n{m.organizer.addr}\n\nGuests\n" +
                     "\n".join(f"{p.name}\n{p.addr}" for p in [m.organizer, *m.attendees]) +
                     "\n\n" + _google_footer(m, rcpt, rng))
        else:
            subject = m.summary
            when_block = f"When: {_outlook_when(m)}\nWhere: {m.location}\n\n" \
                if m.when_block or m.platform == "room" else ""
            plain = when_block + (rm.wrap(m.description, None) + "\n\n" if m.description else "") \
                + _conf_block(m, tenant, rcpt) + "\n"
    ics = rm.ics(method, m.uid, m.sequence, m.summary, m.start, m.end, m.organizer, attendees,
                 "\n".join(m.description) if method != "REPLY" else "", m.location, prodid, tzid,
                 moment, status="CANCELLED" if method == "CANCEL" else "CONFIRMED",
                 windows_tz=not google)
    paragraphs = [b for b in plain.split("\n\n") if b.strip()]
    cal = rm.text_part(ics, "calendar", charset="utf-8", cte="base64" if google else
                       rng.choice(("base64", "quoted-printable", "7bit")),
                       extra=f"; method={method}")
    if google:
        html = linkify(rm.html_body("gmail", paragraphs))
        alt = rm.multipart("alternative", [rm.text_part(plain, charset="UTF-8"),
                                           rm.text_part(html, "html", charset="UTF-8",
                                                        cte="quoted-printable"), cal],
                           rm.boundary(rng, "gmail"))
        body = rm.multipart("mixed", [alt, rm.attachment_part(ics.encode(), "application/ics",
                                                                "invite.ics", style="gmail")],
                            rm.boundary(rng, "gmail"))
        mid = rm.message_id(rng, "gmail")
        cl = None
    else:
        html = linkify(rm.html_body("outlook", paragraphs))
        body = rm.multipart("alternative", [rm.text_part(plain, cte="quoted-printable"),
                                            rm.text_part(html, "html", cte="quoted-printable"),
                                            cal], rm.boundary(rng, "outlook"))
        mid = rm.message_id(rng, "outlook")
        cl = rm.CLIENTS["outlook"]
    extra = [] if google else [("Thread-Topic", m.summary),
                               ("X-MS-Exchange-Organization-AuthAs", "Anonymous")]
    to = [m.organizer] if method == "REPLY" else m.attendees
    return compose(rng, sender=sender, to=to, subject=subject, moment=moment, body=body, mid=mid,
                   rcpt=rcpt.addr, envelope=sender.addr, client=cl, extra=extra)


def _tenant(rng: random.Random) -> dict:
    city = rng.choice((("+1 323-849-4874", "United States, Los Angeles"),
                       ("+1 469-208-1641", "United States, Dallas"),
                       ("+44 20 3443 8756", "United Kingdom, London"),
                       ("+49 69 38089 4321", "Germany, Frankfurt"),
                       ("+31 20 708 5081", "Netherlands, Amsterdam")))
    return {"tid": str(uuid.UUID(int=rng.getrandbits(128))),
            "oid": str(uuid.UUID(int=rng.getrandbits(128))),
            "phone": city[0], "city": city[1], "vtc": str(rng.randint(100000000, 999999999)),
            "zoom_u": rm._alnum(rng, 9), "zoom_numbers": rng.sample(
                ("+1 669 444 9171 US", "+1 669 900 6833 US (San Jose)", "+1 253 205 0468 US",
                 "+1 253 215 8782 US (Tacoma)", "+1 346 248 7799 US (Houston)",
                 "+1 646 931 3860 US", "+1 929 205 6099 US (New York)",
                 "+1 301 715 8592 US (Washington DC)", "+1 312 626 6799 US (Chicago)"), 5)}


def _meeting(rng: random.Random, ctx: Context, fmt: str, organizer: rm.Person,
             attendees: list[rm.Person], base: dt.datetime) -> Meeting:
    system = "google" if fmt.startswith("google") else "outlook"
    platform = {"outlook_teams": "teams", "outlook_teams_new": "teams_new",
                "outlook_zoom": "zoom", "outlook_room": "room", "google_meet": "meet",
                "google_zoom": "zoom", "outlook_webex": "webex"}[fmt]
    conf = {"teams": _teams_conf, "teams_new": _teams_conf, "zoom": _zoom_conf,
            "meet": _meet_conf, "webex": _webex_conf, "room": lambda r: {}}[platform](rng)
    summary = rng.choice((rng.choice(MEETINGS), f"{rng.choice(MEETINGS)}: {ctx.pool.subject(rng)}",
                          ctx.pool.subject(rng), f"{organizer.first} / {attendees[0].first}"))
    if summary == "Interview":
        summary = f"Interview: {rm.make_name(rng)} – {rng.choice(rm.TITLES)}"
    shape = rng.random()
    if shape < 0.35:
        description: list[str] = []
    elif shape < 0.7:
        description = [ctx.pool.words_of_prose(rng, 8, 40)]
    else:
        description = ["Agenda:\n" + "\n".join(f"{i}. {ctx.pool.subject(rng)}"
                                               for i in range(1, rng.randint(2, 5)))]
    start = base.replace(minute=rng.choice((0, 0, 15, 30, 30, 45)), second=0)
    start += dt.timedelta(days=rng.randint(1, 20), hours=rng.randint(-2, 3))
    end = start + dt.timedelta(minutes=rng.choice((15, 25, 30, 30, 45, 60, 60, 90)))
    location = {"teams": "Microsoft Teams Meeting", "teams_new": "Microsoft Teams Meeting",
                "zoom": f"https://{conf.get('host', 'zoom')}.zoom.us/j/{conf.get('n', '')}",
                "meet": "", "room": rng.choice(ROOMS),
                "webex": f"https://{conf.get('site', '')}.webex.com/meet/"
                         f"{organizer.addr.split('@')[0]}"}[platform]
    return Meeting(_uid(rng, system), summary, start, end, organizer, attendees, description,
                   platform, system, location, conf, when_block=rng.random() < 0.5)


def calendar_invitations(ctx: Context, count: int) -> list[Case]:
    """Different meetings from one organiser, updates, cancellations, attendee replies."""
    name = "calendar_invitations"
    cases = []
    for i in range(count):
        rng = ctx.rng(name, i)
        fmt = ctx.rotate(name, i, CAL_FORMATS)
        kind = CAL_KINDS[i % len(CAL_KINDS)]
        org = rm.make_org(rng)
        organizer = org.people[0]
        me = rm.make_person(rng, rng.choice((org.domain, rm.make_org(rng).domain)))
        others = org.people[1:rng.randint(2, 6)]
        tenant = _tenant(rng)
        base = rm.when(rng)
        moment = base - dt.timedelta(days=rng.randint(1, 9))
        deliveries: list[Delivery] = []

        def add(raw: bytes, sender: str, expect: str | None, note: str,
                deliveries: list[Delivery] = deliveries, me: rm.Person = me) -> None:
            deliveries.append(Delivery(raw, sender, [me.addr], expect, note))

        if kind == "different_meetings":
            for k in range(rng.randint(2, 5)):
                m = _meeting(rng, ctx, fmt, organizer, [me, *others], base)
                moment += dt.timedelta(minutes=rng.randint(2, 600))
                add(_invite(rng, m, me, tenant, "REQUEST", rcpt=me, moment=moment),
                    organizer.addr, UNIQUE if k else None, f"invitation {m.summary!r}")
        elif kind == "replies":
            m = _meeting(rng, ctx, fmt, organizer, [me, *others], base)
            repliers = [me, *others, *org.people[6:]]
            rng.shuffle(repliers)
            for k, person in enumerate(repliers[:rng.randint(2, 5)]):
                moment += dt.timedelta(minutes=rng.randint(1, 300))
                status = rng.choice(("ACCEPTED", "ACCEPTED", "TENTATIVE", "DECLINED"))
                raw = _invite(rng, m, me, tenant, "REPLY", rcpt=organizer, moment=moment,
                              replier=person, partstat=status)
                deliveries.append(Delivery(raw, person.addr, [organizer.addr],
                                           UNIQUE if k else None, f"reply {status} {person.name}"))
        else:
            m = _meeting(rng, ctx, fmt, organizer, [me, *others], base)
            add(_invite(rng, m, me, tenant, "REQUEST", rcpt=me, moment=moment), organizer.addr,
                None, "invitation")
            steps = {"update": ["update"] * rng.randint(1, 3), "cancel": ["cancel"],
                     "update_then_cancel": ["update", "cancel"]}[kind]
            for step in steps:
                moment += dt.timedelta(hours=rng.randint(1, 60))
                m.sequence += 1
                if step == "update":
                    shift = dt.timedelta(minutes=rng.choice((-60, -30, 30, 60, 90, 24 * 60,
                                                             2 * 24 * 60, 7 * 24 * 60)))
                    m.start += shift
                    m.end += shift
                    if rng.random() < 0.3:
                        m.end += dt.timedelta(minutes=30)
                    add(_invite(rng, m, me, tenant, "REQUEST", rcpt=me, moment=moment,
                                changed=True), organizer.addr, UNIQUE,
                        f"update SEQUENCE:{m.sequence}")
                else:
                    add(_invite(rng, m, me, tenant, "CANCEL", rcpt=me, moment=moment),
                        organizer.addr, UNIQUE, f"cancel SEQUENCE:{m.sequence}")
        cases.append(Case(name, i, f"{fmt}/{kind}", deliveries))
    return cases


# -- 2. shared disclaimer ------------------------------------------------------------------

SHORT_NOTES = ("Thanks, see attached.", "Approved.", "Approved", "Please see attached.",
               "Looks good to me.", "Noted, thanks.", "Confirmed.", "Can we discuss tomorrow?",
               "Call me when you have a minute.", "Agreed.", "Please proceed.",
               "Received, thank you.",
               "See below.", "FYI", "Signed copy attached.", "Happy to help.",
               "I'll get back to you on this.", "Please review and let me know.")
DISCLAIMER_FORMATS = ("outlook", "owa", "gmail", "apple", "thunderbird", "outlook_ios")


def _own_text(rng: random.Random, ctx: Context) -> list[str]:
    shape = rng.random()
    if shape < 0.3:
        return [rng.choice(SHORT_NOTES)]
    if shape < 0.45:
        return [ctx.pool.sentence(rng, 4, 20)]
    return ctx.pool.prose(rng, rng.choice((1, 1, 2, 3, 4)))


def _small_pdf(rng: random.Random, ctx: Context, name: str) -> rm.Part:
    text = " ".join(ctx.pool.prose(rng, 4))
    data = rm.pdf_bytes(rng, text * 3, rng.randint(8000, 40000))
    return rm.attachment_part(data, "application/pdf", name)


def shared_disclaimer(ctx: Context, count: int) -> list[Case]:
    """Different messages from one organisation sharing its disclaimer and/or a banner."""
    name = "shared_disclaimer"
    cases = []
    for i in range(count):
        rng = ctx.rng(name, i)
        fmt = ctx.rotate(name, i, DISCLAIMER_FORMATS)
        cl = rm.CLIENTS[fmt]
        org = rm.make_org(rng)
        disclaimer = rm.disclaimer_text(rng, org)
        external = rng.random() < 0.7
        mine = rm.make_org(rng)
        me = rm.make_person(rng, mine.domain if external else org.domain)
        banner_kind = rng.randrange(len(rm.BANNERS))
        layout = rng.choice(("banner+disclaimer", "disclaimer", "banner+disclaimer",
                             "banner")) if external else "disclaimer"
        logo = rng.random() < 0.5
        senders = org.people[:rng.randint(1, 5)]
        sig_style = rng.choice((1, 2, 2, 3))
        moment = rm.when(rng)
        deliveries = []
        said: set[str] = set()
        for k in range(rng.randint(2, 5)):
            person = rng.choice(senders)
            moment += dt.timedelta(minutes=rng.randint(3, 3000))
            text = _own_text(rng, ctx)
            while " ".join(text) in said:      # different messages: different own text
                text = _own_text(rng, ctx)
            said.add(" ".join(text))
            attach = []
            if "attached" in text[0].lower() or rng.random() < 0.1:
                kind_of = rng.choice(("Invoice", "Contract", "Minutes", "Quote", "Report"))
                attach = [_small_pdf(rng, ctx, f"{kind_of}_{rng.randint(1000, 9999)}.pdf")]
            paragraphs = clean([greeting(rng, me), *text])
            top = rm.banner_text(rng, mine.name, person.addr, banner_kind) \
                if "banner" in layout else ""
            tail = disclaimer if "disclaimer" in layout else ""
            sig = rm.signature(person, org, rng, sig_style)
            subject = ctx.pool.subject(rng)
            irt = None
            if not attach and rng.random() < 0.3:
                # a reply in a thread: the quoted message is one the mailbox owner wrote
                earlier = moment - dt.timedelta(hours=rng.randint(1, 50))
                asked = clean([greeting(rng, person), *ctx.pool.prose(rng, rng.choice((1, 2))),
                               me.first])
                quoted = rm.Original(me, [person], earlier, subject, rm.wrap(asked, cl.wrap),
                                     message_id=rm.message_id(rng, "outlook",
                                                              me.addr.split("@")[1]))
                plain, html_text = rm.reply_text(fmt, "\n\n".join(paragraphs), quoted, rng, sig)
                plain = (f"{top}\n\n" if top else "") + plain + (f"\n{tail}\n" if tail else "")
                if html_text is not None:
                    html_text = _around_html(html_text, rm.banner_html(top) if top else "",
                                             f"<p style=\"font-size:8pt;color:gray\">"
                                             f"{rm.html_escape(tail)}</p>" if tail else "")
                body = rm.body_for(cl, rng, plain, html_text)
                subject = reply_subject(subject, fmt)
                irt = quoted.message_id
            else:
                body = personal_body(rng, cl, paragraphs, sig=sig, top=top, tail=tail,
                                     logo=org.logo if logo else b"", attachments=attach)
                if rng.random() < 0.3:
                    subject = reply_subject(subject, fmt)
            if top and rng.random() < 0.4:
                subject = f"[EXTERNAL] {subject}"
            raw = compose(rng, sender=person, to=[me], subject=subject, moment=moment, body=body,
                          mid=rm.message_id(rng, fmt, org.domain), rcpt=me.addr,
                          envelope=person.addr, client=cl, in_reply_to=irt, references=irt)
            deliveries.append(Delivery(raw, person.addr, [me.addr], UNIQUE if k else None,
                                       f"{person.name}: {len(' '.join(text).split())} words"
                                       + (" (reply)" if irt else "")))
        cases.append(Case(name, i, f"{fmt}/{layout}", deliveries))
    return cases


def _around_html(document: str, top: str, tail: str) -> str:
    """Banner after <body>, disclaimer before </body> (as transport rules insert them)."""
    match = re.search(r"<body[^>]*>", document)
    if match:
        document = document[:match.end()] + top + document[match.end():]
    else:
        document = top + document
    at = document.rfind("</body>")
    return document[:at] + tail + document[at:] if at >= 0 else document + tail


# -- 3. transactional ----------------------------------------------------------------------

def _template_case(ctx: Context, name: str, i: int, templates: Sequence[rt.Template],
                   same_data: bool) -> Case:
    rng = ctx.rng(name, i)
    template = templates[[t.name for t in templates].index(
        ctx.rotate(name, i, [t.name for t in templates]))]
    me = rm.make_person(rng, rm.make_org(rng).domain if rng.random() < 0.6 else None)
    setup = template.setup(rng, ctx.pool, me)
    deliveries = []
    n = rng.randint(2, 4)
    first = template.data(rng, setup, 0)
    for k in range(n):
        if same_data:
            data = first
        else:
            data = first if k == 0 else template.data(rng, setup, k)
        send_rng = random.Random(f"{ctx.seed}:{name}:{i}:send:{k}")
        rendered = template.render(setup, data, send_rng)
        moment = rendered.moment
        if same_data and k and moment is not None:
            moment = moment + dt.timedelta(seconds=rng.randint(20, 5400))
        raw, envelope = from_rendered(send_rng, rendered, me, moment=moment)
        expect = None if k == 0 else (FLAG if same_data else UNIQUE)
        deliveries.append(Delivery(raw, envelope, [me.addr], expect, rendered.subject))
        if same_data and k >= 1:
            break
    return Case(name, i, template.name, deliveries)


def transactional(ctx: Context, count: int) -> list[Case]:
    """One template with other data: codes, links, orders, tracking, CI runs, alerts, bills."""
    return [_template_case(ctx, "transactional", i, rt.TRANSACTIONAL, False)
            for i in range(count)]


# -- 4. short replies ----------------------------------------------------------------------

SHORT_REPLIES = ("Thanks!", "Thanks", "Thank you!", "+1", "Sounds good", "Sounds good!",
                 "Will do", "Will do.", "👍", "Ok", "OK", "ok thanks", "Got it, thanks.",
                 "Perfect, thank you!", "Great, thanks!", "Done.", "Agreed.", "Yes", "No problem.",
                 "Noted.", "Received, thanks.", "Looks good!", "LGTM", "Approved", "Thx",
                 "Cheers", "Sure!", "On it.", "Works for me.", "Thanks, will review.", "Yes please",
                 "Great news!", "Thank you so much!", "Sure, no problem.")
REPLY_CLIENTS = ("gmail", "outlook", "owa", "apple", "iphone", "thunderbird", "outlook_ios",
                 "outlook_original", "mutt")


def _client_of(style: str) -> rm.Client:
    return rm.CLIENTS.get(style, rm.CLIENTS["outlook"] if style.startswith("outlook")
                          else rm.CLIENTS["thunderbird"])


def _reply_message(rng: random.Random, ctx: Context, style: str, person: rm.Person,
                   me: rm.Person, new_paragraphs: list[str], original: rm.Original | None,
                   *, sig: str = "", moment: dt.datetime, rcpt: str | None = None,
                   org: rm.Org | None = None, logo: bytes = b"",
                   to: Sequence[rm.Person] | None = None,
                   thread: tuple[str, str] | None = None) -> bytes:
    cl = _client_of(style)
    new_text = "\n\n".join(new_paragraphs)
    if original is None:
        body = personal_body(rng, cl, new_paragraphs, sig=sig, logo=logo)
        # a reply that quotes nothing still names its thread (subject, In-Reply-To)
        thread_subject, irt = thread or (ctx.pool.subject(rng), None)
        subject = reply_subject(thread_subject, style)
        refs = irt
    else:
        plain, html_text = rm.reply_text(style, new_text, original, rng, sig)
        if cl.wrap:
            lines = []
            for line in plain.split("\n"):
                lines.append(line if line.startswith(">") or len(line) <= cl.wrap else
                             textwrap.fill(line, cl.wrap))
            plain = "\n".join(lines)
        body = rm.body_for(cl, rng, plain, html_text)
        subject = reply_subject(original.subject, style)
        irt = original.message_id
        refs = (original.references + " " + original.message_id).strip()
        if len(refs) > 70:
            refs = refs.replace(" ", "\n ")
    return compose(rng, sender=person, to=list(to) if to else [me], subject=subject,
                   moment=moment, body=body, mid=rm.message_id(rng, style,
                                                               person.addr.split("@")[1]),
                   rcpt=rcpt or me.addr, envelope=person.addr, client=cl, in_reply_to=irt,
                   references=refs)


def _original_for(rng: random.Random, ctx: Context, to: rm.Person, moment: dt.datetime,
                  paragraphs: int | None = None, sender: rm.Person | None = None,
                  width: int | None = None) -> rm.Original:
    sender = sender or rm.make_person(rng, rng.choice(rm.COMPANIES)[1])
    paras = ctx.pool.prose(rng, paragraphs or rng.choice((1, 1, 2, 3)))
    text = rm.wrap(clean([greeting(rng, to), *paras, rm.signature(sender, None, rng, 0)]),
                   width or rng.choice((None, 72, 76)))
    return rm.Original(sender, [to], moment, ctx.pool.subject(rng), text,
                       message_id=rm.message_id(rng, rng.choice(("gmail", "outlook", "apple")),
                                                sender.addr.split("@")[1]))


def short_replies(ctx: Context, count: int) -> list[Case]:
    """'Thanks!', '+1', 'Sounds good' from different people in different threads."""
    name = "short_replies"
    cases = []
    for i in range(count):
        rng = ctx.rng(name, i)
        layout = ctx.rotate(name, i, ("quoted", "none", "mixed", "signature"))
        org = rm.make_org(rng)
        me = rm.make_person(rng, org.domain)
        moment = rm.when(rng)
        text = rng.choice(SHORT_REPLIES)
        people = [rm.make_person(rng, rng.choice((org.domain, rm.make_org(rng).domain, None)))
                  for _ in range(5)]
        deliveries = []
        subjects: set[str] = set()
        for k in range(rng.randint(2, 5)):
            if rng.random() < 0.4:
                text = rng.choice(SHORT_REPLIES)   # else the very same words again
            person = people[k] if rng.random() < 0.85 or k == 0 else people[0]
            style = rng.choice(REPLY_CLIENTS)
            moment += dt.timedelta(minutes=rng.randint(1, 2000))
            quoted = layout == "quoted" or (layout == "mixed" and rng.random() < 0.5)
            original = _original_for(rng, ctx, person, moment - dt.timedelta(
                hours=rng.randint(1, 72)), sender=me) if quoted else None
            subject = ctx.pool.subject(rng)
            while subject in subjects:
                subject = ctx.pool.subject(rng)
            subjects.add(subject)
            if original is not None:
                original.subject = subject
            thread = (subject, rm.message_id(rng, rng.choice(("gmail", "outlook", "apple")),
                                             me.addr.split("@")[1]))
            sig = ""
            if layout == "signature":
                sig = rm.signature(person, org if person.addr.endswith(org.domain) else None,
                                   rng, rng.choice((1, 2, 3)))
            elif rng.random() < 0.3:
                sig = person.first
            raw = _reply_message(rng, ctx, style, person, me, [text], original, sig=sig,
                                 moment=moment, org=org,
                                 logo=org.logo if person.addr.endswith(org.domain) and
                                 rng.random() < 0.3 else b"", thread=thread)
            deliveries.append(Delivery(raw, person.addr, [me.addr], UNIQUE if k else None,
                                       f"{person.name}: {text!r} ({style})"))
        cases.append(Case(name, i, layout, deliveries))
    return cases


# -- 5. cron reports -----------------------------------------------------------------------

def cron_reports(ctx: Context, count: int) -> list[Case]:
    """Periodic reports of one host whose output changed."""
    return [_cron_case(ctx, "cron_reports", i, same=False) for i in range(count)]


def _cron_case(ctx: Context, name: str, i: int, same: bool) -> Case:
    rng = ctx.rng(name, i)
    template = rt.CRON[[t.name for t in rt.CRON].index(
        ctx.rotate(name, i, [t.name for t in rt.CRON]))]
    me = rm.make_person(rng, rm.make_org(rng).domain)
    setup = template.setup(rng, ctx.pool, me)
    deliveries = []
    previous = None
    n = 2 if same else rng.randint(2, 5)
    for k in range(n):
        data = template.data(rng, setup, k) if not (same and k) else dict(previous)
        if same and k:
            data["at"] = data["at"] + dt.timedelta(seconds=rng.randint(1, 90))
        send_rng = random.Random(f"{ctx.seed}:{name}:{i}:send:{k}")
        rendered = template.render(setup, data, send_rng)
        if previous is not None and not same:
            old = template.render(setup, previous, send_rng)
            if old.plain == rendered.plain:   # nothing changed: not this category's case
                data = template.data(rng, setup, k + 7)
                rendered = template.render(setup, data, send_rng)
        if same and k:
            rendered.plain = template.render(setup, previous, send_rng).plain
        to = rm.Person("", f"root@{setup['fqdn']}") if setup["mail_to"] == "root" else me
        raw, envelope = from_rendered(send_rng, rendered, me, to=to, moment=data["at"])
        expect = None if k == 0 else (FLAG if same else UNIQUE)
        deliveries.append(Delivery(raw, envelope, [me.addr], expect, rendered.subject))
        previous = data
    return Case(name, i, template.name, deliveries)


# -- 6. quoted replies ---------------------------------------------------------------------

QUOTE_LAYOUTS = ("outlook", "owa", "outlook_original", "outlook_ios", "gmail", "apple", "iphone",
                 "thunderbird", "bottom", "inline", "rewrapped")


def quoted_replies(ctx: Context, count: int) -> list[Case]:
    """Replies quoting the whole original in every common client layout."""
    name = "quoted_replies"
    cases = []
    for i in range(count):
        rng = ctx.rng(name, i)
        layout = ctx.rotate(name, i, QUOTE_LAYOUTS)
        org = rm.make_org(rng)
        me = rm.make_person(rng, org.domain)
        author = rng.choice(org.people[1:] + [rm.make_person(rng)])
        replier = rng.choice([p for p in org.people[1:] if p != author] + [rm.make_person(rng)])
        moment = rm.when(rng)
        first_style = rng.choice(("gmail", "outlook", "apple", "thunderbird", "owa"))
        cl = _client_of(first_style)
        paras = ctx.pool.prose(rng, rng.choice((1, 2, 2, 3, 4)))
        sig = rm.signature(author, org if author.addr.endswith(org.domain) else None, rng)
        body_paragraphs = clean([greeting(rng, me), *paras])
        body = personal_body(rng, cl, body_paragraphs, sig=sig)
        subject = ctx.pool.subject(rng)
        mid = rm.message_id(rng, first_style, author.addr.split("@")[1])
        cc = [replier] if rng.random() < 0.7 else []
        raw = compose(rng, sender=author, to=[me], cc=cc, subject=subject, moment=moment,
                      body=body, mid=mid, rcpt=me.addr, envelope=author.addr, client=cl)
        deliveries = [Delivery(raw, author.addr, [me.addr], None, "original")]
        original = rm.Original(author, [me], moment, subject,
                               rm.wrap(body_paragraphs + [sig], cl.wrap), cc=cc, message_id=mid)
        for k in range(rng.choice((1, 1, 1, 2))):
            moment += dt.timedelta(minutes=rng.randint(5, 900))
            n_lines = rng.randint(1, 5)
            new = [" ".join(ctx.pool.sentence(rng, 4, 22) for _ in range(rng.randint(1, 2)))
                   for _ in range(n_lines if layout == "inline" else 1)]
            if layout != "inline" and n_lines > 2:
                new = [textwrap.fill(" ".join(ctx.pool.sentence(rng, 6, 20)
                                                 for _ in range(n_lines - 1)), 76)]
            if layout != "inline" and rng.random() < 0.5:
                new = [greeting(rng, author) or "Hi,", *new]
            new = clean(new)
            sign = rng.choice((replier.first, "", rm.signature(replier, None, rng, 1)))
            who = replier if k == 0 else author
            reply_raw = _reply_message(rng, ctx, layout, who, me, new, original, sig=sign,
                                       moment=moment, to=[original.sender if k == 0 else replier])
            deliveries.append(Delivery(reply_raw, who.addr, [me.addr], UNIQUE,
                                       f"{layout} reply by {who.name}"))
            plain_new = "\n\n".join(new + ([sign] if sign else []))
            quoted, _ = rm.reply_text("gmail" if layout in ("gmail", "inline", "rewrapped",
                                                            "bottom", "thunderbird") else layout,
                                      plain_new, original, rng)
            original = rm.Original(who, [me], moment, reply_subject(original.subject, layout),
                                   quoted, message_id=rm.message_id(rng, "gmail"),
                                   references=(original.references + " "
                                               + original.message_id).strip())
        cases.append(Case(name, i, layout, deliveries))
    return cases


# -- 7. newsletters, different issues ------------------------------------------------------

def newsletters_different_issues(ctx: Context, count: int) -> list[Case]:
    """Issues of one newsletter, digest or promotion: shared masthead and footer."""
    name = "newsletters_different_issues"
    cases = []
    for i in range(count):
        rng = ctx.rng(name, i)
        template = rt.NEWSLETTERS[[t.name for t in rt.NEWSLETTERS].index(
            ctx.rotate(name, i, [t.name for t in rt.NEWSLETTERS]))]
        me = rm.make_person(rng, rng.choice((None, rm.make_org(rng).domain)))
        setup = template.setup(rng, ctx.pool, me)
        deliveries = []
        for k in range(rng.randint(2, 4)):
            data = template.data(rng, setup, k)
            send_rng = random.Random(f"{ctx.seed}:{name}:{i}:send:{k}")
            rendered = template.render(setup, data, send_rng)
            raw, envelope = from_rendered(send_rng, rendered, me)
            deliveries.append(Delivery(raw, envelope, [me.addr], UNIQUE if k else None,
                                       rendered.subject))
        cases.append(Case(name, i, template.name, deliveries))
    return cases


# -- 8. attachment resend ------------------------------------------------------------------

DOCS = ("Q3 financial report", "Signed contract", "Board minutes", "Project plan",
        "Updated budget", "Proposal", "Statement of work", "Audit findings", "Scan of receipts",
        "Floor plan", "Presentation deck", "Invoice backup", "Due diligence pack",
        "Tender documents", "Training materials", "Risk register", "Lease agreement")
COVER = ("Please find attached the {doc}.", "Attached is the {doc} we discussed on {day}.",
         "Here is the latest version of the {doc}.",
         "I've attached the {doc}; the changes are on pages {n} and {m}.",
         "Let me know if you have any questions.", "Could you review and sign by {day}?",
         "Apologies for the delay in getting this over to you.",
         "Resending in case the first one didn't come through; our mail server had problems.",
         "Sending this again as I never heard back.", "As promised, the {doc} is attached.",
         "Please forward to anyone on your team who needs it.",
         "The figures in section {n} have been checked by finance.",
         "Happy to walk you through it on a call this week.",
         "The file is also on the shared drive, but here it is for convenience.",
         "Could you confirm you received it?", "Thanks again for your patience on this.")
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "the call", "last week")


def cover_note(rng: random.Random, ctx: Context, doc: str, low: int = 15, high: int = 60,
               avoid: str = "") -> str:
    for _ in range(50):
        parts = []
        for sentence in rng.sample(COVER, rng.randint(2, 4)):
            parts.append(sentence.format(doc=doc.lower(), day=rng.choice(DAYS),
                                         n=rng.randint(2, 9), m=rng.randint(10, 30)))
        if rng.random() < 0.5:
            parts.insert(rng.randint(0, len(parts)), ctx.pool.sentence(rng, 5, 22))
        note = " ".join(parts)
        words = len(note.split())
        if low <= words <= high and note != avoid:
            return note
    return note


def attachment_payload(rng: random.Random, ctx: Context) -> tuple[bytes, str, str, str]:
    """(bytes, content type, file name, document title): 20 KB - 2 MB, log-uniform."""
    import math
    target = int(math.exp(rng.uniform(math.log(20_000), math.log(2_000_000))))
    ext, ctype, make = rng.choice(rm.ATTACHMENT_KINDS)
    doc = rng.choice(DOCS)
    text = "\n".join(" ".join(ctx.pool.prose(rng, 3)) for _ in range(30))
    data = make(rng, text, target)
    stem = rng.choice((doc.replace(" ", "_"), doc, doc.replace(" ", "-").lower(),
                       f"{doc} {rng.randint(2024, 2026)}"))
    return data, ctype, f"{stem}.{ext}", doc


def attachment_resend(ctx: Context, count: int) -> list[Case]:
    """The same file re-sent under a new 15-60 word cover note (and once renamed)."""
    name = "attachment_resend"
    cases = []
    for i in range(count):
        rng = ctx.rng(name, i)
        fmt = ctx.rotate(name, i, ("outlook", "gmail", "apple", "thunderbird", "owa", "iphone"))
        cl = rm.CLIENTS[fmt]
        org = rm.make_org(rng)
        sender = org.people[0]
        me = rm.make_person(rng, rm.make_org(rng).domain)
        data, ctype, filename, doc = attachment_payload(rng, ctx)
        moment = rm.when(rng)
        subject = rng.choice((doc, f"{doc} attached", f"{org.name}: {doc}", f"{doc} - for review"))
        notes: list[str] = []
        deliveries = []
        renamed = i % 3 == 0
        for k in range(3 if renamed else 2):
            note = cover_note(rng, ctx, doc, avoid=notes[-1] if notes else "")
            notes.append(note)
            fname = filename
            if k == 2:
                stem, ext = filename.rsplit(".", 1)
                fname = rng.choice((f"{stem} (final).{ext}", f"{stem}_v2.{ext}",
                                    f"Copy of {stem}.{ext}", f"{rm._alnum(rng, 8)}.{ext}"))
            moment += dt.timedelta(hours=rng.randint(1, 96))
            part = rm.attachment_part(data, ctype, fname, style="gmail" if fmt == "gmail"
                                      else "outlook")
            sig = rm.signature(sender, org, rng, rng.choice((1, 2, 4)))
            body = personal_body(rng, cl, clean([greeting(rng, me), note]), sig=sig,
                                 attachments=[part],
                                 logo=org.logo if cl.html and rng.random() < 0.3 else b"")
            subj = subject if k == 0 else rng.choice((subject, f"RE: {subject}",
                                                      f"FW: {subject}", f"Resending: {subject}"))
            raw = compose(rng, sender=sender, to=[me], subject=subj, moment=moment, body=body,
                          mid=rm.message_id(rng, fmt, org.domain), rcpt=me.addr,
                          envelope=sender.addr, client=cl)
            deliveries.append(Delivery(raw, sender.addr, [me.addr], FLAG if k else None,
                                       f"{fname} {len(data)} bytes, "
                                       f"note {len(note.split())} words"))
        cases.append(Case(name, i, f"{fmt}/{filename.rsplit('.', 1)[1]}", deliveries))
    return cases


# -- 9. short resend -----------------------------------------------------------------------

SHORT_ASKS = ("Can you send me the Q3 numbers by Friday?", "Are we still on for lunch tomorrow?",
              "Please call me when you get a chance.", "What's the guest Wi-Fi password?",
              "Did the invoice from {company} get paid?", "Can you approve PO {num} today?",
              "Running about ten minutes late.", "Is the boardroom free at 3pm?",
              "Who has the key to the storage room?", "Meeting moved to 2pm.",
              "Can you review my PR before lunch?", "Where did we land on the pricing?",
              "Please sign and return the NDA.", "Any news from {company}?",
              "Can I borrow your charger?", "Reminder: timesheets due today.",
              "What time does the train leave?", "Could you resend the login link?",
              "Is the server back up?", "Did you get my voicemail?",
              "Can you cover my shift on Saturday?", "Please update the ticket {num}.")
RESEND_LINES = ("Resending in case this got lost.", "Just bumping this up.", "Any update on this?",
                "Following up on the below.",
                "Sorry, resending - not sure the first one went through.",
                "Gentle reminder.", "Resending, see below.", "Re-sending with the right address.")


def short_resend(ctx: Context, count: int) -> list[Case]:
    """A message of under 12 words re-sent by its sender: unchanged or one line added."""
    name = "short_resend"
    cases = []
    for i in range(count):
        rng = ctx.rng(name, i)
        fmt = ctx.rotate(name, i, ("gmail", "outlook", "iphone", "apple", "thunderbird", "owa",
                                   "outlook_ios"))
        cl = rm.CLIENTS[fmt]
        org = rm.make_org(rng)
        sender = org.people[0]
        to = [rm.make_person(rng, org.domain)]
        if rng.random() < 0.3:
            to.append(org.people[1])
        me = to[0]
        if rng.random() < 0.7:
            ask = rng.choice(SHORT_ASKS).format(company=rng.choice(rm.COMPANIES)[0],
                                                num=rng.randint(1000, 99999))
        else:
            ask = ctx.pool.sentence(rng, 4, 11)
        while len(ask.split()) >= 12:
            ask = ctx.pool.sentence(rng, 4, 11)
        subject = rng.choice((ask[:40].rstrip("?.!"), ctx.pool.subject(rng), "Quick question",
                              "Friday", "Question"))
        moment = rm.when(rng)
        sig = rng.choice(("", sender.first, rm.signature(sender, org, rng, 1)))
        body = personal_body(rng, cl, [ask], sig=sig)
        mid = rm.message_id(rng, fmt, org.domain)
        raw = compose(rng, sender=sender, to=to, subject=subject, moment=moment, body=body,
                      mid=mid, rcpt=me.addr, envelope=sender.addr, client=cl)
        deliveries = [Delivery(raw, sender.addr, [p.addr for p in to], None, ask)]
        original = rm.Original(sender, to, moment, subject,
                               rm.wrap([ask] + ([sig] if sig else []), cl.wrap), message_id=mid)
        how = ("unchanged", "added_line", "forward", "added_line")[i % 4]
        for _ in range(rng.choice((1, 1, 2))):
            moment += dt.timedelta(hours=rng.randint(1, 72))
            line = rng.choice(RESEND_LINES)
            if how == "unchanged":
                new_body, subj = personal_body(rng, cl, [ask], sig=sig), subject
            elif how == "added_line":
                new_body = personal_body(rng, cl, [line, ask], sig=sig)
                subj = rng.choice((subject, f"Resend: {subject}", f"RE: {subject}"))
            else:
                block = rm.forward_block(fmt, original)
                plain = f"{line}\n\n{block}\n\n{original.text}\n"
                new_body = rm.body_for(cl, rng, plain, rm.html_body(cl.name, [
                    line, block, original.text]) if cl.html else None)
                subj = f"{'FW' if fmt.startswith('o') else 'Fwd'}: {subject}"
            raw = compose(rng, sender=sender, to=to, subject=subj, moment=moment, body=new_body,
                          mid=rm.message_id(rng, fmt, org.domain), rcpt=me.addr,
                          envelope=sender.addr, client=cl)
            deliveries.append(Delivery(raw, sender.addr, [p.addr for p in to], FLAG,
                                       f"resend ({how})"))
        cases.append(Case(name, i, f"{fmt}/{how}", deliveries))
    return cases


# -- 10. list cross-posts ------------------------------------------------------------------

LIST_STYLES = ("mailman2", "mailman3", "listserv", "google_groups", "ezmlm", "yahoo", "groupsio",
               "sympa", "mailman_mime")


YAHOO_SPONSORS = ("Free Web-based e-mail groups by eGroups.com", "Get 128 Bit SSL Encryption!",
                  "Buy Ink Cartridges or Refill Kits for Your HP, Epson, Canon or Lexmark")


def list_footer(style: str, lst: str, host: str, rng: random.Random, mid: str) -> str:
    if style in ("mailman2", "mailman_mime"):
        return (f"_______________________________________________\n{lst.capitalize()} mailing "
                f"list\n{lst}@{host}\nhttps://{host}/mailman/listinfo/{lst}\n")
    if style == "mailman3":
        return (f"_______________________________________________\n{lst} mailing list -- "
                f"{lst}@{host}\nTo unsubscribe send an email to {lst}-leave@{host}\n")
    if style == "listserv":
        return ("\n" + "#" * 76 + "\n\nTo unsubscribe from the " + lst.upper() + " list, click "
                f"the following link:\nhttps://{host}/scripts/wa.exe?SUBED1={lst.upper()}&A=1\n")
    if style == "google_groups":
        return (f"-- \nYou received this message because you are subscribed to the Google Groups "
                f"\"{lst}\" group.\nTo unsubscribe from this group and stop receiving emails from "
                f"it, send an email to {lst}+unsubscribe@googlegroups.com.\nTo view this "
                f"discussion visit https://groups.google.com/d/msgid/{lst}/"
                f"{mid.strip('<>').replace('@', '%40')}.\n")
    if style == "ezmlm":
        return ("\n---------------------------------------------------------------------\nTo "
                f"unsubscribe, e-mail: {lst}-unsubscribe@{host}\nFor additional commands, "
                f"e-mail: {lst}-help@{host}\n")
    if style == "yahoo":
        return ("\n------------------------ Yahoo! Groups Sponsor ---------------------~-->\n"
                f"{rng.choice(YAHOO_SPONSORS)}"
                f"\nhttp://us.click.yahoo.com/{rm._alnum(rng, 6)}/{rm._alnum(rng, 6)}/"
                f"{rm._alnum(rng, 6)}/{rm._alnum(rng, 6)}/TM\n---------------------------------"
                "------------------------------------~->\n\nTo unsubscribe from this group, send "
                f"an email to:\n{lst}-unsubscribe@yahoogroups.com\n\n \n\nYour use of Yahoo! "
                "Groups is subject to http://docs.yahoo.com/info/terms/\n")
    if style == "groupsio":
        return (f"\n-=-=-=-=-=-=-=-=-=-=-=-\nGroups.io Links: You receive all messages sent to "
                f"this group.\nView/Reply Online (#{rng.randint(100, 99999)}): https://groups.io/g/"
                f"{lst}/message/{rng.randint(100, 99999)}\nMute This Topic: https://groups.io/mt/"
                f"{rng.randint(10**7, 10**8)}/{rng.randint(10**5, 10**6)}\nGroup Owner: "
                f"{lst}+owner@groups.io\nUnsubscribe: https://groups.io/g/{lst}/leave/"
                f"{rng.randint(10**6, 10**7)}/{rng.randint(10**6, 10**7)}/xyz [me@example.org]\n"
                "-=-=-=-=-=-=-=-=-=-=-=-\n")
    return (f"\n--\nVous recevez ce message car vous êtes abonné à la liste {lst}@{host}.\n"
            f"Pour vous désabonner : https://{host}/sympa/signoff/{lst}\n")


def _list_host(style: str, lst: str, org_domain: str) -> str:
    return {"google_groups": "googlegroups.com", "yahoo": "yahoogroups.com",
            "groupsio": "groups.io", "listserv": f"listserv.{org_domain}",
            "ezmlm": f"lists.{org_domain}",
            "sympa": f"listes.{org_domain}"}.get(style, f"lists.{org_domain}")


def list_crosspost(ctx: Context, count: int) -> list[Case]:
    """One message cross-posted to 2-3 lists, each copy with its tag, List-Id and footer."""
    name = "list_crosspost"
    cases = []
    list_names = ("users", "devel", "announce", "discuss", "general", "help", "staff", "tech",
                  "members", "board", "community", "events")
    for i in range(count):
        rng = ctx.rng(name, i)
        first_style = ctx.rotate(name, i, LIST_STYLES)
        styles = [first_style] + rng.sample([s for s in LIST_STYLES if s != first_style],
                                            rng.choice((1, 1, 2)))
        rng.shuffle(styles)
        author = rm.make_person(rng, rng.choice((None, rm.make_org(rng).domain)))
        me = rm.make_person(rng, rng.choice((None, rm.make_org(rng).domain)))
        org_domain = rng.choice(rm.COMPANIES)[1]
        project = rm.ascii_fold(rng.choice(rm.COMPANIES)[0].split()[0]).lower()
        names = rng.sample(list_names, len(styles))
        cl = rm.CLIENTS[rng.choice(("gmail", "thunderbird", "mutt", "apple", "outlook"))]
        paragraphs = ctx.pool.prose(rng, rng.choice((1, 1, 2, 3)))
        if rng.random() < 0.15:
            paragraphs = [ctx.pool.words_of_prose(rng, 12, 30)]
        sig = rm.signature(author, None, rng, rng.choice((0, 1, 3)))
        subject = ctx.pool.subject(rng)
        moment = rm.when(rng)
        same_mid = rng.random() < 0.25
        mid0 = rm.message_id(rng, cl.name, author.addr.split("@")[1])
        deliveries = []
        for k, (style, short) in enumerate(zip(styles, names, strict=True)):
            lst = f"{project}-{short}"
            host = _list_host(style, lst, org_domain)
            mid = mid0 if same_mid else rm.message_id(rng, cl.name, author.addr.split("@")[1])
            footer = list_footer(style, lst, host, rng, mid)
            plain = rm.wrap(clean([*paragraphs, sig]), cl.wrap) + "\n"
            html_text = rm.html_body(cl.name, clean([*paragraphs, sig])) if cl.html else None
            if style == "mailman_mime" or (cl.html and style.startswith("mailman")):
                inner = rm.body_for(cl, rng, plain, html_text)
                body = rm.multipart("mixed", [inner, rm.text_part(footer, charset="us-ascii")],
                                    f"==============={rng.randint(10**18, 10**19)}==")
            elif style == "google_groups" and cl.html:
                html_footer = "<p></p>\n-- <br>" + rm.html_escape(footer.split("\n", 1)[1]) \
                    .replace("\n", "<br>\n")
                body = rm.body_for(cl, rng, plain + footer, html_text + html_footer)
            else:
                body = rm.text_part(rm.wrap(clean([*paragraphs, sig]), cl.wrap) + "\n" + footer,
                                    flowed=False)
            tag = {"listserv": "", "google_groups": f"[{lst}] ", "groupsio": f"[{lst}] "}.get(
                style, f"[{short.capitalize() if style == 'yahoo' else lst}] ")
            if rng.random() < 0.15:
                tag = ""
            sender = author
            if style in ("google_groups", "mailman3") and rng.random() < 0.5:
                sender = rm.Person(f"{author.name} via {lst}", f"{lst}@{host}")
            list_headers = [
                ("List-Id", f"<{lst}.{host}>" if style != "google_groups" else
                 f"<{lst}.googlegroups.com>"),
                ("List-Post", f"<mailto:{lst}@{host}>"),
                ("List-Unsubscribe", f"<mailto:{lst}-unsubscribe@{host}>" if style in (
                    "ezmlm", "yahoo") else f"<https://{host}/unsubscribe/{lst}>"),
                ("Precedence", "list"), ("Sender", f"{lst}-bounces@{host}")]
            if style == "listserv":
                list_headers.append(("Reply-To", f"{lst.upper()}@{host.upper()}"))
            envelope = f"{lst}-bounces+{me.addr.replace('@', '=')}@{host}"
            moment += dt.timedelta(seconds=rng.randint(5, 900))
            received = [f"from {host} ({host} [{rt._ip(rng)}])\n\tby mx.{me.addr.split('@')[1]}"
                        f" (Postfix) with ESMTP id {rm._alnum(rng, 10)}\n\tfor <{me.addr}>; "
                        f"{rm.rfc_date(moment)}",
                        f"from {author.addr.split('@')[1]} by {host} with ESMTP; "
                        f"{rm.rfc_date(moment - dt.timedelta(seconds=rng.randint(2, 60)))}"]
            raw = compose(rng, sender=sender, to=[rm.Person("", f"{lst}@{host}")],
                          subject=tag + subject, moment=moment, body=body, mid=mid,
                          rcpt=me.addr, envelope=envelope, client=cl, extra=list_headers,
                          received=received)
            deliveries.append(Delivery(raw, envelope, [me.addr], FLAG if k else None,
                                       f"{style} {lst}"))
        cases.append(Case(name, i, "+".join(styles), deliveries))
    return cases


# -- 11. alias newsletter ------------------------------------------------------------------

def alias_newsletter(ctx: Context, count: int) -> list[Case]:
    """One newsletter to two (or three) addresses of one person; an aliases map says so."""
    name = "alias_newsletter"
    cases = []
    for i in range(count):
        rng = ctx.rng(name, i)
        template = rt.NEWSLETTERS[[t.name for t in rt.NEWSLETTERS].index(
            ctx.rotate(name, i, [t.name for t in rt.NEWSLETTERS]))]
        org = rm.make_org(rng)
        person_name = rm.make_name(rng)
        first = rm.ascii_fold(person_name.split()[0]).lower()
        last = rm.ascii_fold(person_name.split()[-1]).lower()
        addresses = rng.choice((
            [f"{first}@{org.domain}", f"{first[0]}.{last}@{org.domain}"],
            [f"{first}.{last}@{org.domain}", f"{first}@{org.domain}"],
            [f"{first}.{last}@{org.domain}", f"{first}{last[0]}@{rng.choice(rm.FREEMAIL)}"],
            [f"{first}@{org.domain}", f"{first}.{last}@{org.domain}", f"{first[0]}{last}@"
                                                                        f"{org.domain}"]))
        mailbox = addresses[0]
        if rng.random() < 0.3:
            addresses[1] = addresses[1].capitalize()
        people = [rm.Person(person_name, a) for a in addresses]
        setup = template.setup(rng, ctx.pool, people[0])
        data = template.data(rng, setup, 0)
        deliveries = []
        moment = setup["moment"]
        for k, person in enumerate(people):
            setup["me"] = person
            send_rng = random.Random(f"{ctx.seed}:{name}:{i}:send:{k}")
            rendered = template.render(setup, data, send_rng)
            moment = moment + dt.timedelta(seconds=rng.randint(1, 600))
            same_mid = template.name == "mailman_digest"
            mid = None
            if same_mid:
                mid = f"<mailman.{rng.randint(100, 999)}.{rm._hex(random.Random(i), 8)}" \
                      f"@lists.{setup['domain']}>"
            raw, envelope = from_rendered(send_rng, rendered, person, moment=moment, mid=mid)
            deliveries.append(Delivery(raw, envelope, [person.addr], FLAG if k else None,
                                       f"to {person.addr}"))
        aliases = [(a.lower(), mailbox) for a in addresses[1:]]
        aliases.append((mailbox, mailbox))
        other = rm.make_person(rng, org.domain)
        aliases.append((f"{other.addr.split('@')[0]}.alt@{org.domain}", other.addr))
        cases.append(Case(name, i, template.name, deliveries, aliases=aliases,
                          settings={"detector.scope": "recipient"}))
    return cases


# -- 12. resends and re-encodings ----------------------------------------------------------

RESEND_KINDS = ("redelivered", "quoted_printable", "base64", "8bit_latin1", "html_alternative",
                "html_only", "crlf", "forward_gmail", "forward_outlook", "forward_apple",
                "forward_thunderbird", "edited", "invitation_resent")


def _typo_edit(rng: random.Random, text: str) -> str:
    """A light edit: fix (or make) a few typos, as a second send would."""
    words = text.split(" ")
    candidates = [k for k, w in enumerate(words) if len(w) > 4 and w.isalpha()]
    for k in rng.sample(candidates, min(len(candidates), rng.randint(1, 3))):
        w = words[k]
        j = rng.randrange(1, len(w) - 1)
        words[k] = w[:j] + w[j + 1] + w[j] + w[j + 2:]
    return " ".join(words)


def resends_and_reencodings(ctx: Context, count: int) -> list[Case]:
    """The same message again: redelivered, re-encoded, forwarded to self, edited, re-invited."""
    name = "resends_and_reencodings"
    cases = []
    for i in range(count):
        rng = ctx.rng(name, i)
        kind = ctx.rotate(name, i, RESEND_KINDS)
        org = rm.make_org(rng)
        me = rm.make_person(rng, org.domain)
        if kind == "invitation_resent":
            fmt = rng.choice(CAL_FORMATS)
            organizer = rm.make_org(rng).people[0]
            tenant = _tenant(rng)
            base = rm.when(rng)
            m = _meeting(rng, ctx, fmt, organizer, [me, *org.people[1:3]], base)
            m.sequence = rng.choice((0, 0, 1, 2))
            moment = base - dt.timedelta(days=3)
            raws = [_invite(rng, m, me, tenant, "REQUEST", rcpt=me, moment=moment)]
            raws.append(_invite(rng, m, me, tenant, "REQUEST", rcpt=me,
                                moment=moment + dt.timedelta(hours=rng.randint(1, 48))))
            deliveries = [Delivery(raws[0], organizer.addr, [me.addr], None, "invitation"),
                          Delivery(raws[1], organizer.addr, [me.addr], FLAG,
                                   f"same UID, SEQUENCE:{m.sequence}")]
            cases.append(Case(name, i, f"{kind}/{fmt}", deliveries))
            continue
        if kind == "redelivered":
            ham = ctx.pool.ham(rng, 20, 800)
            raw = ham.raw
            moment = rm.when(rng)
            first = _redeliver(rng, raw, me.addr, moment, new_mid=False)
            second = _redeliver(rng, raw, me.addr, moment + dt.timedelta(hours=rng.randint(1, 30)),
                                new_mid=True)
            sender = re.search(rb"^From:.*?([\w.+-]+@[\w.-]+)", raw, re.M)
            env = sender.group(1).decode() if sender else "unknown@example.net"
            cases.append(Case(name, i, f"{kind}", [
                Delivery(first, env, [me.addr], None, ham.path),
                Delivery(second, env, [me.addr], FLAG, "new Received and Message-ID")]))
            continue
        sender = rm.make_person(rng, rng.choice((None, rm.make_org(rng).domain)))
        style = rng.choice(("gmail", "outlook", "apple", "thunderbird"))
        cl = rm.CLIENTS[style]
        ham = ctx.pool.ham(rng, 25, 700)
        paragraphs = [p for p in re.split(r"\n\s*\n", ham.body.strip()) if p.strip()][:12]
        if kind == "8bit_latin1" and all(p.isascii() for p in paragraphs):
            paragraphs = [f"Hi {rng.choice(('José', 'Zoë', 'Søren', 'François', 'Jürgen'))},"] + \
                paragraphs + ["Grüße / Best regards – " + sender.first]
        subject = ham.subject or ctx.pool.subject(rng)
        moment = rm.when(rng)
        text = "\n\n".join(paragraphs) + "\n"
        first_body = rm.text_part(text, cte="7bit" if text.isascii() else "quoted-printable")
        first = compose(rng, sender=sender, to=[me], subject=subject, moment=moment,
                        body=first_body, mid=rm.message_id(rng, style, sender.addr.split("@")[1]),
                        rcpt=me.addr, envelope=sender.addr, client=cl)
        later = moment + dt.timedelta(minutes=rng.randint(2, 3000))
        mid2 = rm.message_id(rng, style, sender.addr.split("@")[1])
        from2, to2, env2, crlf = sender, [me], sender.addr, False
        subject2 = subject
        if kind == "quoted_printable":
            body2 = rm.text_part(text, cte="quoted-printable")
        elif kind == "base64":
            body2 = rm.text_part(text, cte="base64")
        elif kind == "8bit_latin1":
            body2 = rm.text_part(text, charset=rng.choice(("iso-8859-1", "windows-1252")),
                                 cte=rng.choice(("8bit", "quoted-printable")))
        elif kind == "html_alternative":
            body2 = rm.body_for(rm.CLIENTS[rng.choice(("gmail", "outlook", "apple"))], rng, text,
                                rm.html_body(rng.choice(("gmail", "outlook", "apple", "owa")),
                                             paragraphs))
        elif kind == "html_only":
            body2 = rm.text_part(rm.html_body(rng.choice(("outlook", "thunderbird", "owa")),
                                              paragraphs), "html", cte="quoted-printable")
        elif kind == "crlf":
            body2 = rm.text_part(text, cte=rng.choice(("7bit", "quoted-printable")))
            crlf = True
        elif kind == "edited":
            edited = [_typo_edit(rng, p) if len(p.split()) > 8 else p for p in paragraphs]
            body2 = rm.text_part("\n\n".join(edited) + "\n", cte=None)
        else:   # forwarded inline by me to my own mailbox
            fstyle = {"forward_gmail": "gmail", "forward_outlook": rng.choice(("outlook", "owa")),
                      "forward_apple": "apple", "forward_thunderbird": "thunderbird"}[kind]
            fcl = rm.CLIENTS[fstyle]
            original = rm.Original(sender, [me], moment, subject, text)
            block = rm.forward_block(fstyle, original)
            lead = rng.choice(("", "", "FYI", "For the record.", "Forwarding to myself to keep "
                               "this.\nPlease file under projects.", "See below."))
            if fstyle == "apple":
                plain = (lead + "\n\n" if lead else "") + \
                    rm.quote_lines(block + "\n" + text.rstrip())
            else:
                plain = (lead + "\n\n" if lead else "") + block + "\n\n" + text
            body2 = rm.body_for(fcl, rng, plain + "\n", rm.html_body(fcl.name, clean(
                [lead, block.replace("\n", "\n"), *paragraphs])) if fcl.html else None)
            subject2 = f"{'FW' if fstyle in ('outlook', 'owa') else 'Fwd'}: {subject}"
            from2, to2, env2 = me, [me], me.addr
            mid2 = rm.message_id(rng, fstyle, me.addr.split("@")[1])
        second = compose(rng, sender=from2, to=to2, subject=subject2, moment=later, body=body2,
                         mid=mid2, rcpt=me.addr, envelope=env2, client=cl, crlf=crlf)
        cases.append(Case(name, i, kind, [Delivery(first, sender.addr, [me.addr], None, ham.path),
                                          Delivery(second, env2, [me.addr], FLAG, kind)]))
    return cases


def _redeliver(rng: random.Random, raw: bytes, rcpt: str, moment: dt.datetime,
               new_mid: bool) -> bytes:
    head, sep, body = raw.partition(b"\n\n")
    lines = head.split(b"\n")
    kept: list[bytes] = []
    skip = False
    for line in lines:
        if line[:1] in (b" ", b"\t"):
            if not skip:
                kept.append(line)
            continue
        low = line.lower()
        skip = low.startswith((b"received:", b"delivered-to:", b"return-path:", b"x-spam",
                               b"x-original-to:")) or (new_mid and low.startswith(b"message-id:"))
        if not skip:
            kept.append(line)
    trace = [f"Received: {rm.received(rng, moment, rcpt)}".encode()]
    if new_mid:
        kept.append(f"Message-ID: {rm.message_id(rng, 'other', 'resent.example.net')}".encode())
    return b"\n".join([b"Delivered-To: " + rcpt.encode(), *trace, *kept]) + sep + body


# -- 14. copies through a gateway, forwards as attachments ---------------------------------

GATEWAY_KINDS = ("attached_rfc822", "attached_eml", "safelinks", "urldefense_v2",
                 "urldefense_v3", "mimecast", "safelinks_cut", "urldefense_v3_cut",
                 "mimecast_cut")
LINK_PATHS = ("projects/{n}/review", "handbook/deploy.html", "events/{n}", "tickets/{n}",
              "docs/plan-{n}.pdf", "board/{n}?view=list")


def _gateway_link(rng: random.Random, kind: str, link: str) -> str:
    """``link`` as a security gateway rewrites it on the way in."""
    from urllib.parse import quote
    if kind == "safelinks":
        return (f"https://{rng.choice(('nam12', 'eur03', 'apc01'))}.safelinks.protection."
                f"outlook.com/?url={quote(link, safe='')}&data=05%7C02%7C"
                f"{rm._hex(rng, 24)}%7C0%7C0%7C{rng.randrange(10 ** 17)}&sdata="
                f"{rm._alnum(rng, 40)}%3D&reserved=0")
    if kind == "urldefense_v2":
        encoded = quote(link, safe="").replace("%", "-").replace("/", "_")
        return (f"https://urldefense.proofpoint.com/v2/url?u={encoded}&d=DwMF-g&c="
                f"{rm._alnum(rng, 20)}&r={rm._alnum(rng, 40)}&m={rm._alnum(rng, 40)}&s="
                f"{rm._alnum(rng, 40)}&e=")
    if kind == "urldefense_v3":
        return f"https://urldefense.com/v3/__{link}__;!!{rm._alnum(rng, 10)}!{rm._alnum(rng, 60)}$"
    host = link.split("/")[2]
    return f"https://protect-eu.mimecast.com/s/{rm._alnum(rng, 14)}?domain={host}"


def _hard_wrapped(text: str, width: int = 72) -> str:
    """``text`` as a client that hard-wraps plain text: lines broken at spaces, and a word
    longer than a line (a rewritten link) begun where it stands and cut every ``width``
    characters."""
    lines = []
    for line in text.split("\n"):
        quote = "> " if line.startswith(">") else ""     # quoted lines stay quoted
        current, started = "", False
        for word in line.split(" "):
            if current and len(current) + 1 + len(word) > width:
                if len(word) > width and width - len(current) > 20:
                    current = f"{current} {word}"
                else:
                    lines.append(current)
                    current = quote + word
            else:
                current = f"{current} {word}" if current else (quote if started else "") + word
            started = True
            while len(current) > width:
                lines.append(current[:width])
                current = quote + current[width:]
        lines.append(current)
    return "\n".join(lines)


def _with_inline_links(paragraphs: list[str], links: list[str]) -> str:
    """The links after words of the text ("Details here: …"), one a paragraph."""
    shown = list(paragraphs)
    for number, link in enumerate(links):
        at = number % len(shown)
        shown[at] = f"{shown[at].rstrip()} Details here: {link}"
    return "\n\n".join(shown) + "\n"


def _with_links(paragraphs: list[str], links: list[str]) -> str:
    shown = "\n".join(f"- {link}" for link in links)
    return "\n\n".join([*paragraphs, f"The links for this:\n{shown}"]) + "\n"


def gateway_and_attached_copies(ctx: Context, count: int) -> list[Case]:
    """The same message again, changed by the way it came: its links rewritten by a
    security gateway (Safe Links, Proofpoint URL Defense v2/v3, Mimecast) on a second
    delivery, or forwarded whole as an attachment (message/rfc822, an .eml file) by a
    colleague under a note of their own to someone who had it."""
    name = "gateway_and_attached_copies"
    cases = []
    for i in range(count):
        rng = ctx.rng(name, i)
        kind = ctx.rotate(name, i, GATEWAY_KINDS)
        org = rm.make_org(rng)
        me = rm.make_person(rng, org.domain)
        sender = rm.make_person(rng, rm.make_org(rng).domain)
        colleague = org.people[1] if len(org.people) > 1 else rm.make_person(rng, org.domain)
        ham = ctx.pool.ham(rng, 25, 600)
        paragraphs = [p for p in re.split(r"\n\s*\n", ham.body.strip()) if p.strip()][:10]
        site = rm.make_org(rng).domain
        links = [f"https://{rng.choice(('portal', 'docs', 'www', 'app'))}.{site}/"
                 + rng.choice(LINK_PATHS).format(n=rng.randint(10, 99999))
                 for _ in range(rng.randint(1, 3))]
        subject = ham.subject or ctx.pool.subject(rng)
        moment = rm.when(rng)
        style = rng.choice(("gmail", "outlook", "thunderbird"))
        cl = rm.CLIENTS[style]

        cut = kind.endswith("_cut")
        kind = kind.removesuffix("_cut")

        def shown(links: list[str], cut: bool = cut, paragraphs: list[str] = paragraphs
                  ) -> str:
            if cut:     # a client that hard-wraps at 72 cut the gateway's long links
                return _hard_wrapped(_with_inline_links(paragraphs, links))
            return _with_links(paragraphs, links)

        first = compose(rng, sender=sender, to=[me], subject=subject, moment=moment,
                        body=rm.text_part(shown(links)),
                        mid=rm.message_id(rng, style, sender.addr.split("@")[1]),
                        rcpt=me.addr, envelope=sender.addr, client=cl)
        later = moment + dt.timedelta(minutes=rng.randint(5, 2000))
        if kind.startswith("attached"):
            note = cover_note(rng, ctx, subject, 15, 90)
            inner_raw = first.split(b"\n\n", 1)
            inner = b"\n".join(line for line in inner_raw[0].split(b"\n")
                                if not line.lower().startswith((b"received:", b"delivered-to:"))
                                ) + b"\n\n" + inner_raw[1]
            if kind == "attached_rfc822":
                part = rm.Part([("Content-Type", "message/rfc822"),
                                ("Content-Disposition",
                                 f'attachment; filename="{subject[:40]}.eml"')], inner)
            else:
                part = rm.attachment_part(inner, "application/octet-stream",
                                          f"{subject[:40]}.eml")
            body = rm.multipart("mixed", [rm.text_part(note + "\n"), part],
                                rm.boundary(rng, "outlook"))
            second = compose(rng, sender=colleague, to=[me], subject=f"FW: {subject}",
                             moment=later, body=body,
                             mid=rm.message_id(rng, "outlook", org.domain), rcpt=me.addr,
                             envelope=colleague.addr, client=rm.CLIENTS["outlook"])
            envelope = colleague.addr
        else:
            wrapped = [_gateway_link(rng, kind, link) for link in links]
            second = compose(rng, sender=sender, to=[me], subject=subject, moment=later,
                             body=rm.text_part(shown(wrapped)),
                             mid=rm.message_id(rng, style, sender.addr.split("@")[1]),
                             rcpt=me.addr, envelope=sender.addr, client=cl)
            envelope = sender.addr
        cases.append(Case(name, i, kind + "_cut" * cut, [
            Delivery(first, sender.addr, [me.addr], None, ham.path),
            Delivery(second, envelope, [me.addr], FLAG, kind + "_cut" * cut)]))
    return cases


# -- 13. templated mail with the same data -------------------------------------------------

def templated_same_data(ctx: Context, count: int) -> list[Case]:
    """A retried notification (same data) and the same cron output twice."""
    name = "templated_same_data"
    cases = []
    for i in range(count):
        if i % 3 == 2:
            case = _cron_case(ctx, name, i, same=True)
        else:
            case = _template_case(ctx, name, i, rt.TRANSACTIONAL, True)
        cases.append(case)
    return cases


# -- registry ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Category:
    name: str
    target: str     # UNIQUE: every judged message must stay unique; FLAG: must be flagged
    build: Callable[[Context, int], list[Case]]


CATEGORIES: dict[str, Category] = {c.name: c for c in (
    Category("calendar_invitations", UNIQUE, calendar_invitations),
    Category("shared_disclaimer", UNIQUE, shared_disclaimer),
    Category("transactional", UNIQUE, transactional),
    Category("short_replies", UNIQUE, short_replies),
    Category("cron_reports", UNIQUE, cron_reports),
    Category("quoted_replies", UNIQUE, quoted_replies),
    Category("newsletters_different_issues", UNIQUE, newsletters_different_issues),
    Category("attachment_resend", FLAG, attachment_resend),
    Category("short_resend", FLAG, short_resend),
    Category("list_crosspost", FLAG, list_crosspost),
    Category("alias_newsletter", FLAG, alias_newsletter),
    Category("resends_and_reencodings", FLAG, resends_and_reencodings),
    Category("templated_same_data", FLAG, templated_same_data),
    Category("gateway_and_attached_copies", FLAG, gateway_and_attached_copies),
    Category("tracker_status_updates", UNIQUE, rn.tracker_status_updates),
    Category("disclaimer_short_notes", UNIQUE, rn.disclaimer_short_notes),
    Category("subject_only_data", UNIQUE, rn.subject_only_data),
    Category("campaign_copies", FLAG, rn.campaign_copies),
    Category("note_over_original", FLAG, rn.note_over_original),
    Category("resent_under_new_subject", FLAG, rn.resent_under_new_subject),
    Category("campaign_tracked_copies", FLAG, rn.campaign_tracked_copies),
    Category("bulk_notices_with_data", UNIQUE, rn.bulk_notices_with_data),
    Category("resend_notes_languages", FLAG, rn.resend_notes_languages),
    Category("follow_up_notes", FLAG, rn.follow_up_notes),
    Category("own_message_additions", UNIQUE, rn.own_message_additions),
    Category("tracker_comments", UNIQUE, rn.tracker_comments),
    Category("corrected_resend", FLAG, rn.corrected_resend),
    Category("short_fact_changes", UNIQUE, rn.short_fact_changes),
)}
