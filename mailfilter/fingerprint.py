"""Pure fingerprint functions: a :class:`Message` in, a :class:`Fingerprint` out, no I/O.

* character histogram (seed 000, ``chisto``): 36 bins ``0-9a-z``, scaled so the largest bin
  is 255 when any count exceeds 255 (truncating, exactly as the C code's double arithmetic);
* word shingles (seed 001): Unicode letter/digit tokens, lowercased, stoplist removed,
  n-grams hashed to stable values, kept as a bottom-k sketch (Broder's sampling) of
  their top 32 bits (half the store, and collisions among k = 64 values stay negligible);
* an exact digest of the whitespace-folded text (plus attachment digests);
* FastCDC chunk digests of attachments (seed 004), sampled bottom-k by digest.
"""

from __future__ import annotations

import re
import sys
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import xxhash

if TYPE_CHECKING:
    import numpy as np

from mailfilter.features import (
    EMPTY,
    MAX_ATTACHMENTS,
    MAX_FORWARDED,
    MIN_ATTACHMENT_BYTES,
    AttachmentSummary,
    Features,
    key64,
)
from mailfilter.identifiers import identifier_summary, identifiers
from mailfilter.invitations import is_calendar
from mailfilter.message import Message, raw_body, site_of

ALPHABET = b"0123456789abcdefghijklmnopqrstuvwxyz"
HISTOGRAM_BINS = len(ALPHABET)
_TOKEN = re.compile(r"[^\W_]+")


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """Everything the store and the detector know of a message body."""

    histogram: bytes            # 36 bytes, seed 000
    histogram_sum: int          # sum of the 36 bins: the lookup key (±window)
    histogram_chars: int        # characters counted before scaling (how long the body is)
    sketch: tuple[int, ...]     # sorted bottom-k of the shingle hashes (32-bit)
    shingle_count: int          # distinct shingles in the full text
    word_count: int             # tokens after the stoplist
    digest: bytes               # 16 bytes: exact-duplicate key
    chunks: tuple[tuple[int, int], ...] = ()  # (digest, length) of sampled attachment chunks
    attachment_bytes: int = 0
    # Sketch hashes of shingles in the last lines of the text, where list footers live:
    # the detector discounts those that many stored messages share (boilerplate).
    tail_sketch: tuple[int, ...] = ()
    # Sender, thread, quoted text, identifiers, calendar event, attachments (features.py).
    features: Features = EMPTY
    # The identifiers themselves (the record keeps only hashes), for explaining.
    identifier_names: tuple[str, ...] = ()
    # Short texts only: the digests of their parts (each paragraph; all but the first;
    # all but the last), under which a short message it re-sends with a line added is
    # stored.
    part_digests: tuple[bytes, ...] = ()

    @property
    def has_attachments(self) -> bool:
        return self.attachment_bytes > 0


# numpy is imported only by processes that fingerprint many messages (dupfilter-db's batch
# work, the daemons: see use_numpy); the pipe filter, which starts for one message, does the
# same arithmetic in Python and never pays numpy's import (about 70 ms, more than the
# Python arithmetic of any but the longest messages).  Both ways give the same values, bit
# for bit (tests/test_fingerprint.py compares them).
# Measured (µs, Python / numpy): 32 tokens 32 / 42, 64 tokens 75 / 23, 512 tokens 1,046 / 95;
# histogram of 256 bytes 7 / 8, 1 KB 38 / 8.  Importing numpy costs about 70-100 ms of CPU,
# what Python takes for about 45,000 tokens or 2 MB of text.
_VECTOR_MIN_TOKENS = 64         # fewer tokens: Python is as fast as numpy's per-call setup
_VECTOR_MIN_BYTES = 512         # the same for the histogram's bytes
_COLD_MAX_TOKENS = 50_000       # more, in a process without numpy: importing it pays off
_COLD_MAX_BYTES = 2_000_000


def use_numpy() -> None:
    """Import numpy now, so that long texts are hashed and counted with it (batch work and
    daemons call this once at start; before a daemon drops privileges, too)."""
    import numpy  # noqa: F401


