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
from collections.abc import Iterator, Mapping
from itertools import islice

from mailfilter.text import LineCursor, Pattern, Prepared, register
from mailfilter.values import Value, fill

# What a token becomes: one word, so that the copies' texts align word for word.
PLACEHOLDER = "token"
# Header fields that say a message was sent in bulk: ESPs' own fields, by prefix.
_ESP_PREFIXES = ("x-mailgun-", "x-sg-", "x-mc-", "x-mailchimp", "x-campaign", "x-sfmc",
                 "x-marketo", "x-ems", "x-mailjet", "x-sendinblue", "x-mailer-recptid",
                 "x-listmember", "x-rpcampaign", "x-csa-complaints", "x-job")
# ... and those of trackers, whose ids are data (cron's X-Cron-Env: _KIND_OF_NAME).
_TRACKER_PREFIXES = ("x-github-", "x-gitlab-", "x-bugzilla-", "x-jira-", "x-redmine-",
                     "x-gerrit-", "x-phabricator-", "x-launchpad-")
# A field name (after a line break, in the names joined by line breaks) of a tracker (1),
# cron (2) or an ESP (3): "\nx-" first, a literal the regex engine skips to.
_KIND_OF_NAME = Pattern("\nx-(?:({})|(cron-env)|({}))".format(
    *("|".join(re.escape(prefix.removeprefix("x-")) for prefix in prefixes)
      for prefixes in (_TRACKER_PREFIXES, _ESP_PREFIXES))))
# Each byte's class in the one translation of a text that both searches read: "A" a
# capital ASCII letter, "a" another ASCII letter, "0" an ASCII digit, "-" a - or _ (what
# joins a token's groups), " " a blank (space, tab), "N" a line break, "P" what may stand
# before a code of capitals (":" and "#"), "." what may follow one (".,;)"), "x" all else
# (a character beyond ASCII too: the text is encoded with "?" for each, so that offsets
# stay those of the text).
def _class(byte: int) -> str:
    """The class of one byte in :data:`_CLASSES`."""
    char = chr(byte)
    if 65 <= byte <= 90:
        return "A"
    if char.isascii() and (char.isalpha() or char.isdigit()):
        return "a" if char.isalpha() else "0"
    return ("-" if char in "-_" else "N" if char == "\n" else "P" if char in ":#"
            else "." if char in ".,;)" else " " if char in " \t" else "x")


_CLASSES = bytes(ord(_class(byte)) for byte in range(256))
_TOKEN_CHARS = b"-Aa0"      # the classes a token is made of
# A token of letters and digits, maybe in groups joined by - or _, is found where a digit
# meets a letter, by a pattern that starts with the digit: the regex engine skips to each
# "0" at memchr speed (bytes.find for "a0" and "0a" stepped over every letter: 3 µs a
# message; a pattern tried at every character cost 7-38 ns a character); and only in a
# run of five characters or more: a shorter token is none of these, and URL-escaped text
# ("%AC%EC%F7…") holds thousands.
_SWITCH = Pattern(rb"0(?:(?=[Aa])|(?<=[Aa]0))(?:(?<=[-Aa0]{5})|(?<=[-Aa0]{4})(?=[-Aa0])"
                  rb"|(?<=[-Aa0]{3})(?=[-Aa0]{2})|(?<=[-Aa0]{2})(?=[-Aa0]{3})"
                  rb"|(?=[-Aa0]{4}))")
_TOKEN_RUN = Pattern(rb"[-Aa0]*")
# Letters "a", digits "0" (a token's shape, counted in C), all else a space.
_SHAPES = bytes(ord("a") if chr(byte).isascii() and chr(byte).isalpha()
                else ord("0") if chr(byte).isdigit() and byte < 128 else ord(" ")
                for byte in range(256))


