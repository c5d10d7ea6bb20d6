"""What every layer reads the same way: header fields, subjects, Message-IDs, addresses, links.

One definition of each, for the parser (mailfilter/message.py), the features
(mailfilter/features.py) and the identifiers (mailfilter/identifiers.py):

* header fields: a header block read into (lower-case name, unfolded value) pairs;
* subject prefixes: the reply and forward prefixes of the languages the reply layouts
  know (mailfilter/quotes.py), list tags, and the words a sender puts before a message
  sent again or corrected;
* Message-IDs: the ids a field names, and one id as it is compared (brackets and the case
  of its domain do not count);
* addresses: the first address of a From value, its display name, an address as
  recipients are compared;
* links: a link counts by the site it leads to (its registrable domain).

Patterns are compiled on first use.  Pure functions, no I/O.
"""

from __future__ import annotations

import re
from itertools import islice
from urllib.parse import unquote

from mailfilter.text import NOT_SPACE, Pattern, Prepared, register

# -- header fields ----------------------------------------------------------------------

HEADERS_MAX = 1000            # fields read of one header block
HEADER_FIELD_MAX = 8192       # characters kept of one field's value
_UNFOLD = Pattern(r"\n[ \t]+")
_HEADER_FIELD = Pattern(r"^([!-9;-~]+)[ \t]*:[ \t]*(.*)$", re.MULTILINE)
# A header line's start as bytes: whether a block without an empty line is all header.
HEADER_LINE = Pattern(rb"^([!-9;-~]+)[ \t]*:[ \t]*(.*)$", re.MULTILINE)


def read_headers(head: bytes) -> list[tuple[str, str]]:
    """Header fields as (lowercased name, unfolded value), at most 1,000, values capped.

    A hand-rolled reader: no header objects are built, so a pathological 14 KB header
    costs microseconds.
    """
    text = _UNFOLD.get().sub(" ", head.decode("latin-1"))
    pattern = _HEADER_FIELD.get()
    # (A long header is read a field at a time up to the cap: one findall made a tuple of
    # each of its fields first, 140 MB for 4 MiB of short ones.)
    found = pattern.findall(text) if len(text) <= _FINDALL_CHARS else \
        [field.groups() for field in islice(pattern.finditer(text), HEADERS_MAX)]
    return [(name.lower(), value[:HEADER_FIELD_MAX].strip())
            for name, value in found[:HEADERS_MAX]]


_FINDALL_CHARS = 256 * 1024


def first_values(fields: list[tuple[str, str]]) -> dict[str, str]:
    """Each field name's first value."""
    first: dict[str, str] = {}
    for name, value in fields:
        first.setdefault(name, value)
    return first


# -- subjects ---------------------------------------------------------------------------

# Reply and forward prefixes, by language: English, German, Dutch, the Scandinavian
# languages, Finnish, Italian, French, Spanish, Portuguese and Polish clients write these.
REPLY_PREFIXES = ("re", "aw", "antw", "sv", "vs", "rif", "r", "odp", "res")
FORWARD_PREFIXES = ("fwd", "fw", "wg", "tr", "doorst", "vb", "rv", "enc", "pd")
# Words a sender puts before a message sent again or corrected.
RESEND_PREFIXES = ("resend", "resent", "resending", "re-send", "re-sending", "reminder",
                   "updated", "update", "correction",
                   "corrected", "korrektur", "berichtigung", "rectificatif", "corrección",
                   "fyi")
RESEND_MARKS = ("corrected", "correction", "updated", "update", "resend", "resent",
                "reminder", "korrektur", "rectificatif")


def _words(words: tuple[str, ...]) -> str:
    return "|".join(sorted(words, key=lambda word: (-len(word), word)))


# "Re:", "AW[2]:", after an optional list tag ("[list] Re: …").
_REPLY = Pattern(rf"\s*(?:\[[^\]]*\]\s*)?(?:{_words(REPLY_PREFIXES)})\s*(?:\[\d+\]\s*)?:",
                 re.IGNORECASE)
