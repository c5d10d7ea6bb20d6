"""The data of a message: numbers, codes, amounts, dates and times, host names, commit ids.

Templated mail (password resets, one-time codes, order and shipping notices, CI failures,
monitoring alerts, cron reports, calendar text) repeats its words and changes only its data.
Two such messages resemble each other closely, yet each is new information.  The detector
therefore compares the *identifiers* of a near-duplicate pair: when each side holds one the
other lacks, the data differ and the pair is two messages, not one message twice.

An identifier is a token of the visible text that holds a digit (``48213``, ``10:30``,
``2026-12-01``, ``49.99``, ``web03``, ``a1b2c3d``) or a dotted host name
(``db-primary.example.org``).  URLs and mail addresses are set aside first: that is where
tracking tokens and per-recipient unsubscribe codes live, and they differ between copies of
one newsletter.  Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain, filterfalse, islice

import xxhash

from mailfilter.text import Pattern, encoded, words_of

# Set aside before words are read: words that are URLs (with or without a scheme) or mail
# addresses, and the bracketed list tags and reply prefixes of a subject.
# A list tag may carry the list's post number ("[Python-list 1234]", Mailman's %d): one
# post cross-posted to two such lists has two numbers, and is still one post.
# A token with a digit set off from the rest of a subject by a run of spaces, at its end:
# the counter a campaign appends to each copy ("Be Your Own Boss!!      13986") so that no
# two look alike — not data of the message (a subject's real data is never padded away).
# (Each token is read once: a lookahead finds its digit, a possessive run takes it.)
_PADDED_COUNTER = Pattern(r"[ \t]{3,}(?=[^\s]*\d)[^\s]++[ \t]*$"
                          r"|^[ \t]*+(?=[^\s]*\d)[^\s]++[ \t]{3,}")
# Campaign tokens at a subject's end, no data of the message either: a token with a digit
# after the subject's closing punctuation ("Be Your Own Boss!! 13986"), or a random-looking
# run of letters and digits (alternating more than once, with a letter beyond a-f: "…
# today k83jf02x"; "web03" is a host, a hexadecimal run a commit or hash) — unless a label
# names it (#, "order", "build", a colon …): "Build #1235 failed", "Your code: X7K2PQ".
_CAMPAIGN_TOKEN = Pattern(
    r"(?:(?<=[!?.])[ \t]++(?=[^\s]*\d)[^\s]++"
    r"|(?<=[^\s#:])[ \t]++(?=[a-z0-9]{0,23}[g-z])"
    r"(?=[a-z0-9]{0,21}(?:[a-z]\d{1,22}[a-z]|\d[a-z]{1,22}\d))[a-z0-9]{5,24}+)[ \t]*$",
    re.IGNORECASE)
# In mass mail (campaign.is_mass_mail) a campaign's token may also stand bare after the
# subject's last word ("Exclusive invitation for you 61064", "Shape up for summer now
# [x8armg]"): a number of four digits or more (not a year), or letters and digits of five
# or more (not hexadecimal: a commit id), maybe in brackets — still unless a label names
# it ("Your order 46044").  Outside mass mail such a number is data ("Queue depth 5230").
_BARE_TOKEN = Pattern(
    r"(?<=[^\s#:])[ \t]++([\[(]?)(?=[^\s]*\d)([a-z0-9]{4,24}+)[\])]?[ \t]*$", re.IGNORECASE)
_LABELS = frozenset((
    "no", "nr", "id", "ref", "code", "case", "job", "run", "pin", "order", "build", "issue",
    "ticket", "invoice", "account", "release", "version", "number", "pr", "bug", "tracking",
    "reference", "booking", "confirmation", "shipment", "parcel", "package", "delivery",
    "payment", "receipt", "statement", "transaction", "request", "appointment",
    "reservation", "membership", "member", "customer", "claim", "policy", "report",
    "balance", "is"))
_SUBJECT_TAGS = Pattern(r"\[[^\]\d]{0,40}\]|\[[\w.-]{1,40} \d{1,7}\]"
                        r"|\b(?:re|fwd?|aw|wg|sv|tr|vs)\s*(?:\[\d+\]\s*)?:", re.IGNORECASE)
# Host names: labels ending in a top-level domain that networks really use (every country
# code, the common generic ones, the private ones of internal networks); a dotted pair of
# words in running text ending otherwise — "end.Start", "file.tcl" — is a typo, not a
# host.  Searched for only where such an ending occurs (a literal scan).
_COUNTRY_TLDS = (
    "ac ad ae af ag ai al am ao aq ar as at au aw ax az ba bb bd be bf bg bh bi bj bm bn bo "
    "br bs bt bw by bz ca cc cd cf cg ch ci ck cl cm cn co cr cu cv cw cx cy cz de dj dk dm "
    "do dz ec ee eg er es et eu fi fj fk fm fo fr ga gd ge gf gg gh gi gl gm gn gp gq gr gs "
    "gt gu gw gy hk hm hn hr ht hu id ie il im in iq ir is it je jm jo jp ke kg kh ki km kn "
    "kp kr kw ky kz la lb lc li lk lr ls lt lu lv ly ma mc md me mg mh mk ml mm mn mo mp mq "
    "mr ms mt mu mv mw mx my mz na nc ne nf ng ni nl no np nr nu nz om pa pe pf pg ph pk pl "
    "pm pn pr ps pt pw py qa re ro rs ru rw sa sb sc sd se sg sh si sk sl sm sn so sr ss st "
    "su sv sx sy sz tc td tf tg th tj tk tl tm tn to tr tt tv tw tz ua ug uk us uy uz va vc "
    "ve vg vi vn vu wf ws ye yt za zm zw").split()
_TLDS = "|".join(sorted({
    *_COUNTRY_TLDS, "com", "org", "net", "edu", "gov", "mil", "int", "io", "info", "biz",
    "dev", "app", "cloud", "online", "site", "tech", "shop", "xyz", "email",
    "local", "lan", "internal", "intra", "corp", "home", "example", "test", "localdomain",
}, key=lambda tld: (-len(tld), tld)))
_TLD_END = r"(?![\w-]|\.[\w-])"    # the name ends there (no further label)
_HOST_MAX = 253
_TLD_SET = frozenset(_TLDS.split("|"))
# A dot and a last label; whether the label is a top-level domain is a set lookup (one
# pattern of all 270 names, tried at every dot, cost 30 ms on a 200 KB message).
_TLD_HINT = re.compile(rf"\.([a-z]{{2,11}}){_TLD_END}", re.IGNORECASE)
# The names grouped by first letter ("c(?:om|at|…)"), each group longest first as in
# _TLDS: the same matches (no character matches two first letters, even ignoring case),
# 20 alternatives tried at a dot instead of 270.
_TLD_GROUPS = "|".join(
    f"{letter}(?:{'|'.join(tld[1:] for tld in _TLDS.split('|') if tld[0] == letter)})"
    for letter in sorted({tld[0] for tld in _TLD_SET}))
# (Each label possessive: a label is followed by a dot or by the name's end, and no
# character it could give back is a dot.)
_HOST_NAME = rf"[a-z0-9][a-z0-9-]*+(?:\.[a-z0-9-]++)*\.(?:{_TLD_GROUPS}){_TLD_END}"
_HOST = Pattern(_HOST_NAME, re.IGNORECASE)
# The same, tried only where a label starts (no letter or digit before it): tried inside a
# run of letters and digits, each place took that run again to its end, and backtracked
# over it (a run of 77 capitals before each of 8,700 link sites: 0.8 s a MB).  A match
# never starts inside a run where none starts at the run's first letter or digit (every
# place in it reads the same label to the same end), so the first match is the same
# wherever the letter or digit before the place searched from is also searched.
_HOST_AT_LABEL = Pattern(r"(?<![a-z0-9])" + _HOST_NAME, re.IGNORECASE)
# Words are read as the shingles read them (runs of letters and digits, lower case).  A
# word with a digit counts by its digits alone ("web03" is 03, "INV-0042" is 0042, "24want"
# is 24: an edit that drops a space makes no new data), except a commit id or hash: a
# hexadecimal word of 7+ characters with a digit and a letter counts whole.  Punctuation
# splits numbers (10:30 is 10 and 30), and a value that occurs again counts again.
_LETTERS = bytes(range(ord("a"), ord("z") + 1))
_HEX_LETTERS = b"abcdef"
_NOT_HEX = bytes(set(_LETTERS) - set(_HEX_LETTERS))
# File paths (/var/log/app/app.log): which file a report is about is its data too.
# The slash first (a literal the regex engine finds fast), then the look back at the one
# character before it: a path starts at a slash that follows no word, slash or dot.
# (Possessive: each name is taken whole, nothing kept to backtrack into — the regex engine
# kept memory for every name of a path of a million.)
_PATH = Pattern(r"/(?<![\w/.]/)[\w.@-]++(?:/[\w.@-]++)++")
DIGIT = re.compile(r"\d")      # (features.py asks it too)
_NOT_DIGITS_OR_SPACE = re.compile(r"[^\d ]+")
# A record keeps the hashes of up to this many different identifiers, else a bit map.
EXACT_IDENTIFIERS = 32
IDENTIFIER_BITS = 1024


def _take_hosts(source: str, found: list[str]) -> str:
    """Add the host names of ``source`` to ``found``; ``source`` without them.  Each place
    where a top-level domain ends a word is looked at, not every position of the text."""
    spans = []
    for hint in _TLD_HINT.finditer(source):
        if hint.group(1).lower() not in _TLD_SET:
            continue
        # A host name has at most 253 characters: look no further back for its start
        # (the whole text back, at every hint, was quadratic in a long message).
        window = max(0, hint.start() - _HOST_MAX)
        start = max(window - 1, source.rfind(" ", window, hint.start()),
                    source.rfind("\n", window, hint.start()),
                    source.rfind("\t", window, hint.start())) + 1
        # (A window's edge may cut a run: there the place searched from may start one.)
        host = (_HOST if start == window > 0 else _HOST_AT_LABEL).get().search(
            source, start, hint.end())
        if host is not None and host.end() == hint.end():
            found.append(host.group(0).lower())
            spans.append((host.start(), host.end()))
    if not spans:
        return source
    pieces, last = [], 0
    for start, end in spans:
        pieces.append(source[last:start])
        last = end
    pieces.append(source[last:])
    return " ".join(pieces)


def _without_links(text: str) -> str:
    """``text`` without its words that are URLs or mail addresses (only lines that hold
    one, found by substring searches of its lowered copy, are split into words)."""
    lowered = text.lower()
    if len(lowered) != len(text):           # offsets differ: line by line
        lines = text.split("\n")
        for number, line in enumerate(lines):
            if "@" in line or "://" in line or "www." in line.lower():
                lines[number] = _without_link_words(line)
        return "\n".join(lines)
    marks = []
    for word in ("@", "://", "www."):
        at = lowered.find(word)
        while at >= 0:
            marks.append(at)
            at = lowered.find(word, at + 1)
    pieces = []
    last = line_end = 0
    for at in sorted(marks):
        if at < line_end:
            continue                        # this line was rewritten already
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        line_end = len(text) if end < 0 else end
        pieces.append(text[last:start])
        pieces.append(_without_link_words(text[start:line_end]))
        last = line_end
    pieces.append(text[last:])
    return "".join(pieces)


def _without_link_words(line: str) -> str:
    return " ".join(word for word in line.split() if "@" not in word
                    and "://" not in word and "www." not in word.lower())


def _numbered_words(words: Sequence[str] | Sequence[bytes], found: list[str]) -> None:
    """Append the identifiers among ``words`` (a text's, as the shingles read them) to
    ``found``."""
    if not words:
        return
    if isinstance(words[0], bytes):
        _numbered_bytes(words, found)           # type: ignore[arg-type]
        return
    # Words are runs of letters and digits: those that are not all letters hold a digit.
    numbered = list(filterfalse(str.isalpha, words))        # type: ignore[arg-type]
    if not numbered:
        return
    # Each one's decimal digits, all words in one pass (words hold no space).
    digits = _NOT_DIGITS_OR_SPACE.sub("", " ".join(numbered)).split(" ")
    found.extend(word if word.isdigit() or (len(word) >= 7 and set(word) <= _HEX_CHARS)
                 else kept or word for word, kept in zip(numbered, digits, strict=True))


def _in_rounds(words: Sequence[str] | Sequence[bytes]) -> Callable[[], Iterator[str]]:
    """The identifiers among ``words``, read a round of words at a time (each as
    :func:`_numbered_words` reads them all: each word's value is its own)."""
    def values() -> Iterator[str]:
        for start in range(0, len(words), _ROUND):
            found: list[str] = []
            _numbered_words(words[start:start + _ROUND], found)
            yield from found
    return values


def _numbered_bytes(words: Sequence[bytes], found: list[str]) -> None:
    """:func:`_numbered_words` of ASCII words, each pass one C loop over all of them: the
    words with a digit; each one's digits, or itself when it is hexadecimal (a commit id)
    of 7+ characters."""
    numbered = list(filterfalse(bytes.isalpha, words))
    if not numbered:
        return
    joined = b" ".join(numbered)
    # (A word with a digit keeps it: no word vanishes, the lists stay aligned.)
    digits = joined.translate(None, _LETTERS).split()
    if _LONG_HEX.search(joined) is not None:
        hexes = joined.translate(None, _NOT_HEX).split()
        digits = [word if len(word) >= 7 and hexed == word else kept
                  for word, kept, hexed in zip(numbered, digits, hexes, strict=True)]
    found.extend(b" ".join(digits).decode("ascii").split(" "))


_LONG_HEX = re.compile(rb"(?<![^ ])[0-9a-f]{7,}+(?![^ ])")
_HEX_CHARS = frozenset("0123456789abcdef")


def subject_stem(subject: str) -> str:
    """``subject`` without the numbers and codes a campaign may write at its end, as in
    mass mail (``_BARE_TOKEN``, up to three: "… [qmpyq] 67983"), labelled ones kept: what
    two copies of one campaign share whoever sent them (features.py keys it)."""
    for _ in range(3):
        stem = _without_end_tokens(subject, True).rstrip()
        if stem == subject:
            break
        subject = stem
    return subject


def _without_end_tokens(subject: str, mass_mail: bool = False, lure: bool = False) -> str:
    """``subject`` without a padded counter (``_PADDED_COUNTER``), then without a campaign
    token at its end (see ``_CAMPAIGN_TOKEN``; in mass mail also ``_BARE_TOKEN``), unless a
    label word stands before it (``lure``: a mass mail's reply prefix without a thread,
    where a label names nothing).  Each of these has a digit in the subject's first or
    last word: without one there, the patterns (tried along the whole subject) are not."""
    words = subject.split()
    if not words or (DIGIT.search(words[0]) is None and DIGIT.search(words[-1]) is None):
        return subject
    if "  " in subject or "\t" in subject:       # (a padded counter's three blanks)
        padded = _PADDED_COUNTER.get().sub("", subject)
        if padded != subject:
            subject, words = padded, padded.split()
            if not words:
                return subject
    # A campaign token follows the end of a sentence ("!! 13986"), or is the last word
    # of 5 to 24 letters and digits: without either, its pattern is not tried.
    last = words[-1]
    match = _CAMPAIGN_TOKEN.get().search(subject) \
        if (len(words) > 1 and words[-2][-1] in "!?.") \
        or (5 <= len(last) <= 24 and last.isascii() and last.isalnum()) else None
    if match is None and mass_mail:
        match = _BARE_TOKEN.get().search(subject)
        token = match.group(2) if match else ""
        if match and (token.isdigit() and (len(token) < 4 or (
                len(token) == 4 and token.startswith(("19", "20")))) or (
                not token.isdigit() and (len(token) < 5 or set(token.lower()) <= _HEX_CHARS))):
            match = None        # a year, a commit id, or too short to be drawn at random
    if match is None:
        return subject
    before = subject[:match.start()].rstrip(" \t").rsplit(None, 1)
    if before and before[-1].lower().rstrip(".") in _LABELS and not lure:
        return subject
    return subject[:match.start()]


def identifiers(text: str, subject: str = "",
                words: Sequence[str] | Sequence[bytes] | None = None,
                mass_mail: bool = False, lure: bool = False) -> list[str]:
    """The identifiers of ``text`` and of the subject (tags, Re:/Fwd: and a campaign's
    padded counter or random token removed), lower case, in order of appearance; a value that occurs
    again is listed again with its count (``39``, ``39#2``): a report in which one of two
    equal figures changed differs.

    ``words``: the words of ``text`` as the shingles read them (lower case), to save
    reading them again when the text holds no link, address or host name.  ``mass_mail``:
    sent to a list of addresses (campaign.is_mass_mail), where a bare number or code at
    the subject's end is a campaign's token too; ``lure``: a mass mail's reply prefix
    without a thread ("Re: your order 20018"), where even a labelled one is."""
    found: list[str] = []
    from_subject = 0
    if subject:
        if DIGIT.search(subject):      # a padded counter or campaign token has a digit
            subject = _without_end_tokens(subject, mass_mail, lure)
        if "[" in subject or ":" in subject:        # every tag and prefix has one
            subject = _SUBJECT_TAGS.get().sub(" ", subject)
    for from_text, (source, known) in enumerate(((subject, None), (text, words))):
        if from_text:
            from_subject = len(found)
        if not source:
            continue
        if "@" in source or "://" in source or "www." in source or "WWW." in source:
            source, known = _without_links(source), None
        if "." in source:
            without = _take_hosts(source, found)
            if without is not source:
                source, known = without, None
        if "/" in source and (path := _PATH.get()).search(source):
            found.extend(found_path.lower() for found_path in path.findall(source))
            source, known = path.sub(" ", source), None
        if known is None:
            known = words_of(source)
        if from_text and len(known) > _ROUND:
            return _numbered(found, from_subject, _in_rounds(known))
        _numbered_words(known, found)
    return _numbered(found, from_subject)


def _numbered(found: list[str], from_subject: int,
              more: Callable[[], Iterator[str]] | None = None) -> list[str]:
    """``found`` (the subject's values, then the text's from ``from_subject`` on, then
    ``more()``'s: a long text's, read in rounds), each value listed again with its count;
    a value the subject names counts as often as the subject or the text names it,
    whichever is more, not both added: an issue number in the subject and in the
    masthead is one datum, so that the same text re-sent under another subject ("Last
    chance: …") holds the same data."""
    text = found[from_subject:]
    short = more is None and len(text) <= _ROUND
    if short and len(set(found)) == len(found):
        return found                    # no value occurs again (a set: one C loop)

    def text_values() -> Iterator[str]:
        return iter(text) if more is None else chain(text, more())

    numbered: list[str] = []
    if from_subject:
        subject = found[:from_subject]
        text_counts = Counter(filter(set(subject).__contains__, text_values()))  # (in C)
        counts: dict[str, int] = {}
        for value in subject:
            counts[value] = count = counts.get(value, 0) + 1
            if count > text_counts[value]:
                numbered.append(value if count == 1 else f"{value}#{count}")
    numbered += _counted(text) if short else _until_the_map_is_full(_counted(text_values()))
    return numbered


# A text of more words or values than this is read and numbered a round of them at a
# time, and no further once its values have set every bit of the summary's map: more
# could change no record (identifier_summary), and a crafted report of a million numbers
# would otherwise hold hundreds of MB of strings (and bytes.join an 80-byte view of each
# word at once).  (A round of distinct values fills the map's 1,024 bits.)
_ROUND = 8192


def _counted(values: Iterable[str]) -> Iterator[str]:
    """Each of ``values``, from its second occurrence on with its count (``39#2``)."""
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = count = counts.get(value, 0) + 1
        yield value if count == 1 else f"{value}#{count}"


def _until_the_map_is_full(numbered: Iterator[str]) -> list[str]:
    """The first rounds of ``numbered``, up to the one after which their hashes have set
    every bit of identifier_summary's map."""
    kept: list[str] = []
    positions: set[int] = set()
    while len(positions) < IDENTIFIER_BITS and (values := list(islice(numbered, _ROUND))):
        kept += values
        positions.update(map(IDENTIFIER_BITS.__rmod__, _hashes(values)))
    return kept


def _hashes(tokens: list[str]) -> set[int]:
    """The distinct 32-bit hashes (identifier_hash) of ``tokens``, in one C loop."""
    return set(map(_LOW_32, map(xxhash.xxh3_64_intdigest, encoded(tokens))))


_LOW_32 = (0xFFFFFFFF).__and__          # a hash's low 32 bits (mapped in C)


def identifier_hash(token: str) -> int:
    """32-bit hash of one identifier (stable across processes and machines)."""
    return xxhash.xxh3_64_intdigest(token.encode("utf-8", "surrogatepass")) & 0xFFFFFFFF


def identifier_summary(tokens: Iterable[str]) -> tuple[tuple[int, ...], bytes]:
    """What a record keeps of its identifiers: their hashes, sorted, when there are at most
    ``EXACT_IDENTIFIERS`` different ones; else a 1024-bit map of them (128 bytes).

    A long report (apt logs, df over many file systems) has hundreds; a sample of them
    would miss the few that changed, a bit map does not (a value that changed sets a bit
    the other report lacks, unless another value already set it: about 1 time in 5 at 200
    values, and a changed report changes several).
    """
    hashes = _hashes(tokens if isinstance(tokens, list) else list(tokens))
    if len(hashes) <= EXACT_IDENTIFIERS:
        return tuple(sorted(hashes)), b""
    # (Not sorted: a report of a million numbers is read in linear time; each of the
    # 1,024 bits is set once.)
    bits = 0
    for position in set(map(IDENTIFIER_BITS.__rmod__, hashes)):
        bits |= 1 << position
    return (), bits.to_bytes(IDENTIFIER_BITS // 8, "big")


def _as_bits(hashes: Iterable[int], bits: bytes) -> int:
    if bits:
        return int.from_bytes(bits, "big")
    value = 0
    for one in hashes:
        value |= 1 << (one % IDENTIFIER_BITS)
    return value


def identifier_difference(ours: tuple[int, ...], our_bits: bytes, theirs: tuple[int, ...],
                          their_bits: bytes) -> tuple[Callable[[str], bool], bool, bool]:
    """Compare two summaries: (is this identifier of ours missing from theirs?, whether we
    have one they lack, whether they have one we lack).  Exact when both kept hashes; with
    a bit map on either side, a difference is never invented, only sometimes missed."""
    if not our_bits and not their_bits:
        mine, other = set(ours), set(theirs)
        return ((lambda token: identifier_hash(token) not in other),
                bool(mine - other), bool(other - mine))
    mine_bits, other_bits = _as_bits(ours, our_bits), _as_bits(theirs, their_bits)
    return ((lambda token: not other_bits >> (identifier_hash(token) % IDENTIFIER_BITS) & 1),
            bool(mine_bits & ~other_bits), bool(other_bits & ~mine_bits))