def _numpy_loaded() -> bool:
    """True when this process has imported numpy (see :func:`use_numpy`).  An import
    under way in another thread is waited for by the ``import`` statement itself."""
    return "numpy" in sys.modules


# Byte values whose counts make each bin: the digit or lower-case letter, and for letters
# its upper-case twin (chisto folds case with tolower() in the C locale).
_FOLD_CASE = bytes.maketrans(ALPHABET.upper(), ALPHABET)
_BIN_VALUES = list(ALPHABET)


def character_histogram(data: bytes) -> tuple[bytes, int]:
    """(36-byte histogram, characters counted) of ``data`` exactly as chisto computes it.

    Only ASCII ``0-9``, ``a-z`` and ``A-Z`` (folded to lower case) count, as in the C locale.
    A count above 255 scales every bin by ``255/max`` with truncation, like
    ``(char)((double)work[k] * factor)``.  One ``bincount`` pass over the bytes (numpy), or
    a case fold and 36 ``count`` passes.
    """
    if len(data) >= _VECTOR_MIN_BYTES and (_numpy_loaded() or len(data) >= _COLD_MAX_BYTES):
        values = _bin_counts_numpy(data)
    else:
        folded = data.translate(_FOLD_CASE)
        values = [folded.count(value) for value in _BIN_VALUES]
    largest = max(values)
    total = sum(values)
    if largest > 255:
        factor = 255.0 / float(largest)
        values = [int(float(count) * factor) & 0xFF for count in values]
    return bytes(values), total


_NUMPY_BINS: tuple = ()      # (bin byte values, their upper-case twins, letter mask)


def _bin_counts_numpy(data: bytes) -> list[int]:
    import numpy as np
    global _NUMPY_BINS
    if not _NUMPY_BINS:
        bins = np.frombuffer(ALPHABET, dtype=np.uint8).astype(np.intp)
        upper = np.frombuffer(ALPHABET.upper(), dtype=np.uint8).astype(np.intp)
        _NUMPY_BINS = (bins, upper, bins != upper)
    bins, upper, letters = _NUMPY_BINS
    by_byte = np.bincount(np.frombuffer(data, dtype=np.uint8), minlength=256)
    return (by_byte[bins] + np.where(letters, by_byte[upper], 0)).tolist()


def raw_histogram(raw: bytes) -> bytes:
    """Histogram of a whole raw message in chisto's own way (byte-identical to ``chisto``)."""
    return character_histogram(raw_body(raw))[0]


def tokenize(text: str, stoplist: Iterable[str] = ()) -> list[str]:
    """Maximal runs of Unicode letters and digits, lowercased, stop words removed."""
    tokens = _TOKEN.findall(text.lower())
    if stoplist:
        stop = stoplist if isinstance(stoplist, (set, frozenset)) else set(stoplist)
        tokens = [token for token in tokens if token not in stop]
    return tokens


# ASCII letters and digits map to themselves in lower case, every other byte to a space:
# on ASCII text, ``translate`` + ``split`` finds exactly the tokens :func:`tokenize` finds.
_ASCII_WORDS = bytes(
    (byte | 0x20) if chr(byte).isascii() and chr(byte).isalpha() else
    byte if chr(byte).isdigit() and byte < 128 else 0x20
    for byte in range(256))


def _words(text: str, stoplist: frozenset[str]) -> list[str] | list[bytes]:
    """The tokens of :func:`tokenize`, as UTF-8 bytes when ``text`` is ASCII (the common
    case), found by a byte translation, which is about twice as fast as the regex."""
    if not text.isascii():
        return tokenize(text, stoplist)
    words = text.encode("ascii").translate(_ASCII_WORDS).split()
    if stoplist:
        stop = {word.encode("ascii") for word in stoplist if word.isascii()}
        words = [word for word in words if word not in stop]
    return words


_TOKEN_CACHE: dict[str | bytes, int] = {}
_TOKEN_CACHE_MAX = 200_000