_FORWARD = Pattern(rf"\s*(?:\[[^\]]*\]\s*)?(?:{_words(FORWARD_PREFIXES)})\s*(?:\[\d+\]\s*)?:",
                   re.IGNORECASE)
# Every leading prefix and list tag (a tag with a number — "[Ticket #27271]" — names the
# thread and stays).
_ALL_PREFIXES = _words(REPLY_PREFIXES + FORWARD_PREFIXES + RESEND_PREFIXES)
_LEADING = Pattern(rf"^(?:\s*(?:\[[^\]\d]{{0,60}}\]|(?:{_ALL_PREFIXES})\s*(?:\[\d+\]\s*)?:))+",
                   re.IGNORECASE)
_MARKS = Pattern(rf"\s*[(\[](?:{_words(RESEND_MARKS)})[)\]]\s*", re.IGNORECASE)
# Anywhere in a subject: list tags (also with the list's post number, "[Python-list 1234]",
# Mailman's %d: one post cross-posted to two such lists has two numbers, and is still one
# post) and reply and forward prefixes.
_TAGS = Pattern(rf"\[[^\]\d]{{0,40}}\]|\[[\w.-]{{1,40}} \d{{1,7}}\]"
                rf"|\b(?:{_words(REPLY_PREFIXES + FORWARD_PREFIXES)})\s*(?:\[\d+\]\s*)?:",
                re.IGNORECASE)


def is_reply_subject(subject: str) -> bool:
    """The subject says it answers a message (Re:, AW:, SV:, …)."""
    return bool(_REPLY.get().match(subject))


def is_forward_subject(subject: str) -> bool:
    """The subject says it forwards a message (Fwd:, WG:, TR:, …)."""
    return bool(_FORWARD.get().match(subject))


def normal_subject(subject: str) -> str:
    """The subject without Re:/Fwd:/list tags and resend or correction marks, spaces
    folded, lower case."""
    subject = _LEADING.get().sub("", subject)
    if "(" in subject or "[" in subject:        # every mark is in brackets
        subject = _MARKS.get().sub(" ", subject)
    return " ".join(subject.split()).lower()


def subject_without_tags(subject: str) -> str:
    """The subject with its list tags and reply and forward prefixes blanked out."""
    return _TAGS.get().sub(" ", subject)


# -- Message-IDs ------------------------------------------------------------------------

_MESSAGE_IDS = Pattern(r"<[^<>\s]{1,250}>")
THREAD_IDS_MAX = 6


def message_ids(value: str) -> list[str]:
    """The ``<…>`` ids a field (References, In-Reply-To) names, in order."""
    return _MESSAGE_IDS.get().findall(value) if "<" in value else []


def thread_ids(references: str, in_reply_to: str) -> tuple[str, ...]:
    """Ids of the messages one answers: the thread's root (first of References), then the
    closest ones (In-Reply-To and the end of References), at most six, each once."""
    ids = message_ids(references) + message_ids(in_reply_to)
    if len(ids) > THREAD_IDS_MAX:
        ids = ids[:1] + ids[1 - THREAD_IDS_MAX:]
    return tuple(dict.fromkeys(ids))


def bare_message_id(message_id: str) -> str:
    """A Message-ID as ids are compared: no brackets or spaces, its domain lower case."""
    value = message_id.strip().strip("<>").strip()
    local, at, domain = value.rpartition("@")
    return f"{local}@{domain.lower()}" if at else value


# -- addresses --------------------------------------------------------------------------

# (A bare address is tried only where a run of address characters starts: tried inside
# one, each place took the run to its end again and backtracked over it — 27 s for a
# forwarded "From: @aaa…" line of 127 KB.  Where a place inside a run has a match, so has
# the run's start, ending at the same "@": the same first match.)
_ADDRESS = Pattern(r"<([^<>\s]+@[^<>\s]+)>"
                   r"|(?<![^\s<>\"(),;:])([^\s<>\"(),;:]+@[^\s<>\"(),;:]+)")


