"""Bulk mail and the per-copy tokens a campaign writes into each copy's text.

A bulk sender (an ESP newsletter, a promotion, spam) makes every copy of one campaign
different on purpose: a reference code ("Ref: 8XK2-99QZ"), a tracking id ("ID: a81f…",
"Tracking #…"), a message id in the footer.  No reader takes them for the message's data,
and read as data they made two copies of one campaign "two messages" (identifiers differ).
In bulk mail such tokens are written as one placeholder before the text is measured, so
that the copies are one text; numbers, amounts, dates, host names and commit-length hex
stay, and so does a random-looking token that a label names as data ("Order: W7K2PQ9X",
"Booking reference: X7K2PQ"): two order confirmations stay two notices.  Mail from trackers
and other programs (GitHub, Jira, Bugzilla, Auto-Submitted, List-Id) is never bulk here:
their commit ids and run ids are news.  Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from mailfilter.normalise import first_values
from mailfilter.text import Pattern, Prepared, register

if TYPE_CHECKING:
    from mailfilter.message import Message

# What a token becomes: one word, so that the copies' texts align word for word.
PLACEHOLDER = "token"
# Header fields that say a message was sent in bulk: ESPs' own fields, by prefix.
_ESP_PREFIXES = ("x-mailgun-", "x-sg-", "x-mc-", "x-mailchimp", "x-campaign", "x-sfmc",
                 "x-marketo", "x-ems", "x-mailjet", "x-sendinblue", "x-mailer-recptid",
                 "x-listmember", "x-rpcampaign", "x-csa-complaints", "x-job")
# ... and those of trackers and programs, whose ids are data.
_NOTIFIER_PREFIXES = ("x-github-", "x-gitlab-", "x-bugzilla-", "x-jira-", "x-redmine-",
                      "x-gerrit-", "x-phabricator-", "x-launchpad-", "x-cron-env")
# A random-looking token: letters and digits, maybe in groups joined by - or _, with a
# digit and a letter (found by lookaheads; the possessive run reads each token once).
_TOKEN = Pattern(r"(?<![\w.@/-])(?=[\w-]*\d)(?=[\w-]*[a-z])[a-z0-9]++(?:[-_][a-z0-9]++)*+"
                 r"(?![\w@/]|\.\w)", re.IGNORECASE)
# Label words that name a token as the message's data (several languages).
_LABELS = (r"order|booking|reservation|confirmation|invoice|ticket|case|account|policy|claim|"
           r"pnr|serial|licen[cs]e|verification|pin|password|passcode|otp|bestell\w*|"
           r"buchung\w*|rechnung\w*|commande|r[ée]servation|facture|pedido|reserva|factura|"
           r"ordine|prenotazione|fattura|boeking|bestelling|factuur")
_DATA_LABEL = Pattern(rf"\b(?:{_LABELS})\b", re.IGNORECASE)
# In mail not sent in bulk, more: codes, keys, vouchers, a carrier's tracking number
# (a campaign without bulk headers labels its tokens "Ref:", "ID:", "Tracking #").
_OWN_DATA_LABEL = Pattern(
    rf"\b(?:{_LABELS}|code|c[oó]digo|codice|key|schlüssel|clé|activation|aktivierung\w*"
    r"|voucher|gutschein|gift|coupon|member|mitglied\w*|customer|kunde\w*|client|cliente"
    r"|tracking (?:number|no)|sendungsnummer|suivi|seguimiento)\b", re.IGNORECASE)
# Where a label may be: the keyword scan's words (each label's first letters).
_LABEL_STEMS = register((
    "order", "booking", "reservation", "confirmation", "invoice", "ticket", "case", "account",
    "policy", "claim", "pnr", "serial", "licen", "verification", "pin", "password", "passcode",
    "otp", "bestell", "buchung", "rechnung", "commande", "réservation", "facture", "pedido",
    "reserva", "factura", "ordine", "prenotazione", "fattura", "boeking", "bestelling",
    "factuur", "code", "código", "codice", "key", "schlüssel", "clé", "activation",
    "aktivierung", "voucher", "gutschein", "gift", "coupon", "member", "mitglied", "customer",
    "kunde", "client", "cliente", "tracking", "sendungsnummer", "suivi", "seguimiento"))
_LABEL_REACH = 40       # characters before a token on its line where a label names it
_HEX = frozenset("0123456789abcdef")
# A labelled code of at least this many characters counts whole ("G28YEAUU" as such).
_CODE_MIN = 5


def is_notifier(headers: Mapping[str, str]) -> bool:
    """Sent by a tracker, a code host, cron or another program that says so in its
    header (X-GitHub-*, X-Bugzilla-*, X-JIRA-*, Auto-Submitted …)."""
    submitted = headers.get("auto-submitted", "").strip().lower()
    return (bool(submitted) and submitted != "no") \
        or any(name.startswith(_NOTIFIER_PREFIXES) for name in headers)


def is_bulk(headers: Mapping[str, str]) -> bool:
    """Sent in bulk (List-Unsubscribe, Precedence: bulk or junk, an ESP's header fields,
    a spam filter's yes) and not by a tracker or another program (their ids are data), nor
    through a discussion list (List-Post: people write there; a newsletter's List-Id
    alone is no such list)."""
    if headers.get("list-post", "no").strip().lower() != "no" or is_notifier(headers):
        return False
    if "list-unsubscribe" in headers:
        return True
    if headers.get("precedence", "").strip().lower() in ("bulk", "junk"):
        return True
    if headers.get("x-spam-flag", "").strip().lower() == "yes" \
            or headers.get("x-spam-status", "").lstrip().lower().startswith("yes"):
        return True
    return any(name.startswith(_ESP_PREFIXES) for name in headers)


def random_looking(token: str) -> bool:
    """A campaign's token, not data: of 6 or more letters and digits (separators left
    out), at least 2 of each, and either hexadecimal of 16+ (not a 40-digit commit id) or
    switching between letters and digits 3 times or more ("8XK2-99QZ", "a81f3c9e");
    "web03", "x86_64", "SHA256", "covid19" are not."""
    bare = token.replace("-", "").replace("_", "").lower()
    if len(bare) < 6:
        return False
    digits = sum(c.isdigit() for c in bare)
    if digits < 2 or len(bare) - digits < 2:
        return False
    if set(bare) <= _HEX and len(bare) >= 16:
        return len(bare) != 40
    switches = sum(a.isdigit() != b.isdigit() for a, b in zip(bare, bare[1:], strict=False))
    return switches >= 3


def codes_of(message: Message) -> list[str]:
    """:func:`labelled_codes` of a parsed message (none for a tracker's or a program's:
    their tokens were left as they are)."""
    headers = first_values(message.headers)
    if message.automated or is_notifier(headers):
        return []
    return labelled_codes(message.prepared, is_bulk(headers))


def labelled_codes(prepared: Prepared, bulk: bool) -> list[str]:
    """The codes of letters and digits a label names as data ("Order: G28YEAUU"), whole
    and lower case, in mail whose tokens :func:`without_campaign_tokens` read: the
    identifiers count a mixed word by its digits alone, and two order codes' digits alike
    ("G28YEAUU", "A2UEQVE8": 28) made two orders one once nothing else told them apart.
    Only where a label word occurs (the prepared text's keyword scan says where)."""
    text = prepared.text
    label = (_DATA_LABEL if bulk else _OWN_DATA_LABEL).get()
    found = []
    token = _TOKEN.get()
    for at in prepared.starts(_LABEL_STEMS):
        hit = label.match(text, at) if prepared.aligned else None
        if hit is None:
            continue
        end = min(len(text), hit.end() + _LABEL_REACH)
        newline = text.find("\n", hit.end(), end)
        if newline == hit.end() or text[hit.end():newline].strip(" \t:#.-") == "":
            newline = text.find("\n", newline + 1, newline + 1 + _LABEL_REACH) \
                if newline >= 0 else -1     # the code alone on the next line
            end = min(len(text), hit.end() + 2 * _LABEL_REACH)
        for match in token.finditer(text, hit.end(), end if newline < 0 else newline):
            if len(match.group(0)) >= _CODE_MIN:    # (the pattern: a letter and a digit)
                found.append(match.group(0).lower())
    return found


def _labelled(text: str, start: int, label: re.Pattern[str]) -> bool:
    """A label stands before the token at ``start`` on its line, or on the line above
    when the token stands alone ("Your verification code:\n\n    X7K2PQ")."""
    line = text.rfind("\n", 0, start) + 1
    if label.search(text, max(line, start - _LABEL_REACH), start):
        return True
    if text[line:start].strip():
        return False
    above = text[max(0, line - 2 * _LABEL_REACH):line].rstrip()
    return bool(above) and label.search(above.rpartition("\n")[2]) is not None


def without_campaign_tokens(prepared: Prepared, bulk: bool) -> Prepared:
    """``prepared`` with its random-looking tokens written as :data:`PLACEHOLDER`, unless
    a label names them as data (one pattern over the text; ``prepared`` itself when
    nothing changes).  ``bulk``: sent in bulk (:func:`is_bulk`); other mail keeps more
    labelled tokens (codes, keys, vouchers, tracking numbers)."""
    text = prepared.text
    label = (_DATA_LABEL if bulk else _OWN_DATA_LABEL).get()
    pieces: list[str] = []
    last = 0
    for match in _TOKEN.get().finditer(text):
        token = match.group(0)
        if not random_looking(token):
            continue
        start = match.start()
        if _labelled(text, start, label):
            continue
        pieces.append(text[last:start])
        pieces.append(PLACEHOLDER)
        last = match.end()
    if not pieces:
        return prepared
    pieces.append(text[last:])
    return Prepared("".join(pieces))
