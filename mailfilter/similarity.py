"""The measures between two messages; pure functions, no I/O.

* histogram distance (seed 000): how many of the 36 bins differ, and by how much at most;
* resemblance and containment of shingle sets (seed 001, Broder), exact and estimated from
  bottom-k sketches;
* seed 004: chunking (FSP fixed-size, CDC content-defined, SBC sliding-block), formula 1
  (length-weighted set similarity, duplicate chunks counted as ``bsim`` does) and formula 2
  (LCS over the chunk fingerprint sequences, weighted by chunk length).
"""

from __future__ import annotations

import operator
import zlib
from collections import Counter
from collections.abc import Iterable, Sequence

import xxhash

from mailfilter.fingerprint import HISTOGRAM_BINS, chunk_digests

Chunk = tuple[int, int]  # (digest, length)
_LCS_CELLS_MAX = 4_000_000


# The lowest bit of every byte of a 36-byte integer.
_LOW_BITS = int.from_bytes(b"\x01" * HISTOGRAM_BINS, "big")


def histogram_distance(a: bytes, b: bytes) -> tuple[int, int]:
    """(bins that differ, largest difference in one bin) between two 36-byte histograms.

    The bins that differ are the non-zero bytes of ``a XOR b``, counted with integer
    arithmetic (every message checked compares a few stored histograms)."""
    if len(a) != len(b):
        raise ValueError("histograms of different lengths")
    if a == b:
        return 0, 0
    low_bits = _LOW_BITS if len(a) == HISTOGRAM_BINS else \
        int.from_bytes(b"\x01" * len(a), "big")
    folded = int.from_bytes(a, "big") ^ int.from_bytes(b, "big")
    folded |= folded >> 4
    folded |= folded >> 2
    folded |= folded >> 1
    positions = (folded & low_bits).bit_count()
    largest = max(map(abs, map(operator.sub, a, b)))
    return positions, largest


def resemblance(a: Iterable[int], b: Iterable[int]) -> float:
    """Broder resemblance |A∩B| / |A∪B| of two shingle sets (0 for two empty sets)."""
    set_a, set_b = set(a), set(b)
    union = len(set_a | set_b)
    return len(set_a & set_b) / union if union else 0.0


def containment(a: Iterable[int], b: Iterable[int]) -> float:
    """How much of A is in B: |A∩B| / |A|."""
    set_a, set_b = set(a), set(b)
    return len(set_a & set_b) / len(set_a) if set_a else 0.0


def sketch_comparison(sketch_a: Sequence[int], sketch_b: Sequence[int], k: int
                      ) -> tuple[float, float]:
    """(resemblance of A and B, containment of A in B) estimated from bottom-k sketches.

    The k smallest hashes of the union are a uniform sample of the union (Broder): the
    share of them present in both sketches estimates |A∩B| / |A∪B|.  Within that sample,
    membership in B is exact (anything of B that small is in B's sketch), so the share of
    A's sampled hashes also in B estimates |A∩B| / |A|.
    """
    set_a, set_b = set(sketch_a), set(sketch_b)
    union = set_a | set_b
    if not union:
        return 0.0, 0.0
    if len(union) <= k:                         # the sample is the whole union
        both = len(set_a & set_b)
        return both / len(union), (both / len(set_a) if set_a else 0.0)
    sample = sorted(union)[:k]                  # every hash up to the k-th smallest
    both = len(set_a.intersection(set_b, sample))
    of_a = len(set_a.intersection(sample))
    return both / k, (both / of_a if of_a else 0.0)


def sketch_resemblance(sketch_a: Sequence[int], sketch_b: Sequence[int], k: int) -> float:
    """Resemblance estimated from two bottom-k sketches (see :func:`sketch_comparison`)."""
    return sketch_comparison(sketch_a, sketch_b, k)[0]


# -- seed 004 --------------------------------------------------------------------------

def fsp_chunks(data: bytes, size: int = 4096) -> list[Chunk]:
    """Fixed-size partition: one chunk every ``size`` bytes."""
    return [(xxhash.xxh3_64_intdigest(data[i:i + size]), len(data[i:i + size]))
            for i in range(0, len(data), size)]


def cdc_chunks(data: bytes, average: int = 4096) -> list[Chunk]:
    """Content-defined chunking (FastCDC)."""
    return chunk_digests(data, average)