def address_of(value: str) -> str | None:
    """The first mail address of a From value, lower case, without brackets."""
    found = _ADDRESS.get().search(value) if "@" in value else None
    if found is None:
        return value.strip().lower() or None
    return (found.group(1) or found.group(2)).lower()


def display_name(value: str) -> str:
    """The display name of a From value ("Ann Lee" of "Ann Lee <ann@x>"), or ""."""
    name = value.split("<", 1)[0] if "<" in value else ""
    if not name and "(" in value:       # old style: ann@x (Ann Lee)
        name = value[value.find("(") + 1:value.rfind(")")]
    return name.strip().strip('"').strip()


def bare_address(address: str) -> str:
    """An address as recipients are compared: no brackets or spaces, lower case."""
    return address.strip().strip("<>").strip().lower()


# -- links ------------------------------------------------------------------------------

LINK = Pattern(r"\b(?:[a-z][a-z0-9+.-]{1,15}://|www\.)([^\s/?#<>\"')\]]*)"
               r"[^\s<>\"')\]]*", re.IGNORECASE)
# Second-level labels under which registries sell names (example.co.uk, example.com.au).
_SECOND_LEVEL = frozenset(("co", "com", "org", "net", "ac", "gov", "edu", "ne", "or", "go"))


def site_of(host: str) -> str:
    """The domain an organisation registered (``mail.example.co.uk`` → ``example.co.uk``),
    without a list of public suffixes: the last two labels, or three under a common
    second-level label of a country code."""
    labels = host.strip(".").split(".")
    if len(labels) >= 3 and len(labels[-1]) == 2 and labels[-2] in _SECOND_LEVEL:
        return ".".join(labels[-3:])
    return ".".join(labels[-2:])


# Security gateways that rewrite every link of a message they pass (Microsoft Defender
# Safe Links, Proofpoint URL Defense, Mimecast, Barracuda, Cisco, Sophos, Google's redirect):
# the site of the wrapper's host, and where the wrapped link or its domain is.
_WRAPPER_SITES = frozenset((
    "outlook.com", "proofpoint.com", "urldefense.com", "mimecast.com", "cudasvc.com",
    "cisco.com", "sophos.com", "google.com"))
_WRAPPED_QUERY = Pattern(r"[?&](?:url|u|a|q|d|domain)=([^&\s]+)", re.IGNORECASE)
_URLDEFENSE_V3 = Pattern(r"/v3/__(.+?)__", re.IGNORECASE)
_CISCO_PATH = Pattern(r"secure-web\.cisco\.com/[^/]+/(.+)", re.IGNORECASE)


def host_of(link: str) -> str:
    """The host of ``link`` (with or without a scheme): no user, port, path, query or
    fragment."""
    rest = link.partition("://")[2] if "://" in link else link
    for end in "/?#":
        rest = rest.partition(end)[0]
    return rest.rpartition("@")[2].partition(":")[0]


def wrapped_link(link: str) -> str | None:
    """The link a gateway's rewritten link stands for (``https://nam12.safelinks.protection
    .outlook.com/?url=https%3A%2F%2Fexample.com%2Fa&data=…`` → ``https://example.com/a``),
    or None when ``link`` is no known wrapper: one copy of a message that passed a gateway
    and one that did not are the same message."""
    lowered = link.lower()
    host = host_of(lowered)
    if site_of(host) not in _WRAPPER_SITES:
        return None
    if "urldefense" in host:
        v3 = _URLDEFENSE_V3.get().search(link)
        if v3:
            return v3.group(1)
        found = _WRAPPED_QUERY.get().search(link)
        if found:   # v2 writes "%" as "-" and "/" as "_"; v1 percent-encodes
            value = found.group(1)
            if "/v2/" in lowered:
                value = value.replace("-", "%").replace("_", "/")
            return unquote(value)
        return None
    if "cisco.com" in host:
        path = _CISCO_PATH.get().search(link)
        return unquote(path.group(1)) if path else None
    if host.endswith(("safelinks.protection.outlook.com", "cudasvc.com", "mimecast.com",
                      "sophos.com")) or (host.endswith("google.com")
                                         and lowered.partition(host)[2].startswith("/url")):
        found = _WRAPPED_QUERY.get().search(link)
        if found:
            value = unquote(found.group(1))
            return value if "://" in value or "." in value else None
    return None


