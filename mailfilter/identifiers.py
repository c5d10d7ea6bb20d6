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
from collections.abc import Iterable

import xxhash

# Set aside before words are read: words that are URLs (with or without a scheme) or mail
# addresses, and the bracketed list tags and reply prefixes of a subject.
_SUBJECT_TAGS = re.compile(r"\[[^\]]{0,40}\]|\b(?:re|fwd?|aw|wg|sv|tr|vs)\s*(?:\[\d+\])?\s*:",
                           re.IGNORECASE)
# Host names: labels ending in a top-level domain that networks really use (a dotted pair
# of words in running text — "end.Start", "file.tcl" — is a typo, not a host).  Searched
# for only where such an ending occurs (a literal scan).
_TLDS = ("com|org|net|edu|gov|mil|int|io|co|uk|de|fr|nl|be|ch|at|it|es|se|no|dk|fi|ie|pl|cz"
         "|eu|us|ca|au|nz|jp|cn|in|br|ru|info|biz|dev|app|cloud|local|lan|internal|intra|corp"
         "|home|example|test|localdomain")
_TLD_END = r"(?![\w-]|\.[\w-])"    # the name ends there (no further label)
_TLD_HINT = re.compile(rf"\.(?:{_TLDS}){_TLD_END}", re.IGNORECASE)
_HOST = re.compile(rf"[a-z0-9][a-z0-9-]*(?:\.[a-z0-9-]+)*\.(?:{_TLDS}){_TLD_END}",
                   re.IGNORECASE)
# Words are read as the shingles read them (runs of letters and digits).  A word of digits
# is a number; a hexadecimal word of 7+ characters with a digit and a letter is a commit
# id or a hash; any other word counts by its digit runs only ("web03" is 03, "INV-0042" is
# 0042, "24want" is 24), so that an edit that drops a space makes no new data.
_WORDS = re.compile(r"[^\W_]+")
_DIGITS = re.compile(r"\d+")
_HEX = frozenset("0123456789abcdef")
_DIGIT = re.compile(r"\d")
# ASCII letters map to lower case, digits to themselves, everything else to a space.
_ASCII_WORDS = bytes(
    (byte | 0x20) if chr(byte).isascii() and chr(byte).isalpha() else
    byte if chr(byte).isdigit() and byte < 128 else 0x20 for byte in range(256))
# Identifiers kept per message (the smallest hashes: a bottom-k sample of longer lists).
MAX_IDENTIFIERS = 48


def _take_hosts(source: str, found: dict[str, None]) -> str:
    """Add the host names of ``source`` to ``found``; ``source`` without them.  Each place
    where a top-level domain ends a word is looked at, not every position of the text."""
    spans = []
    for hint in _TLD_HINT.finditer(source):
        start = max(source.rfind(" ", 0, hint.start()), source.rfind("\n", 0, hint.start()),
                    source.rfind("\t", 0, hint.start())) + 1
        host = _HOST.search(source, start, hint.end())
        if host is not None and host.end() == hint.end():
            found.setdefault(host.group(0).lower(), None)
            spans.append((host.start(), host.end()))
    if not spans:
        return source
    pieces, last = [], 0
    for start, end in spans:
        pieces.append(source[last:start])
        last = end
    pieces.append(source[last:])
    return " ".join(pieces)


def _words_with_digits(text: str) -> list[str]:
    """The words of ``text`` that hold a digit, lower case, in order."""
    if text.isascii():
        return [word.decode("ascii") for word in
                text.encode("ascii").translate(_ASCII_WORDS).split() if not word.isalpha()]
    return [word.lower() for word in _WORDS.findall(text) if not word.isalpha()]


def identifiers(text: str, subject: str = "") -> list[str]:
    """The identifiers of ``text`` and of the subject (tags and Re:/Fwd: removed), lower
    case, in order of appearance, each once."""
    found: dict[str, None] = {}
    for source in (_SUBJECT_TAGS.sub(" ", subject) if subject else "", text):
        if not source:
            continue
        if "@" in source or "://" in source or "www." in source or "WWW." in source:
            source = " ".join(word for word in source.split() if "@" not in word
                              and "://" not in word and "www." not in word.lower())
        if "." in source:
            source = _take_hosts(source, found)
        for word in _words_with_digits(source):
            if word.isdigit() or (len(word) >= 7 and _HEX.issuperset(word)
                                  and not word.isdigit()):
                found.setdefault(word, None)
            else:
                for digits in _DIGITS.findall(word):
                    found.setdefault(digits, None)
    return list(found)


def identifier_hash(token: str) -> int:
    """32-bit hash of one identifier (stable across processes and machines)."""
    return xxhash.xxh3_64_intdigest(token.encode("utf-8", "surrogatepass")) & 0xFFFFFFFF


def identifier_sample(tokens: Iterable[str], limit: int = MAX_IDENTIFIERS
                      ) -> tuple[tuple[int, ...], bool]:
    """(the ``limit`` smallest distinct hashes, sorted; whether any were left out)."""
    hashes = sorted({identifier_hash(token) for token in tokens})
    return tuple(hashes[:limit]), len(hashes) > limit


def identifier_difference(ours: tuple[int, ...], ours_truncated: bool,
                          theirs: tuple[int, ...], theirs_truncated: bool
                          ) -> tuple[set[int], set[int]]:
    """(hashes only in ours, hashes only in theirs), as far as both samples can tell.

    Both samples are bottom-k: below the smaller of their largest kept hashes (when one is
    truncated), membership is exact on both sides, so the difference is exact there.
    """
    limit = None
    if ours_truncated and ours:
        limit = ours[-1]
    if theirs_truncated and theirs:
        limit = theirs[-1] if limit is None else min(limit, theirs[-1])
    mine, other = set(ours), set(theirs)
    if limit is not None:
        mine = {value for value in mine if value <= limit}
        other = {value for value in other if value <= limit}
    return mine - other, other - mine