def _token_hashes(tokens: Sequence[str] | Sequence[bytes]) -> list[int]:
    """xxh3-64 of every token's UTF-8 bytes, in order.

    Tokens may be ``str`` or their UTF-8 ``bytes`` (both hash alike).  Memoised, since
    mail vocabulary repeats: one ``dict.get`` per token, in C (``map``); only a text with
    words the cache does not hold yet is gone through again in Python.
    """
    cache = _TOKEN_CACHE
    values = list(map(cache.get, tokens))
    if None not in values:
        return values
    hash64 = xxhash.xxh3_64_intdigest
    new = {token: hash64(token if isinstance(token, bytes)
                         else token.encode("utf-8", "surrogatepass"))
           for token, value in zip(tokens, values, strict=True) if value is None}
    if len(cache) + len(new) > _TOKEN_CACHE_MAX:
        cache.clear()
    cache.update(new)
    # From this message's own lookups, not the shared cache again: another thread (a
    # daemon's sessions share it) may have cleared it meanwhile.
    return [new[token] if value is None else value
            for token, value in zip(tokens, values, strict=True)]


def _token_hash_bytes(tokens: Sequence[str] | Sequence[bytes]) -> bytes:
    """The hashes of :func:`_token_hashes` packed as little-endian u64 (8 bytes a token)."""
    values = array("Q", _token_hashes(tokens))
    if sys.byteorder == "big":
        values.byteswap()
    return values.tobytes()


# n-gram hashing (see shingle_array): odd 64-bit weights, one per position in the
# n-gram, drawn from splitmix64 so that they are fixed forever; then murmur3's 64-bit
# finaliser.  All of it is arithmetic modulo 2**64: a few numpy array passes per message,
# or the same in Python integers (masked to 64 bits) for short texts and cold processes.
_SPLITMIX_GAMMA = 0x9E3779B97F4A7C15
_MASK_64 = 0xFFFFFFFFFFFFFFFF
_FMIX_1 = 0xFF51AFD7ED558CCD
_FMIX_2 = 0xC4CEB9FE1A85EC53


def _splitmix64(state: int) -> int:
    value = (state + _SPLITMIX_GAMMA) & 0xFFFFFFFFFFFFFFFF
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return value ^ (value >> 31)


_WEIGHTS = tuple(_splitmix64(position * _SPLITMIX_GAMMA) | 1 for position in range(64))


def _check_ngram(ngram: int) -> None:
    if ngram < 1 or ngram > len(_WEIGHTS):
        raise ValueError(f"n-gram size must be 1..{len(_WEIGHTS)}, not {ngram}")


_NUMPY_CONSTANTS: tuple = ()  # the weights and the finaliser's constants as numpy values


def shingle_array(tokens: Sequence[str] | Sequence[bytes], ngram: int) -> np.ndarray:
    """The 32-bit hash of the n-gram starting at each token position, in order (uint32).

    Each token is hashed with xxh3-64; an n-gram's hash is the top 32 bits of murmur3's
    finaliser applied to the weighted sum (mod 2**64) of its tokens' hashes, with a
    different odd weight per position.  Order and token boundaries count (``ab c`` and
    ``a bc`` differ), the value is the same on every machine and in every process
    (Python's randomised ``hash()`` is never used), and the work is a few numpy passes
    instead of one hash call per position.  :func:`shingle_list` is the same as a list,
    computed without numpy where that is cheaper.
    """
    import numpy as np
    global _NUMPY_CONSTANTS
    _check_ngram(ngram)
    if len(tokens) < ngram:
        return np.empty(0, dtype=np.uint32)
    if not _NUMPY_CONSTANTS:
        _NUMPY_CONSTANTS = (np.array(_WEIGHTS, dtype=np.uint64), np.uint64(_FMIX_1),
                            np.uint64(_FMIX_2), np.uint64(33), np.uint64(32))
    weights, fmix_1, fmix_2, shift_33, shift_32 = _NUMPY_CONSTANTS
    token_hashes = np.frombuffer(_token_hash_bytes(tokens), dtype="<u8")
    count = len(token_hashes) - ngram + 1
    mixed = token_hashes[:count] * weights[0]
    for position in range(1, ngram):
        mixed += token_hashes[position:position + count] * weights[position]
    mixed ^= mixed >> shift_33
    mixed *= fmix_1
    mixed ^= mixed >> shift_33
    mixed *= fmix_2
    mixed ^= mixed >> shift_33
    return (mixed >> shift_32).astype(np.uint32)