# Where a gateway's link ends: Safe Links closes with ``reserved=0``, URL Defense v3 with
# ``$``, v2 with ``&e=``; Mimecast's ``domain=`` holds a host name.
_HOST_TAIL = Pattern(r"[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,}[.,;:]?", re.IGNORECASE)


def _gateway_of(lowered: str) -> str:
    """Which gateway wrote the lower-case link ``lowered``: '' for none."""
    if "safelinks.protection.outlook.com" in lowered:
        return "safelinks"
    if "urldefense" in lowered:
        return "v3" if "/v3/__" in lowered else "v2" if "/v2/" in lowered else "v1"
    return "mimecast" if "mimecast.com/s/" in lowered else ""


def gateway_link_is_whole(link: str, next_word: str) -> bool:
    """A link that ends a line is whole, not a gateway's link cut short by a client that
    wrapped the line inside it (``next_word`` is what opens the next line): what ends each
    wrapper is known, so that no other link is ever joined to the word under it.  A link
    that becomes a gateway's only with ``next_word`` (the wrapper's name was cut) is not."""
    lowered = link.lower()
    gateway = _gateway_of(lowered)
    if gateway != _gateway_of(lowered + next_word.lower()):
        return False        # cut in the wrapper's name or before its version
    if gateway == "safelinks":
        return "reserved=0" in lowered
    if gateway == "v3":
        return lowered.endswith("$")
    if gateway == "v2":
        return "&e=" in lowered
    if gateway == "mimecast":
        domain = lowered.rpartition("domain=")[2] if "domain=" in lowered else ""
        if not domain or "." not in domain or domain.endswith((".", "-")):
            return False
        return not _HOST_TAIL.get().fullmatch(next_word) or "." in domain.rpartition(".")[0]
    return True


def link_site(match: re.Match[str]) -> str:
    """The site a :data:`LINK` match leads to: its registered domain, lower case (no user,
    port, path or query, no tracking subdomain like ``u9414681.ct.sendgrid.net``); through
    a gateway's rewritten link, the site of the link it wraps."""
    site = site_of(match.group(1).rpartition("@")[2].partition(":")[0].lower())
    if site in _WRAPPER_SITES:
        inner = wrapped_link(match.group(0))
        inner_host = host_of(inner.lower()) if inner is not None else ""
        if "." in inner_host:
            return site_of(inner_host)
    return site


