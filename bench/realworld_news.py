"""Categories of bench/realworld.py for the recall issue's remaining situations: tracker
updates whose only news is a status line, notices whose data live only in the subject,
campaign copies, resends under a new subject and short notes over the whole original.

Each function has the signature of the others in realworld_cases.py (``(ctx, count) ->
list[Case]``) and is registered in its CATEGORIES.  The formats are those the software
really sends (Jira Server/Data Center's plain notification, Bugzilla's change table and
comment header, GitHub's and GitLab's issue notifications, Jenkins/GitHub Actions build
mail, shop order confirmations, campaign spam of the corpus)."""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Sequence

import realworld_cases as rc
import realworld_mail as rm

# -- tracker_status_updates (unique) -------------------------------------------------------

_JIRA_STEPS = (("Open", "In Progress"), ("In Progress", "In Review"), ("In Review", "Done"),
               ("Done", "Reopened"), ("Reopened", "In Progress"), ("In Review", "Blocked"),
               ("Blocked", "In Progress"), ("Done", "Closed"))
_BUG_STEPS = (("NEW", "ASSIGNED"), ("ASSIGNED", "IN_PROGRESS"), ("IN_PROGRESS", "RESOLVED"),
              ("RESOLVED", "VERIFIED"), ("VERIFIED", "CLOSED"), ("RESOLVED", "REOPENED"),
              ("REOPENED", "ASSIGNED"), ("UNCONFIRMED", "NEW"))
_PROJECTS = ("OPS", "INFRA", "WEB", "PAY", "CORE", "MOB", "DATA", "SEC", "HR", "CRM")
TRACKER_FORMATS = ("jira", "jira", "bugzilla", "github", "gitlab")


def _steps(rng: random.Random, steps: tuple[tuple[str, str], ...], count: int
           ) -> list[tuple[str, str]]:
    """``count`` status changes that follow on from one another where they can."""
    out = [rng.choice(steps)]
    while len(out) < count:
        following = [s for s in steps if s[0] == out[-1][1] and s not in out]
        out.append(rng.choice(following) if following else
                   rng.choice([s for s in steps if s not in out]))
    return out


def _jira(rng: random.Random, ctx: rc.Context, me: rm.Person, k: int, ticket: dict,
          step: tuple[str, str], moment: dt.datetime) -> tuple[bytes, str]:
    actor = rng.choice(ticket["people"])
    key, host = ticket["key"], ticket["host"]
    changes = [f"    Status: {step[1]}  (was: {step[0]})"]
    if step[1] in ("Done", "Closed", "RESOLVED") and rng.random() < 0.7:
        changes.append(f"Resolution: {rng.choice(('Done', 'Fixed', 'Won’t Do'))}")
    if rng.random() < 0.25:
        other = rng.choice([p for p in ticket["people"] if p != ticket["assignee"]])
        changes.append(f"    Assignee: {other.name}  (was: {ticket['assignee'].name})")
        ticket["assignee"] = other
    head = f"{actor.name} updated {key}:"
    quoted = "\n".join(rm.quote_lines(block).rstrip() for block in (
        f"{ticket['title']}\n{'-' * len(ticket['title'])}\n\n"
        f"                Key: {key}\n                URL: https://{host}/browse/{key}\n"
        f"            Project: {ticket['project']}\n         Issue Type: {ticket['type']}\n"
        f"           Reporter: {ticket['reporter'].name}\n"
        f"           Assignee: {ticket['assignee'].name}\n"
        f"           Priority: {ticket['priority']}\n",
        ticket["description"]))
    body = (f"\n     [ https://{host}/browse/{key}?page=com.atlassian.jira.plugin.system."
            f"issuetabpanels:all-tabpanel ]\n\n{head}\n{'-' * len(head)}\n"
            + "\n".join(changes) + f"\n\n{quoted}\n\n\n\n--\nThis message was sent by "
            f"Atlassian Jira\n(v{ticket['version']})\n")
    thread = f"<JIRA.{ticket['id']}.{ticket['created']}@Atlassian.JIRA>"
    mid = f"<JIRA.{ticket['id']}.{ticket['created']}.{rng.randint(1000, 99999)}." \
          f"{ticket['created'] + 60000 * (k + 1)}@Atlassian.JIRA>"
    raw = rc.compose(rng, sender=rm.Person(f"{actor.name} (Jira)", f"jira@{host}"), to=[me],
                     subject=f"[JIRA] ({key}) {ticket['title']}", moment=moment,
                     body=rm.text_part(body), mid=mid, rcpt=me.addr, envelope=f"jira@{host}",
                     in_reply_to=thread, references=thread,
                     extra=[("Auto-Submitted", "auto-generated"),
                            ("X-JIRA-FingerPrint", ticket["fingerprint"])])
    return raw, f"jira@{host}"


def _bugzilla(rng: random.Random, ctx: rc.Context, me: rm.Person, k: int, ticket: dict,
              step: tuple[str, str], moment: dt.datetime) -> tuple[bytes, str]:
    actor = rng.choice(ticket["people"])
    number, host = ticket["number"], ticket["host"]
    rows = [("Status", step[0], step[1])]
    if step[1] == "RESOLVED":
        rows.append(("Resolution", "---", rng.choice(("FIXED", "WONTFIX", "WORKSFORME"))))
    if step[1] == "ASSIGNED" and rng.random() < 0.5:
        rows.append(("Assignee", ticket["assignee"].addr, actor.addr))
    table = "\n".join(f"{what:>16}|{removed:<28}|{added}" for what, removed, added in rows)
    comment = ""
    if rng.random() < 0.5:
        ticket["comments"] += 1
        comment = (f"\n--- Comment #{ticket['comments']} from {actor.name} <{actor.addr}> "
                   f"---\n{ctx.pool.sentence(rng, 4, 16)}\n")
    body = (f"https://{host}/show_bug.cgi?id={number}\n\n{actor.name} <{actor.addr}> "
            f"changed:\n\n{'What':>16}    |Removed                     |Added\n{'-' * 76}\n"
            f"{table}\n{comment}\n-- \nYou are receiving this mail because:\n"
            f"You are watching the assignee of the bug.\n")
    mid = f"<bug-{number}-{rng.randint(100, 999)}-{rm._alnum(rng, 10)}@https.{host}/>"
    thread = f"<bug-{number}-{ticket['reporter_id']}@https.{host}/>"
    raw = rc.compose(rng, sender=rm.Person("", f"bugzilla-daemon@{host}"), to=[me],
                     subject=f"[Bug {number}] {ticket['title']}", moment=moment,
                     body=rm.text_part(body), mid=mid, rcpt=me.addr,
                     envelope=f"bugzilla-daemon@{host}", in_reply_to=thread,
                     references=thread,
                     extra=[("Auto-Submitted", "auto-generated"),
                            ("X-Bugzilla-Status", step[1]),
                            ("X-Bugzilla-Product", ticket["project"])])
    return raw, f"bugzilla-daemon@{host}"


def _github(rng: random.Random, ctx: rc.Context, me: rm.Person, k: int, ticket: dict,
            step: tuple[str, str], moment: dt.datetime) -> tuple[bytes, str]:
    actor = rng.choice(ticket["people"])
    repo, number = ticket["repo"], ticket["number"]
    news = rng.choice((f"Closed #{number} as completed.", f"Reopened #{number}.",
                       f"Closed #{number} as not planned.",
                       f"Closed #{number} as completed via #{number + rng.randint(1, 40)}.",
                       f"@{actor.first.lower()} assigned this to @{me.first.lower()}.",
                       f"Labels: {rng.choice(('bug', 'needs-triage', 'blocked', 'p1'))}"))
    while news in ticket["said"]:
        news = f"Reopened #{number}." if news.startswith("Closed") else \
            f"Closed #{number} as completed."
        if news in ticket["said"]:
            news = f"@{actor.first.lower()} added the p{len(ticket['said'])} label"
    ticket["said"].add(news)
    body = (f"{news}\n\n—\nReply to this email directly, view it on GitHub:\n"
            f"https://github.com/{repo}/issues/{number}#event-{rng.randint(10**9, 10**10)}\n"
            f"You are receiving this because you are subscribed to this thread.\n\n"
            f"Message ID: <{repo}/issues/{number}/issue_event/{rng.randint(10**9, 10**10)}"
            f"@github.com>\n")
    mid = f"<{repo}/issues/{number}/issue_event/{rng.randint(10**9, 10**10)}@github.com>"
    thread = f"<{repo}/issues/{number}@github.com>"
    raw = rc.compose(rng, sender=rm.Person(actor.name, "notifications@github.com"), to=[me],
                     subject=f"Re: [{repo}] {ticket['title']} (Issue #{number})",
                     moment=moment, body=rm.text_part(body), mid=mid, rcpt=me.addr,
                     envelope="noreply@github.com", in_reply_to=thread, references=thread,
                     extra=[("X-GitHub-Reason", "subscribed"),
                            ("List-ID", f"{repo} <{repo.replace('/', '.')}.github.com>")])
    return raw, "noreply@github.com"