def shingle_list(tokens: Sequence[str] | Sequence[bytes], ngram: int) -> list[int]:
    """:func:`shingle_array` as a list of ints: with numpy when this process has it and the
    text is long enough for it to pay, else in Python integers (the same values)."""
    _check_ngram(ngram)
    if len(tokens) < ngram:
        return []
    if len(tokens) >= _VECTOR_MIN_TOKENS and (
            _numpy_loaded() or len(tokens) >= _COLD_MAX_TOKENS):
        return shingle_array(tokens, ngram).tolist()
    hashes = _token_hashes(tokens)
    count = len(hashes) - ngram + 1
    weight = _WEIGHTS[0]
    mixed = [value * weight for value in hashes[:count]]
    for position in range(1, ngram):
        weight = _WEIGHTS[position]
        mixed = [total + value * weight
                 for total, value in zip(mixed, hashes[position:], strict=False)]
    mask, first, second = _MASK_64, _FMIX_1, _FMIX_2
    out = []
    append = out.append
    for value in mixed:
        value &= mask
        value ^= value >> 33
        value = (value * first) & mask
        value ^= value >> 33
        value = (value * second) & mask
        append((value ^ (value >> 33)) >> 32)
    return out


def _shingles(tokens: Sequence[str] | Sequence[bytes], ngram: int, sketch_size: int,
              tail_from: int) -> tuple[tuple[int, ...], int, set[int]]:
    """(bottom-k sketch, distinct shingles, the shingles from position ``tail_from`` on)."""
    if len(tokens) >= _VECTOR_MIN_TOKENS and (
            _numpy_loaded() or len(tokens) >= _COLD_MAX_TOKENS):
        import numpy as np
        positions = shingle_array(tokens, ngram)
        distinct = np.sort(positions)  # then drop repeats (cheaper than np.unique's hashing)
        if len(distinct) > 1:
            distinct = distinct[np.concatenate(([True], distinct[1:] != distinct[:-1]))]
        return (tuple(distinct[:sketch_size].tolist()), len(distinct),
                set(positions[tail_from:].tolist()))
    values = shingle_list(tokens, ngram)
    ordered = sorted(set(values))
    return tuple(ordered[:sketch_size]), len(ordered), set(values[tail_from:])


def shingle_hashes(tokens: Sequence[str], ngram: int) -> list[int]:
    """Distinct stable hashes of every word n-gram, ascending (see :func:`shingle_array`)."""
    return sorted(set(shingle_list(tokens, ngram)))


def text_digest(text: str, attachment_digests: Iterable[bytes] = (),
                whole_body: bytes | None = None) -> bytes:
    """128-bit digest of the whitespace-folded text and of each attachment's bytes, and of
    the whole body when only a prefix of it was read (``Message.whole_body``)."""
    hasher = xxhash.xxh3_128(" ".join(text.split()).encode("utf-8", "surrogatepass"))
    for digest in attachment_digests:
        hasher.update(b"\x00" + digest)
    if whole_body is not None:
        hasher.update(b"\x01" + whole_body)
    return hasher.digest()


PART_DIGEST_WORDS = 60
_PARAGRAPHS = re.compile(r"\n[ \t]*\n")


def part_digests(text: str, attachment_digests: Sequence[bytes], whole: bytes
                 ) -> tuple[bytes, ...]:
    """Digests (as :func:`text_digest`) of the parts of a short text that a shorter message
    it re-sends could be: each paragraph or line, and the text without one of them (a line
    added above, below or between a greeting and the question); at most 24, the whole
    text's own digest left out."""
    parts: list[str] = []
    for units in ([p for p in _PARAGRAPHS.split(text) if _TOKEN.search(p)],
                  [line for line in text.split("\n") if _TOKEN.search(line)]):
        if 2 <= len(units) <= 8:
            parts += units
            parts += ["\n".join(units[:i] + units[i + 1:]) for i in range(len(units))]
    found = dict.fromkeys(text_digest(part, attachment_digests) for part in parts)
    found.pop(whole, None)
    return tuple(found)[:24]