# What a writer puts above their own message when they send it again (read in lower case:
# IGNORECASE made the search three times slower).
RESEND_NOTE_WORDS = 40
_RESEND_NOTE = Pattern(
    r"\b(?:re-?send(?:ing)?|re-?sent|sending (?:this |it )?again|send(?:ing)? (?:this |it )?"
    r"once more|bounce[ds]?(?: back)?|(?:did not|didn't|does not|doesn't) (?:seem to )?(?:go "
    r"through|arrive|reach you)|in case you (?:missed|didn't get|did not get|never got)|"
    r"(?:get|got|receive) (?:it|this) twice|bump(?:ing)? (?:this|it)|(?:did not|didn't|"
    r"never) hear(?:d)? back|(?:did|have) you "
    r"(?:see|get|receive) my (?:message|e-?mail|note)|erneut gesendet|noch ?mal gesendet"
    r"|renvoi|here it is again|correct(?:ed|ion)[^.\n]{0,40}\b(?:below|again)"
    # the same in English words more, and in German, French, Spanish, Dutch and Italian:
    r"|came back(?: to me)? undelivered|undeliver(?:able|ed)|(?:apologies|sorry) for the "
    r"duplicate|(?:arrives?|get|receive) (?:it |this )?(?:twice|two times)"
    r"|(?:apologies|sorry) if [^.\n]{0,30}\b(?:duplicate|twice)|trying (?:this |it )?again"
    r"|erneut (?:ge)?(?:sendet|schickt|verschickt)|(?:noch ?(?:ein)?mal|nochmals|erneut) "
    r"(?:ge)?(?:sendet|schickt|senden|schicken|verschickt)|schicke [^.\n]{0,30}noch ?(?:ein)?"
    r"mal|(?:sende|schicke)[^.\n]{0,30}(?:noch ?(?:ein)?mal|erneut)|unzustellbar"
    r"|zurückgekommen|nicht zugestellt|doppelt (?:erhalten|bekommen|ankommt|ankommen)"
    r"|je (?:vous |te )?renvoie|renvoy(?:er|é|ée)|nouvel envoi|m'est revenu"
    r"|n'a pas été (?:distribué|remis)|non distribué"
    r"|(?:recevez|reçois|receviez|recevrez) [^.\n]{0,20}(?:en double|deux fois)|le doublon"
    r"|reenv[ií](?:o|ando|ar|ado)|vuelvo a (?:enviar|mandar)|rebot(?:ó|o|ado)|fue devuelto"
    r"|no se entregó|no llegó"
    r"|(?:llega|recibes|recibe|reciba[s]?) (?:dos veces|duplicado)"
    r"|opnieuw (?:verzonden|verstuurd|gestuurd)|nogmaals (?:verzonden|verstuurd|gestuurd)"
    r"|stuur[^.\n]{0,30}(?:nogmaals|opnieuw)|onbestelbaar|teruggekomen|kwam terug"
    r"|niet (?:afgeleverd|bezorgd)"
    r"|(?:dubbel|twee keer) (?:krijgt|ontvangt)"
    r"|reinvi(?:o|ata|ato|are)|(?:ti|vi|le|gli) rimando|invi(?:o|ata|ato) di nuovo"
    r"|tornat[ao] indietro|non è stat[ao] (?:recapitat|consegnat)[ao]|respint[ao]"
    r"|rimbalzat[ao]"
    r"|(?:ricevi|riceve|arriva) due volte|doppione)\b")
# Words one of which every match of _RESEND_NOTE holds (tests/test_quotes.py derives it
# from the pattern): found by the one keyword scan (mailfilter/text.py), so that the
# pattern, slow to try at every word, is searched only in the few texts that hold one.
RESEND_CUES = register((
    "send", "sent", "bounce", "through", "arrive", "reach you", "in case you", "twice",
    "two times", "bump", "hear", "you see my", "you get my", "you receive my", "erneut",
    "envoi", "again", "correct", "undeliver", "duplica", "schick", "unzustellbar",
    "zurückgekommen", "zugestellt", "doppel", "renvoy", "revenu", "pas été", "distribu",
    "double", "deux fois", "doublon", "reenv", "vuelvo", "rebot", "devuelto", "entreg",
    "lleg", "veces", "opnieuw", "nogmaals", "stuur", "onbestelbaar", "teruggekomen",
    "kwam terug", "niet", "krijgt", "ontvangt", "reinvi", "rimando", "di nuovo", "indietro",
    "non è", "respint", "rimbalzat", "due volte", "doppione"))
