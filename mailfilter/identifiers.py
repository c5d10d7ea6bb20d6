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

# Set aside before tokens are read: URLs (with or without a scheme), mail addresses, and
# bracketed list tags and reply prefixes of a subject.
_URL = re.compile(r"(?:\b[a-z][a-z0-9+.-]{1,15}://|\bwww\.)[^\s<>\"')\]]*", re.IGNORECASE)
_ADDRESS = re.compile(r"[^\s<>\"'(),;:]+@[^\s<>\"'(),;:]+")
_SUBJECT_TAGS = re.compile(r"\[[^\]]{0,40}\]|\b(?:re|fwd?|aw|wg|sv|tr|vs)\s*(?:\[\d+\])?\s*:",
                           re.IGNORECASE)
# Host names: labels ending in a top-level domain that networks really use (a dotted pair
# of words in running text — "end.Start", "file.tcl" — is a typo, not a host).
_HOST = re.compile(
    r"\b[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?)*"
    r"\.(?:com|org|net|edu|gov|mil|int|io|co|uk|de|fr|nl|be|ch|at|it|es|se|no|dk|fi|ie|pl"
    r"|cz|eu|us|ca|au|nz|jp|cn|in|br|ru|info|biz|dev|app|cloud|local|lan|internal|intra"
    r"|corp|home|example|test|localdomain)\b", re.IGNORECASE)
# Numbers, with the punctuation data uses inside them (1.2.3, 10:30, 1,234.50), wherever
# they stand: "web03" gives 03, "INV-2026-0042" gives 2026 and 0042.  Letters glued to a
# number do not count (an edit that drops a space must not make new data), except in
# commit ids and hashes: hexadecimal words of 7+ characters with a digit and a letter.
_NUMBER = re.compile(r"\d+(?:[.:,]\d+)*")
_HEX_ID = re.compile(r"(?<![^\W_])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,64}(?![^\W_])",
                     re.IGNORECASE)
_DIGIT = re.compile(r"\d")
# Identifiers kept per message (the smallest hashes: a bottom-k sample of longer lists).
MAX_IDENTIFIERS = 48


def identifiers(text: str, subject: str = "") -> list[str]:
    """The identifiers of ``text`` and of the subject (tags and Re:/Fwd: removed), lower
    case, in order of appearance, each once."""
    found: dict[str, None] = {}
    for source in (_SUBJECT_TAGS.sub(" ", subject), text):
        if not _DIGIT.search(source) and "." not in source:
            continue
        if "@" in source or "://" in source or "www." in source.lower():
            source = _ADDRESS.sub(" ", _URL.sub(" ", source))
        if "." in source:
            for host in _HOST.findall(source):
                found.setdefault(host.lower(), None)
            source = _HOST.sub(" ", source)
        for hexadecimal in _HEX_ID.findall(source):
            found.setdefault(hexadecimal.lower(), None)
        source = _HEX_ID.sub(" ", source)
        for number in _NUMBER.findall(source):
            found.setdefault(number, None)
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