def _gitlab(rng: random.Random, ctx: rc.Context, me: rm.Person, k: int, ticket: dict,
            step: tuple[str, str], moment: dt.datetime) -> tuple[bytes, str]:
    actor = rng.choice(ticket["people"])
    project, number, host = ticket["repo"], ticket["number"], ticket["host"]
    news = {0: f"Issue was closed by {actor.name}",
            1: f"Issue was reopened by {actor.name}",
            2: f"Assignee changed to {rng.choice(ticket['people']).name}",
            3: f"{actor.name} changed the milestone to %{rng.randint(10, 40)}.0",
            4: f"Status changed to {step[1].replace('_', ' ').lower()}"}[k % 5]
    body = (f"{news}\n\n-- \nReply to this email directly or view it on GitLab: "
            f"https://{host}/{project}/-/issues/{number}\nYou're receiving this email "
            f"because of your account on {host}. Unsubscribe from this thread · Manage all "
            f"notifications · Help\n")
    mid = f"<note_{rng.randint(10**6, 10**7)}@{host}>"
    thread = f"<issue_{ticket['id']}@{host}>"
    raw = rc.compose(rng, sender=rm.Person(actor.name, f"gitlab@{host}"), to=[me],
                     subject=f"{project} | {ticket['title']} (#{number})", moment=moment,
                     body=rm.text_part(body), mid=mid, rcpt=me.addr, envelope=f"gitlab@{host}",
                     in_reply_to=thread, references=thread,
                     extra=[("X-GitLab-Project", project), ("X-GitLab-Issue-IID", str(number)),
                            ("Auto-Submitted", "auto-generated")])
    return raw, f"gitlab@{host}"


_TRACKERS = {"jira": _jira, "bugzilla": _bugzilla, "github": _github, "gitlab": _gitlab}


def tracker_status_updates(ctx: rc.Context, count: int) -> list[rc.Case]:
    """One ticket's successive updates (Jira, Bugzilla, GitHub, GitLab): each carries its
    news in one or two lines (a status change) above or around the ticket it quotes."""
    name = "tracker_status_updates"
    cases = []
    for i in range(count):
        rng = ctx.rng(name, i)
        fmt = ctx.rotate(name, i, TRACKER_FORMATS)
        org = rm.make_org(rng)
        me = rm.make_person(rng, org.domain)
        project = rng.choice(_PROJECTS)
        number = rng.randint(10, 40000)
        ticket = {
            "people": org.people[:rng.randint(2, 5)], "title": ctx.pool.subject(rng)[:70],
            "key": f"{project}-{number}", "number": number, "project": project,
            "host": rng.choice(("jira", "issues", "tracker", "bugs")) + "." + org.domain,
            "repo": f"{org.domain.split('.')[0]}/{rng.choice(('api', 'web', 'infra'))}",
            "id": rng.randint(10**5, 10**6), "created": rng.randint(10**12, 2 * 10**12),
            "reporter_id": rng.randint(1, 10**6), "comments": rng.randint(0, 6),
            "type": rng.choice(("Bug", "Task", "Story")), "said": set(),
            "priority": rng.choice(("Major", "Minor", "Critical", "High")),
            "version": rng.choice(("8.20.10#820010-sha1:ace47f9", "9.4.5#940005-sha1:e3094934",
                                   "1001.0.0-SNAPSHOT#100234-sha1:0b3c5a1")),
            "fingerprint": rm._hex(rng, 32),
            "description": "\n\n".join(rm.wrap([p], 72) for p in ctx.pool.prose(
                rng, rng.choice((1, 2, 3)))),
        }
        ticket["reporter"] = rng.choice(ticket["people"])
        ticket["assignee"] = rng.choice(ticket["people"])
        steps = _steps(rng, _BUG_STEPS if fmt == "bugzilla" else _JIRA_STEPS,
                       rng.randint(3, 5))
        moment = rm.when(rng)
        deliveries = []
        for k, step in enumerate(steps):
            moment += dt.timedelta(minutes=rng.randint(2, 2000))
            raw, envelope = _TRACKERS[fmt](rng, ctx, me, k, ticket, step, moment)
            deliveries.append(rc.Delivery(raw, envelope, [me.addr], rc.UNIQUE if k else None,
                                          f"{fmt}: {step[0]} -> {step[1]}"))
        cases.append(rc.Case(name, i, fmt, deliveries))
    return cases


# -- disclaimer_short_notes (unique) -------------------------------------------------------

# Disclaimers and banners as organisations word them (none of them is among the ones
# realworld_mail.py draws from): two short notes under one of them are two messages.
OTHER_DISCLAIMERS = [
    ('The information contained in this communication is confidential, may be attorney-client '
     'privileged, may constitute inside information, and is intended only for the use of the '
     'addressee. It is the property of {org}. Unauthorized use, disclosure or copying of this '
     'communication or any part thereof is strictly prohibited and may be unlawful. If you '
     'have received this communication in error, please notify us immediately by return email '
     'and destroy this communication and all copies thereof, including all attachments.'),
    ('This message contains information which may be confidential and privileged. Unless you '
     'are the addressee (or authorized to receive for the addressee), you may not use, copy or'
     ' disclose to anyone the message or any information contained in the message. If you have'
     ' received the message in error, please advise the sender by reply e-mail, and delete the'
     ' message.'),
    ('This message may contain information that is confidential or privileged. If you are not '
     'the intended recipient, please advise the sender immediately and delete this message. '
     'See http://www.{domain}.com/disclaimer for further information on confidentiality and '
     'the risks inherent in electronic communication.'),
    ('This transmission may contain information that is proprietary, privileged, confidential '
     'and/or exempt from disclosure under applicable law. If you are not the intended '
     'recipient, you are hereby notified that any disclosure, copying, distribution, or use of'
     ' the information contained herein (including any reliance thereon) is STRICTLY '
     'PROHIBITED. Although this transmission and any attachments are believed to be free of '
     'any virus or other defect that might affect any computer system into which it is '
     'received and opened, it is the responsibility of the recipient to ensure that it is '
     'virus free and no responsibility is accepted by {org} Inc., its subsidiaries and '
     'affiliates, as applicable, for any loss or damage arising in any way from its use. If '
     'you received this transmission in error, please immediately contact the sender and '
     'destroy the material in its entirety, whether in electronic or hard copy format. Thank '
     'you.'),
    ('Please refer to http://www.{domain}.com/pages/disclosures for disclosures relating to '
     'European legal entities.'),
    ('IRS Circular 230 Disclosure: To ensure compliance with requirements imposed by the IRS, '
     'we inform you that any U.S. federal tax advice contained in this communication '
     '(including any attachments) is not intended or written to be used, and cannot be used, '
     'for the purpose of (i) avoiding penalties under the Internal Revenue Code or (ii) '
     'promoting, marketing or recommending to another party any transaction or matter '
     'addressed herein.'),
    ('We process your personal data in accordance with our Privacy Notice, available at '
     'https://www.{domain}.com/privacy. If you no longer wish to receive emails from us, '
     'please let us know.'),
    ('ATTENTION: This email came from an external source. Do not open attachments or click on '
     'links from unknown senders or unexpected emails.'),
    ('[External] This message is from an external sender. Be cautious, especially with links '
     'and attachments.'),
    ('This Message Is From an External Sender\nThis message came from outside your '
     'organization.'),
    ('EXTERNAL SENDER: Do not click any links or open any attachments unless you trust the '
     'sender and know the content is safe.'),
    ('Diese E-Mail enthält vertrauliche und/oder rechtlich geschützte Informationen. Wenn Sie '
     'nicht der richtige Adressat sind oder diese E-Mail irrtümlich erhalten haben, '
     'informieren Sie bitte sofort den Absender und vernichten Sie diese Mail. Das unerlaubte '
     'Kopieren sowie die unbefugte Weitergabe dieser Mail ist nicht gestattet.'),
    ('Confidentiality: This email and its attachments are intended for the above named only '
     'and may be confidential. If they have come to you in error you must take no action based'
     ' on them, nor must you copy or show them to anyone; please reply to this email and '
     'highlight the error.'),
    ('Security Warning: Please be aware that email is not a secure communication medium. {org}'
     ' will never ask you to change bank details by email; always call us to confirm.'),
    ('Internet communications are not secure and therefore {org} does not accept legal '
     'responsibility for the contents of this message. Any views or opinions presented are '
     'solely those of the author and do not necessarily represent those of {org}.'),
    ('{org} Ltd is a company registered in England and Wales with company number 01234567. '
     'Registered office: 1 King Street, London EC2V 8AU. {org} Ltd is authorised and regulated'
     ' by the Financial Conduct Authority.'),
    ('NOTICE: This email and any attachments may contain confidential information. Use and '
     'further disclosure of the information by the recipient must be consistent with '
     'applicable laws, regulations and agreements. If you received this email in error, please'
     ' notify the sender; delete the email; and do not use, disclose or store the information '
     'it contains.'),
    ("Ce message et toutes les pièces jointes sont établis à l'intention exclusive de ses "
     'destinataires et sont confidentiels. Si vous recevez ce message par erreur, merci de le '
     "détruire et d'en avertir immédiatement l'expéditeur."),
    ('This e-mail is confidential. It may also be legally privileged. If you are not the '
     'addressee you may not copy, forward, disclose or use any part of it. If you have '
     'received this message in error, please delete it and all copies from your system and '
     'notify the sender immediately by return e-mail.'),
    ('Warning: Although {org} has taken reasonable precautions to ensure no viruses are '
     'present in this email, the company cannot accept responsibility for any loss or damage '
     'arising from the use of this email or attachments.'),
    ('PRIVILEGED AND CONFIDENTIAL: This communication, including attachments, is for the '
     'exclusive use of addressee and may contain proprietary, confidential and/or privileged '
     'information. If you are not the intended recipient, any use, copying, disclosure, '
     'dissemination or distribution is strictly prohibited.'),
    ('This email has been scanned for viruses and malware, and may have been automatically '
     'archived by Mimecast Ltd.'),
    ('Caution: External ({addr})\nFirst-Time Sender\nDetails'),
    ("You don't often get email from {addr}. Learn why this is important"),
    ('Please consider the environment before printing this email.'),
    ('[EXT] '),
]


