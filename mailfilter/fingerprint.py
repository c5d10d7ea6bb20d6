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

import heapq
import re
import sys
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import itemgetter

import xxhash
from pyfastcdc.cy import FastCDC

from mailfilter.message import Message, raw_body

ALPHABET = b"0123456789abcdefghijklmnopqrstuvwxyz"
HISTOGRAM_BINS = len(ALPHABET)
_CHARACTERS = [ALPHABET[i:i + 1] for i in range(HISTOGRAM_BINS)]
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

    @property
    def has_attachments(self) -> bool:
        return self.attachment_bytes > 0


def character_histogram(data: bytes) -> tuple[bytes, int]:
    """(36-byte histogram, characters counted) of ``data`` exactly as chisto computes it.

    Only ASCII ``0-9``, ``a-z`` and ``A-Z`` (folded to lower case) count, as in the C locale.
    A count above 255 scales every bin by ``255/max`` with truncation, like
    ``(char)((double)work[k] * factor)``.
    """
    lowered = data.lower()
    counts = [lowered.count(character) for character in _CHARACTERS]
    largest = max(counts)
    total = sum(counts)
    if largest > 255:
        factor = 255.0 / float(largest)
        counts = [int(float(count) * factor) & 0xFF for count in counts]
    return bytes(counts), total


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


_TOKEN_CACHE: dict[str, int] = {}
_TOKEN_CACHE_MAX = 200_000


def _token_hash_bytes(tokens: Sequence[str]) -> bytes:
    """xxh3-64 of every token, packed as little-endian u64 (8 bytes a token).

    Memoised, since mail vocabulary repeats; the per-token lookups run in C
    (``itemgetter``) rather than in a Python loop.
    """
    cache = _TOKEN_CACHE
    missing = set(tokens).difference(cache)
    if missing:
        if len(cache) + len(missing) > _TOKEN_CACHE_MAX:
            cache.clear()
            missing = set(tokens)
        for token in missing:
            cache[token] = xxhash.xxh3_64_intdigest(token.encode("utf-8", "surrogatepass"))
    values = array("Q", [cache[tokens[0]]] if len(tokens) == 1 else itemgetter(*tokens)(cache))
    if sys.byteorder == "big":
        values.byteswap()
    return values.tobytes()


def shingle_positions(tokens: Sequence[str], ngram: int) -> list[int]:
    """The 32-bit hash of the n-gram starting at each token position, in order.

    Each token is hashed with xxh3-64; an n-gram's hash is the top 32 bits of the xxh3-64
    of its tokens' hashes laid end to end.  Token boundaries are explicit, so ``ab c``
    and ``a bc`` differ, and the value is the same on every machine and in every process
    (Python's randomised ``hash()`` is never used).
    """
    if len(tokens) < ngram:
        return []
    packed = memoryview(_token_hash_bytes(tokens))
    width = 8 * ngram
    digest = xxhash.xxh3_64_intdigest
    return [digest(packed[start:start + width]) >> 32
            for start in range(0, len(packed) - width + 1, 8)]


def shingle_hashes(tokens: Sequence[str], ngram: int) -> list[int]:
    """Distinct stable hashes of every word n-gram, ascending (see
    :func:`shingle_positions`)."""
    return sorted(set(shingle_positions(tokens, ngram)))


def text_digest(text: str, attachment_digests: Iterable[bytes] = ()) -> bytes:
    """128-bit digest of the whitespace-folded text and of each attachment's bytes."""
    hasher = xxhash.xxh3_128(" ".join(text.split()).encode("utf-8", "surrogatepass"))
    for digest in attachment_digests:
        hasher.update(b"\x00" + digest)
    return hasher.digest()


def chunk_digests(data: bytes, average: int) -> list[tuple[int, int]]:
    """FastCDC chunks of ``data`` as (xxh3-64 digest, length), in order."""
    if not data:
        return []
    if len(data) <= max(64, average // 4):
        return [(xxhash.xxh3_64_intdigest(data), len(data))]
    chunker = FastCDC(avg_size=average)
    return [(xxhash.xxh3_64_intdigest(chunk.data), chunk.length)
            for chunk in chunker.cut_buf(data)]


def _tail_start(text: str, tokens: Sequence[str], stoplist: Iterable[str],
                lines: int) -> int:
    """Index of the first token of the last ``lines`` non-blank lines of ``text``.

    No token spans a line break, so this is the token count minus the tail's own.
    """
    kept = [line for line in text[-200 * lines:].split("\n") if line.strip()]
    if len(kept) <= lines and len(text) <= 200 * lines:
        return 0
    return max(0, len(tokens) - len(tokenize("\n".join(kept[-lines:]), stoplist)))


def compute(message: Message, *, histogram: str = "decoded", ngram: int = 5,
            sketch_size: int = 64, stoplist: Iterable[str] = (),
            chunk_average: int = 4096, chunk_sample: int = 32,
            tail_lines: int = 8) -> Fingerprint:
    """The fingerprint of a parsed message with the given (store-bound) parameters."""
    if histogram == "raw":
        source = message.raw_body
    else:
        source = message.text.encode("ascii", "ignore")
    hist, chars = character_histogram(source)
    tokens = tokenize(message.text, stoplist)
    positions = shingle_positions(tokens, ngram)
    distinct = set(positions)
    sketch = tuple(sorted(distinct)[:sketch_size] if len(distinct) < 4096
                   else heapq.nsmallest(sketch_size, distinct))
    tail_from = max(0, _tail_start(message.text, tokens, stoplist, tail_lines) - ngram + 1)
    tail = set(positions[tail_from:])
    attachment_digests = [xxhash.xxh3_128_digest(a.data) for a in message.attachments]
    chunks: list[tuple[int, int]] = []
    attachment_bytes = 0
    for attachment in message.attachments:
        attachment_bytes += len(attachment.data)
        chunks.extend(chunk_digests(attachment.data, chunk_average))
    sampled = sorted(set(chunks))[:chunk_sample] if chunks else []
    return Fingerprint(
        histogram=hist,
        histogram_sum=sum(hist),
        histogram_chars=chars,
        sketch=sketch,
        shingle_count=len(distinct),
        word_count=len(tokens),
        digest=text_digest(message.text, attachment_digests),
        chunks=tuple(sampled),
        attachment_bytes=attachment_bytes,
        tail_sketch=tuple(value for value in sketch if value in tail),
    )