def _tokens_with_switches(classes: bytes, found: re.Match[bytes] | None
                          ) -> Iterator[tuple[int, int]]:
    """(start, end) of each token of ``classes`` (a text translated by ``_CLASSES``) of
    ``_CODE_MIN`` to ``_TOKEN_MAX`` characters in which a letter meets a digit, in order,
    from the one of ``found`` (``_SWITCH``'s first match) on.  A token's edges are
    stripped in C from a window around its switch; a longer run is read whole once."""
    search = _SWITCH.get().search
    size = len(classes)
    while found is not None:        # (each token read once, from its first switch on)
        at = found.start()
        width = _TOKEN_MAX + 1
        while True:             # (a longer run: twice as far back, linear all the same)
            low = max(0, at - width)
            head = classes[low:at].rstrip(_TOKEN_CHARS)
            if head or not low:
                start = low + len(head)
                break
            width *= 2
        high = at + _TOKEN_MAX + 2
        ahead = classes[at:high]
        tail = ahead.lstrip(_TOKEN_CHARS)
        end = after = at + len(ahead) - len(tail) if tail or high >= size \
            else _TOKEN_RUN.get().match(classes, at).end()
        while classes[start] == 45:             # "-"
            start += 1
        while classes[end - 1] == 45:
            end -= 1
        if _CODE_MIN <= end - start <= _TOKEN_MAX:
            yield start, end
        found = search(classes, after)


# Label words that name a token as the message's data (several languages): each a
# pattern that starts with a letter.
_LABELS = (
    "order", "booking", "reservation", "confirmation", "invoice", "ticket", "case",
    "account", "policy", "claim", "pnr", "serial", "licen[cs]e", "verification", "pin",
    "password", "passcode", "otp", r"bestell\w*", r"buchung\w*", r"rechnung\w*",
    "commande", "r[ée]servation", "facture", "pedido", "reserva", "factura", "ordine",
    "prenotazione", "fattura", "boeking", "bestelling", "factuur",
    # a carrier's number: two parcels of one order are two notices
    "tracking (?:number|no)", "sendungsnummer", "num[ée]ro de suivi",
    "n[uú]mero de seguimiento", "track ?(?:&|and) ?trace", "trackingnummer", "shipment")
# In mail not sent in bulk, more: codes, keys, vouchers, a carrier's tracking number
# (a campaign without bulk headers labels its tokens "Ref:", "ID:", "Tracking #").
_OWN_LABELS = (
    *_LABELS, "code", "c[oó]digo", "codice", "key", "schlüssel", "clé", "activation",
    r"aktivierung\w*", "voucher", "gutschein", "gift", "coupon", "member", r"mitglied\w*",
    "customer", r"kunde\w*", "client", "cliente", "suivi", "seguimiento")


class _Label:
    """Label words (lower-case patterns), searched in a window of a text: case-blind, but
    in an ASCII window over its lower-case copy (the regex engine with IGNORECASE took 6
    µs for 40 characters without a label, three times as long); the words grouped by
    their first letter, so that at each character one branch a letter is tried, not
    every word (2.2 µs → 0.9 µs for 40 characters)."""

    __slots__ = ("_lower", "_any_case")

    def __init__(self, words: tuple[str, ...]) -> None:
        by_letter: dict[str, list[str]] = {}
        for word in words:
            by_letter.setdefault(word[0], []).append(word[1:])
        source = r"\b(?:{})\b".format("|".join(
            f"{letter}(?:{'|'.join(rests)})" for letter, rests in by_letter.items()))
        self._lower = Pattern(source)
        self._any_case = Pattern(source, re.IGNORECASE)

    def names(self, text: str, start: int = 0, end: int | None = None) -> bool:
        """A label word occurs in ``text[start:end]`` (its word boundaries read as in the
        whole text: the character before ``start`` counts)."""
        end = len(text) if end is None else end
        begin = max(0, start - 1)
        window = text[begin:end]
        if window.isascii():
            return self._lower.get().search(window.lower(), start - begin) is not None
        return self._any_case.get().search(text, start, end) is not None


_DATA_LABEL = _Label(_LABELS)
_OWN_DATA_LABEL = _Label(_OWN_LABELS)
_LABEL_REACH = 40       # characters before a token on its line where a label names it
_HEX = frozenset("0123456789abcdef")
_HEX_OR_SEPARATOR = _HEX | frozenset("-_")
# A labelled code of at least this many characters counts whole ("G28YEAUU" as such).
_CODE_MIN = 5
# Longer runs are no campaign's id (a UUID has 36 characters): base64, PGP armour.
_TOKEN_MAX = 48
# Tokens (and runs of capitals) of one text weighed at most: each costs a few µs of
# Python, and a crafted 4 MiB of them took 2 s (the corpus's most: 2,775, in a spam of
# 106 KB of text; a campaign's copy holds a handful).  Those beyond stay as they are.
TOKENS_MAX = 10_000


