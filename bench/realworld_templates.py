"""Machine-written mail for bench/realworld.py: transactional, cron and newsletter templates.

Each :class:`Template` has three steps: ``setup`` (what stays fixed for one sender and one
recipient: brand, host, list), ``data`` (what one mailing says: codes, amounts, hosts, package
lists, articles; called with the step number, so reports evolve from day to day) and
``render`` (the mail itself, with a per-send random source for what differs between two
sends of the same data: tracking tokens, Message-ID, send time).  The layouts follow the real
senders (GitHub Actions, GitLab, Jenkins, Nagios, Alertmanager, Zabbix, Shopify, Stripe, Xero,
apticron, logwatch, cron-apt, certbot, borg, unattended-upgrades, Mailchimp, Substack,
Mailman digests, HubSpot); brand names are fictional.
"""

# ruff: noqa: E501  (template text: real URLs, header lines and markup kept whole)

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from zoneinfo import ZoneInfo

import realworld_mail as rm
from realworld_corpus import TextPool


@dataclass
class Rendered:
    """One rendered mailing."""

    sender: rm.Person
    subject: str
    plain: str | None
    html: str | None
    headers: list[tuple[str, str]] = field(default_factory=list)
    mid_style: str = "postfix"
    envelope: str = ""
    moment: dt.datetime | None = None


@dataclass(frozen=True)
class Template:
    name: str
    kind: str   # transactional, cron, newsletter
    setup: Callable[[random.Random, TextPool, rm.Person], dict]
    data: Callable[[random.Random, dict, int], dict]
    render: Callable[[dict, dict, random.Random], Rendered]


def _brand(rng: random.Random) -> tuple[str, str]:
    name, domain = rng.choice(rm.COMPANIES)
    return name.split(",")[0].split(" ")[0] if rng.random() < 0.5 else name, domain