def sbc_chunks(data: bytes, reference: bytes, size: int = 4096) -> list[Chunk]:
    """Sliding-block chunking of ``data`` against the fixed-size blocks of ``reference``.

    A window of ``size`` bytes slides over ``data`` one byte at a time; where its rolling
    checksum (Adler-32) and then its strong digest match a block of ``reference``, that
    block becomes a chunk and the window jumps past it.  Bytes between matches form
    literal chunks.  This finds shifted copies of blocks, which FSP cannot.
    """
    blocks: dict[int, set[int]] = {}
    for i in range(0, len(reference) - size + 1, size):
        block = reference[i:i + size]
        blocks.setdefault(zlib.adler32(block), set()).add(xxhash.xxh3_64_intdigest(block))
    chunks: list[Chunk] = []
    literal_start = 0
    position = 0
    if len(data) < size or not blocks:
        return fsp_chunks(data, size)
    modulus = 65521
    window = data[:size]
    a = (1 + sum(window)) % modulus
    b = (size + sum((size - j) * window[j] for j in range(size))) % modulus
    while position + size <= len(data):
        checksum = (b << 16) | a
        candidates = blocks.get(checksum)
        if candidates is not None:
            digest = xxhash.xxh3_64_intdigest(data[position:position + size])
            if digest in candidates:
                if literal_start < position:
                    chunks.append((xxhash.xxh3_64_intdigest(data[literal_start:position]),
                                   position - literal_start))
                chunks.append((digest, size))
                position += size
                literal_start = position
                if position + size <= len(data):
                    window = data[position:position + size]
                    a = (1 + sum(window)) % modulus
                    b = (size + sum((size - j) * window[j] for j in range(size))) % modulus
                continue
        if position + size >= len(data):
            break
        outgoing, incoming = data[position], data[position + size]
        a = (a - outgoing + incoming) % modulus
        b = (b - size * outgoing - 1 + a) % modulus
        position += 1
    if literal_start < len(data):
        tail = data[literal_start:]
        chunks.append((xxhash.xxh3_64_intdigest(tail), len(tail)))
    return chunks


def chunk_similarity(chunks_a: Sequence[Chunk], chunks_b: Sequence[Chunk]) -> float:
    """Seed 004 formula 1, weighted by chunk length, duplicate chunks counted (``bsim``).

    union = Σ len·(n₁+n₂), intersection = Σ len·min(n₁, n₂) over distinct chunks;
    similarity = 2·intersection / union.
    """
    count_a = Counter(d for d, _ in chunks_a)
    count_b = Counter(d for d, _ in chunks_b)
    lengths = dict(chunks_a)
    lengths.update(chunks_b)
    union = intersection = 0
    for digest, length in lengths.items():
        n1, n2 = count_a.get(digest, 0), count_b.get(digest, 0)
        union += length * (n1 + n2)
        intersection += length * min(n1, n2)
    return 2.0 * intersection / union if union else 0.0


def lcs_similarity(chunks_a: Sequence[Chunk], chunks_b: Sequence[Chunk]) -> float:
    """Seed 004 formula 2: 2·(length of the LCS's chunks) / (total length of both).

    As ``bsim``: the LCS is found over chunk fingerprints (ties prefer "up", then "left",
    over a diagonal match), then the lengths of the chunks on the backtracked path are
    summed.  The table is O(m·n); more than 4 million cells raises ``ValueError`` (the
    seed itself suggests LCS only for small inputs).
    """
    m, n = len(chunks_a), len(chunks_b)
    if m * n > _LCS_CELLS_MAX:
        raise ValueError(f"LCS of {m}×{n} chunks is too large; use formula 1")
    total = sum(length for _, length in chunks_a) + sum(length for _, length in chunks_b)
    if not total:
        return 0.0
    up, left, diagonal = 1, 2, 3
    scores = [[0] * (n + 1) for _ in range(m + 1)]
    moves = [bytearray([left] * (n + 1)) for _ in range(m + 1)]
    for i in range(1, m + 1):
        moves[i][0] = up
        row, above, move = scores[i], scores[i - 1], moves[i]
        digest_a = chunks_a[i - 1][0]
        for j in range(1, n + 1):
            if digest_a == chunks_b[j - 1][0]:
                score, step = above[j - 1] + 1, diagonal
            else:
                score, step = above[j - 1], 0
            if above[j] >= score:
                score, step = above[j], up
            if row[j - 1] >= score:
                score, step = row[j - 1], left
            row[j], move[j] = score, step
    lengths = dict(chunks_a)
    lengths.update(chunks_b)
    matched = 0
    i, j = m, n
    while i > 0 or j > 0:
        step = moves[i][j]
        if step == diagonal:
            i, j = i - 1, j - 1
            matched += lengths[chunks_a[i][0]]
        elif step == up:
            i -= 1
        else:
            j -= 1
    return 2.0 * matched / total