class Sending(Value):
    """How a message was sent, by its header fields, read in one pass.

    tracker: by an issue tracker or code host that says so (X-GitHub-*, X-JIRA-*,
    X-Bugzilla-* …): it sends each event once, so its mail with other words is the next
    event.  notifier: by a tracker, cron or another program that says so (those, or
    Auto-Submitted other than "no"): its ids are data.  discussion: through a discussion
    list (List-Post: people write there; a newsletter's List-Id alone is no such list).
    bulk: in bulk (List-Unsubscribe, Precedence: bulk or junk, an ESP's header fields, a
    spam filter's yes), and neither by a program nor through a discussion list."""

    __slots__ = ("tracker", "notifier", "discussion", "bulk")

    def __init__(self, tracker: bool, notifier: bool, discussion: bool, bulk: bool) -> None:
        fill(self, tracker, notifier, discussion, bulk)


def sending(headers: Mapping[str, str]) -> Sending:
    """How the message with these header fields (lower-case names) was sent."""
    tracker = cron = esp = False
    names = "\n" + "\n".join(headers)
    if "\nx-" in names:         # (one pattern over the names, not three tests a field)
        for kind in _KIND_OF_NAME.get().finditer(names):
            if kind.lastindex == 1:
                tracker = True
            elif kind.lastindex == 2:
                cron = True
            else:
                esp = True
    submitted = headers.get("auto-submitted", "").strip().lower()
    notifier = tracker or cron or (bool(submitted) and submitted != "no")
    discussion = headers.get("list-post", "no").strip().lower() != "no"
    bulk = not notifier and not discussion and (
        esp or "list-unsubscribe" in headers
        or headers.get("precedence", "").strip().lower() in ("bulk", "junk")
        or headers.get("x-spam-flag", "").strip().lower() == "yes"
        or headers.get("x-spam-status", "").lstrip().lower().startswith("yes"))
    return Sending(tracker, notifier, discussion, bulk)


def is_bulk(headers: Mapping[str, str]) -> bool:
    """Sent in bulk, not by a program nor through a discussion list (:class:`Sending`)."""
    return sending(headers).bulk


def _wrapped(phrases: tuple[str, ...]) -> tuple[str, ...]:
    """``phrases`` as written, and each wrapped once at one of its spaces (a line break,
    or a space and a line break as format=flowed leaves it): a removal line is often the
    last line of a wrapped paragraph ("If you want to get removed / from our list")."""
    variants = list(phrases)
    for phrase in phrases:
        for at, char in enumerate(phrase):
            if char == " ":
                variants += (phrase[:at] + "\n" + phrase[at + 1:],
                             phrase[:at] + " \n" + phrase[at + 1:])
    return tuple(variants)


# Words of a list-removal line, in the languages of the reply layouts: a message that
# carries one was sent to a list of addresses (a promotion, spam, a newsletter), whatever
# its header fields say (spam campaigns send none of them).  Not "you are receiving this
# because": notifications say that too, and their data may live in the subject alone; nor
# "be removed" or "mailing list" alone, which any mail about a server or a list may say.
REMOVAL_WORDS = register(_wrapped((
    "unsubscribe", "to be removed", "removed from", "remove you from", "remove me from",
    "remove yourself", "get removed", "removal instructions", "remove instructions",
    '"remove"', "subject=remove", "reply with remove", "opt out", "opt-out",
    "wish to receive", "want to receive", "stop receiving", "no longer receive",
    "delete your address", "future mailings", "future marketing", "future promotions",
    "future offers", "further e-mail", "further email", "further mailings",
    "leave this list", "leave our list", "off our list", "off this list",
    "get out of this list", "from our mailing list", "abbestellen",
    "abmelden", "désinscri", "désabonne", "darse de baja", "darte de baja",
    "cancelar suscripción", "cancelar la suscripción", "afmelden", "uitschrijven",
    "disiscriv", "cancella l'iscrizione")))


# Local parts of a sender's promotions desk: what it sends goes to a list of addresses.
# Not "news" or "sales" (a news service's figures and a sales desk's quote numbers are
# data), nor the notices' no-reply, orders, billing, alerts.
_PROMOTION_DESKS = frozenset(("offer", "offers", "promo", "promos", "promotion", "promotions",
                              "deals", "specials", "marketing"))