# A follow-up over one's own earlier message ("Any update?", "Quick nudge", "In case this
# got lost – see below"): weaker words than a resend's, so every sentence of the note must
# say it (a reply that adds anything else is a reply).
FOLLOW_UP_WORDS = 30
_FOLLOW_UP = Pattern(
    r"\b(?:in case (?:this|it|my (?:e-?mail|message|note|mail))[^.\n]{0,20}\b(?:lost|buried|"
    r"missed|slipped)|any (?:update|news|thoughts|word|feedback)|(?:quick|gentle|friendly|"
    r"small|little) (?:nudge|reminder|ping|bump|follow-?up)|nudg(?:e|ing)|follow(?:ing)?[ -]up"
    r"|checking in|bump(?:ing)?|slipped through|(?:had|have|get|got) a chance to (?:look|"
    r"review|read|check)|let me know (?:what you think|if you need)|(?:my|the) (?:e-?mail|"
    r"message|note|mail) below|see below|ping(?:ing)?|circl(?:e|ing) back|chas(?:e|ing)"
    r"|top of your inbox|make sure you (?:saw|got|received|see)|reminder"
    r"|untergegangen|neuigkeiten|erinnerung|nachhak\w*|nachfrag\w*|gelegenheit|zeit gehabt"
    r"|etwas neues|siehe unten|meine (?:mail|e-mail|nachricht) unten"
    r"|au cas où|se serait perdu|du nouveau|des nouvelles|relance|relancer|rappel|ci-dessous"
    r"|reviens vers (?:vous|toi)"
    r"|eu le temps|jeter un (?:œil|oeil|coup d'(?:œil|oeil))"
    r"|por si se (?:ha )?perdido|novedad(?:es)?|recordatorio|seguimiento|has podido|pudiste"
    r"|(?:ver|mira) abajo|de abajo"
    r"|ondergesneeuwd|nieuws over|nog nieuws|herinnering|navragen|hoe het (?:hier)?mee staat"
    r"|hieronder|kunnen kijken|tijd gehad"
    r"|andat[ao] pers[ao]|novità|promemoria|ti ricordo|sollecit(?:o|are|arti)|vedi sotto"
    r"|qui sotto"
    r"|avuto modo)\b")
_SENTENCES = Pattern(r"[^.!?;:\n¿¡]+")


def is_resend_note(text: str) -> bool:
    """``text`` (a message's own text, quotes set aside) is a short note that it sends its
    writer's earlier message again, and nothing more."""
    # (Split at most that many times: a long text is not split whole to be counted.)
    if len(text.split(None, RESEND_NOTE_WORDS)) > RESEND_NOTE_WORDS:
        return False
    lowered = text.lower()                          # the patterns are lower case
    # (The keyword scan of these few words first: it costs a fifth of the pattern's
    # search, and most short texts hold none of RESEND_CUES.)
    return Prepared(text, _lowered=lowered).any(RESEND_CUES) \
        and _RESEND_NOTE.get().search(lowered) is not None \
        and _ADDITION.get().search(lowered) is None


# A note that adds something to the message it sends again ("Bumping this. I forgot to
# mention one thing: …", "PS: …") is a new message, in the six languages of the notes.
_ADDITION = Pattern(
    r"(?:\b(?:forgot to (?:mention|add|say|tell)|one (?:more|other) thing|additionally|in "
    r"addition|p\.?s\.?(?=\W)|also,|one correction|vergessen|noch etwas|außerdem|ausserdem"
    r"|oubli[ée]|de plus|par ailleurs|olvid[eéó]|además|vergat|vergeten|bovendien"
    r"|dimentica|inoltre))")