def _token(rng: random.Random, n: int = 40) -> str:
    return rm._alnum(rng, n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")


def _track(rng: random.Random, ctx: dict, url: str) -> str:
    """A click-tracking URL as ESPs write them (differs per send and recipient)."""
    style = ctx.get("tracking", "none")
    if style == "sendgrid":
        return f"https://u{rng.randint(1000000, 9999999)}.ct.sendgrid.net/ls/click?upn={_token(rng, 120)}"
    if style == "mailchimp":
        return f"https://{ctx['slug']}.us{ctx['dc']}.list-manage.com/track/click?u={ctx['u']}&id=" \
               f"{rm._hex(rng, 10)}&e={rm._hex(rng, 10)}"
    if style == "ses":
        return f"https://{rm._alnum(rng, 8).lower()}.r.{ctx['region']}.awstrack.me/L0/{url.replace(':', '%3A').replace('/', '%2F')}/1/0100019{rm._hex(rng, 9)}-{rm._hex(rng, 8)}/{_token(rng, 28)}=402"
    return url


def _pixel(rng: random.Random, ctx: dict) -> str:
    if ctx.get("tracking", "none") == "none":
        return ""
    return (f"<img src=\"https://open.{ctx['domain']}/o/{_token(rng, 60)}\" width=\"1\" "
            f"height=\"1\" alt=\"\" style=\"display:none\">")


def esp_html(ctx: dict, blocks: list[str], footer: str, rng: random.Random,
             button: tuple[str, str] | None = None) -> str:
    """A table-layout transactional HTML mail (inline CSS, brand bar, footer, pixel)."""
    rows = []
    for block in blocks:
        if block.startswith("#"):
            rows.append(f"<tr><td style=\"padding:24px 40px 0;font:600 20px/28px -apple-system,"
                        f"Segoe UI,Helvetica,Arial,sans-serif;color:#24292f\">"
                        f"{rm.html_escape(block.lstrip('# '))}</td></tr>")
        elif block.startswith("|"):
            cells = "".join(f"<td style=\"padding:6px 8px;border-bottom:1px solid #eaecef\">"
                            f"{rm.html_escape(c.strip())}</td>" for c in block.strip("|").split("|"))
            rows.append(f"<tr><td style=\"padding:0 40px\"><table width=\"100%\" "
                        f"cellpadding=\"0\" cellspacing=\"0\"><tr>{cells}</tr></table></td></tr>")
        else:
            text = rm.html_escape(block).replace("\n", "<br>")
            rows.append(f"<tr><td style=\"padding:16px 40px 0;font:14px/22px -apple-system,"
                        f"Segoe UI,Helvetica,Arial,sans-serif;color:#24292f\">{text}</td></tr>")
    if button:
        rows.append(f"<tr><td align=\"center\" style=\"padding:24px 40px\"><a href=\""
                    f"{_track(rng, ctx, button[1])}\" style=\"background:{ctx.get('color', '#1f6feb')};"
                    f"color:#ffffff;padding:12px 24px;border-radius:6px;text-decoration:none;"
                    f"font-weight:600\">{rm.html_escape(button[0])}</a></td></tr>")
    foot = rm.html_escape(footer).replace("\n", "<br>")
    return ("<!DOCTYPE html PUBLIC \"-//W3C//DTD XHTML 1.0 Transitional//EN\" "
            "\"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd\">\n<html xmlns=\"http://"
            "www.w3.org/1999/xhtml\"><head><meta http-equiv=\"Content-Type\" content=\"text/html; "
            "charset=UTF-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1"
            ".0\"><title></title><style type=\"text/css\">body{margin:0;padding:0}table{border-"
            "collapse:collapse}img{border:0;outline:none}@media only screen and (max-width:600px)"
            "{.container{width:100%!important}}</style></head>\n<body style=\"margin:0;padding:0;"
            "background:#f6f8fa\"><table role=\"presentation\" width=\"100%\" cellpadding=\"0\" "
            "cellspacing=\"0\" bgcolor=\"#f6f8fa\"><tr><td align=\"center\"><table class=\""
            "container\" width=\"600\" cellpadding=\"0\" cellspacing=\"0\" bgcolor=\"#ffffff\">\n"
            f"<tr><td style=\"padding:24px 40px;background:{ctx.get('color', '#1f6feb')}\"><img "
            f"src=\"https://static.{ctx['domain']}/email/logo.png\" alt=\"{rm.html_escape(ctx['brand'])}"
            "\" width=\"120\" height=\"32\"></td></tr>\n" + "\n".join(rows) +
            f"\n<tr><td style=\"padding:32px 40px;font:12px/18px Helvetica,Arial,sans-serif;"
            f"color:#6a737d\">{foot}</td></tr>\n</table></td></tr></table>{_pixel(rng, ctx)}"
            "</body></html>\n")


def _html_from_blocks(ctx: dict, plain: str, footer: str, rng: random.Random,
                      button: tuple[str, str] | None = None) -> str:
    blocks = [b for b in plain.split("\n\n") if b.strip() and b.strip() != footer.strip()]
    return esp_html(ctx, blocks, footer, rng, button)


def _service_setup(rng: random.Random, pool: TextPool, me: rm.Person) -> dict:
    brand, domain = _brand(rng)
    return {"brand": brand, "domain": domain, "me": me,
            "tracking": rng.choice(("none", "sendgrid", "ses")),
            "region": rng.choice(("us-east-1", "eu-west-1", "us-west-2")),
            "color": rng.choice(("#1f6feb", "#0f766e", "#7c3aed", "#d9480f", "#111827")),
            "zone": ZoneInfo(rng.choice(rm.ZONES)),
            "moment": rm.when(rng), "html": rng.random() < 0.8,
            "mid": rng.choice(("ses", "sendgrid", "postfix"))}


def _at(ctx: dict, step: int, rng: random.Random, spread_hours: int = 30) -> dt.datetime:
    return ctx["moment"] + dt.timedelta(hours=step * rng.randint(2, spread_hours),
                                        minutes=rng.randrange(60), seconds=rng.randrange(60))


def _masked(addr: str) -> str:
    local, _, domain = addr.partition("@")
    return f"{local[:2]}*****@{domain}"


DEVICES = ("Chrome on Windows", "Safari on iPhone", "Firefox on Ubuntu", "Edge on Windows 11",
           "Chrome on Android", "Safari on macOS", "the Outlook app on iOS")
PLACES = ("Berlin, Germany", "Seattle, WA, United States", "London, United Kingdom",
          "Amsterdam, Netherlands", "Toronto, Canada", "Sydney, Australia", "Austin, TX, "
          "United States", "Dublin, Ireland", "Mumbai, India", "Paris, France")


def _ip(rng: random.Random) -> str:
    return f"{rng.randint(11, 223)}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"


def _when_text(moment: dt.datetime) -> str:
    return f"{moment.strftime('%B')} {moment.day}, {moment.year} at " \
           f"{moment.strftime('%I:%M %p').lstrip('0')} {moment.tzname()}"


def _noreply(ctx: dict, local: str = "noreply", name: str | None = None) -> rm.Person:
    return rm.Person(name or ctx["brand"], f"{local}@{ctx['domain']}")


def _envelope(ctx: dict, rng: random.Random) -> str:
    if ctx["mid"] == "ses":
        return f"0100019{rm._hex(rng, 9)}-{rm._hex(rng, 8)}-000000@amazonses.com"
    if ctx["mid"] == "sendgrid":
        return f"bounces+{rng.randint(10**6, 10**7)}-{rm._hex(rng, 4)}-" \
               f"{ctx['me'].addr.replace('@', '=')}@em{rng.randint(100, 9999)}.{ctx['domain']}"
    return f"bounce@{ctx['domain']}"


# -- transactional -------------------------------------------------------------------------

def _reset_link_data(rng: random.Random, ctx: dict, step: int) -> dict:
    return {"token": _token(rng, 36), "at": _at(ctx, step, rng), "device": rng.choice(DEVICES),
            "place": rng.choice(PLACES), "ip": _ip(rng), "hours": rng.choice((1, 2, 3, 24))}


def _reset_link(ctx: dict, d: dict, rng: random.Random) -> Rendered:
    b = ctx["brand"]
    url = f"https://{ctx['domain']}/password_reset/{d['token']}"
    footer = (f"You're receiving this email because a password reset was requested for your "
              f"account.\n{b} · {rm.rng_address(ctx)}")
    plain = (f"{b} password reset\n\nWe heard that you lost your {b} password. Sorry about "
             f"that!\n\nBut don't worry! You can use the following link to reset your password:"
             f"\n\n{_track(rng, ctx, url)}\n\nIf you don't use this link within {d['hours']} "
             f"hour{'s' if d['hours'] > 1 else ''}, it will expire. To get a new password reset "
             f"link, visit: https://{ctx['domain']}/password_reset\n\nThis request was made on "
             f"{_when_text(d['at'])} from {d['device']} in {d['place']} (IP address "
             f"{d['ip']}).\n\nThanks,\nThe {b} Team\n\n{footer}\n")
    html = _html_from_blocks(ctx, plain.replace(_track(rng, ctx, url), "").replace(
        "following link", "following button"), footer, rng, ("Reset your password", url)) \
        if ctx["html"] else None
    return Rendered(_noreply(ctx), f"[{b}] Please reset your password", plain, html,
                    mid_style=ctx["mid"], moment=d["at"])


def _reset_code_data(rng: random.Random, ctx: dict, step: int) -> dict:
    return {"code": f"{rng.randint(0, 999999):06d}", "at": _at(ctx, step, rng, 6)}


def _reset_code(ctx: dict, d: dict, rng: random.Random) -> Rendered:
    b = ctx["brand"]
    masked = _masked(ctx["me"].addr)
    plain = (f"{b} account\n\nPassword reset code\n\nPlease use this code to reset the "
             f"password for the {b} account {masked}.\n\nHere is your code: {d['code']}\n\n"
             f"If you don't recognize the {b} account {masked}, you can click "
             f"{_track(rng, ctx, 'https://account.' + ctx['domain'] + '/ConsumerOptOut?tok=' + _token(rng, 24))}"
             f" to remove your email address from that account.\n\nThanks,\nThe {b} account "
             f"team\n")
    footer = f"Privacy Statement\n{b} Corporation, {rm.rng_address(ctx)}"
    html = _html_from_blocks(ctx, plain, footer, rng) if ctx["html"] else None
    return Rendered(_noreply(ctx, "account-security-noreply", f"{b} account team"),
                    f"{b} account password reset", plain, html, mid_style=ctx["mid"],
                    moment=d["at"])


def _otp_data(rng: random.Random, ctx: dict, step: int) -> dict:
    return {"code": f"{rng.randint(0, 999999):06d}", "at": _at(ctx, step, rng, 8),
            "minutes": rng.choice((5, 10, 15, 30))}


def _otp(ctx: dict, d: dict, rng: random.Random) -> Rendered:
    b, code = ctx["brand"], d["code"]
    shown = f"{code[:3]}-{code[3:]}" if ctx.get("dash") else code
    subject = rng.choice((f"{b} confirmation code: {shown}", f"Your {b} verification code",
                          f"{shown} is your {b} verification code")) if ctx.get("fixed") is None \
        else ctx["fixed"].format(code=shown, b=b)
    plain = (f"Confirm your email address\n\nYour confirmation code is below — enter it in "
             f"your open browser window and we'll help you get signed in.\n\n{shown}\n\nThis "
             f"code expires in {d['minutes']} minutes.\n\nIf you didn't request this email, "
             f"there's nothing to worry about — you can safely ignore it.\n\n{b} Technologies, "
             f"{rm.rng_address(ctx)}\n")
    html = _html_from_blocks(ctx, plain, "", rng) if ctx["html"] else None
    return Rendered(_noreply(ctx, "no-reply"), subject, plain, html, mid_style=ctx["mid"],
                    moment=d["at"])


def _otp_setup(rng: random.Random, pool: TextPool, me: rm.Person) -> dict:
    ctx = _service_setup(rng, pool, me)
    ctx["dash"] = rng.random() < 0.5
    ctx["fixed"] = rng.choice(("{b} confirmation code: {code}", "Your {b} verification code",
                               "{code} is your {b} verification code"))
    return ctx


def _signin_data(rng: random.Random, ctx: dict, step: int) -> dict:
    return {"at": _at(ctx, step, rng), "device": rng.choice(DEVICES),
            "place": rng.choice(PLACES), "ip": _ip(rng)}


def _signin(ctx: dict, d: dict, rng: random.Random) -> Rendered:
    b = ctx["brand"]
    plain = (f"New sign-in to your {b} account\n\nWe noticed a new sign-in to your {b} account "
             f"{ctx['me'].addr}.\n\nDevice: {d['device']}\nLocation: {d['place']} (approximate)"
             f"\nIP address: {d['ip']}\nTime: {_when_text(d['at'])}\n\nIf this was you, you "
             f"don't need to do anything. If not, we'll help you secure your account: "
             f"{_track(rng, ctx, 'https://' + ctx['domain'] + '/security/checkup')}\n\nYou received "
             f"this email to let you know about important changes to your {b} account and "
             f"services.\n© 2025 {b} LLC, {rm.rng_address(ctx)}\n")
    html = _html_from_blocks(ctx, plain, "", rng, ("Check activity",
                                                   f"https://{ctx['domain']}/security")) \
        if ctx["html"] else None
    return Rendered(_noreply(ctx, "no-reply", f"{b} Security"), f"Security alert: new sign-in "
                    f"to your {b} account", plain, html, mid_style=ctx["mid"], moment=d["at"])


PRODUCTS = (("USB-C to HDMI Adapter, 4K@60Hz", 19.99), ("Stainless Steel Water Bottle 750 ml", 24.95),
            ("Wireless Ergonomic Mouse", 39.99), ("Organic Darjeeling Tea, 100 g", 12.50),
            ("Noise Cancelling Headphones", 199.00), ("A5 Dotted Notebook (2-pack)", 15.80),
            ("Cast Iron Skillet 10\"", 34.99), ("Running Socks, Size M, 3 pairs", 17.00),
            ("LED Desk Lamp with Wireless Charger", 45.99), ("Yoga Mat 6 mm", 29.90),
            ("Mechanical Keyboard, Brown Switches", 89.00), ("Paperback: The Pragmatic Programmer",
                                                          42.49),
            ("Coffee Beans, Ethiopia Yirgacheffe 1 kg", 31.00), ("Phone Case, Clear", 11.99),
            ("Laptop Stand, Aluminium", 49.99), ("Bamboo Cutting Board Set", 27.45),
            ("Merino Wool Beanie", 22.00), ("Portable SSD 1 TB", 94.99))


def _order_data(rng: random.Random, ctx: dict, step: int) -> dict:
    items = [(name, rng.randint(1, 3), price) for name, price in
             rng.sample(PRODUCTS, rng.randint(1, 4))]
    subtotal = sum(q * p for _, q, p in items)
    shipping = rng.choice((0.0, 4.99, 5.95, 7.50))
    tax = round(subtotal * rng.choice((0.0725, 0.0825, 0.1, 0.19)), 2)
    at = _at(ctx, step, rng, 72)
    return {"number": ctx.get("next", rng.randint(1001, 9999)) + step * rng.randint(1, 40),
            "amazon": f"{rng.randint(111, 114)}-{rng.randint(10**6, 10**7 - 1)}-"
                      f"{rng.randint(10**6, 10**7 - 1)}",
            "items": items, "subtotal": subtotal, "shipping": shipping, "tax": tax,
            "total": subtotal + shipping + tax, "at": at,
            "arrive": at + dt.timedelta(days=rng.randint(2, 6)),
            "tracking": "1Z" + rm._alnum(rng, 6, "ABCDEFGHJKLMNPRSTUVWXYZ0123456789") +
                        f"{rng.randint(10**9, 10**10 - 1)}",
            "carrier": rng.choice(("UPS", "FedEx", "USPS", "DHL Express")),
            "card": f"{rng.randint(1000, 9999)}"}


def _money(value: float, cur: str = "$") -> str:
    return f"{cur}{value:,.2f}"


def _order_setup(rng: random.Random, pool: TextPool, me: rm.Person) -> dict:
    ctx = _service_setup(rng, pool, me)
    ctx["next"] = rng.randint(1001, 40000)
    city, _ = rng.choice(rm.CITIES)
    ctx["ship_to"] = f"{me.name}\n{rng.randint(1, 999)} {rng.choice(rm.STREETS)}\n{city}"
    return ctx


def _order_shopify(ctx: dict, d: dict, rng: random.Random) -> Rendered:
    b = ctx["brand"]
    lines = "\n".join(f"{n} × {q}\n{_money(q * p)}" for n, q, p in d["items"])
    plain = (f"{b.upper()}\n\nOrder #{d['number']}\n\nThank you for your purchase!\n\nHi "
             f"{ctx['me'].first}, we're getting your order ready to be shipped. We will notify "
             f"you when it has been sent.\n\nView your order: {_track(rng, ctx, 'https://' + ctx['domain'] + '/account/orders/' + rm._hex(rng, 32))}"
             f"\n\nOr visit our store: https://{ctx['domain']}\n\nOrder summary\n\n{lines}\n\n"
             f"Subtotal\n{_money(d['subtotal'])}\nShipping\n{_money(d['shipping'])}\nTaxes\n"
             f"{_money(d['tax'])}\nTotal\n{_money(d['total'])} USD\n\nCustomer information\n\n"
             f"Shipping address\n{ctx['ship_to']}\n\nBilling address\n{ctx['ship_to']}\n\n"
             f"Shipping method\nStandard Shipping\n\nPayment method\nending with {d['card']} — "
             f"{_money(d['total'])}\n\nIf you have any questions, reply to this email or "
             f"contact us at support@{ctx['domain']}\n")
    html = _html_from_blocks(ctx, plain, f"{b} · {rm.rng_address(ctx)}", rng,
                             ("View your order", f"https://{ctx['domain']}/account")) \
        if ctx["html"] else None
    return Rendered(rm.Person(b, f"store+{rng.randint(10**7, 10**8)}@t.shopifyemail.com"
                              if ctx.get("shopify_from") else f"orders@{ctx['domain']}"),
                    f"Order #{d['number']} confirmed", plain, html, mid_style="postfix",
                    moment=d["at"])


def _order_amazon(ctx: dict, d: dict, rng: random.Random) -> Rendered:
    b = ctx["brand"]
    first = d["items"][0][0]
    more = len(d["items"]) - 1
    subject = f"Your {b} order #{d['amazon']} of \"{first[:40]}\"" + \
        (f" and {more} more item{'s' if more > 1 else ''}." if more else ".")
    lines = "\n".join(f"{n}\nQuantity: {q}\n{_money(p)}\n" for n, q, p in d["items"])
    plain = (f"{b}\n\nHello {ctx['me'].name},\n\nThank you for shopping with us. We'll send a "
             f"confirmation when your items ship.\n\nDetails\nOrder #{d['amazon']}\n\nArriving:"
             f"\n{d['arrive'].strftime('%A, %B')} {d['arrive'].day}\n\nShip to:\n"
             f"{ctx['ship_to']}\n\n{lines}\nItem Subtotal: {_money(d['subtotal'])}\nShipping & "
             f"Handling: {_money(d['shipping'])}\nEstimated tax: {_money(d['tax'])}\n\nOrder "
             f"Total: {_money(d['total'])}\n\nView or manage order: {_track(rng, ctx, 'https://www.' + ctx['domain'] + '/gp/css/order-details?orderID=' + d['amazon'])}"
             f"\n\nWe hope to see you again soon.\n{b}\n\n"
             f"By placing your order, you agree to {b}'s Conditions of Use and Privacy Notice.\n"
             f"This email was sent from a notification-only address that cannot accept incoming "
             f"email. Please do not reply to this message.\n")
    html = _html_from_blocks(ctx, plain, "", rng) if ctx["html"] else None
    return Rendered(rm.Person(f"{b}.com", f"auto-confirm@{ctx['domain']}"), subject, plain, html,
                    mid_style="ses", moment=d["at"])


def _shipping(ctx: dict, d: dict, rng: random.Random) -> Rendered:
    b = ctx["brand"]
    items = "\n".join(f"{n} × {q}" for n, q, _ in d["items"])
    plain = (f"{b.upper()}\n\nOrder #{d['number']}\n\nYour order is on the way\n\nYour order is "
             f"on the way. Track your shipment to see the delivery status.\n\nTrack your order: "
             f"{_track(rng, ctx, 'https://' + ctx['domain'] + '/apps/track/' + d['tracking'])}\n\n"
             f"{d['carrier']} tracking number: {d['tracking']}\n\nItems in this shipment\n\n"
             f"{items}\n\nIf you have any questions, reply to this email or contact us at "
             f"support@{ctx['domain']}\n")
    html = _html_from_blocks(ctx, plain, f"{b}", rng, ("View your order",
                                                       f"https://{ctx['domain']}/account")) \
        if ctx["html"] else None
    return Rendered(rm.Person(b, f"orders@{ctx['domain']}"),
                    f"A shipment from order #{d['number']} is on the way", plain, html,
                    mid_style="postfix", moment=d["at"] + dt.timedelta(days=1))


def _carrier(ctx: dict, d: dict, rng: random.Random) -> Rendered:
    arrive = d["arrive"]
    day = f"{arrive.strftime('%A')}, {arrive.strftime('%m/%d/%Y')}"
    weight = f"{random.Random(d['tracking']).randint(5, 400) / 10:.2f} LBS"
    plain = (f"UPS Update: Package Scheduled for Delivery {day}\n\nHello, your package is "
             f"scheduled for delivery on {day} between 9:00 "
             f"AM - 1:00 PM.\n\nScheduled Delivery Date: {day}\nEstimated Delivery Time: "
             f"9:00 AM - 1:00 PM\nTracking Number: {d['tracking']}\nShip To: "
             f"{ctx['ship_to'].splitlines()[-1]}\nNumber of Packages: {len(d['items'])}\n"
             f"UPS Service: UPS Ground\nWeight: {weight}\nShipper: {ctx['brand']}\n"
             f"Reference Number(s): {d['number']}\n\nTrack your package: "
             f"{_track(rng, ctx, 'https://www.ups.com/track?tracknum=' + d['tracking'])}\n\n"
             f"Do not reply to this e-mail. UPS and {ctx['brand']} will not receive your "
             f"reply.\n\n© 2025 United Parcel Service of America, Inc. UPS, the UPS brandmark, "
             f"and the color brown are trademarks of United Parcel Service of America, Inc. All "
             f"rights reserved.\n")
    html = _html_from_blocks(ctx, plain, "", rng) if ctx["html"] else None
    return Rendered(rm.Person("UPS", "mcinfo@ups.com"), f"UPS Update: Package Scheduled for "
                    f"Delivery {day}", plain, html, mid_style="postfix",
                    moment=d["at"] + dt.timedelta(days=2))


def _carrier_fix(ctx: dict, d: dict, rng: random.Random) -> Rendered:
    d = dict(d)
    return _carrier(ctx, d, rng)


REPOS = ("api-server", "web-frontend", "billing-service", "infra", "mobile-app", "data-pipeline",
         "docs", "auth-gateway", "search-indexer", "etl-jobs", "design-system", "cli")
BRANCHES = ("main", "develop", "release/2.4", "feature/login-rework", "fix/timeout-retry",
            "dependabot/npm_and_yarn/axios-1.7.4", "renovate/pytest-8.x", "hotfix/null-check",
            "feature/csv-export", "chore/upgrade-node-20")
JOBS = ("build", "test (3.11)", "test (3.12)", "lint", "e2e", "deploy-staging", "unit-tests",
        "integration", "typecheck", "docker")


def _ci_setup(rng: random.Random, pool: TextPool, me: rm.Person) -> dict:
    ctx = _service_setup(rng, pool, me)
    org = rm.ascii_fold(rng.choice(rm.COMPANIES)[0].split()[0]).lower()
    ctx.update(org=org, repo=rng.choice(REPOS), workflow=rng.choice(("CI", "Build and test",
                                                                     "Tests", "Release")),
               authors=[rm.make_name(rng) for _ in range(4)], pool=pool)
    return ctx


def _ci_data(rng: random.Random, ctx: dict, step: int) -> dict:
    jobs = rng.sample(JOBS, rng.randint(2, 5))
    failed = rng.sample(jobs, rng.randint(1, len(jobs)))
    return {"sha": rm._hex(rng, 40), "branch": rng.choice(BRANCHES), "run": rng.randint(10**9, 10**10),
            "number": rng.randint(100, 9000), "jobs": jobs, "failed": failed,
            "durations": {j: (rng.randint(0, 14), rng.randint(1, 59)) for j in jobs},
            "author": rng.choice(ctx["authors"]), "message": ctx["pool"].sentence(rng, 4, 12),
            "at": _at(ctx, step, rng, 10), "line": rng.randint(10, 900)}


def _dur(m: int, s: int) -> str:
    return (f"{m} minute{'s' if m != 1 else ''} and " if m else "") + f"{s} second{'s' if s != 1 else ''}"


def _ci_github(ctx: dict, d: dict, rng: random.Random) -> Rendered:
    repo = f"{ctx['org']}/{ctx['repo']}"
    rows = "\n".join(f"    {j}: {'Failed' if j in d['failed'] else 'Succeeded'} in "
                     f"{_dur(*d['durations'][j])}" for j in d["jobs"])
    plain = (f"[{repo}] {ctx['workflow']} workflow run\n\n\n{ctx['workflow']}: Some jobs were "
             f"not successful\nView workflow run: https://github.com/{repo}/actions/runs/"
             f"{d['run']}\n\n{rows}\n\n\n—\nYou are receiving this because this workflow ran on "
             f"your default branch.\nManage your GitHub Actions notifications: "
             f"https://github.com/settings/notifications\n")
    html = _html_from_blocks(ctx | {"brand": "GitHub", "domain": "github.com"}, plain, "", rng) \
        if ctx["html"] else None
    return Rendered(rm.Person(f"{ctx['authors'][0]}", "notifications@github.com"),
                    f"[{repo}] Run failed: {ctx['workflow']} - {d['branch']} ({d['sha'][:7]})",
                    plain, html, [("List-ID", f"{ctx['org']}/{ctx['repo']} <{ctx['repo']}."
                                  f"{ctx['org']}.github.com>"),
                                  ("X-GitHub-Reason", "ci_activity")], "postfix",
                    "noreply@github.com", d["at"])


def _ci_gitlab(ctx: dict, d: dict, rng: random.Random) -> Rendered:
    project = f"{ctx['org']}/{ctx['repo']}"
    base = f"https://gitlab.{ctx['domain']}/{project}"
    fails = "\n".join(f"✖ {j.split()[0]}\n\n{j}\n( {base}/-/jobs/{d['run'] % 10**8 + i} )\n"
                      for i, j in enumerate(d["failed"]))
    plain = (f"Your pipeline has failed.\n\nProject: {ctx['repo']} ( {base} )\nBranch: "
             f"{d['branch']} ( {base}/-/commits/{d['branch']} )\n\nCommit: {d['sha'][:8]} ( "
             f"{base}/-/commit/{d['sha']} )\nCommit Author: {d['author']}\n\n"
             f"{d['message']}\n\nPipeline #{d['run'] % 10**7} ( {base}/-/pipelines/"
             f"{d['run'] % 10**7} ) triggered by {d['author']}\nhad {len(d['failed'])} failed "
             f"job{'s' if len(d['failed']) > 1 else ''}.\n\nFailed jobs\n\n{fails}\n"
             f"$ make {d['failed'][0].split()[0]}\nERROR: Job failed: exit code "
             f"{random.Random(d['sha']).choice((1, 2, 137))}\n\n-- \nYou're receiving this email "
             f"because of your account on gitlab.{ctx['domain']}. Manage all notifications · Help\n")
    html = _html_from_blocks(ctx | {"brand": "GitLab"}, plain, "", rng) if ctx["html"] else None
    return Rendered(rm.Person("GitLab", f"gitlab@{ctx['domain']}"),
                    f"{project} | Failed pipeline for {d['branch']} | {d['sha'][:8]}", plain, html,
                    [("X-GitLab-Project", ctx["repo"]), ("X-GitLab-Pipeline-Id",
                                                         str(d["run"] % 10**7)),
                     ("X-GitLab-Pipeline-Status", "failed"), ("List-Id", f"{project} <"
                                                              f"{ctx['repo']}.gitlab>")],
                    "postfix", f"gitlab@{ctx['domain']}", d["at"])


def _ci_jenkins(ctx: dict, d: dict, rng: random.Random) -> Rendered:
    job = f"{ctx['repo']}-{d['branch'].split('/')[-1]}"
    url = f"https://jenkins.{ctx['domain']}/job/{job}/{d['number']}/"
    r = random.Random(d["sha"])
    log = "\n".join(f"[{j}] {r.choice(('Running', 'Collecting', 'Compiling', 'Downloading'))} "
                    f"{r.choice(('module', 'dependency', 'artifact'))} {r.randint(1, 400)}/"
                    f"{r.randint(400, 900)}" for j in d["jobs"])
    plain = (f"See <{url}display/redirect?page=changes>\n\nChanges:\n\n[{d['author']}] "
             f"{d['message']}\n\n\n------------------------------------------\n[...truncated "
             f"{r.randint(10, 999)}.{r.randint(10, 99)} KB...]\n{log}\nFAILED: "
             f"{d['failed'][0]} (line {d['line']})\nBuild step 'Execute shell' marked build as "
             f"failure\nRecording test results\n[Checks API] No suitable checks publisher found."
             f"\nFinished: FAILURE\n")
    return Rendered(rm.Person("Jenkins", f"jenkins@{ctx['domain']}"),
                    f"Build failed in Jenkins: {job} #{d['number']}", plain, None, [],
                    "postfix", f"jenkins@{ctx['domain']}", d["at"])


HOSTS = ("web01", "web02", "db01", "db02", "app-03", "cache1", "lb-east-1", "mail02", "build7",
         "k8s-node-04", "nas", "vpn-gw", "backup01", "es-data-2", "redis-01", "proxy3")
SERVICES = (("HTTP", "HTTP CRITICAL: HTTP/1.1 503 Service Unavailable - {n} bytes in {t} second "
             "response time"), ("Disk /var", "DISK CRITICAL - free space: /var {n} MB ({p}% inode="
                                "{q}%)"),
            ("Load", "CRITICAL - load average: {a}, {b}, {c}"),
            ("SSH", "CRITICAL - Socket timeout after {s} seconds"),
            ("PING", "PING CRITICAL - Packet loss = {p}%, RTA = {t} ms"),
            ("Swap", "SWAP CRITICAL - {p}% free ({n} MB out of 2047 MB)"),
            ("MySQL", "CRITICAL - Slave is {s} seconds behind master"))


def _mon_setup(rng: random.Random, pool: TextPool, me: rm.Person) -> dict:
    ctx = _service_setup(rng, pool, me)
    ctx["hosts"] = rng.sample(HOSTS, 5)
    ctx["net"] = f"10.{rng.randint(0, 40)}.{rng.randint(0, 9)}"
    ctx["fixed_host"] = rng.random() < 0.5
    return ctx


def _mon_data(rng: random.Random, ctx: dict, step: int) -> dict:
    host = ctx["hosts"][0] if ctx["fixed_host"] else rng.choice(ctx["hosts"])
    service = rng.choice(SERVICES)
    values = {"n": rng.randint(100, 9000), "t": f"{rng.uniform(0.001, 9.9):.3f}",
              "p": rng.randint(1, 99), "q": rng.randint(1, 99), "s": rng.randint(10, 900),
              "a": f"{rng.uniform(4, 40):.2f}", "b": f"{rng.uniform(4, 40):.2f}",
              "c": f"{rng.uniform(4, 40):.2f}"}
    return {"host": host, "addr": f"{ctx['net']}.{HOSTS.index(host) + 10}",
            "service": service[0], "output": service[1].format(**values),
            "state": rng.choice(("CRITICAL", "WARNING", "CRITICAL")), "at": _at(ctx, step, rng, 9),
            "type": rng.choice(("PROBLEM", "PROBLEM", "RECOVERY")), "value": values,
            "metric": rng.choice(("HighCPUUsage", "HighMemoryUsage", "DiskWillFillIn4Hours",
                                  "InstanceDown", "HighRequestLatency", "TooManyRestarts")),
            "severity": rng.choice(("warning", "critical")), "event": rng.randint(10**5, 10**7)}


def _nagios(ctx: dict, d: dict, rng: random.Random) -> Rendered:
    state = "OK" if d["type"] == "RECOVERY" else d["state"]
    at = d["at"].astimezone(dt.UTC)
    plain = (f"***** Nagios *****\n\nNotification Type: {d['type']}\n\nService: {d['service']}\n"
             f"Host: {d['host']}\nAddress: {d['addr']}\nState: {state}\n\nDate/Time: "
             f"{at.strftime('%a %b')} {at.day} {at.strftime('%H:%M:%S')} UTC {at.year}\n\n"
             f"Additional Info:\n\n{d['output']}\n")
    return Rendered(rm.Person("Nagios", f"nagios@monitor.{ctx['domain']}"),
                    f"** {d['type']} Service Alert: {d['host']}/{d['service']} is {state} **",
                    plain, None, [], "postfix", f"nagios@monitor.{ctx['domain']}", d["at"])


def _alertmanager(ctx: dict, d: dict, rng: random.Random) -> Rendered:
    inst = f"{d['host']}:9100"
    labels = (f"alertname = {d['metric']}\ninstance = {inst}\njob = node\nseverity = "
              f"{d['severity']}\nteam = {ctx['repo'] if 'repo' in ctx else 'platform'}")
    value = d["value"]["p"]
    started = d["at"].astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
    plain = (f"[1] Firing\nLabels\n{labels}\nAnnotations\ndescription = {d['metric']} on "
             f"{inst}: value is {value}.{d['value']['q']}%\nsummary = {d['metric']} on "
             f"{d['host']}\nSource: http://prometheus.{ctx['domain']}:9090/graph?g0.expr="
             f"instance%3A{d['metric'].lower()}%3Aratio%7Binstance%3D%22{inst}%22%7D+%3E+0.9\n"
             f"StartsAt: {started} +0000 UTC\n\nSent by Alertmanager\n")
    html = ("<!DOCTYPE html><html><head><meta name=\"viewport\" content=\"width=device-width\">"
            "<meta http-equiv=\"Content-Type\" content=\"text/html; charset=UTF-8\"><title>"
            f"{d['metric']}</title></head><body itemscope itemtype=\"http://schema.org/EmailMessage"
            "\"><table class=\"body-wrap\"><tr><td class=\"container\" width=\"600\"><div class="
            "\"content\"><table class=\"main\" width=\"100%\" cellpadding=\"0\" cellspacing=\"0\">"
            f"<tr><td class=\"alert alert-warning\">1 alert for alertname={d['metric']}</td></tr>"
            "<tr><td class=\"content-wrap\"><table width=\"100%\" cellpadding=\"0\" cellspacing="
            f"\"0\"><tr><td class=\"content-block\"><a href=\"http://alertmanager.{ctx['domain']}"
            f":9093/#/alerts?receiver=team-mail\" class=\"btn-primary\">View in Alertmanager</a>"
            f"</td></tr><tr><td class=\"content-block\"><strong>[1] Firing</strong></td></tr><tr>"
            f"<td class=\"content-block\"><strong>Labels</strong><br />"
            + "<br />".join(rm.html_escape(x) for x in labels.split("\n")) +
            "<br /><strong>Annotations</strong><br />" + rm.html_escape(
                f"description = {d['metric']} on {inst}: value is {value}.{d['value']['q']}%") +
            f"<br /><a href=\"http://prometheus.{ctx['domain']}:9090/graph\">Source</a><br /></td>"
            "</tr></table></td></tr></table><div class=\"footer\"><table width=\"100%\"><tr><td "
            "class=\"aligncenter content-block\"><a href=\"http://alertmanager\">Sent by "
            "Alertmanager</a></td></tr></table></div></div></td></tr></table></body></html>\n")
    return Rendered(rm.Person("Alertmanager", f"alertmanager@{ctx['domain']}"),
                    f"[FIRING:1] {d['metric']} node ({inst} {d['severity']})", plain,
                    html if ctx["html"] else None, [], "postfix", f"alertmanager@{ctx['domain']}",
                    d["at"])


def _zabbix(ctx: dict, d: dict, rng: random.Random) -> Rendered:
    at = d["at"]
    name = {"HighCPUUsage": "High CPU utilization (over 90% for 5m)",
            "HighMemoryUsage": "High memory utilization (>90% for 5m)",
            "DiskWillFillIn4Hours": "/var: Disk space is low (used > 80%)",
            "InstanceDown": "Zabbix agent is not available (for 3m)",
            "HighRequestLatency": "Nginx: Response time is too high",
            "TooManyRestarts": "Service has been restarted (uptime < 10m)"}[d["metric"]]
    plain = (f"Problem started at {at.strftime('%H:%M:%S')} on {at.strftime('%Y.%m.%d')}\n"
             f"Problem name: {name}\nHost: {d['host']}\nSeverity: "
             f"{'High' if d['severity'] == 'critical' else 'Warning'}\nOperational data: "
             f"Current utilization: {d['value']['p']}.{d['value']['q']} %\nOriginal problem ID: "
             f"{d['event']}\n")
    return Rendered(rm.Person("Zabbix", f"zabbix@{ctx['domain']}"), f"Problem: {name}", plain,
                    None, [], "postfix", f"zabbix@{ctx['domain']}", d["at"])


def _invoice_data(rng: random.Random, ctx: dict, step: int) -> dict:
    at = _at(ctx, step, rng, 24 * 30)
    lines = [(rng.choice(("Pro plan (monthly)", "Team seats × 5", "Consulting hours",
                          "Support retainer", "Additional storage 100 GB", "API overage",
                          "Annual licence renewal", "Onboarding workshop")),
              rng.randint(5, 4000) + rng.choice((0, 0.5, 0.99)))
             for _ in range(rng.randint(1, 3))]
    total = sum(v for _, v in lines)
    return {"number": f"{rng.randint(1000, 9999)}-{rng.randint(1000, 9999)}",
            "inv": f"INV-{rng.randint(100, 9999):04d}", "at": at, "lines": lines,
            "total": total, "due": at + dt.timedelta(days=rng.choice((7, 14, 30))),
            "card": f"{rng.randint(1000, 9999)}", "brand": rng.choice(("Visa", "Mastercard",
                                                                        "American Express"))}


def _stripe(ctx: dict, d: dict, rng: random.Random) -> Rendered:
    b = ctx["brand"]
    lines = "\n".join(f"{n}    {_money(v)}" for n, v in d["lines"])
    plain = (f"{b}\n\nReceipt from {b}\n{_money(d['total'])}\nPaid {d['at'].strftime('%B')} "
             f"{d['at'].day}, {d['at'].year}\n\nReceipt number    {d['number']}\nInvoice number  "
             f"  {d['inv']}\nPayment method    {d['brand']} - {d['card']}\n\n{lines}\n\nTotal    "
             f"{_money(d['total'])}\nAmount paid    {_money(d['total'])}\n\nQuestions? Contact "
             f"us at billing@{ctx['domain']} or call us at +1 888-555-0134.\n\nSomething wrong "
             f"with the email? View it in your browser: {_track(rng, ctx, 'https://pay.stripe.com/receipts/invoices/' + _token(rng, 60))}"
             f"\n\nYou're receiving this email because you made a purchase at {b}, which "
             f"partners with Stripe to provide invoicing and payment processing.\n")
    html = _html_from_blocks(ctx, plain, "Powered by stripe | Learn more about Stripe Billing",
                             rng) if ctx["html"] else None
    return Rendered(rm.Person(b, f"invoice+statements@{ctx['domain']}"),
                    f"Your receipt from {b} #{d['number']}", plain, html, [], "sendgrid",
                    "bounces@stripe.com", d["at"])


def _xero(ctx: dict, d: dict, rng: random.Random) -> Rendered:
    b = ctx["brand"]
    plain = (f"Hi {ctx['me'].first},\n\nHere's invoice {d['inv']} for {_money(d['total'])} AUD."
             f"\n\nThe amount outstanding of {_money(d['total'])} AUD is due on "
             f"{d['due'].day} {d['due'].strftime('%b %Y')}.\n\nView and pay your bill online: "
             f"https://in.xero.com/{_token(rng, 36)}\n\nFrom your online bill you can print a "
             f"PDF, export a CSV, or create a free login and view your outstanding bills.\n\nIf "
             f"you have any questions, please let us know.\n\nThanks,\n{b}\n")
    return Rendered(rm.Person(b, "messaging-service@post.xero.com"),
                    f"Invoice {d['inv']} from {b} for {ctx['me'].name}", plain, None,
                    [("Reply-To", f"accounts@{ctx['domain']}")], "postfix", "bounce@post.xero.com",
                    d["at"])


def _bank_data(rng: random.Random, ctx: dict, step: int) -> dict:
    return {"amount": rng.randint(100, 250000) / 100, "at": _at(ctx, step, rng, 20),
            "merchant": rng.choice(("AMZN Mktp US", "SQ *BLUE BOTTLE COFFEE", "UBER *TRIP",
                                    "SHELL OIL 57442", "TARGET 00012345", "NETFLIX.COM",
                                    "WHOLEFDS #10234", "DELTA AIR 0067", "APPLE.COM/BILL",
                                    "STARBUCKS STORE 1123")),
            "card": ctx.get("card", "4242")}


def _bank(ctx: dict, d: dict, rng: random.Random) -> Rendered:
    b = ctx["brand"]
    at = d["at"]
    plain = (f"{b} Alert\n\nA charge of {_money(d['amount'])} was made on your credit card "
             f"ending in {d['card']}.\n\nMerchant: {d['merchant']}\nAmount: {_money(d['amount'])}"
             f"\nDate: {at.strftime('%m/%d/%Y')}\nTime: {at.strftime('%I:%M %p')} "
             f"{at.tzname()}\n\nIf you don't recognize this transaction, call us at the number "
             f"on the back of your card.\n\nYou are receiving this alert because you chose to "
             f"receive transaction alerts for charges over $0.00. To change your alert "
             f"settings, sign in at {ctx['domain']}.\n\nPlease do not reply to this email. "
             f"{b}, N.A. Member FDIC.\n")
    html = _html_from_blocks(ctx, plain, "", rng) if ctx["html"] else None
    return Rendered(rm.Person(f"{b} Alerts", f"alerts@notify.{ctx['domain']}"),
                    f"Transaction alert: {_money(d['amount'])} at {d['merchant']}"
                    if ctx.get("amount_subject") else "You made a credit card purchase",
                    plain, html, [], ctx["mid"], f"alerts@notify.{ctx['domain']}", d["at"])


def _bank_setup(rng: random.Random, pool: TextPool, me: rm.Person) -> dict:
    ctx = _service_setup(rng, pool, me)
    ctx["card"] = f"{rng.randint(1000, 9999)}"
    ctx["amount_subject"] = rng.random() < 0.5
    return ctx


def rng_address(ctx: dict) -> str:
    r = random.Random(ctx["domain"])
    city, _ = r.choice(rm.CITIES)
    return f"{r.randint(1, 999)} {r.choice(rm.STREETS)}, {city}"


rm.rng_address = rng_address  # one place for the sender's postal address

TRANSACTIONAL = (
    Template("password_reset_link", "transactional", _service_setup, _reset_link_data, _reset_link),
    Template("password_reset_code", "transactional", _service_setup, _reset_code_data, _reset_code),
    Template("one_time_code", "transactional", _otp_setup, _otp_data, _otp),
    Template("signin_alert", "transactional", _service_setup, _signin_data, _signin),
    Template("order_shopify", "transactional", _order_setup, _order_data, _order_shopify),
    Template("order_marketplace", "transactional", _order_setup, _order_data, _order_amazon),
    Template("shipping_notice", "transactional", _order_setup, _order_data, _shipping),
    Template("carrier_update", "transactional", _order_setup, _order_data, _carrier_fix),
    Template("ci_github_actions", "transactional", _ci_setup, _ci_data, _ci_github),
    Template("ci_gitlab", "transactional", _ci_setup, _ci_data, _ci_gitlab),
    Template("ci_jenkins", "transactional", _ci_setup, _ci_data, _ci_jenkins),
    Template("nagios", "transactional", _mon_setup, _mon_data, _nagios),
    Template("alertmanager", "transactional", _mon_setup, _mon_data, _alertmanager),
    Template("zabbix", "transactional", _mon_setup, _mon_data, _zabbix),
    Template("receipt_stripe", "transactional", _service_setup, _invoice_data, _stripe),
    Template("invoice_xero", "transactional", _service_setup, _invoice_data, _xero),
    Template("card_alert", "transactional", _bank_setup, _bank_data, _bank),
)


# -- cron ----------------------------------------------------------------------------------

PACKAGES = (("openssl", "3.0.15-1~deb12u1"), ("libssl3", "3.0.15-1~deb12u1"),
            ("linux-image-amd64", "6.1.119-1"), ("curl", "7.88.1-10+deb12u8"),
            ("libcurl4", "7.88.1-10+deb12u8"), ("openssh-server", "1:9.2p1-2+deb12u4"),
            ("openssh-client", "1:9.2p1-2+deb12u4"), ("tzdata", "2024b-0+deb12u1"),
            ("libc6", "2.36-9+deb12u9"), ("libc-bin", "2.36-9+deb12u9"), ("sudo", "1.9.13p3-1+deb12u1"),
            ("nginx", "1.22.1-9+deb12u1"), ("postgresql-15", "15.10-0+deb12u1"),
            ("python3.11", "3.11.2-6+deb12u5"), ("libxml2", "2.9.14+dfsg-1.3~deb12u1"),
            ("git", "1:2.39.5-0+deb12u1"), ("bind9-host", "1:9.18.28-1~deb12u2"),
            ("libexpat1", "2.5.0-1+deb12u1"), ("systemd", "252.33-1~deb12u1"),
            ("libsystemd0", "252.33-1~deb12u1"), ("rsync", "3.2.7-1+deb12u2"),
            ("libgnutls30", "3.7.9-2+deb12u3"), ("vim-tiny", "2:9.0.1378-2+deb12u1"),
            ("intel-microcode", "3.20241112.1~deb12u1"), ("docker-ce", "5:27.4.0-1~debian.12~bookworm"))


def _host_setup(rng: random.Random, pool: TextPool, me: rm.Person) -> dict:
    name, domain = rng.choice(rm.COMPANIES)
    host = rng.choice(HOSTS)
    zone = ZoneInfo(rng.choice(("UTC", "Europe/Berlin", "America/New_York", "Europe/London")))
    start = rm.when(rng).astimezone(zone).replace(hour=rng.choice((0, 3, 4, 6, 7)),
                                                 minute=rng.choice((0, 17, 25, 30)), second=1)
    sizes = rng.choice((20, 40, 50, 100, 200, 500, 1800))
    return {"host": host, "fqdn": f"{host}.{domain}", "domain": domain, "me": me,
            "moment": start, "zone": zone, "disk": sizes,
            "used": rng.uniform(0.2, 0.85) * sizes, "boot": rng.uniform(0.1, 0.4),
            "data": rng.choice((0, 250, 500, 1000, 2000, 4000)), "data_used": rng.uniform(0.1, 0.9),
            "pkgs": rng.sample(PACKAGES, 8), "ip": f"10.{rng.randint(0, 99)}.{rng.randint(0, 9)}."
                                               f"{rng.randint(2, 250)}",
            "archive": rng.uniform(3, 900), "certs": [f"{s}.{domain}" for s in
                                                      rng.sample(("www", "mail", "api", "vpn",
                                                                  "git", "intranet"), rng.randint(1, 3))],
            "expiry": start.date() + dt.timedelta(days=rng.randint(40, 85)),
            "kernel": rng.choice(("6.1.0-27-amd64", "6.1.0-28-amd64", "5.15.0-126-generic")),
            "mail_to": rng.choice(("root", me.addr))}


def _day(ctx: dict, step: int, rng: random.Random) -> dt.datetime:
    return ctx["moment"] + dt.timedelta(days=step, seconds=rng.randint(0, 40))


def _cron_data(rng: random.Random, ctx: dict, step: int) -> dict:
    """One day of a host: disk figures drift, packages come and go, counts change."""
    ctx["used"] = min(ctx["disk"] * 0.98, ctx["used"] + ctx["disk"] * rng.uniform(0.001, 0.03))
    ctx["data_used"] = min(0.99, ctx["data_used"] + rng.uniform(0.001, 0.02))
    n = rng.randint(1, 6)
    pkgs = sorted(rng.sample(ctx["pkgs"], n))
    if step and rng.random() < 0.5:   # a new security update on a later day
        pkgs = sorted(set(pkgs) | {rng.choice(PACKAGES)})
    return {"at": _day(ctx, step, rng), "used": ctx["used"], "data_used": ctx["data_used"],
            "pkgs": pkgs, "ssh_fail": rng.randint(0, 400), "ips": [_ip(rng) for _ in range(rng.randint(1, 4))],
            "sudo": rng.randint(0, 12), "mails": rng.randint(20, 3000),
            "bytes": rng.randint(10**5, 10**9), "files": rng.randint(1000, 900000),
            "dedup": rng.uniform(0.05, 0.9), "secs": rng.uniform(20, 4000), "step": step,
            "expiry_days": (ctx["expiry"] - (ctx["moment"].date() + dt.timedelta(days=step))).days,
            "http_404": rng.randint(0, 900), "kernel_msgs": rng.randint(0, 30)}


def _cron_headers(ctx: dict, command: str, d: dict) -> list[tuple[str, str]]:
    return [("X-Cron-Env", "<SHELL=/bin/sh>"), ("X-Cron-Env", "<HOME=/root>"),
            ("X-Cron-Env", "<PATH=/usr/bin:/bin>"), ("X-Cron-Env", "<LOGNAME=root>")]


def _cron_from(ctx: dict) -> rm.Person:
    return rm.Person("Cron Daemon", f"root@{ctx['fqdn']}")


def _size(value_gb: float) -> str:
    if value_gb >= 1000:
        return f"{value_gb / 1024:.1f}T"
    if value_gb >= 10:
        return f"{value_gb:.0f}G"
    return f"{value_gb:.1f}G"


def _df(ctx: dict, d: dict, rng: random.Random) -> Rendered:
    root = ctx["disk"]
    used = d["used"]
    rows = [("udev", "3.9G", "0", "3.9G", "0%", "/dev"),
            ("tmpfs", "795M", f"{1 + d['step'] % 3}.{(d['mails'] % 9)}M", "793M", "1%", "/run"),
            ("/dev/sda1", _size(root), _size(used), _size(root - used),
             f"{round(100 * used / root)}%", "/"),
            ("tmpfs", "3.9G", "0", "3.9G", "0%", "/dev/shm"),
            ("tmpfs", "5.0M", "0", "5.0M", "0%", "/run/lock"),
            ("/dev/sda15", "124M", "12M", "113M", "10%", "/boot/efi")]
    if ctx["data"]:
        du = ctx["data"] * d["data_used"]
        rows.append(("/dev/sdb1", _size(ctx["data"]), _size(du), _size(ctx["data"] - du),
                     f"{round(100 * d['data_used'])}%", "/srv"))
    rows.append(("tmpfs", "795M", "0", "795M", "0%", "/run/user/0"))
    table = "Filesystem      Size  Used Avail Use% Mounted on\n" + "\n".join(
        f"{a:<15} {b:>4}  {c:>4}  {e:>4} {f:>4} {g}" for a, b, c, e, f, g in rows)
    return Rendered(_cron_from(ctx), f"Cron <root@{ctx['host']}> df -h | grep -v loop",
                    table + "\n", None, _cron_headers(ctx, "df", d), "postfix",
                    f"root@{ctx['fqdn']}", d["at"])


def _apticron(ctx: dict, d: dict, rng: random.Random) -> Rendered:
    pkgs = d["pkgs"]
    listing = "\n".join(f"\t{n} {v}" for n, v in pkgs)
    changes = "\n\n".join(
        f"--- Changes for {n} ({n}) ---\n{n} ({v}) bookworm-security; urgency=medium\n\n"
        f"  * {random.Random(n + v).choice(('Fix CVE-2024-', 'Backport fix for CVE-2024-', 'Security update for CVE-2025-'))}"
        f"{random.Random(n).randint(1000, 59999)}\n\n -- Debian Security Team <team@security.debian.org>  "
        f"{rm.rfc_date(d['at'] - dt.timedelta(days=random.Random(n + v).randint(1, 9)))}"
        for n, v in pkgs)
    at = rm.rfc_date(d["at"])
    plain = (f"apticron report [{at}]\n{'=' * 72}\n\napticron has detected that some packages "
             f"need upgrading on: \n\n\t{ctx['fqdn']} \n\t[ {ctx['ip']} ]\n\nThe following "
             f"packages are currently pending an upgrade:\n\n{listing}\n\n{'=' * 72}\n\nPackage "
             f"Details:\n\nReading changelogs...\n{changes}\n\n{'=' * 72}\n\nYou can perform the "
             f"upgrade by issuing the command:\n\n\tapt full-upgrade\n\nas root on "
             f"{ctx['fqdn']}\n\n-- \napticron\n")
    return Rendered(rm.Person("root", f"root@{ctx['fqdn']}"),
                    f"{len(pkgs)} package update(s) for {ctx['fqdn']}", plain, None, [],
                    "postfix", f"root@{ctx['fqdn']}", d["at"])


def _logwatch(ctx: dict, d: dict, rng: random.Random) -> Rendered:
    at = d["at"]
    yday = at - dt.timedelta(days=1)
    ips = "\n".join(f"      {ip}: {random.Random(ip).randint(1, 300)} Time(s)" for ip in d["ips"])
    used = round(100 * d["used"] / ctx["disk"])
    plain = (f"\n ################### Logwatch 7.8 (01/22/23) ####################\n"
             f"        Processing Initiated: {at.strftime('%a %b %d %H:%M:%S %Y')}\n"
             f"        Date Range Processed: yesterday\n"
             f"                              ( {yday.strftime('%Y-%b-%d')} )\n"
             f"                              Period is day.\n"
             f"        Detail Level of Output: 0\n        Type of Output/Format: stdout / text\n"
             f"        Logfiles for Host: {ctx['host']}\n"
             f"  ##################################################################\n\n"
             f" --------------------- Kernel Begin ------------------------\n\n"
             f" WARNING:  Kernel Errors Present\n    ata1.00: failed command: READ FPDMA "
             f"QUEUED ...:  {d['kernel_msgs']} Time(s)\n\n ---------------------- Kernel End "
             f"-------------------------\n\n\n --------------------- pam_unix Begin "
             f"------------------------\n\n sshd:\n    Authentication Failures:\n"
             f"       unknown ({d['ips'][0]}): {d['ssh_fail']} Time(s)\n    Invalid Users:\n"
             f"       Unknown Account: {d['ssh_fail'] // 2 + 1} Time(s)\n\n sudo:\n    Sessions "
             f"Opened:\n       root -> root: {d['sudo']} Time(s)\n\n ---------------------- "
             f"pam_unix End -------------------------\n\n\n --------------------- SSHD Begin "
             f"------------------------\n\n Failed logins from:\n{ips}\n\n Illegal users from:\n"
             f"{ips}\n\n ---------------------- SSHD End -------------------------\n\n\n "
             f"--------------------- Postfix Begin ------------------------\n\n"
             f"    {d['bytes'] // 1000:>8}K  Bytes accepted                       "
             f"{d['bytes']:,}\n    {d['mails']:>8}   Accepted                           "
             f"100.00%\n\n ---------------------- Postfix End -------------------------\n\n\n "
             f"--------------------- Disk Space Begin ------------------------\n\n Filesystem  "
             f"    Size  Used Avail Use% Mounted on\n /dev/sda1       {_size(ctx['disk'])}  "
             f"{_size(d['used'])}  {_size(ctx['disk'] - d['used'])}  {used}% /\n\n\n "
             f"---------------------- Disk Space End -------------------------\n\n\n "
             f"###################### Logwatch End #########################\n\n")
    return Rendered(rm.Person("logwatch", f"logwatch@{ctx['fqdn']}"),
                    f"Logwatch for {ctx['host']} (Linux)", plain, None, [("X-Mailer",
                                                                         "Perl script \"logwatch\"")],
                    "postfix", f"logwatch@{ctx['fqdn']}", d["at"])


def _borg(ctx: dict, d: dict, rng: random.Random) -> Rendered:
    at = d["at"]
    orig = d["bytes"] / 1e6 * 40
    comp = orig * 0.61
    dedup = comp * d["dedup"] * 0.1
    end = at + dt.timedelta(seconds=d["secs"])
    secs = d["secs"]
    dur = f"{int(secs // 60)} minutes {secs % 60:.2f} seconds" if secs >= 60 else f"{secs:.2f} seconds"
    plain = (f"------------------------------------------------------------------------------\n"
             f"Repository: ssh://borg@backup01.{ctx['domain']}/./{ctx['host']}\n"
             f"Archive name: {ctx['host']}-{at.strftime('%Y-%m-%dT%H:%M:%S')}\n"
             f"Archive fingerprint: {random.Random(str(d)).getrandbits(256):064x}\n"
             f"Time (start): {at.strftime('%a, %Y-%m-%d %H:%M:%S')}\n"
             f"Time (end):   {end.strftime('%a, %Y-%m-%d %H:%M:%S')}\n"
             f"Duration: {dur}\nNumber of files: {d['files']}\nUtilization of max. archive "
             f"size: 0%\n----------------------------------------------------------------------"
             f"--------\n                       Original size      Compressed size    "
             f"Deduplicated size\nThis archive:               {orig:.2f} MB          "
             f"{comp:.2f} MB              {dedup:.2f} MB\nAll archives:              "
             f"{orig * 31 / 1000:.2f} GB            {comp * 31 / 1000:.2f} GB"
             f"             {ctx['archive']:.2f} GB\n\n                       Unique chunks"
             f"         Total chunks\nChunk index:                  {d['files'] * 3 + 1177}"
             f"               {d['files'] * 41}\n--------------------------------------------"
             f"----------------------------------\nterminating with success status, rc 0\n")
    return Rendered(_cron_from(ctx), f"Cron <root@{ctx['host']}> /usr/local/sbin/borg-backup.sh",
                    plain, None, _cron_headers(ctx, "borg", d), "postfix", f"root@{ctx['fqdn']}",
                    d["at"])


def _certbot(ctx: dict, d: dict, rng: random.Random) -> Rendered:
    days = d["expiry_days"]
    due = days <= 30
    blocks = []
    for cert in ctx["certs"]:
        blocks.append(f"Processing /etc/letsencrypt/renewal/{cert}.conf\n- - - - - - - - - - - "
                      f"- - - - - - - - - - - - - - - - - - - -\n" +
                      ("Renewing an existing certificate for " + cert if due else
                       "Certificate not yet due for renewal"))
    expiry = ctx["expiry"] + (dt.timedelta(days=90) if due else dt.timedelta())
    listing = "\n".join(f"  /etc/letsencrypt/live/{c}/fullchain.pem expires on "
                        f"{expiry.isoformat()} ({'success' if due else 'skipped'})"
                        for c in ctx["certs"])
    head = "Congratulations, all renewals succeeded: " if due else \
        "The following certificates are not due for renewal yet:"
    plain = ("Saving debug log to /var/log/letsencrypt/letsencrypt.log\n\n- - - - - - - - - - - "
             "- - - - - - - - - - - - - - - - - - - -\n" + "\n\n- - - - - - - - - - - - - - - - "
             "- - - - - - - - - - - - - - - -\n".join(blocks) +
             f"\n\n- - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - -"
             f"\n{head}\n{listing}\n" + ("" if due else "No renewals were attempted.\n") +
             "- - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - -\n")
    return Rendered(_cron_from(ctx), f"Cron <root@{ctx['host']}> test -x /usr/bin/certbot -a \\! -d "
                    f"/run/systemd/system && perl -e 'sleep int(rand(43200))' && certbot -q renew",
                    plain, None, _cron_headers(ctx, "certbot", d), "postfix", f"root@{ctx['fqdn']}",
                    d["at"])


def _certbot_data(rng: random.Random, ctx: dict, step: int) -> dict:
    d = _cron_data(rng, ctx, step)
    # a renewal notice is only new when its date moved: a week between runs
    d["at"] = ctx["moment"] + dt.timedelta(days=7 * step + rng.randint(0, 2), hours=rng.randint(0, 11))
    d["expiry_days"] = (ctx["expiry"] - d["at"].date()).days
    if step:
        ctx["expiry"] = ctx["expiry"] + dt.timedelta(days=rng.randint(1, 60))
    return d


def _cron_apt(ctx: dict, d: dict, rng: random.Random) -> Rendered:
    at = d["at"]
    sleep = random.Random(str(at)).randint(1, 3500)
    names = " ".join(n for n, _ in d["pkgs"])
    gets = "\n".join(f"Get:{i} http://security.debian.org/debian-security bookworm-security/main "
                     f"amd64 {n} amd64 {v} [{random.Random(n).randint(30, 9000):,} kB]"
                     for i, (n, v) in enumerate(d["pkgs"], 1))
    total = sum(random.Random(n).randint(30, 9000) for n, _ in d["pkgs"])
    stamp = at.strftime("%a %b %e %H:%M:%S %Z %Y")
    later = (at + dt.timedelta(seconds=sleep)).strftime("%a %b %e %H:%M:%S %Z %Y")
    plain = (f"CRON-APT RUN [/etc/cron-apt/config]: {stamp}\nCRON-APT SLEEP: {sleep}, {later}\n"
             f"CRON-APT ACTION: 3-download\nCRON-APT LINE: /usr/bin/apt-get -o quiet=1 "
             f"dist-upgrade -d -y -o APT::Get::Show-Upgraded=true\nReading package lists...\n"
             f"Building dependency tree...\nReading state information...\nCalculating upgrade..."
             f"\nThe following packages will be upgraded:\n  {names}\n{len(d['pkgs'])} upgraded, 0 "
             f"newly installed, 0 to remove and 0 not upgraded.\nNeed to get {total:,} kB of "
             f"archives.\nAfter this operation, {random.Random(names).randint(0, 900)} kB of "
             f"additional disk space will be used.\n{gets}\nFetched {total:,} kB in "
             f"{random.Random(names).randint(1, 9)}s ({random.Random(stamp).randint(900, 9000)} "
             f"kB/s)\nDownload complete and in download only mode\n")
    return Rendered(rm.Person("root", f"root@{ctx['fqdn']}"), f"CRON-APT completed on "
                    f"{ctx['host']} [/etc/cron-apt/config]", plain, None, [], "postfix",
                    f"root@{ctx['fqdn']}", d["at"])


def _unattended(ctx: dict, d: dict, rng: random.Random) -> Rendered:
    at = d["at"]
    names = " ".join(n for n, _ in d["pkgs"])
    log = "\n".join(f"Preparing to unpack .../{n}_{v.split(':')[-1]}_amd64.deb ...\nUnpacking "
                    f"{n}:amd64 ({v}) over ({v[:-1]}0) ...\nSetting up {n}:amd64 ({v}) ..."
                    for n, v in d["pkgs"])
    reboot = any(n.startswith(("linux-image", "libc6", "systemd")) for n, _ in d["pkgs"])
    plain = ("Unattended upgrade result: All upgrades installed\n\n"
             + ("Warning: A reboot is required to complete this upgrade, or a previous one.\n\n"
                if reboot else "")
             + f"Packages that were upgraded:\n {names} \n\nPackage installation log:\nLog "
             f"started: {at.strftime('%Y-%m-%d  %H:%M:%S')}\n(Reading database ... "
             f"{d['files'] % 90000 + 30000} files and directories currently installed.)\n{log}\n"
             f"Processing triggers for libc-bin (2.36-9+deb12u9) ...\nLog ended: "
             f"{(at + dt.timedelta(seconds=int(d['secs']) % 300)).strftime('%Y-%m-%d  %H:%M:%S')}"
             f"\n\nUnattended-upgrades log:\nStarting unattended upgrades script\nAllowed "
             f"origins are: origin=Debian,codename=bookworm,label=Debian-Security\nPackages that "
             f"will be upgraded: {names}\nWriting dpkg log to /var/log/unattended-upgrades/"
             f"unattended-upgrades-dpkg.log\nAll upgrades installed\n")
    subject = f"{'[reboot required] ' if reboot else ''}unattended-upgrades result for " \
              f"{ctx['fqdn']}: SUCCESS"
    return Rendered(rm.Person("root", f"root@{ctx['fqdn']}"), subject, plain, None, [],
                    "postfix", f"root@{ctx['fqdn']}", d["at"])


CRON = (
    Template("df", "cron", _host_setup, _cron_data, _df),
    Template("apticron", "cron", _host_setup, _cron_data, _apticron),
    Template("logwatch", "cron", _host_setup, _cron_data, _logwatch),
    Template("borg_backup", "cron", _host_setup, _cron_data, _borg),
    Template("certbot", "cron", _host_setup, _certbot_data, _certbot),
    Template("cron_apt", "cron", _host_setup, _cron_data, _cron_apt),
    Template("unattended_upgrades", "cron", _host_setup, _cron_data, _unattended),
)


# -- newsletters ---------------------------------------------------------------------------

def _news_setup(rng: random.Random, pool: TextPool, me: rm.Person) -> dict:
    brand, domain = _brand(rng)
    title = rng.choice(("Weekly", "Insider", "Digest", "Dispatch", "Roundup", "Briefing",
                        "Notes", "Update"))
    return {"brand": brand, "domain": domain, "me": me, "pool": pool,
            "title": f"The {brand.split()[0]} {title}", "slug": rm.ascii_fold(brand).lower()[:12],
            "dc": rng.randint(1, 21), "u": rm._hex(rng, 25), "list_id": rm._hex(rng, 10),
            "tracking": rng.choice(("mailchimp", "sendgrid", "none")), "region": "us-east-1",
            "color": rng.choice(("#e85c41", "#2b6cb0", "#2f855a", "#553c9a", "#111111")),
            "moment": rm.when(rng), "issue": rng.randint(12, 480), "subject_style": rng.randrange(3),
            "writer": rm.make_person(rng, domain), "html": True, "mid": "mailchimp",
            "about": pool.words_of_prose(rng, 25, 60),
            "list": rm.ascii_fold(brand).lower()[:10] + "-" + rng.choice(("announce", "news",
                                                                         "users", "discuss"))}


def _news_data(rng: random.Random, ctx: dict, step: int) -> dict:
    pool: TextPool = ctx["pool"]
    n = rng.choice((1, 2, 2, 3, 4))
    articles = []
    for _ in range(n):
        paragraphs = pool.prose(rng, rng.choice((1, 1, 2)))
        articles.append((pool.subject(rng), paragraphs))
    return {"issue": ctx["issue"] + step, "articles": articles,
            "at": ctx["moment"] + dt.timedelta(days=7 * step, minutes=rng.randrange(30)),
            "offer": rng.choice((10, 15, 20, 25, 30, 40, 50)), "code": rm._alnum(
                rng, 6, "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"),
            "products": rng.sample(PRODUCTS, 4)}


def _news_footer_plain(ctx: dict, rng: random.Random, kind: str) -> str:
    b = ctx["brand"]
    if kind == "mailchimp":
        return (f"============================================================\n"
                f"Copyright © 2025 {b}, All rights reserved.\nYou are receiving this email "
                f"because you opted in via our website.\n\nOur mailing address is:\n{b}\n"
                f"{rng_address(ctx)}\n\nWant to change how you receive these emails?\nYou can "
                f"** update your preferences (https://{ctx['slug']}.us{ctx['dc']}.list-manage."
                f"com/profile?u={ctx['u']}&id={ctx['list_id']}&e={rm._hex(rng, 10)}&c="
                f"{rm._hex(rng, 10)})\nor ** unsubscribe from this list (https://{ctx['slug']}.us"
                f"{ctx['dc']}.list-manage.com/unsubscribe?u={ctx['u']}&id={ctx['list_id']}&e="
                f"{rm._hex(rng, 10)}&c={rm._hex(rng, 10)})\n.\n\nEmail Marketing Powered by "
                f"Mailchimp\nhttp://www.mailchimp.com/monkey-rewards/?utm_source=freemium_"
                f"newsletter&utm_medium=email&utm_campaign=monkey_rewards&aid={ctx['u']}&afl=1\n")
    if kind == "substack":
        return (f"You're currently a free subscriber to {ctx['title']}. For the full experience,"
                f" upgrade your subscription.\n\nUpgrade to paid\n{_track(rng, ctx, 'https://' + ctx['slug'] + '.substack.com/subscribe')}\n\n"
                f"Like\nComment\nRestack\n\n© 2025 {ctx['writer'].name}\n548 Market Street PMB "
                f"72296, San Francisco, CA 94104\nUnsubscribe https://substack.com/redirect/2/"
                f"{_token(rng, 80)}\n\nGet the app\nStart writing\n")
    return (f"You received this email because you signed up for {ctx['title']} at "
            f"{ctx['domain']}.\n{b} · {rng_address(ctx)}\nManage preferences: "
            f"https://{ctx['domain']}/email-preferences?e={_token(rng, 24)} · Unsubscribe: "
            f"https://{ctx['domain']}/unsubscribe?u={_token(rng, 32)}\n© 2025 {b}. All rights "
            f"reserved. Privacy Policy | Terms of Service\n")


def _news_html(ctx: dict, d: dict, rng: random.Random, plain_blocks: list[str],
               footer: str, masthead: str) -> str:
    rows = [f"<tr><td style=\"padding:8px 24px;font:12px Helvetica;color:#999\" align=\"center\">"
            f"<a href=\"{_track(rng, ctx, 'https://' + ctx['domain'] + '/newsletter/' + str(d['issue']))}\">"
            f"View this email in your browser</a></td></tr>",
            f"<tr><td style=\"background:{ctx['color']};padding:28px 24px\"><img src=\"https://"
            f"mcusercontent.com/{ctx['u']}/images/{rm._hex(random.Random(ctx['u']), 32)}.png\" "
            f"width=\"200\" alt=\"{rm.html_escape(ctx['brand'])}\"><h1 style=\"font:bold 28px "
            f"Georgia,serif;color:#fff;margin:12px 0 0\">{rm.html_escape(masthead)}</h1></td></tr>"]
    for block in plain_blocks:
        if block.startswith("## "):
            rows.append(f"<tr><td style=\"padding:24px 24px 0\"><h2 style=\"font:bold 20px "
                        f"Georgia,serif;margin:0\">{rm.html_escape(block[3:])}</h2></td></tr>")
        else:
            rows.append(f"<tr><td style=\"padding:12px 24px 0;font:16px/26px Georgia,serif;color:"
                        f"#333\">{rm.html_escape(block).replace(chr(10), '<br>')}</td></tr>")
    rows.append(f"<tr><td style=\"padding:24px\" align=\"center\"><a href=\"{_track(rng, ctx, 'https://twitter.com/' + ctx['slug'])}\">"
                f"<img src=\"https://cdn-images.mailchimp.com/icons/social-block-v2/color-twitter"
                f"-48.png\" width=\"24\" alt=\"Twitter\"></a> <a href=\"{_track(rng, ctx, 'https://www.linkedin.com/company/' + ctx['slug'])}\">"
                f"<img src=\"https://cdn-images.mailchimp.com/icons/social-block-v2/color-linkedin"
                f"-48.png\" width=\"24\" alt=\"LinkedIn\"></a></td></tr>")
    rows.append(f"<tr><td style=\"padding:24px;font:12px/18px Helvetica;color:#666;background:"
                f"#fafafa\">{rm.html_escape(footer).replace(chr(10), '<br>')}</td></tr>")
    return ("<!doctype html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" xmlns:v=\"urn:schemas-"
            "microsoft-com:vml\" xmlns:o=\"urn:schemas-microsoft-com:office:office\">\n<head>\n"
            "<meta charset=\"UTF-8\"><meta http-equiv=\"X-UA-Compatible\" content=\"IE=edge\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>"
            f"{rm.html_escape(masthead)}</title>\n<style type=\"text/css\">p{{margin:10px 0;padding"
            ":0;}}table{border-collapse:collapse;}h1,h2,h3,h4,h5,h6{display:block;margin:0;"
            "padding:0;}img,a img{border:0;height:auto;outline:none;text-decoration:none;}body,"
            "#bodyTable,#bodyCell{height:100%;margin:0;padding:0;width:100%;}#outlook a{padding:0"
            ";}.ReadMsgBody{width:100%;}.ExternalClass{width:100%;}</style>\n</head>\n<body>\n"
            "<center><table align=\"center\" border=\"0\" cellpadding=\"0\" cellspacing=\"0\" "
            "width=\"100%\" id=\"bodyTable\"><tr><td align=\"center\" valign=\"top\" id=\"bodyCell\""
            "><table border=\"0\" cellpadding=\"0\" cellspacing=\"0\" width=\"600\" class=\""
            "templateContainer\">\n" + "\n".join(rows) + "\n</table></td></tr></table></center>"
            f"{_pixel(rng, ctx)}</body>\n</html>\n")


def _newsletter(ctx: dict, d: dict, rng: random.Random, kind: str) -> Rendered:
    masthead = f"{ctx['title']} — Issue #{d['issue']}"
    greet = f"Hi {ctx['me'].first}," if kind != "substack" else ""
    blocks = []
    if greet:
        blocks.append(greet)
    blocks.append(ctx["about"])
    for headline, paragraphs in d["articles"]:
        blocks.append(f"## {headline}")
        blocks.extend(paragraphs)
        blocks.append(f"Read more: {_track(rng, ctx, 'https://' + ctx['domain'] + '/blog/' + rm.ascii_fold(headline).lower()[:40])}")
    if kind == "hubspot":
        blocks.append("## Upcoming events")
        blocks.append(f"Join our team for a live webinar on {(d['at'] + dt.timedelta(days=9)).strftime('%B')} "
                      f"{(d['at'] + dt.timedelta(days=9)).day}. Register now to save your seat.")
    footer = _news_footer_plain(ctx, rng, kind)
    plain_blocks = [b_.replace("## ", "") for b_ in blocks]
    if kind == "mailchimp":
        plain = (f"** {masthead}\n------------------------------------------------------------\n"
                 f"View this email in your browser ({_track(rng, ctx, 'https://' + ctx['domain'] + '/newsletter/' + str(d['issue']))})\n\n"
                 + "\n\n".join(plain_blocks) + "\n\n" + footer)
    elif kind == "substack":
        plain = (f"View this post on the web at https://{ctx['slug']}.substack.com/p/"
                 f"{rm.ascii_fold(d['articles'][0][0]).lower()[:30]}\n\n" + "\n\n".join(plain_blocks)
                 + "\n\n" + footer)
    else:
        plain = f"{masthead}\n\n" + "\n\n".join(plain_blocks) + "\n\n" + footer
    html = _news_html(ctx, d, rng, blocks, footer, masthead)
    subject = d["articles"][0][0] if kind == "substack" else (
        f"{ctx['title']} #{d['issue']}: {d['articles'][0][0]}", f"{masthead}",
        f"{d['articles'][0][0]} | {ctx['title']}")[ctx["subject_style"]]
    headers = [("List-Unsubscribe", f"<https://{ctx['slug']}.us{ctx['dc']}.list-manage.com/"
                f"unsubscribe?u={ctx['u']}&id={ctx['list_id']}&e={rm._hex(rng, 10)}>, "
                f"<mailto:unsubscribe-{rm._hex(rng, 20)}@mailchimpapp.net>"),
               ("List-Unsubscribe-Post", "List-Unsubscribe=One-Click"),
               ("Precedence", "bulk"), ("X-Campaign", f"mailchimp{ctx['u']}.{rm._hex(rng, 10)}"),
               ("List-Id", f"{ctx['u']}mc list <{ctx['u']}.{rng.randint(10**5, 10**6)}.list-id."
                           f"mcsv.net>")]
    sender = rm.Person(ctx["title"] if kind != "substack" else ctx["writer"].name,
                       f"newsletter@{ctx['domain']}" if kind != "substack" else
                       f"{ctx['slug']}@substack.com")
    return Rendered(sender, subject, plain, html, headers, "mailchimp",
                    f"bounce-mc.us{ctx['dc']}_{rng.randint(10**7, 10**8)}.{rng.randint(10**5, 10**6)}"
                    f"-{ctx['me'].addr.replace('@', '=')}@mail{rng.randint(10, 250)}.mcsv.net",
                    d["at"])


def _mailman_digest(ctx: dict, d: dict, rng: random.Random) -> Rendered:
    lst = ctx["list"]
    host = f"lists.{ctx['domain']}"
    topics = "\n".join(f"   {i}. {h} ({rm.make_name(random.Random(h))})"
                       for i, (h, _) in enumerate(d["articles"], 1))
    messages = "\n\n".join(
        f"Message: {i}\nDate: {rm.rfc_date(d['at'] - dt.timedelta(hours=i * 3))}\nFrom: "
        f"{rm.make_name(random.Random(h))} <{rm.ascii_fold(rm.make_name(random.Random(h))).lower()}"
        f"@example.net>\nTo: {lst}@{host}\nSubject: Re: [{lst}] {h}\nMessage-ID: "
        f"<{rm._hex(random.Random(h + str(i)), 16)}@example.net>\nContent-Type: text/plain; "
        f"charset=\"us-ascii\"\n\n" + rm.wrap(p, 72) + "\n\n\n" + "-" * 70
        for i, (h, p) in enumerate(d["articles"], 1))
    plain = (f"Send {lst} mailing list submissions to\n\t{lst}@{host}\n\nTo subscribe or "
             f"unsubscribe via the World Wide Web, visit\n\thttps://{host}/mailman/listinfo/"
             f"{lst}\nor, via email, send a message with subject or body 'help' to\n\t"
             f"{lst}-request@{host}\n\nYou can reach the person managing the list at\n\t"
             f"{lst}-owner@{host}\n\nWhen replying, please edit your Subject line so it is more "
             f"specific\nthan \"Re: Contents of {lst} digest...\"\n\n\nToday's Topics:\n\n"
             f"{topics}\n\n\n{'-' * 70}\n\n{messages}\n\n_______________________________________"
             f"________\n{lst} mailing list\n{lst}@{host}\nhttps://{host}/mailman/listinfo/{lst}"
             f"\n\n\nEnd of {lst} Digest, Vol {d['issue'] // 12}, Issue {d['issue']}\n"
             f"{'*' * (30 + len(lst))}\n")
    return Rendered(rm.Person("", f"{lst}-request@{host}"),
                    f"{lst} Digest, Vol {d['issue'] // 12}, Issue {d['issue']}", plain, None,
                    [("List-Id", f"{lst}.{host}"), ("Precedence", "list"),
                     ("List-Unsubscribe", f"<https://{host}/mailman/options/{lst}>, <mailto:"
                      f"{lst}-request@{host}?subject=unsubscribe>"),
                     ("Errors-To", f"{lst}-bounces@{host}")], "postfix",
                    f"{lst}-bounces+{ctx['me'].addr.replace('@', '=')}@{host}", d["at"])


def _promo(ctx: dict, d: dict, rng: random.Random) -> Rendered:
    b = ctx["brand"]
    products = "\n\n".join(f"{n}\nNow {_money(p * (100 - d['offer']) / 100)} (was {_money(p)})\n"
                           f"Shop now: {_track(rng, ctx, 'https://' + ctx['domain'] + '/p/' + rm.ascii_fold(n).lower()[:20])}"
                           for n, p in d["products"])
    headline = d["articles"][0][0]
    story = "\n\n".join(d["articles"][0][1])
    footer = (f"FREE SHIPPING on orders over $50 | Easy 30-day returns | Help Center\n\n*Offer "
              f"valid online only through 11:59 p.m. PT on the date shown. Discount applies to "
              f"full-price items only; excludes gift cards, sale items and select brands. Cannot "
              f"be combined with other offers. Prices and availability subject to change.\n\n"
              f"You are receiving this email because you subscribed to {b} emails at "
              f"{ctx['domain']}. Unsubscribe: {_track(rng, ctx, 'https://' + ctx['domain'] + '/unsubscribe?e=' + _token(rng, 30))}"
              f"\n{b}, {rng_address(ctx)}\n© 2025 {b}. All rights reserved.\n")
    plain = (f"{b.upper()}\nNew Arrivals | Women | Men | Home | Sale\n\n{d['offer']}% OFF "
             f"EVERYTHING*\nUse code {d['code']} at checkout\n\n{headline}\n\n{story}\n\n"
             f"{products}\n\n{footer}")
    blocks = [f"{d['offer']}% OFF EVERYTHING*", f"Use code {d['code']} at checkout",
              f"## {headline}", *d["articles"][0][1],
              *[f"{n} — now {_money(p * (100 - d['offer']) / 100)}" for n, p in d["products"]]]
    html = _news_html(ctx, d, rng, blocks, footer, f"{b}")
    return Rendered(rm.Person(b, f"news@e.{ctx['domain']}"),
                    f"{d['offer']}% off: {headline[:50]}", plain, html,
                    [("List-Unsubscribe", f"<https://{ctx['domain']}/u/{_token(rng, 30)}>"),
                     ("Precedence", "bulk")], "sendgrid", f"bounces+{rng.randint(10**6, 10**7)}@"
                    f"em.{ctx['domain']}", d["at"])


NEWSLETTERS = (
    Template("mailchimp", "newsletter", _news_setup, _news_data,
             lambda c, d, r: _newsletter(c, d, r, "mailchimp")),
    Template("substack", "newsletter", _news_setup, _news_data,
             lambda c, d, r: _newsletter(c, d, r, "substack")),
    Template("hubspot", "newsletter", _news_setup, _news_data,
             lambda c, d, r: _newsletter(c, d, r, "hubspot")),
    Template("mailman_digest", "newsletter", _news_setup, _news_data, _mailman_digest),
    Template("retail_promo", "newsletter", _news_setup, _news_data, _promo),
)
