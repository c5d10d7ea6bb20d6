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
    return subject      # sender: only the sender's local part changes


def campaign_copies(ctx: rc.Context, count: int) -> list[rc.Case]:
    """One campaign's text, the same body byte for byte, sent again with a random token in
    the subject (padded, after its closing punctuation, a random run of letters and
    digits, a padded number in front) or from another local part of the same domain."""
    name = "campaign_copies"
    styles = ("padded", "after_punctuation", "random_token", "leading_padded", "sender")
    cases = []
    for i in range(count):
        rng = ctx.rng(name, i)
        style = ctx.rotate(name, i, styles)
        tld = rng.choice(("com", "net", "biz", "info"))
        domain = f"{rm._alnum(rng, 8, 'abcdefghijklmnopqrstuvwxyz')}.{tld}"
        me = rm.make_person(rng)
        subject = rng.choice(_PROMO_SUBJECTS)
        text = "\n\n".join(ctx.pool.prose(rng, rng.choice((1, 2, 3)))) + \
            f"\n\nTo be removed from our list, reply with REMOVE to remove@{domain}\n"
        body = rm.text_part(text)
        deliveries = []
        moment = rm.when(rng, 2002)
        for k in range(2):
            local = rm._alnum(rng, rng.randint(4, 9), "abcdefghijklmnopqrstuvwxyz0123456789") \
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
    "ticket": "Thanks for contacting our support team. A member of the team will reply as "
              "soon as possible, usually within one working day. Please do not open a new "
              "request for the same question.",
}


def subject_only_data(ctx: rc.Context, count: int) -> list[rc.Case]:
    """Notices of one sender with the same body byte for byte whose data (a build, order,
    invoice or ticket number, a sign-in code) live only in the subject: each is new."""
    name = "subject_only_data"
    kinds = ("jenkins", "jenkins_plain", "order", "order_no", "code", "invoice", "ticket")
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
                             if kind.startswith("jenkins") else [])
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