def disclaimer_short_notes(ctx: rc.Context, count: int) -> list[rc.Case]:
    """Two or three different notes of 10-40 words from one sender, each under the same
    long disclaimer and/or external-mail banner (the block outweighs the note)."""
    name = "disclaimer_short_notes"
    cases = []
    for i in range(count):
        rng = ctx.rng(name, i)
        org, mine = rm.make_org(rng), rm.make_org(rng)
        person, me = org.people[0], rm.make_person(rng, mine.domain)
        fill = {"org": org.name, "domain": org.domain, "addr": person.addr}
        blocks = [text.format(**fill) for text in rng.sample(OTHER_DISCLAIMERS, 2)]
        top = blocks[0] if rng.random() < 0.4 else ""
        tail = "\n\n".join(blocks[1:] if top else blocks)
        fmt = rng.choice(("outlook", "gmail", "apple", "thunderbird"))
        cl = rm.CLIENTS[fmt]
        moment = rm.when(rng)
        said: set[str] = set()
        deliveries = []
        for k in range(rng.randint(2, 3)):
            note = ctx.pool.words_of_prose(rng, 10, 40)
            while note in said:
                note = ctx.pool.words_of_prose(rng, 10, 40)
            said.add(note)
            moment += dt.timedelta(minutes=rng.randint(5, 3000))
            body = rc.personal_body(rng, cl, rc.clean([rc.greeting(rng, me), note]),
                                    sig=rm.signature(person, org, rng, 2), top=top, tail=tail)
            raw = rc.compose(rng, sender=person, to=[me], subject=ctx.pool.subject(rng),
                             moment=moment, body=body, mid=rm.message_id(rng, fmt, org.domain),
                             rcpt=me.addr, envelope=person.addr, client=cl)
            deliveries.append(rc.Delivery(raw, person.addr, [me.addr],
                                          rc.UNIQUE if k else None,
                                          f"{len(note.split())} words"))
        cases.append(rc.Case(name, i, fmt, deliveries))
    return cases


# -- campaign_copies (flag) and subject_only_data (unique) ---------------------------------

_PROMO_SUBJECTS = ("Be Your Own Boss!!", "Lowest mortgage rates in years", "Your FREE trial "
                   "is waiting", "Earn $5000 a week from home!", "Last chance: 80% off "
                   "everything", "Refinance today and save", "You have been selected!",
                   "Hot stock alert", "Lose 20 lbs in 30 days", "Cheap meds online")


def _campaign_subject(rng: random.Random, subject: str, style: str) -> str:
    """``subject`` with the kind of token a campaign adds to make each copy different."""
    if style == "padded":
        return f"{subject}{' ' * rng.randint(3, 30)}{rng.randint(1000, 99999)}"
    if style == "after_punctuation":
        return f"{subject.rstrip('!?.')}!! {rng.randint(1000, 99999)}"
    if style == "random_token":
        letters = "abcdefghijklmnopqrstuvwxyz"
        token = rm._alnum(rng, rng.randint(5, 10), letters + "0123456789")
        while not (any(c.isdigit() for c in token) and any(c in letters[6:] for c in token)):
            token = rm._alnum(rng, rng.randint(5, 10), letters + "0123456789")
        return f"{subject} {token}"
    if style == "leading_padded":
        return f"{rng.randint(1000, 99999)}{' ' * rng.randint(3, 20)}{subject}"
    if style == "fake_reply":
        return f"Re: your order {rng.randint(10000, 99999)}"
    if style in ("bare_number", "machine_sender", "rotating_sender", "promotions_desk"):
        # After the subject's last word, no punctuation or padding ("… for you 61064").
        return f"{subject.rstrip('!?.')} {rng.randint(1000, 99999)}"
    if style == "bracketed":
        token = rng.choice((rm._alnum(rng, 6, "abcdefghijklmnopqrstuvwxyz0123456789"),
                            str(rng.randint(10000, 99999))))
        return f"{subject.rstrip('!?.')} {rng.choice(('[{}]', '({})', '{}')).format(token)}"
    return subject      # sender: only the sender's local part changes