def is_mass_mail(sent: Sending, text: Prepared, sender: str | None) -> bool:
    """Sent to a list of addresses, by what one copy shows alone: bulk header fields
    (``sent.bulk``), a list-removal line in its ``text`` (the whole
    decoded text, before cleaning sets footers aside), a sender local part a machine
    drew for this copy ("khqou1tzg6@…", see :func:`random_looking`) or a promotions
    desk's ("offers@…").  Never mail through a discussion list or from a tracker or
    program.  A campaign writes a per-copy token into such mail's subject (identifiers.py
    reads it so)."""
    if sent.notifier or sent.discussion:
        return False
    if sent.bulk or text.any(REMOVAL_WORDS):
        return True
    local = (sender or "").partition("@")[0]
    return local.partition("+")[0].lower() in _PROMOTION_DESKS or (
        len(local) <= _TOKEN_MAX and random_looking(local, bulk=False))


_RANDOM, _CODE = "random", "code"


def _shape(token: str, bulk: bool = True, coded: bytes | None = None) -> str:
    """:data:`_RANDOM` for a campaign's token (see :func:`random_looking`), :data:`_CODE`
    for one that is a code only when a label names it (letters and digits switching
    twice or more: "G28YEAUU"), "" for neither.  A hexadecimal run under 16 is a commit
    id ("3f9a2c1e7b") outside bulk mail.  ``coded``: a text's token as ``_CLASSES``
    translated it, when the caller has it."""
    if coded is None:
        bare = token.replace("-", "").replace("_", "")
        if bare.isascii() and bare.isalnum():
            coded = bare.encode("ascii")
    if coded is not None:                   # a text's token: counted in C
        coded = coded.translate(_SHAPES, b"-_")     # letters "a", digits "0"
        size, digits = len(coded), coded.count(b"0")
        switches = coded.count(b"a0") + coded.count(b"0a")  # neither overlaps itself
    else:                                   # an address's local part ("ann.lee+x")
        bare = bare.lower()
        size, digits, switches = len(bare), sum(c.isdigit() for c in bare), _switches(bare)
    if size < 6 or digits < 2 or size - digits < 2:
        if digits == 1 and size >= 8 and token.isupper():
            return _RANDOM      # upper case with one digit: "EK9TWFTWYR", "4TCLWCPDAM"
        return _CODE if size >= _CODE_MIN and switches >= 2 else ""
    if (size >= 16 or not bulk) and set(token.lower()) <= _HEX_OR_SEPARATOR:
        return _RANDOM if size >= 16 and size != 40 else ""
    if switches == 2 and size >= 8 and (token.isupper() or size < len(token)):
        return _RANDOM      # a formatted or upper-case code: "5CDF-NMT3", "G28YEAUU"
    return _RANDOM if switches >= 3 else _CODE if switches == 2 else ""


def _switches(bare: str) -> int:
    """Places where a digit and a non-digit meet."""
    return sum(a.isdigit() != b.isdigit() for a, b in zip(bare, bare[1:], strict=False))


def random_looking(token: str, bulk: bool = True) -> bool:
    """A campaign's token, not data: of 6 or more letters and digits (separators left
    out), at least 2 of each, and either hexadecimal of 16+ (not a 40-digit commit id) or
    switching between letters and digits 3 times or more ("8XK2-99QZ", "a81f3c9e" in
    bulk mail: elsewhere a hexadecimal run under 16 is a commit), or twice in 8 or more
    written in groups or upper case ("5CDF-NMT3", "G28YEAUU"), or of 8 or more in upper
    case with one digit ("EK9TWFTWYR"); "web03", "x86_64",
    "SHA256", "covid19", "Win10Pro" are not."""
    return _shape(token, bulk) is _RANDOM


def _labelled(text: str, start: int, label: _Label, lines: LineCursor | None = None
              ) -> bool:
    """A label stands before the token at ``start`` on its line, or on the line above
    when the token stands alone ("Your verification code:\n\n    X7K2PQ").  ``lines``:
    a cursor over ``text`` that the caller asks for its tokens in order."""
    if lines is None:
        lines = LineCursor(text)
    line = lines.line_start(start)
    if label.names(text, max(line, start - _LABEL_REACH), start):
        return True
    if not lines.blank_before(start):
        return False
    above = text[max(0, line - 2 * _LABEL_REACH):line].rstrip()
    return bool(above) and label.names(above.rpartition("\n")[2])