# What a follow-up says besides ("Happy to jump on a call", "I have copied the original
# below", "Could you let me know by Friday", "We need an answer before the end of the
# month"): offers, thanks and asks for an answer, which carry no news of their own.
_COURTESY = Pattern(
    r"\b(?:happy to (?:jump|hop|get|have) on|happy to (?:discuss|chat|talk|help|answer)"
    r"|(?:could|can|would|will) you (?:please )?let me know|let me know (?:if|whether|what|"
    r"when|how|your)|(?:i have|i've|i) (?:copied|pasted|included|added|put) (?:the|my) "
    r"(?:original|e-?mail|message|note|mail)|for (?:your )?convenience|(?:we|i) (?:need|"
    r"would need|'d need) (?:an? |your )?(?:answer|reply|response|decision|input|feedback|"
    r"confirmation)|thanks? (?:you )?(?:in advance|again|so much)|thank you|no rush|no "
    r"worries|hope (?:you are|you're|all is|this finds you) (?:well|good|doing well)|if "
    r"(?:anything|something) is (?:unclear|missing)|if you (?:need|have|want) (?:more|any|"
    r"further)|(?:a|one) (?:quick )?(?:yes|no|yes or no) is (?:enough|fine)"
    r"|ich freue mich auf (?:ihre|deine) (?:antwort|rückmeldung)|danke im voraus"
    r"|merci d'avance|gracias de antemano|alvast bedankt|grazie in anticipo)\b")


_WRAPPED = Pattern(r"\n(?=[a-zß-ÿ])")


def is_follow_up_note(text: str) -> bool:
    """``text`` is a short follow-up and nothing more: at most ``FOLLOW_UP_WORDS`` words,
    every sentence of four words or more (a greeting, "Thanks!", a name are shorter) says
    it follows up, or, once one has, offers, thanks or asks for an answer in words
    without a figure ("Happy to jump on a call if easier"); one at least follows up."""
    if len(text.split(None, FOLLOW_UP_WORDS)) > FOLLOW_UP_WORDS:
        return False
    # A line break before a lower-case letter is a client's hard wrap inside a sentence
    # ("Could you let me know by Friday\nwhether this works"), not its end.
    lowered = _WRAPPED.get().sub(" ", text).lower()
    follow_up, courtesy = _FOLLOW_UP.get(), _COURTESY.get()
    # (A sentence that follows up is one in the whole text too: its edges are delimiters,
    # no word characters.  Most texts hold none: one search, not one a sentence.)
    if follow_up.search(lowered) is None or _ADDITION.get().search(lowered):
        return False
    said = False
    for sentence in _SENTENCES.get().findall(lowered):
        if follow_up.search(sentence):
            said = True
        elif len(sentence.split()) >= 4 and not (
                said and courtesy.search(sentence) and not any(map(str.isdigit, sentence))):
            return False
    return said


def opens_with_resend_note(text: str, follow_up: bool = False, cue: bool = True) -> bool:
    """``text`` opens with a short paragraph saying it sends something again ("We are
    re-sending this issue because …", "Bumping this to the top of your inbox") above more
    text: the message it re-sends, pasted under the note.  ``follow_up``: a follow-up
    ("In case this got lost – see below") counts too (over a forwarded message: what
    is pasted under a follow-up may be anything).  ``cue``: False when the text holds
    none of :data:`RESEND_CUES` (then no resend note)."""
    if not cue and not follow_up:
        return False
    first = NOT_SPACE.get().search(text)
    if first is None:
        return False
    start = first.start()
    end = text.find("\n\n", start)
    if end >= 0 and _is_greeting(text[start:end]):     # "Hi Søren," above the note
        after = NOT_SPACE.get().search(text, end)
        start = after.start() if after is not None else len(text)
        end = text.find("\n\n", start)
    if end < 0 or NOT_SPACE.get().search(text, end) is None:
        return False
    lead = text[start:end]
    return (cue and is_resend_note(lead)) or (follow_up and is_follow_up_note(lead))


def _is_greeting(paragraph: str) -> bool:
    """A salutation alone on its lines ("Hi Søren,", "Dear all,")."""
    return len(paragraph.split(None, 4)) <= 4 and paragraph.rstrip().endswith((",", "!"))