def chunk_digests(data: bytes, average: int) -> list[tuple[int, int]]:
    """FastCDC chunks of ``data`` as (xxh3-64 digest, length), in order."""
    if not data:
        return []
    if len(data) <= max(64, average // 4):
        return [(xxhash.xxh3_64_intdigest(data), len(data))]
    from pyfastcdc.cy import FastCDC  # only messages with attachments need it
    chunker = FastCDC(avg_size=average)
    return [(xxhash.xxh3_64_intdigest(chunk.data), chunk.length)
            for chunk in chunker.cut_buf(data)]


def _tail_start(text: str, tokens: Sequence[str] | Sequence[bytes],
                stoplist: frozenset[str], lines: int) -> int:
    """Index of the first token of the last ``lines`` non-blank lines of ``text``.

    No token spans a line break, so this is the token count minus the tail's own.
    """
    kept = [line for line in text[-200 * lines:].split("\n") if line.strip()]
    if len(kept) <= lines and len(text) <= 200 * lines:
        return 0
    return max(0, len(tokens) - len(_words("\n".join(kept[-lines:]), stoplist)))


def compute(message: Message, *, histogram: str = "decoded", ngram: int = 5,
            sketch_size: int = 64, stoplist: Iterable[str] = (),
            chunk_average: int = 4096, chunk_sample: int = 32,
            tail_lines: int = 8) -> Fingerprint:
    """The fingerprint of a parsed message with the given (store-bound) parameters."""
    if histogram == "raw":
        source = message.raw_body
    else:
        source = message.text.encode("utf-8", "surrogatepass")  # non-ASCII bytes count nowhere
    hist, chars = character_histogram(source)
    stop = frozenset(stoplist)
    tokens = _words(message.text, stop)
    tail_from = max(0, _tail_start(message.text, tokens, stop, tail_lines) - ngram + 1)
    sketch, shingle_count, tail = _shingles(tokens, ngram, sketch_size, tail_from)
    # An invitation counts by its event (UID, SEQUENCE, times), not by the bytes of its
    # calendar part, which hold the time the copy was made (DTSTAMP): the same invitation
    # sent again has the same digest.
    calendar_key = message.calendar.key.to_bytes(8, "big") if message.calendar else b""
    attachment_digests = [calendar_key if calendar_key and is_calendar(a.content_type,
                                                                       a.filename)
                          else xxhash.xxh3_128_digest(a.data) for a in message.attachments]
    chunks: list[tuple[int, int]] = []
    attachment_bytes = 0
    for attachment in message.attachments:
        attachment_bytes += len(attachment.data)
        if not is_calendar(attachment.content_type, attachment.filename):
            chunks.extend(chunk_digests(attachment.data, chunk_average))
    sampled = sorted(set(chunks))[:chunk_sample] if chunks else []
    names = identifiers(message.text, message.subject, None if stop else tokens)
    # An invitation is its event: the same event in the same version is the same message
    # whatever its text (a resend may come with an empty body, or another client's).
    digest = text_digest("" if calendar_key else message.text, attachment_digests,
                         message.whole_body)
    return Fingerprint(
        part_digests=part_digests(message.text, attachment_digests, digest)
        if len(tokens) <= PART_DIGEST_WORDS else (),
        features=message_features(message, names),
        identifier_names=tuple(names[:64]),
        histogram=hist,
        histogram_sum=sum(hist),
        histogram_chars=chars,
        sketch=sketch,
        shingle_count=shingle_count,
        word_count=len(tokens),
        digest=digest,
        chunks=tuple(sampled),
        attachment_bytes=attachment_bytes,
        tail_sketch=tuple(value for value in sketch if value in tail),
    )


# Reply and forward prefixes, list tags (a tag with a number — "[Ticket #27271]" — names
# the thread and stays), and the words a sender puts before a message sent again or
# corrected ("Resend:", "UPDATED:", "Korrektur:", "(corrected)").
_SUBJECT_PREFIX = re.compile(
    r"^(?:\s*(?:\[[^\]\d]{0,60}\]|(?:re|fwd?|fw|aw|wg|sv|tr|vs|antw|rif|doorst|resend|resent"
    r"|reminder|updated?|correction|corrected|korrektur|berichtigung|rectificatif|corrección"
    r"|fyi)\s*(?:\[\d+\])?\s*:))+", re.IGNORECASE)
_SUBJECT_MARKS = re.compile(r"\s*[(\[](?:corrected|correction|updated?|resend|resent|"
                            r"reminder|korrektur|rectificatif)[)\]]\s*", re.IGNORECASE)


def normal_subject(subject: str) -> str:
    """The subject without Re:/Fwd:/list tags and resend or correction marks, spaces
    folded, lower case."""
    return " ".join(_SUBJECT_MARKS.sub(" ", _SUBJECT_PREFIX.sub("", subject)).split()).lower()


# Mail providers whose users are unrelated people: their domain names no organisation.
_PROVIDERS = frozenset((
    "gmail", "googlemail", "yahoo", "ymail", "hotmail", "outlook", "live", "msn", "aol",
    "icloud", "me", "mac", "gmx", "web", "mail", "yandex", "qq", "163", "126", "proton",
    "protonmail", "zoho", "comcast", "earthlink", "att", "verizon", "btinternet", "orange",
    "free", "libero", "t-online", "wanadoo", "rediffmail", "naver", "hanmail", "seznam",
    "o2", "wp", "interia", "onet", "bigpond", "optusnet", "shaw", "rogers", "sympatico",
    "juno", "netzero", "cox", "charter", "sbcglobal", "bellsouth", "rocketmail", "lycos",
    "excite", "fastmail", "tutanota", "posteo", "mailbox", "hushmail", "inbox", "rambler"))


def registrable_domain(address: str | None) -> str:
    """The organisation a sender writes for: the domain it registered
    (``mail.example.co.uk`` → ``example.co.uk``: the last two labels, or three under a
    common second-level label of a country code; no list of public suffixes), or, at a
    public mail provider (gmail.com, yahoo.co.uk …), the address itself."""
    if not address or "@" not in address:
        return ""
    domain = site_of(address.rpartition("@")[2])
    return address if domain.partition(".")[0] in _PROVIDERS else domain


def message_id_key64(message_id: str) -> int:
    """64-bit key of a Message-ID (brackets and the case of its domain ignored), for
    comparing a record with the thread ids of a reply."""
    value = message_id.strip().strip("<>").strip()
    local, at, domain = value.rpartition("@")
    return key64(f"{local}@{domain.lower()}" if at else value)


def name_key(name: str) -> int:
    """key64 of a display name as people write it: case, quotes and spacing do not count."""
    return key64(" ".join(name.lower().replace('"', "").split()))


def message_features(message: Message, names: list[str] | None = None) -> Features:
    """The :class:`Features` of a parsed message (pure)."""
    quoted_words = b""
    if message.quoted:
        words = _words(message.quoted, frozenset())
        quoted_words = b" ".join(words) if message.quoted.isascii() else \
            " ".join(words).encode("utf-8", "replace")      # type: ignore[arg-type]
    files = [a for a in message.attachments if not is_calendar(a.content_type, a.filename)
             and not a.inline and len(a.data) >= MIN_ATTACHMENT_BYTES]
    files.sort(key=lambda a: len(a.data), reverse=True)
    hashes, bits = identifier_summary(
        identifiers(message.text, message.subject) if names is None else names)
    return Features(
        sender=key64(message.sender),
        sender_name=name_key(message.sender_name),
        sender_domain=key64(registrable_domain(message.sender)),
        subject=key64(normal_subject(message.subject)),
        thread=tuple(message_id_key64(i) for i in message.thread),
        quoted=key64(quoted_words),
        identifiers=hashes,
        identifier_bits=bits,
        calendar=message.calendar,
        attachments=tuple(AttachmentSummary(xxhash.xxh3_64_intdigest(a.data), len(a.data),
                                            a.filename or "") for a in files[:MAX_ATTACHMENTS]),
        attachment_bytes=sum(len(a.data) for a in files),
        text_bytes=message.text_length,
        automated=message.automated,
        is_reply=message.is_reply,
        forwarded_from=tuple(dict.fromkeys(
            name_key(name) for name in message.forwarded_from))[:MAX_FORWARDED],
    )