def without_campaign_tokens(prepared: Prepared, bulk: bool
                            ) -> tuple[Prepared, tuple[str, ...]]:
    """``prepared`` with its random-looking tokens written as :data:`PLACEHOLDER`, unless
    a label names them as data; and the codes of letters and digits labels name, whole
    and lower case (the identifiers count a mixed word by its digits alone, and two order
    codes' digits alike, "G28YEAUU" and "A2UEQVE8": 28, made two orders one).  One
    pass over the text; ``prepared`` itself when nothing changes.  ``bulk``: sent in
    bulk (:func:`is_bulk`); other mail keeps more labelled tokens (codes, keys,
    vouchers, tracking numbers)."""
    text, codes = _masked(prepared.text, bulk)
    return (prepared if text is None else Prepared(text)), codes


def subject_without_tokens(subject: str) -> tuple[str, tuple[str, ...]]:
    """A subject with a campaign's random tokens written as :data:`PLACEHOLDER` ("Spring
    sale [8XK2-99QZ]"), for its identifiers; and its labelled codes ("Order G28YEAUU")."""
    masked, codes = _masked(subject, False)
    return masked or subject, codes


def _masked(text: str, bulk: bool) -> tuple[str | None, tuple[str, ...]]:
    """(``text`` with its random-looking tokens replaced, None when there is none; the
    labelled codes)."""
    classes = text.encode("ascii", "replace").translate(_CLASSES)
    switch = _SWITCH.get().search(classes)
    capitals = _CAPITALS_RUN.get().search(classes)
    if switch is None and capitals is None:
        return None, ()                 # (most texts and subjects: two searches in C)
    label = _DATA_LABEL if bulk else _OWN_DATA_LABEL
    pieces: list[str] = []
    codes: list[str] = []
    kept = 0                # the text kept up to there
    lines = LineCursor(text)
    for start, end in islice(_tokens_with_switches(classes, switch), TOKENS_MAX):
        token = text[start:end]
        # Not a part of an address, a path or a host name (nor a blob: _TOKEN_MAX).
        if (start and text[start - 1] in ".@/") or text.startswith(("@", "/"), end) \
                or (text.startswith(".", end) and text[end + 1:end + 2].isalnum()):
            continue
        shape = _shape(token, bulk, classes[start:end])
        if not shape:
            continue
        if _labelled(text, start, label, lines):
            codes.append(token.lower())
            continue
        if shape is _RANDOM:
            pieces.append(text[kept:start])
            pieces.append(PLACEHOLDER)
            kept = end
    if capitals is not None:
        codes.extend(_letter_codes(text, classes, capitals, label))
    if not pieces:
        return None, tuple(codes)
    pieces.append(text[kept:])
    return "".join(pieces), tuple(codes)


# Codes of capitals: a pattern that starts with five capitals finds the runs of 5 to 12
# with what may follow them at memchr speed (one tried at every character cost 14 µs a
# message); what stands before is stepped over in Python for the few it finds.
_CAPITALS_RUN = Pattern(rb"(AAAAA(?<![Aa0]AAAAA)A{0,7}+) *+(?:[.N]|\Z)")


def _letter_codes(text: str, classes: bytes, run: re.Match[bytes] | None,
                  label: _Label) -> list[str]:
    """Codes of 5 to 12 capital letters alone, lower case ("Order: ZFWJJVPB", "Booking
    reference: YNTGSQRV", or alone on the line under such a label): after a colon or #
    or alone on their line, and only when a label names them (no digit, so
    :func:`_tokens_with_switches` does not find them).  ``classes``: ``text`` translated
    by ``_CLASSES``; ``run``: ``_CAPITALS_RUN``'s first match in it."""
    search = _CAPITALS_RUN.get().search
    found: list[str] = []
    lines = LineCursor(text)
    for _ in range(TOKENS_MAX):
        if run is None:
            break
        at, end = run.span(1)
        before = at - 1
        while before >= 0 and classes[before] == 32:       # " "
            before -= 1
        if (before < 0 or classes[before] in b"PN") and _labelled(text, at, label,
                                                                        lines):
            found.append(text[at:end].lower())
        run = search(classes, run.end())
    return found