def _machine_local_part(rng: random.Random) -> str:
    """A local part a bulk sender draws for each copy ("khqou1tzg6", "b4y0mprj")."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    while True:
        local = rm._alnum(rng, rng.randint(8, 10), letters + "0123456789")
        digits = sum(c.isdigit() for c in local)
        if 2 <= digits <= 4 and local[0] in letters:
            return local


def campaign_copies(ctx: rc.Context, count: int) -> list[rc.Case]:
    """One campaign's text, the same body byte for byte, sent again with a random token in
    the subject (padded, after its closing punctuation, a random run of letters and
    digits, a padded number in front, a bare number after the last word, a token in
    brackets) or from another local part of the same domain.  A bare number is data in
    other mail ("Queue depth on mx1 5230"): here the copy shows it was mass-mailed by a
    list-removal line, or ("machine_sender", no such line) by local parts a machine drew;
    ("rotating_sender") a local part of letters per copy, no removal line: the same text
    from two local parts under one subject but its number; ("fake_reply") "Re: your order
    N" with no thread, in mass mail; ("promotions_desk") one promotions desk's address
    ("offers@", "deals@"), a bare number, no removal line."""
    name = "campaign_copies"
    styles = ("padded", "after_punctuation", "random_token", "leading_padded", "sender",
              "bare_number", "machine_sender", "bracketed", "rotating_sender", "fake_reply",
              "promotions_desk")
    cases = []
    for i in range(count):
        rng = ctx.rng(name, i)
        style = ctx.rotate(name, i, styles)
        tld = rng.choice(("com", "net", "biz", "info"))
        domain = f"{rm._alnum(rng, 8, 'abcdefghijklmnopqrstuvwxyz')}.{tld}"
        me = rm.make_person(rng)
        subject = rng.choice(_PROMO_SUBJECTS)
        text = "\n\n".join(ctx.pool.prose(rng, rng.choice((1, 2, 3))))
        if style not in ("machine_sender", "rotating_sender", "promotions_desk"):
            text += rng.choice((
                f"\n\nTo be removed from our list, reply with REMOVE to remove@{domain}\n",
                f"\n\nTo unsubscribe from future offers, write to off@{domain}\n",
                "\n\nIf you no longer wish to receive our offers, click here.\n",
                "\n\nIf you wish not to receive any further e-mail from us, click here.\n",
                # wrapped, and other wordings spam uses
                f"\n\nIf you want to get removed\nfrom our list please email remove@{domain}\n",
                '\n\nPS. Please put "Remove" in the subject line to get out\nof this list.\n',
                "\n\nTo be eliminated from future marketing, visit our site.\n"))
        body = rm.text_part(text)
        deliveries = []
        moment = rm.when(rng, 2002)
        for k in range(2):
            local = _machine_local_part(rng) if style == "machine_sender" else \
                rng.choice(("offers", "promo", "deals", "specials")) \
                if style == "promotions_desk" and k == 0 else \
                rm._alnum(rng, rng.randint(5, 9), "abcdefghijklmnopqrstuvwxyz") \
                if style == "rotating_sender" else \
                rm._alnum(rng, rng.randint(4, 9), "abcdefghijklmnopqrstuvwxyz0123456789") \
                if style == "sender" or k == 0 else deliveries[0].sender.split("@")[0]
            sender = rm.Person(rng.choice(("", "Offers", "Customer Service")), f"{local}@{domain}")
            moment += dt.timedelta(minutes=rng.randint(1, 600))
            raw = rc.compose(rng, sender=sender, to=[me],
                             subject=_campaign_subject(rng, subject, style) if style != "sender"
                             or k == 0 else subject, moment=moment, body=body,
                             mid=rm.message_id(rng, "other", domain), rcpt=me.addr,
                             envelope=sender.addr)
            deliveries.append(rc.Delivery(raw, sender.addr, [me.addr], rc.FLAG if k else None,
                                          style))
        cases.append(rc.Case(name, i, style, deliveries))
    return cases


def _subject_data(rng: random.Random, kind: str, value: int, host: str) -> tuple[str, str]:
    """(subject, sender address) of a notice whose data live only in its subject."""
    return {
        "jenkins": (f"Build #{value} failed: api-main", f"jenkins@ci.{host}"),
        "jenkins_plain": (f"api-main - Build # {value} - Failure!", f"jenkins@ci.{host}"),
        "order": (f"Order {value} confirmed", f"orders@shop.{host}"),
        "order_no": (f"Your order no. {value} has shipped", f"orders@shop.{host}"),
        "code": (f"Your verification code is {value % 1000000:06d}", f"no-reply@{host}"),
        "invoice": (f"Invoice INV-{value} from {host.split('.')[0].title()}",
                    f"billing@{host}"),
        "ticket": (f"[Ticket #{value}] We received your request", f"support@{host}"),
        # a bare number at the end, no label, and no sign of mass mail: data
        "monitor": (f"Queue depth on mx1 {value}", f"alerts@monitor.{host}"),
        # mass mail (List-Unsubscribe, an unsubscribe line), a label before the number
        "shop_bulk": (f"Shipping update for your package {value}", f"shop@news.{host}"),
        "loyalty_bulk": (f"Your points balance {value}", f"rewards@news.{host}"),
        # a local part per copy (a reply-able no-reply address), a labelled number
        "code_per_copy_sender": (f"Security code {value % 1000000:06d}",
                                 f"no-reply+{rm._alnum(rng, 6, 'abcdefghjkmnpqrstuvwxyz')}"
                                 f"@{host}"),
    }[kind]


_SUBJECT_DATA_BODIES = {
    "jenkins": "See the console output and the changes since the last successful build on "
               "the build page. You are receiving this because you are on the build's "
               "notification list.",
    "order": "Thank you for shopping with us. We will send you another email when your "
             "items ship. You can check the status of your order at any time in your account.",
    "code": "Use this code to finish signing in. It expires in 10 minutes. If you did not "
            "try to sign in, you can ignore this email and your account stays safe.",
    "invoice": "Please find your invoice in your billing portal. Payment is due within 30 "
               "days of the invoice date. Thank you for your business with us.",
    "monitor": "The mail queue on mx1 is above its warning level. You are receiving this "
               "because you subscribed to alerts for this host.",
    "shop": "Your parcel is on its way and will arrive in 2-4 working days. Track it in "
            "your account.\n\nTo unsubscribe from our emails, change your preferences.",
    "loyalty": "Spend your points in any of our stores or online before they expire.\n\n"
               "To unsubscribe from these emails, click here.",
    "ticket": "Thanks for contacting our support team. A member of the team will reply as "
              "soon as possible, usually within one working day. Please do not open a new "
              "request for the same question.",
}


def subject_only_data(ctx: rc.Context, count: int) -> list[rc.Case]:
    """Notices of one sender with the same body byte for byte whose data (a build, order,
    invoice or ticket number, a sign-in code) live only in the subject: each is new."""
    name = "subject_only_data"
    kinds = ("jenkins", "jenkins_plain", "order", "order_no", "code", "invoice", "ticket",
             "monitor", "shop_bulk", "loyalty_bulk", "code_per_copy_sender")
    cases = []
    for i in range(count):
        rng = ctx.rng(name, i)
        kind = ctx.rotate(name, i, kinds)
        org = rm.make_org(rng)
        me = rm.make_person(rng, org.domain if kind.startswith("jenkins") else None)
        body = rm.text_part(_SUBJECT_DATA_BODIES[kind.split("_")[0]] + "\n")
        value = rng.randint(100, 999999)
        moment = rm.when(rng)
        deliveries = []
        for k in range(rng.randint(2, 4)):
            value += rng.randint(1, 40)
            subject, addr = _subject_data(rng, kind, value, org.domain)
            moment += dt.timedelta(minutes=rng.randint(1, 3000))
            raw = rc.compose(rng, sender=rm.Person(org.name, addr), to=[me], subject=subject,
                             moment=moment, body=body, mid=rm.message_id(rng, "postfix",
                                                                         org.domain),
                             rcpt=me.addr, envelope=addr,
                             extra=[("Auto-Submitted", "auto-generated")]
                             if kind.startswith("jenkins") else
                             [("List-Unsubscribe", f"<mailto:unsubscribe@{org.domain}>")]
                             if kind.endswith("_bulk") else [])
            deliveries.append(rc.Delivery(raw, addr, [me.addr], rc.UNIQUE if k else None,
                                          subject))
        cases.append(rc.Case(name, i, kind, deliveries))
    return cases


# -- note_over_original and resent_under_new_subject (flag) --------------------------------

_FOLLOW_UP_SUBJECTS = ("Following up", "Reminder", "Any update?", "Still need your answer",
                       "Did you get this?", "Quick reminder", "Checking in", "Re-sending")
_FOLLOW_UP_NOTES = (
    "Hi {first}, I am re-sending this in case it got buried in your inbox. Could you take a "
    "look when you get a chance?",
    "{first}, just bumping this to the top of your inbox. I still need an answer before "
    "the end of the week, see below.",
    "Sending this again since I did not hear back. No rush, but please let me know what "
    "you think of the message below.",
    "Hi {first}, did you see my message below? It may have gone to your junk folder, so "
    "I am sending it once more.",
    "Resending my note from last week below. Happy to jump on a call if that is easier "
    "for you.",
)
NOTE_LAYOUTS = ("gmail", "outlook", "apple", "thunderbird", "pasted")


def note_over_original(ctx: rc.Context, count: int) -> list[rc.Case]:
    """A message of 8-80 words, then its own sender's short note (~20 words) over the
    whole of it — forwarded in the sender's client layout or pasted — under another
    subject."""
    name = "note_over_original"
    cases = []
    for i in range(count):
        rng = ctx.rng(name, i)
        layout = ctx.rotate(name, i, NOTE_LAYOUTS)
        org = rm.make_org(rng)
        ann = org.people[0] if rng.random() < 0.6 else rm.make_person(rng)
        me = rm.make_person(rng, rm.make_org(rng).domain)
        cl = rm.CLIENTS["outlook" if layout in ("outlook", "pasted") else layout]
        moment = rm.when(rng)
        own = ctx.pool.words_of_prose(rng, 8, 80)
        original_text = f"Hi {me.first},\n\n{rm.wrap([own], cl.wrap)}\n\n{ann.first}"
        subject = ctx.pool.subject(rng)
        mid = rm.message_id(rng, "outlook" if layout == "pasted" else layout,
                            ann.addr.split("@")[1])
        first = rc.compose(rng, sender=ann, to=[me], subject=subject, moment=moment,
                           body=rm.text_part(original_text), mid=mid, rcpt=me.addr,
                           envelope=ann.addr, client=cl)
        later = moment + dt.timedelta(hours=rng.randint(2, 200))
        note = rng.choice(_FOLLOW_UP_NOTES).format(first=me.first)
        o = rm.Original(ann, [me], moment, subject, original_text, message_id=mid)
        if layout == "pasted":
            text = f"{note}\n\n{original_text}\n"
        else:
            block = rm.forward_block(layout if layout != "outlook" else "outlook", o)
            text = f"{note}\n\n{block}\n{original_text}\n"
        second = rc.compose(rng, sender=ann, to=[me],
                            subject=rng.choice(_FOLLOW_UP_SUBJECTS), moment=later,
                            body=rm.text_part(text),
                            mid=rm.message_id(rng, "outlook" if layout == "pasted" else layout,
                                              ann.addr.split("@")[1]),
                            rcpt=me.addr, envelope=ann.addr, client=cl)
        cases.append(rc.Case(name, i, layout, [
            rc.Delivery(first, ann.addr, [me.addr], None, f"{len(own.split())} words"),
            rc.Delivery(second, ann.addr, [me.addr], rc.FLAG, "note over the original")]))
    return cases


_RESEND_PREFIXES = ("[Correction] ", "Re-send: ", "UPDATED: ", "(Corrected link) ", "")
_RESEND_NOTES = (
    "We are re-sending this issue because some of the links in yesterday's email did not "
    "work. Apologies for the duplicate!",
    "Correction: the date of the webinar in our last email was wrong. The corrected issue "
    "is below.",
    "Oops! Our last email went out with a broken image. Here it is again.",
)


def resent_under_new_subject(ctx: rc.Context, count: int) -> list[rc.Case]:
    """A newsletter issue, then the same issue re-sent by its sender under a new subject
    with a correction note on top (and, half the time, one paragraph edited)."""
    name = "resent_under_new_subject"
    cases = []
    for i in range(count):
        rng = ctx.rng(name, i)
        brand = rng.choice(("The Weekly Brief", "Product Digest", "Garden Notes",
                            "City Council News", "Runner's Letter", "Dev Weekly"))
        host = f"{rm._alnum(rng, 7, 'abcdefghijklmnopqrstuvwxyz')}.com"
        sender = rm.Person(brand, f"news@{host}")
        me = rm.make_person(rng)
        paragraphs = ctx.pool.prose(rng, rng.choice((3, 4, 5)))
        footer = (f"You are receiving this because you subscribed to {brand}.\n"
                  f"Unsubscribe: https://{host}/u/{rm._hex(rng, 16)}\n{brand}, "
                  f"{rng.randint(1, 999)} Main Street")
        subject = ctx.pool.subject(rng)
        moment = rm.when(rng)
        headers = [("List-Unsubscribe", f"<https://{host}/unsubscribe>"),
                   ("List-Id", f"{brand} <news.{host}>")]
        body1 = f"{brand}\n\n" + "\n\n".join(rm.wrap([p], 72) for p in paragraphs) + \
            f"\n\n{footer}\n"
        first = rc.compose(rng, sender=sender, to=[me], subject=subject, moment=moment,
                           body=rm.text_part(body1), mid=rm.message_id(rng, "mailchimp"),
                           rcpt=me.addr, envelope=f"bounce@{host}", extra=headers)
        edited = list(paragraphs)
        at = rng.randrange(len(edited))     # the correction: one sentence, or a few words
        sentences = edited[at].split(". ")
        if rng.random() < 0.6 and len(sentences) >= 3:
            sentences[rng.randrange(len(sentences))] = ctx.pool.sentence(rng, 6, 20)
            edited[at] = ". ".join(sentences)
        else:
            edited[at] = rc._typo_edit(rng, edited[at])
        body2 = f"{rng.choice(_RESEND_NOTES)}\n\n{brand}\n\n" + \
            "\n\n".join(rm.wrap([p], 72) for p in edited) + f"\n\n{footer}\n"
        prefix = rng.choice(_RESEND_PREFIXES)
        new_subject = prefix + (subject if prefix else ctx.pool.subject(rng))
        second = rc.compose(rng, sender=sender, to=[me], subject=new_subject,
                            moment=moment + dt.timedelta(hours=rng.randint(1, 30)),
                            body=rm.text_part(body2), mid=rm.message_id(rng, "mailchimp"),
                            rcpt=me.addr, envelope=f"bounce@{host}", extra=headers)
        cases.append(rc.Case(name, i, prefix.strip() or "new subject", [
            rc.Delivery(first, sender.addr, [me.addr], None, subject),
            rc.Delivery(second, sender.addr, [me.addr], rc.FLAG, new_subject)]))
    return cases


# -- campaign_tracked_copies (flag) and bulk_notices_with_data (unique) --------------------

_UPPER_DIGITS = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"


def _random_code(rng: random.Random, style: str) -> str:
    """A per-copy token as campaigns and ESPs write them (each mixes letters and digits)."""
    while True:
        if style == "ref":
            code = f"{rm._alnum(rng, 4, _UPPER_DIGITS)}-{rm._alnum(rng, 4, _UPPER_DIGITS)}"
        elif style == "hex":
            code = rm._hex(rng, rng.choice((16, 24, 32)))
        elif style == "uuid":
            code = "-".join(rm._hex(rng, n) for n in (8, 4, 4, 4, 12))
        else:
            code = rm._alnum(rng, rng.randint(8, 14))
        letters = sum(c.isalpha() for c in code)
        digits = sum(c.isdigit() for c in code)
        if letters >= 2 and digits >= 2:
            return code


_REF_LABELS = ("Ref: {}", "Reference: {}", "ID: {}", "Tracking #{}", "Tracking ID: {}",
               "Your personal code: {}", "Offer ID {}", "Referenz: {}", "Réf. : {}",
               "Mailing-ID: {}", "[{}]", "Msg-Id {}")
_ESPS = (
    ("mailchimp", [("X-Mailer", "MailChimp Mailer - **CID{cid}**"),
                   ("X-Campaign", "mailchimp{cid}"), ("X-MC-User", "{user}")]),
    ("sendgrid", [("X-SG-EID", "{eid}"), ("X-Entity-ID", "{user}")]),
    ("mailgun", [("X-Mailgun-Sid", "{eid}"), ("X-Mailgun-Variables", '{{"cid": "{cid}"}}')]),
    ("spam", [("X-Spam-Flag", "YES"), ("X-Spam-Status", "Yes, score=8.1 required=5.0"),
              ("X-Mailer", "Mass Mailer Pro 4.1")]),
    ("precedence", [("Precedence", "bulk")]),
)


def _tracked(rng: random.Random, host: str, kind: str) -> str:
    """A per-recipient click-tracking link of one ESP."""
    token = _random_code(rng, "alnum")
    return {
        "mailchimp": f"https://{host}.us{rng.randint(1, 21)}.list-manage.com/track/click?"
                     f"u={rm._hex(rng, 25)}&id={rm._hex(rng, 10)}&e={rm._hex(rng, 10)}",
        "sendgrid": f"https://u{rng.randint(10**6, 10**7)}.ct.sendgrid.net/ls/click?upn="
                    f"{token}{rm._alnum(rng, 40)}",
        "mailgun": f"http://email.{host}.com/c/{rm._alnum(rng, 60)}",
        "spam": f"http://{host}.com/r/{token}/{rm._hex(rng, 12)}",
        "precedence": f"https://{host}.com/t/{token}?utm_source=newsletter&uid={rm._hex(rng, 20)}",
    }[kind]


def _bulk_headers(rng: random.Random, kind: str, host: str, cid: str, eid: str,
                  user: str) -> list[tuple[str, str]]:
    """ESP headers and List-Unsubscribe of one copy (``eid``: this copy's own id)."""
    template = dict(_ESPS)[kind]
    out = [(name, value.format(cid=cid, eid=eid, user=user)) for name, value in template]
    if kind != "spam" or rng.random() < 0.5:
        out.append(("List-Unsubscribe", f"<https://{host}.com/unsubscribe/{eid}>, "
                                        f"<mailto:unsubscribe-{eid}@{host}.com>"))
        out.append(("List-Unsubscribe-Post", "List-Unsubscribe=One-Click"))
    return out


def campaign_tracked_copies(ctx: rc.Context, count: int) -> list[rc.Case]:
    """Two copies of one bulk campaign (spam, an ESP newsletter, a promotion) to one mailbox:
    beside a random token in the subject or another sender local part, each copy's body
    carries its own reference code ("Ref: 8XK2-99QZ", "ID: a81f…", "Tracking #…"), tracking
    ids and per-recipient click-tracked links; plain text, HTML or both."""
    name = "campaign_tracked_copies"
    styles = ("ref_code", "hex_id", "uuid", "links_only", "html", "two_codes")
    cases = []
    for i in range(count):
        rng = ctx.rng(name, i)
        style = ctx.rotate(name, i, styles)
        kind = rng.choice([k for k, _ in _ESPS])
        host = rm._alnum(rng, rng.randint(6, 10), "abcdefghijklmnopqrstuvwxyz")
        domain = f"{host}.{rng.choice(('com', 'net', 'biz', 'info'))}"
        me = rm.make_person(rng)
        subject = rng.choice(_PROMO_SUBJECTS)
        subject_style = rng.choice(("padded", "after_punctuation", "random_token", "sender",
                                    "same"))
        paragraphs = ctx.pool.prose(rng, rng.choice((1, 2, 3)))
        labels = rng.sample(_REF_LABELS, 2)
        code_style = {"hex_id": "hex", "uuid": "uuid"}.get(style, rng.choice(("ref", "alnum")))
        cid, user = rm._hex(rng, 10), rm._hex(rng, 25)
        alternative = rng.random() < 0.5       # one structure for every copy
        link_count = rng.randint(1, 3)
        deliveries: list[rc.Delivery] = []
        moment = rm.when(rng, rng.choice((2002, 2025)))
        for k in range(2):
            eid = rm._alnum(rng, 22)
            codes = [_random_code(rng, code_style), _random_code(rng, "hex")]
            links = [_tracked(rng, host, kind) for _ in range(link_count)]
            lines = [f"Hello {me.first}," if rng.random() < 0 else "Hello,"]
            lines += [rm.wrap([p], 72) for p in paragraphs]
            lines.append(f"Click here: {links[0]}")
            lines += [f"More: {link}" for link in links[1:]]
            if style != "links_only":
                lines.append(labels[0].format(codes[0]))
            if style == "two_codes":
                lines.append(labels[1].format(codes[1]))
            lines.append(f"To be removed from our list, visit {_tracked(rng, host, kind)} or "
                         f"reply with REMOVE to remove@{domain}")
            text = "\n\n".join(lines) + "\n"
            if style == "html":
                html_text = "<html><body>" + "".join(
                    f"<p>{rm.html_escape(line)}</p>" if "://" not in line else
                    f'<p><a href="{line.split(" ", 2)[-1].split()[-1]}">Click here</a></p>'
                    for line in lines) + \
                    f'<img src="https://{host}.com/open/{eid}.gif" width="1" height="1">' \
                    "</body></html>"
                body = rm.multipart("alternative", [rm.text_part(text),
                                                    rm.text_part(html_text, "html")],
                                    rm.boundary(rng, "esp")) if alternative \
                    else rm.text_part(html_text, "html", cte="quoted-printable")
            else:
                body = rm.text_part(text)
            local = rm._alnum(rng, rng.randint(4, 9), "abcdefghijklmnopqrstuvwxyz0123456789") \
                if subject_style == "sender" or k == 0 else deliveries[0].sender.split("@")[0]
            sender = rm.Person(rng.choice(("", "Offers", "Customer Service")),
                               f"{local}@{domain}")
            moment += dt.timedelta(minutes=rng.randint(1, 600))
            subj = subject if subject_style in ("sender", "same") \
                else _campaign_subject(rng, subject, subject_style)
            raw = rc.compose(rng, sender=sender, to=[me], subject=subj, moment=moment,
                             body=body, mid=rm.message_id(rng, "other", domain), rcpt=me.addr,
                             envelope=f"bounce-{eid}@{domain}",
                             extra=_bulk_headers(rng, kind, host, cid, eid, user))
            deliveries.append(rc.Delivery(raw, sender.addr, [me.addr], rc.FLAG if k else None,
                                          f"{style}/{kind}/{subject_style}"))
        cases.append(rc.Case(name, i, style, deliveries))
    return cases


def _notice_text(rng: random.Random, kind: str, data: dict, brand: str) -> list[str]:
    """The lines of a transactional notice sent through an ESP (its data in ``data``)."""
    if kind == "order":
        return [f"Hi {data['first']},", "Thanks for your order! We're getting it ready.",
                f"Order number: {data['order']}", f"Order date: {data['date']}",
                f"{data['item']}  Qty 1  ${data['amount']}", f"Total: ${data['amount']}",
                "We'll email you again when your order ships."]
    if kind == "order_code":
        return [f"Hello {data['first']},", f"Your {brand} order is confirmed.",
                f"Order: {data['code']}", "Items: 1", "Delivery: 3-5 business days",
                "Questions? Reply to this email and our team will help."]
    if kind == "shipping":
        return [f"Hi {data['first']},", f"Good news: part of order {data['order']} is on "
                f"its way.", f"Estimated delivery: {data['date']}", "Carrier: UPS",
                "Track your package in your account."]
    if kind == "booking":
        return [f"Dear {data['first']},", "Your booking is confirmed.",
                f"Booking reference: {data['code']}", f"Check-in: {data['date']}",
                f"Total paid: EUR {data['amount']}", "We look forward to welcoming you."]
    if kind == "ticket":
        return [f"Hi {data['first']},", f"Your request {data['key']} has been updated.",
                f"Status: {data['status']}", "Reply to this email to add a comment.",
                "The support team"]
    return [f"Hi {data['first']},", f"Your invoice for {data['date']} is ready.",
            f"Invoice number: INV-{data['order']}", f"Amount due: ${data['amount']}",
            "It will be charged to the card on file."]


def bulk_notices_with_data(ctx: rc.Context, count: int) -> list[rc.Case]:
    """Transactional notices sent through a bulk ESP (List-Unsubscribe, ESP headers, a
    tracking id and click-tracked links of their own in each copy) whose meaningful data
    differ: an order number, a labelled order code, an amount, a date, a ticket key, a
    booking reference.  Each is a new notice, random-looking tokens or not."""
    name = "bulk_notices_with_data"
    kinds = ("order", "order_code", "shipping", "booking", "ticket", "invoice")
    cases = []
    for i in range(count):
        rng = ctx.rng(name, i)
        kind = ctx.rotate(name, i, kinds)
        esp = rng.choice(("mailchimp", "sendgrid", "mailgun", "precedence"))
        host = rm._alnum(rng, rng.randint(5, 9), "abcdefghijklmnopqrstuvwxyz")
        brand = host.title()
        me = rm.make_person(rng)
        sender = rm.Person(brand, f"{rng.choice(('orders', 'hello', 'support', 'news'))}"
                                  f"@{host}.com")
        subject = {"order": "Your order is confirmed", "order_code": "Order confirmation",
                   "shipping": "Your package is on its way", "booking": "Booking confirmed",
                   "ticket": "Your request was updated", "invoice": "Your invoice"}[kind]
        which = rng.choice(("all", "one"))
        base = {"first": me.first, "order": str(rng.randint(10**5, 10**8)),
                "code": _random_code(rng, "alnum")[:8].upper(),
                "date": f"{rng.randint(1, 28)} {rng.choice(('March', 'April', 'May'))} 2025",
                "item": rng.choice(("Wool socks", "Travel mug", "USB-C cable", "Notebook")),
                "amount": f"{rng.randint(5, 400)}.{rng.randint(0, 99):02d}",
                "key": f"SUP-{rng.randint(100, 9999)}",
                "status": rng.choice(("Waiting for support", "In progress", "Resolved"))}
        cid, user = rm._hex(rng, 10), rm._hex(rng, 25)
        moment = rm.when(rng)
        deliveries = []
        for k in range(rng.randint(2, 3)):
            data = dict(base)
            if k:       # the next notice: every datum new, or only the key one
                key_field = {"order": "order", "order_code": "code", "shipping": "date",
                             "booking": "code", "ticket": "key", "invoice": "amount"}[kind]
                fields = [key_field] if which == "one" else list(base)
                for field in fields:
                    if field == "first":
                        continue
                    if field in ("order",):
                        data[field] = str(int(base[field]) + rng.randint(1, 5000) * k)
                    elif field == "code":
                        data[field] = _random_code(rng, "alnum")[:8].upper()
                    elif field == "date":
                        data[field] = f"{(int(base['date'].split()[0]) + k) % 28 + 1} " \
                                      f"{base['date'].split(' ', 1)[1]}"
                    elif field == "amount":
                        data[field] = f"{rng.randint(5, 400)}.{rng.randint(0, 99):02d}"
                    elif field == "key":
                        data[field] = f"SUP-{int(base['key'][4:]) + k}"
                    elif field == "status" and which == "all":
                        data[field] = base[field] if kind != "ticket" else "Closed"
            eid = rm._alnum(rng, 22)
            lines = _notice_text(rng, kind, data, brand)
            lines.append(f"View in your account: {_tracked(rng, host, esp)}")
            lines.append(f"Message ID: {_random_code(rng, 'hex')}")
            lines.append(f"You receive this email because you have an account with {brand}."
                         f" Manage preferences: {_tracked(rng, host, esp)}")
            text = "\n\n".join(lines) + "\n"
            moment += dt.timedelta(hours=rng.randint(1, 200))
            raw = rc.compose(rng, sender=sender, to=[me], subject=subject, moment=moment,
                             body=rm.text_part(text), mid=rm.message_id(rng, "other",
                                                                        f"{host}.com"),
                             rcpt=me.addr, envelope=f"bounce-{eid}@{host}.com",
                             extra=_bulk_headers(rng, esp, host, cid, eid, user))
            deliveries.append(rc.Delivery(raw, sender.addr, [me.addr],
                                          rc.UNIQUE if k else None, f"{kind}/{which}"))
        cases.append(rc.Case(name, i, f"{kind}/{which}", deliveries))
    return cases


# -- resend_notes_languages and follow_up_notes (flag), own_message_additions (unique) -----

RESEND_NOTES_BY_LANGUAGE = {
    "en": ("Resending - my first email bounced back, apologies if you get it twice.",
           "Re-sending this as my earlier email seems to have bounced. Sorry if it arrives "
           "twice.",
           "Sending again, the first one came back undelivered. Apologies for the duplicate.",
           "Trying this again - your server sent me a bounce for the first one. Sorry if this "
           "is a duplicate.",
           "Got a bounce notice on my first email, so here it is again. Apologies if you end "
           "up with it twice."),
    "de": ("Erneut gesendet - meine erste E-Mail kam als unzustellbar zurück, entschuldigen "
           "Sie, falls Sie sie doppelt erhalten.",
           "Ich schicke die Nachricht noch einmal, die erste ist leider zurückgekommen. "
           "Sorry, falls sie doppelt ankommt.",
           "Nochmals gesendet, da meine erste Mail nicht zugestellt werden konnte."),
    "fr": ("Je renvoie ce message : mon premier e-mail m'est revenu. Désolé si vous le "
           "recevez en double.",
           "Nouvel envoi - mon premier message n'a pas été distribué, toutes mes excuses si "
           "vous le recevez deux fois.",
           "Je vous renvoie mon mail, le premier a été rejeté. Excusez le doublon."),
    "es": ("Reenvío este correo: el primero fue devuelto. Disculpa si te llega dos veces.",
           "Te lo vuelvo a enviar porque mi primer correo rebotó. Perdona si lo recibes "
           "duplicado.",
           "Reenviando - mi primer mensaje no llegó, disculpas si lo recibes dos veces."),
    "nl": ("Opnieuw verzonden - mijn eerste e-mail kwam terug als onbestelbaar, excuses als "
           "je hem dubbel krijgt.",
           "Ik stuur dit nogmaals, mijn eerste mail is teruggekomen. Sorry als je hem twee "
           "keer ontvangt.",
           "Nogmaals verstuurd, de eerste mail is niet aangekomen."),
    "it": ("Reinvio questa mail: la prima mi è tornata indietro, scusa se la ricevi due "
           "volte.",
           "Ti rimando il messaggio perché il primo non è stato recapitato. Scusa per il "
           "doppione.",
           "Invio di nuovo, la mia prima email è stata respinta. Mi scuso se arriva due "
           "volte."),
}
_RESEND_SUBJECTS = ("{s}", "Fwd: {s}", "FW: {s}", "Re: {s}", "Resending: {s}", "RESEND: {s}",
                    "WG: {s}", "TR: {s}", "RV: {s}", "I: {s}")
_QUOTE_LAYOUTS = ("gmail", "outlook", "apple", "thunderbird", "forward_gmail",
                  "forward_outlook", "forward_apple", "forward_thunderbird")


def _note_over(rng: random.Random, ctx: rc.Context, name: str, i: int, notes: dict,
               subjects: Sequence[str], keep_subject: bool) -> rc.Case:
    """A message of its sender, then the same sender's note above it, quoted as a reply
    to oneself (with In-Reply-To or not) or forwarded inline, in one client's layout."""
    language = ctx.rotate(name, i, tuple(notes))
    layout = rng.choice(_QUOTE_LAYOUTS)
    org = rm.make_org(rng)
    ann = org.people[0] if rng.random() < 0.6 else rm.make_person(rng)
    me = rm.make_person(rng, rm.make_org(rng).domain)
    style = layout.removeprefix("forward_")
    cl = rm.CLIENTS[style]
    moment = rm.when(rng)
    own = ctx.pool.words_of_prose(rng, 15, 120)
    original_text = f"Hi {me.first},\n\n{rm.wrap([own], cl.wrap)}\n\n{ann.first}"
    subject = ctx.pool.subject(rng)
    domain = ann.addr.split("@")[1]
    mid = rm.message_id(rng, style, domain)
    first = rc.compose(rng, sender=ann, to=[me], subject=subject, moment=moment,
                       body=rm.text_part(original_text), mid=mid, rcpt=me.addr,
                       envelope=ann.addr, client=cl)
    note = rng.choice(notes[language]).format(first=me.first)
    if rng.random() < 0.5:      # a client that wraps hard, inside a sentence
        note = rm.wrap([note], rng.choice((40, 56, 72)))
    if rng.random() < 0.4:
        note = f"Hi {me.first},\n\n{note}"
    o = rm.Original(ann, [me], moment, subject, original_text, message_id=mid)
    threaded = False
    html_text = None
    if layout.startswith("forward_"):
        text = f"{note}\n\n{rm.forward_block(style, o)}\n{original_text}\n"
    else:       # as the client sends it: plain, or plain and HTML (blockquote, Outlook)
        text, html_text = rm.reply_text(style, note, o, rng)
        threaded = rng.random() < 0.6
    new_subject = rng.choice(subjects).format(s=subject) if keep_subject \
        else rng.choice(subjects)
    second = rc.compose(rng, sender=ann, to=[me], subject=new_subject,
                        moment=moment + dt.timedelta(hours=rng.randint(1, 120)),
                        body=rm.body_for(cl, rng, text, html_text),
                        mid=rm.message_id(rng, style, domain),
                        rcpt=me.addr, envelope=ann.addr, client=cl,
                        in_reply_to=mid if threaded else None,
                        references=mid if threaded else None)
    return rc.Case(name, i, f"{language}/{layout}", [
        rc.Delivery(first, ann.addr, [me.addr], None, subject),
        rc.Delivery(second, ann.addr, [me.addr], rc.FLAG, f"{language} {layout}: "
                                                          f"{new_subject}")])


def resend_notes_languages(ctx: rc.Context, count: int) -> list[rc.Case]:
    """"Resending - my first email bounced back" in English, German, French, Spanish,
    Dutch or Italian, above the sender's own message quoted with ``>`` as a reply to
    oneself (Gmail, Outlook, Apple Mail, Thunderbird layouts) or forwarded inline; the
    subject unchanged or with Fwd:/FW:/Re:/Resending:/RESEND:."""
    name = "resend_notes_languages"
    return [_note_over(ctx.rng(name, i), ctx, name, i, RESEND_NOTES_BY_LANGUAGE,
                       _RESEND_SUBJECTS, True) for i in range(count)]


FOLLOW_UP_NOTES_BY_LANGUAGE = {
    "en": ("In case this got lost - see below.", "Any update on this?",
           "Quick nudge on the message below, {first}. Did you have a chance to look?",
           "Just following up on my email below. Any thoughts?",
           "Gentle reminder about the below - let me know if you need anything else from me.",
           "Bumping this up in case it slipped through the cracks.",
           # a follow-up with an offer or an ask for an answer beside it
           "Any news on this? Happy to discuss on the phone if that helps.",
           "Just checking in on the message below. Thanks in advance for a quick reply.",
           "Following up on my note below - could you let me know when you have decided?"),
    "de": ("Falls das untergegangen ist - siehe unten.", "Gibt es hierzu schon Neuigkeiten?",
           "Kurze Erinnerung an meine Mail unten. Hattest du schon Gelegenheit, sie dir "
           "anzusehen?", "Ich wollte noch einmal nachhaken, siehe meine Nachricht unten."),
    "fr": ("Au cas où ce message se serait perdu, voir ci-dessous.",
           "Avez-vous du nouveau à ce sujet ?",
           "Petite relance concernant mon message ci-dessous. Avez-vous eu le temps d'y "
           "jeter un œil ?", "Je me permets de vous relancer, voir mon e-mail ci-dessous."),
    "es": ("Por si se ha perdido, ver abajo.", "¿Alguna novedad sobre esto?",
           "Un pequeño recordatorio sobre mi correo de abajo. ¿Has podido revisarlo?",
           "Solo quería hacer seguimiento de mi mensaje de abajo."),
    "nl": ("Voor het geval dit is ondergesneeuwd, zie hieronder.",
           "Is hier al nieuws over?",
           "Even een herinnering aan mijn mail hieronder. Heb je er al naar kunnen kijken?",
           "Ik wilde even navragen hoe het hiermee staat, zie hieronder."),
    "it": ("Nel caso fosse andata persa, vedi sotto.", "Ci sono novità su questo?",
           "Un piccolo promemoria sulla mia mail qui sotto. Hai avuto modo di guardarla?",
           "Volevo solo sollecitare una risposta alla mail qui sotto."),
}
_FOLLOW_UP_SUBJECTS_ML = ("Following up", "Any update?", "Quick nudge", "Reminder",
                          "Nachfrage", "Erinnerung", "Relance", "Seguimiento",
                          "Recordatorio", "Herinnering", "Sollecito", "Checking in")


def follow_up_notes(ctx: rc.Context, count: int) -> list[rc.Case]:
    """A short follow-up ("In case this got lost - see below", "Any update?", "Quick
    nudge", in six languages) of the sender over the whole of its own earlier message,
    quoted or forwarded, under another subject ("Following up", "Any update?")."""
    name = "follow_up_notes"
    return [_note_over(ctx.rng(name, i), ctx, name, i, FOLLOW_UP_NOTES_BY_LANGUAGE,
                       _FOLLOW_UP_SUBJECTS_ML, False) for i in range(count)]


_ADDITIONS = {
    "en": "I forgot to mention one thing: {p}",
    "de": "Eine Sache habe ich vergessen: {p}",
    "fr": "J'ai oublié de préciser une chose : {p}",
    "es": "Se me olvidó comentar una cosa: {p}",
    "nl": "Eén ding vergat ik nog te melden: {p}",
    "it": "Dimenticavo una cosa: {p}",
}


def own_message_additions(ctx: rc.Context, count: int) -> list[rc.Case]:
    """The sender writes again above its own earlier message (quoted as a reply, under
    "Re:" or another subject) and ADDS something: a question, a correction of facts, a
    new paragraph of 12-60 words, sometimes after a follow-up phrase ("Following up:
    …").  A new message each time."""
    name = "own_message_additions"
    cases = []
    for i in range(count):
        rng = ctx.rng(name, i)
        language = ctx.rotate(name, i, tuple(_ADDITIONS))
        # Replies only: a forward that adds a paragraph over the whole original is the
        # original again with a note (rule resent-original), a reply adds to a thread.
        layout = rng.choice(_QUOTE_LAYOUTS[:4])
        org = rm.make_org(rng)
        ann = org.people[0]
        me = rm.make_person(rng, rm.make_org(rng).domain)
        style = layout.removeprefix("forward_")
        cl = rm.CLIENTS[style]
        moment = rm.when(rng)
        own = ctx.pool.words_of_prose(rng, 15, 120)
        original_text = f"Hi {me.first},\n\n{rm.wrap([own], cl.wrap)}" \
                        f"\n\n{ann.first}"
        subject = ctx.pool.subject(rng)
        domain = ann.addr.split("@")[1]
        mid = rm.message_id(rng, style, domain)
        first = rc.compose(rng, sender=ann, to=[me], subject=subject, moment=moment,
                           body=rm.text_part(original_text), mid=mid, rcpt=me.addr,
                           envelope=ann.addr, client=cl)
        added = ctx.pool.words_of_prose(rng, 12, 60)
        note = _ADDITIONS[language].format(p=added)
        if rng.random() < 0.4:
            lead = rng.choice(FOLLOW_UP_NOTES_BY_LANGUAGE[language]).format(first=me.first)
            note = f"{lead} {note}"
        o = rm.Original(ann, [me], moment, subject, original_text, message_id=mid)
        threaded = False
        html_text = None
        if layout.startswith("forward_"):
            text = f"{note}\n\n{rm.forward_block(style, o)}\n{original_text}\n"
        else:
            text, html_text = rm.reply_text(style, note, o, rng)
            threaded = rng.random() < 0.6
        new_subject = rng.choice((f"Re: {subject}", f"AW: {subject}",
                                  rng.choice(_FOLLOW_UP_SUBJECTS_ML)))
        second = rc.compose(rng, sender=ann, to=[me], subject=new_subject,
                            moment=moment + dt.timedelta(hours=rng.randint(1, 120)),
                            body=rm.body_for(cl, rng, text, html_text),
                            mid=rm.message_id(rng, style, domain),
                            rcpt=me.addr, envelope=ann.addr, client=cl,
                            in_reply_to=mid if threaded else None,
                            references=mid if threaded else None)
        cases.append(rc.Case(name, i, f"{language}/{layout}", [
            rc.Delivery(first, ann.addr, [me.addr], None, subject),
            rc.Delivery(second, ann.addr, [me.addr], rc.UNIQUE, f"{language} {layout}")]))
    return cases


# -- tracker_comments (unique) -------------------------------------------------------------

_SHORT_COMMENTS = ("Any update on this?", "Bump.", "+1", "Still happening on 2.4.1.",
                   "Same here.", "Is anyone working on this?", "Friendly ping.",
                   "Gibt es hier Neuigkeiten?", "Any news?", "Closing as duplicate.",
                   "Thanks, confirmed fixed.", "Can you share the logs?",
                   "Reopening, see the last run.", "Moved to the next sprint.",
                   "Following up on this - any update?", "Quick nudge on this one.")


def tracker_comments(ctx: rc.Context, count: int) -> list[rc.Case]:
    """One issue's successive notifications (GitHub, Jira, Bugzilla) whose news is one
    line or a short comment ("Any update on this?", "Bump.", "+1") above the issue's
    description quoted with ``>``, sometimes the same words from another person ("+1",
    "+1") or, on GitHub, from the same person twice (another comment id): each comment
    is news."""
    name = "tracker_comments"
    formats = ("github", "jira", "bugzilla")
    cases = []
    for i in range(count):
        rng = ctx.rng(name, i)
        fmt = ctx.rotate(name, i, formats)
        org = rm.make_org(rng)
        me = rm.make_person(rng, org.domain)
        people = org.people[:rng.randint(2, 5)]
        title = ctx.pool.subject(rng)[:70]
        description = "\n\n".join(rm.wrap([p], 72) for p in ctx.pool.prose(
            rng, rng.choice((1, 2))))
        number = rng.randint(10, 9000)
        repo = f"{org.domain.split('.')[0]}/{rng.choice(('api', 'web', 'infra'))}"
        key = f"{rng.choice(_PROJECTS)}-{number}"
        host = f"{rng.choice(('jira', 'bugs'))}.{org.domain}"
        thread = {"github": f"<{repo}/issues/{number}@github.com>",
                  "jira": f"<JIRA.{rng.randint(10**5, 10**6)}.{rng.randint(10**12, 2 * 10**12)}"
                          f"@{host}>",
                  "bugzilla": f"<bug-{number}-{rng.randint(1, 9999)}@{host}/>"}[fmt]
        comments = rng.sample(_SHORT_COMMENTS, rng.randint(3, 5))
        if rng.random() < 0.5:      # the same words again from someone else ("+1", "+1")
            at = rng.randrange(1, len(comments))
            comments.insert(at, comments[at - 1])
        actors = [rng.choice(people) for _ in comments]
        # On GitHub, sometimes the same person posts the same words twice (two comment
        # ids in the links); elsewhere the same words come from another person.
        twice = fmt == "github" and rng.random() < 0.5
        for k in range(1, len(comments)):
            if comments[k] == comments[k - 1] and actors[k] == actors[k - 1] and not twice:
                actors[k] = next(p for p in org.people if p != actors[k - 1])
        moment = rm.when(rng)
        deliveries = []
        for k, (comment, actor) in enumerate(zip(comments, actors, strict=True)):
            moment += dt.timedelta(minutes=rng.randint(5, 3000))
            quoted = rm.quote_lines(description)
            if fmt == "github":
                body = (f"{comment}\n\n> {title}\n>\n{quoted}\n\n—\nReply to this email "
                        f"directly, view it on GitHub:\nhttps://github.com/{repo}/issues/"
                        f"{number}#issuecomment-{rng.randint(10**9, 10**10)}\nYou are "
                        f"receiving this because you are subscribed to this thread.\n\n"
                        f"Message ID: <{repo}/issues/{number}/{rng.randint(10**9, 10**10)}"
                        f"@github.com>\n")
                sender = rm.Person(actor.name, "notifications@github.com")
                subject = f"Re: [{repo}] {title} (Issue #{number})"
                extra = [("X-GitHub-Reason", "subscribed"), ("X-GitHub-Sender",
                                                              actor.first.lower()),
                         ("List-ID", f"{repo} <{repo.replace('/', '.')}.github.com>"),
                         ("List-Unsubscribe", f"<mailto:unsub+{rm._hex(rng, 40)}"
                                              f"@reply.github.com>")]
                envelope = "noreply@github.com"
            elif fmt == "jira":
                body = (f"{actor.name} commented on {key}:\n{'-' * 40}\n\n{comment}\n\n"
                        f"> {title}\n> {'-' * len(title)}\n>\n{quoted}\n\n\n\n--\nThis "
                        f"message was sent by Atlassian Jira\n(v9.4.5#940005-sha1:e3094934)\n")
                sender = rm.Person(f"{actor.name} (Jira)", f"jira@{host}")
                subject = f"[JIRA] ({key}) {title}"
                extra = [("Auto-Submitted", "auto-generated"),
                         ("X-JIRA-FingerPrint", rm._hex(rng, 32))]
                envelope = f"jira@{host}"
            else:
                body = (f"https://{host}/show_bug.cgi?id={number}\n\n--- Comment #{k + 1} "
                        f"from {actor.name} <{actor.addr}> ---\n{comment}\n\n(In reply to "
                        f"comment #0)\n{quoted}\n\n-- \nYou are receiving this mail because:"
                        f"\nYou are watching the assignee of the bug.\n")
                sender = rm.Person(actor.name, f"bugzilla-daemon@{host}")
                subject = f"[Bug {number}] {title}"
                extra = [("Auto-Submitted", "auto-generated"),
                         ("X-Bugzilla-Product", "Platform")]
                envelope = f"bugzilla-daemon@{host}"
            raw = rc.compose(rng, sender=sender, to=[me], subject=subject, moment=moment,
                             body=rm.text_part(body), mid=rm.message_id(rng, "other",
                                                                        envelope.split("@")[1]),
                             rcpt=me.addr, envelope=envelope, in_reply_to=thread,
                             references=thread, extra=extra)
            deliveries.append(rc.Delivery(raw, envelope, [me.addr], rc.UNIQUE if k else None,
                                          f"{fmt}: {comment}"))
        cases.append(rc.Case(name, i, fmt, deliveries))
    return cases


# -- corrected_resend (flag) and short_fact_changes (unique) -------------------------------

# A person's short note (12-40 words) with facts in slots: a day, a time, a room, a
# decision, and a place where a negation fits.
_NOTES = (
    "Hi {first}, could we move the review to {day} at {time}? I will book room {room} and "
    "send the agenda to the whole team {{neg}}before then.",
    "{first}, the budget request for the new laptops is {decision}. Please let the "
    "supplier know and ask them to ship everything to the office by {day}.",
    "Quick note: the build on the release branch is {{neg}}broken again since this "
    "morning. Please hold your merges until {day} at {time} while we look into it.",
    "Hi {first}, I {{neg}}managed to reach the landlord about the heating. He will send "
    "someone on {day} around {time}, so somebody needs to be in the flat to let them in.",
    "Thanks {first}. The venue is confirmed for {day} and we can use room {room} from "
    "{time}. Could you bring the projector and the printed name cards for the guests?",
    "{first}, your leave request for {day} has been {decision} by the team lead. Please "
    "update the shared calendar so that the others can plan their own cover.",
    "Just a heads up that the delivery will {{neg}}arrive on {day} between {time} and noon. "
    "Could you make sure the loading dock is free and that someone signs for it?",
)
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
_DECISIONS = ("approved", "rejected", "accepted", "declined", "postponed")
# Wording a writer corrects when it sends its note again: words replaced by a synonym,
# a filler word added or dropped.
_SYNONYMS = {"could": "can", "send": "forward", "whole": "entire", "review": "meeting",
             "ask": "tell", "bring": "take", "make": "ensure", "shared": "team",
             "someone": "somebody", "office": "main office", "update": "fix",
             "Please": "Kindly", "again": "once more", "free": "clear", "plan": "arrange",
             "guests": "visitors", "look": "dig", "request": "application"}
_FILLERS = ("also", "just", "really", "please", "now")


def _note_facts(rng: random.Random) -> dict[str, str]:
    return {"day": rng.choice(_DAYS), "time": f"{rng.randint(9, 16)}:{rng.choice(('00', '30'))}",
            "room": str(rng.randint(2, 12)), "decision": rng.choice(_DECISIONS)}


def _reword(rng: random.Random, text: str) -> str:
    """The same note with 1-3 of its words reworded (a synonym, a filler added or
    dropped), never a number, a day or a decision."""
    words = text.split(" ")
    changes = 0
    for _ in range(rng.randint(1, 3)):
        how = rng.choice(("synonym", "synonym", "add", "drop"))
        if how == "synonym":
            places = [k for k, w in enumerate(words) if w in _SYNONYMS]
            if places:
                k = rng.choice(places)
                words[k] = _SYNONYMS[words[k]]
                changes += 1
        elif how == "add":
            k = rng.randrange(1, len(words))
            words.insert(k, rng.choice(_FILLERS))
            changes += 1
        else:
            places = [k for k, w in enumerate(words) if w in _FILLERS]
            if places:
                del words[rng.choice(places)]
                changes += 1
    if not changes:
        k = rng.randrange(1, len(words))
        words.insert(k, rng.choice(_FILLERS))
    return " ".join(words)


def _fact_change(rng: random.Random, template: str, facts: dict[str, str]
                 ) -> tuple[dict[str, str], str, str]:
    """Another fact in the same note: (facts, negation, what changed)."""
    kinds = [k for k in ("day", "time", "room", "decision") if "{" + k + "}" in template]
    if "{neg}" in template:
        kinds.append("neg")
    kind = rng.choice(kinds)
    changed = dict(facts)
    if kind == "neg":
        return changed, "not ", "negation"
    while changed[kind] == facts[kind]:
        changed[kind] = _note_facts(rng)[kind]
    return changed, "", kind


def _short_note_case(ctx: rc.Context, name: str, i: int, again: str) -> rc.Case:
    """A person's short note, fresh or as a reply quoting the recipient's message, and
    the same person's note again under the same subject and thread: ``again`` is
    "reworded" (1-3 words of wording corrected: a copy) or "fact" (a day, a time, a
    room, a decision or a negation changed: another message)."""
    rng = ctx.rng(name, i)
    style = ctx.rotate(name, i, ("gmail", "outlook", "apple", "thunderbird", "iphone"))
    cl = rm.CLIENTS[style]
    org = rm.make_org(rng)
    ann = org.people[0]
    me = rm.make_person(rng, rng.choice((org.domain, rm.make_org(rng).domain)))
    template = rng.choice(_NOTES)
    facts = _note_facts(rng)
    text = template.format(first=me.first, **facts).replace("{neg}", "")
    domain = ann.addr.split("@")[1]
    moment = rm.when(rng)
    layout = rng.choice(("fresh", "reply"))
    subject = ctx.pool.subject(rng)
    original = None
    if layout == "reply":
        asked = ctx.pool.words_of_prose(rng, 15, 60)
        original = rm.Original(me, [ann], moment - dt.timedelta(hours=rng.randint(1, 48)),
                               subject, f"Hi {ann.first},\n\n{rm.wrap([asked], cl.wrap)}\n\n"
                               f"{me.first}",
                               message_id=rm.message_id(rng, "gmail", me.addr.split("@")[1]))
    if again == "reworded":
        second, how = _reword(rng, text), "reworded"
    else:
        changed, negation, how = _fact_change(rng, template, facts)
        second = template.format(first=me.first, **changed).replace("{neg}", negation)
    sig = rng.choice(("", ann.first, f"Thanks,\n{ann.first}"))
    deliveries = []
    for k, note in enumerate((text, second)):
        if original is not None:
            plain, html_text = rm.reply_text(style, note, original, rng, sig)
            body = rm.body_for(cl, rng, plain, html_text)
            subj, irt = f"Re: {subject}", original.message_id
        else:
            body, subj, irt = rc.personal_body(rng, cl, [note], sig=sig), subject, None
        raw = rc.compose(rng, sender=ann, to=[me], subject=subj,
                         moment=moment + dt.timedelta(minutes=rng.randint(5, 600) * k),
                         body=body, mid=rm.message_id(rng, style, domain), rcpt=me.addr,
                         envelope=ann.addr, client=cl, in_reply_to=irt, references=irt)
        expect = None if k == 0 else (rc.FLAG if again == "reworded" else rc.UNIQUE)
        deliveries.append(rc.Delivery(raw, ann.addr, [me.addr], expect, how))
    return rc.Case(name, i, f"{style}/{layout}/{how}", deliveries)


def corrected_resend(ctx: rc.Context, count: int) -> list[rc.Case]:
    """A short note (12-40 words) sent again by its writer under the same subject and
    thread with 1-3 words of its wording corrected (a synonym, a filler word added or
    dropped): the same message again."""
    return [_short_note_case(ctx, "corrected_resend", i, "reworded") for i in range(count)]


def short_fact_changes(ctx: rc.Context, count: int) -> list[rc.Case]:
    """The same short note sent again by its writer under the same subject and thread
    with one fact changed — the day, the time, the room, the decision (approved /
    rejected …) or a negation added: a correction the reader must get."""
    return [_short_note_case(ctx, "short_fact_changes", i, "fact") for i in range(count)]
