"""Pure fingerprint functions: a :class:`Message` in, a :class:`Fingerprint` out, no I/O.

* character histogram (seed 000, ``chisto``): ``HISTOGRAM_BINS`` (36) bins ``0-9a-z``, scaled
  so the largest bin is 255 when any count exceeds 255 (truncating, exactly as the C
  code's double arithmetic);
* word shingles (seed 001): Unicode letter/digit tokens, lowercased, stoplist removed,
  n-grams hashed to stable values, kept as a bottom-k sketch (Broder's sampling) of
  their top 32 bits (half the store, and collisions among k = 64 values stay negligible);
* an exact digest of the whitespace-folded text (plus attachment digests);
* FastCDC chunk digests of attachments (seed 004), sampled bottom-k by digest.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, compress
from typing import TYPE_CHECKING

import xxhash

if TYPE_CHECKING:
    import numpy as np

from mailfilter.campaign import subject_without_tokens
from mailfilter.features import (
    EMPTY,
    Features,
    is_calendar,
    message_features,
    message_id_key64,  # noqa: F401 - rules.py reads it from here
    normal_subject,  # noqa: F401 - and tests
    registrable_domain,  # noqa: F401
)
from mailfilter.identifiers import identifiers
from mailfilter.message import Message, raw_body
from mailfilter.normalise import is_reply_subject
from mailfilter.text import ASCII_WORDS, NOT_SPACE, Pattern, encoded, token_pattern, words_of
from mailfilter.values import Value, fill

ALPHABET = b"0123456789abcdefghijklmnopqrstuvwxyz"
HISTOGRAM_BINS = len(ALPHABET)        # 36: the histogram's length, everywhere it is read


class Fingerprint(Value):
    """Everything the store and the detector know of a message body.

    histogram: 36 bytes, seed 000; histogram_sum: the sum of its bins, the lookup key
    (±window); histogram_chars: characters counted before scaling (how long the body is).
    sketch: the sorted bottom-k of the shingle hashes (32-bit); shingle_count: distinct
    shingles of the full text; word_count: tokens after the stoplist.  digest: 16 bytes,
    the exact-duplicate key.  chunks: (digest, length) of sampled attachment chunks;
    attachment_bytes.  tail_sketch: sketch hashes of shingles in the last lines of the
    text, where list footers live (the detector discounts those that many stored
    messages share).  features: sender, thread, quoted text, identifiers, calendar
    event, attachments (features.py).  identifier_names: the identifiers themselves
    (the record keeps only hashes), for explaining.  part_digests: short texts only, the
    digests of their parts (each paragraph; all but the first; all but the last), under
    which a short message it re-sends with a line added is stored.  attached_digests:
    the digests of the messages it carries whole (a forward as an attachment), each as
    that message's own digest, so the stored original is found exactly.
    """

    __slots__ = ("histogram", "histogram_sum", "histogram_chars", "sketch", "shingle_count",
                 "word_count", "digest", "chunks", "attachment_bytes", "tail_sketch",
                 "features", "identifier_names", "part_digests", "attached_digests")

    def __init__(self, histogram: bytes, histogram_sum: int, histogram_chars: int,
                 sketch: tuple[int, ...], shingle_count: int, word_count: int, digest: bytes,
                 chunks: tuple[tuple[int, int], ...] = (), attachment_bytes: int = 0,
                 tail_sketch: tuple[int, ...] = (), features: Features = EMPTY,
                 identifier_names: tuple[str, ...] = (),
                 part_digests: tuple[bytes, ...] = (),
                 attached_digests: tuple[bytes, ...] = ()) -> None:
        fill(self, histogram, histogram_sum, histogram_chars, sketch, shingle_count,
             word_count, digest, chunks, attachment_bytes, tail_sketch, features,
             identifier_names, part_digests, attached_digests)

    @property
    def has_attachments(self) -> bool:
        return self.attachment_bytes > 0


# numpy is imported only by processes that fingerprint many messages (dupfilter-db's batch
# work, the daemons: see use_numpy); the pipe filter, which starts for one message, does the
# same arithmetic in Python and never pays numpy's import (about 70 ms, more than the
# Python arithmetic of any but the longest messages).  Both ways give the same values, bit
# for bit (tests/test_fingerprint.py compares them).
# Measured (µs a call over the corpus, tokens hashed in one C loop, Python / numpy): 5-15
# tokens 8 / 9, 16-31 tokens 17 / 10, 32-47 27 / 11, 64-95 53 / 15; histogram (one
# bincount of the case-folded bytes) of up to 128 bytes 5.2 / 3.4, 128-511 bytes 9.0 / 4.0.
# Importing numpy costs about 70-100 ms of CPU, what Python takes for about 45,000 tokens
# or 2 MB of text.
_VECTOR_MIN_TOKENS = 16         # fewer tokens: Python is as fast as numpy's per-call setup
_VECTOR_MIN_BYTES = 0           # the histogram: numpy, once loaded, for any length
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


_NUMPY_BINS: list = []       # the bins' byte values as numpy indexes


# Bytes a ``bincount`` reads at once: it widens its input to 8-byte integers, so a 35 MB
# text (HTML rules turned into lines) took 280 MB at once; a chunk takes 8 MB.
_BIN_CHUNK = 1 << 20


def _bin_counts_numpy(data: bytes) -> list[int]:
    """The 36 bins' counts: ``bincount`` of the case-folded bytes, a MB at a time."""
    import numpy as np
    if not _NUMPY_BINS:
        _NUMPY_BINS.append(np.frombuffer(ALPHABET, dtype=np.uint8).astype(np.intp))
    folded = np.frombuffer(data.translate(_FOLD_CASE), dtype=np.uint8)
    counts = np.bincount(folded[:_BIN_CHUNK], minlength=256)
    for start in range(_BIN_CHUNK, len(folded), _BIN_CHUNK):
        counts += np.bincount(folded[start:start + _BIN_CHUNK], minlength=256)
    return counts[_NUMPY_BINS[0]].tolist()


def raw_histogram(raw: bytes) -> bytes:
    """Histogram of a whole raw message in chisto's own way (byte-identical to ``chisto``)."""
    return character_histogram(raw_body(raw))[0]


def tokenize(text: str, stoplist: Iterable[str] = ()) -> list[str]:
    """Maximal runs of Unicode letters and digits, lowercased, stop words removed."""
    tokens = token_pattern().findall(text.lower())
    if stoplist:
        stop = stoplist if isinstance(stoplist, (set, frozenset)) else set(stoplist)
        tokens = [token for token in tokens if token not in stop]
    return tokens


def _words(text: str, stoplist: frozenset[str]) -> list[str] | list[bytes]:
    """The tokens of :func:`tokenize`, as ASCII bytes when ``text`` is ASCII (see
    :func:`mailfilter.text.words_of`)."""
    return words_of(text, stoplist)


_HASH64 = xxhash.xxh3_64_intdigest


def _token_hashes(tokens: Sequence[str] | Sequence[bytes]) -> Iterator[int]:
    """xxh3-64 of every token's UTF-8 bytes, in order (``str`` or ``bytes`` tokens hash
    alike), one C loop: hashing a token (tens of ns) is cheaper than looking it up in a
    cache of mail's vocabulary, whose dict outgrows the CPU's caches (measured 3x)."""
    if not tokens or isinstance(tokens[0], bytes):
        return map(_HASH64, tokens)
    if len(tokens) <= _ENCODE_ROUND:
        return map(_HASH64, encoded(tokens))       # type: ignore[arg-type]
    # (A long text's tokens encoded a round at a time: 1.4 million bytes objects at once
    # took 80 MB.)
    return chain.from_iterable(
        map(_HASH64, encoded(tokens[start:start + _ENCODE_ROUND]))  # type: ignore[arg-type]
        for start in range(0, len(tokens), _ENCODE_ROUND))


_ENCODE_ROUND = 65_536



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
    token_hashes = np.fromiter(_token_hashes(tokens), dtype=np.uint64, count=len(tokens))
    # The weighted sums of every window in one call (a sliding dot product, in uint64:
    # modulo 2**64 like the rest), not a multiply and an add per position.
    mixed = np.correlate(token_hashes, weights[:ngram])
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
    hashes = list(_token_hashes(tokens))
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
            first = np.empty(len(distinct), dtype=bool)     # each value's first place
            first[0] = True
            np.not_equal(distinct[1:], distinct[:-1], out=first[1:])
            distinct = distinct[first]
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
    if len(text) > _FOLD_ROUND:
        return _folded_digest(_folded_rounds(text), attachment_digests, whole_body)
    if text.isascii():      # the same folding, without a word list: two C passes
        folded = _SPACE_RUNS.get().sub(b" ", text.encode("ascii").translate(_SPACES)).strip(b" ")
    else:
        folded = " ".join(text.split()).encode("utf-8", "surrogatepass")
    return _folded_digest(folded, attachment_digests, whole_body)


def _folded_rounds(text: str) -> Iterator[bytes]:
    """The whitespace-folded text of :func:`text_digest`, a round of about ``_FOLD_ROUND``
    characters at a time, each round ending before a character that is no white space (so
    that no run of it spans two rounds).  One substitution over a long text kept an object
    for each run it replaced: 137 MB for 4 MiB of "De: b" lines between blank lines, and
    a word list of it (split and join) 70 MB."""
    data: bytes | str
    if text.isascii():
        data = text.encode("ascii").translate(_SPACES)
        runs, not_space, space = _SPACE_RUNS.get(), _NOT_A_SPACE.get(), b" "
    else:
        data = text                 # (pieces encoded one round at a time)
        runs, not_space, space = _OTHER_SPACES.get(), NOT_SPACE.get(), " "
    start = 0
    while start < len(data):
        following = not_space.search(data, start + _FOLD_ROUND)
        end = len(data) if following is None else following.start()
        piece = runs.sub(space, data[start:end])
        if start == 0:
            piece = piece.lstrip(space)
        if end == len(data):
            piece = piece.rstrip(space)
        start = end
        yield piece if isinstance(piece, bytes) else piece.encode("utf-8", "surrogatepass")


# The ASCII characters str.split() splits at (str.isspace), each made a space.
_ASCII_SPACES = bytes(byte for byte in range(128) if chr(byte).isspace())
_SPACES = bytes.maketrans(_ASCII_SPACES, b" " * len(_ASCII_SPACES))
_SPACE_RUNS = Pattern(rb"  +")
_NOT_A_SPACE = Pattern(rb"[^ ]")
# Beyond ASCII: each run of str.isspace characters but a lone space (what split and join
# would make one space), found without a list of the words; five times as slow as split
# and join on a message of a few KB, as fast on MBs.
_OTHER_SPACES = Pattern(r"\s{2,}|[^\S ]")
# A text longer than this is folded a round of this many characters at a time.
_FOLD_ROUND = 1 << 18


def _folded_digest(folded: bytes | Iterator[bytes], attachment_digests: Iterable[bytes] = (),
                   whole_body: bytes | None = None) -> bytes:
    """:func:`text_digest` of a text already whitespace-folded (UTF-8), whole or in
    pieces."""
    if isinstance(folded, bytes):
        hasher = xxhash.xxh3_128(folded)
    else:
        hasher = xxhash.xxh3_128()
        for piece in folded:
            hasher.update(piece)
    for digest in attachment_digests:
        hasher.update(b"\x00" + digest)
    if whole_body is not None:
        hasher.update(b"\x01" + whole_body)
    return hasher.digest()


PART_DIGEST_WORDS = 60
# A text of so few words spread over this many lines or more is no short message re-sent
# (a crafted one: thousands of rule or blank lines around a few words, each line weighed
# here in Python — 0.75 s for 1 MB of HTML rules): it gets no part digests.
PART_DIGEST_LINES = 1_000
_PARAGRAPHS = Pattern(r"\n[ \t]*\n")


def part_digests(text: str, attachment_digests: Sequence[bytes], whole: bytes
                 ) -> tuple[bytes, ...]:
    """Digests (as :func:`text_digest`) of the parts of a short text that a shorter message
    it re-sends could be: each paragraph or line, and the text without one of them (a line
    added above, below or between a greeting and the question); at most 24, the whole
    text's own digest left out; none for a text of ``PART_DIGEST_LINES`` lines or more."""
    if text.count("\n") >= PART_DIGEST_LINES:
        return ()
    parts: list[str] = []           # each whitespace-folded (as text_digest folds it)
    token = token_pattern()
    for units in ([p for p in _PARAGRAPHS.get().split(text) if token.search(p)],
                  [line for line in text.split("\n") if token.search(line)]):
        if 2 <= len(units) <= 8:
            # (Each unit has a word: the text without one unit folds to the others'
            # folded texts joined by a space.)
            folded = [" ".join(unit.split()) for unit in units]
            parts += folded
            parts += [" ".join(folded[:i] + folded[i + 1:]) for i in range(len(units))]
    found = dict.fromkeys(_folded_digest(part.encode("utf-8", "surrogatepass"),
                                         attachment_digests) for part in parts)
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
    pieces = text[-200 * lines:].split("\n")
    kept = list(compress(pieces, map(str.strip, pieces)))          # the non-blank lines
    if len(kept) <= lines and len(text) <= 200 * lines:
        return 0
    tail = "\n".join(kept[-lines:])
    if stoplist or not tail.isascii():
        return max(0, len(tokens) - len(_words(tail, stoplist)))
    # Counted, not listed: each word starts where a mark follows a space (or the start).
    marks = tail.encode("ascii").translate(_WORD_MARKS)
    return max(0, len(tokens) - marks.count(b" a") - marks.startswith(b"a"))


# ASCII_WORDS with every letter and digit an "a": words are the runs of "a".
_WORD_MARKS = bytes(0x20 if byte == 0x20 else 0x61 for byte in ASCII_WORDS)


def compute(message: Message, *, histogram: str = "decoded", ngram: int = 5,
            sketch_size: int = 64, stoplist: Iterable[str] = (),
            chunk_average: int = 4096, chunk_sample: int = 32,
            tail_lines: int = 8, attached_digests: tuple[bytes, ...] = ()) -> Fingerprint:
    """The fingerprint of a parsed message with the given (store-bound) parameters.

    The tokens are the message's prepared text's (``Message.prepared``), read by the
    shingles and the identifiers alike.  ``attached_digests``: the digests
    of its attached messages, fingerprinted on their own (``engine.analyse``)."""
    if histogram == "raw":
        source = message.raw_body
    else:
        source = message.text.encode("utf-8", "surrogatepass")  # non-ASCII bytes count nowhere
    hist, chars = character_histogram(source)
    stop = frozenset(stoplist)
    tokens = message.prepared.words(stop)
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
    # (campaign.py: a campaign's random tokens are no data, labelled codes count whole)
    subject, codes = (message.subject, ()) if message.notifier \
        else subject_without_tokens(message.subject)
    # A mass mail's "Re:" with no thread under it is a lure: its "order 20018" is no data.
    lure = message.mass_mail and not message.thread and is_reply_subject(message.subject)
    names = identifiers(message.text, subject, None if stop else tokens, message.mass_mail,
                        lure)
    names += message.codes + codes
    # An invitation is its event: the same event in the same version is the same message
    # whatever its text (a resend may come with an empty body, or another client's).
    digest = text_digest("" if calendar_key else message.text, attachment_digests,
                         message.whole_body)
    return Fingerprint(
        part_digests=part_digests(message.text, attachment_digests, digest)
        if len(tokens) <= PART_DIGEST_WORDS else (),
        features=message_features(message, names, tokens),
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
        tail_sketch=tuple(filter(tail.__contains__, sketch)),
        attached_digests=tuple(d for d in dict.fromkeys(attached_digests) if d != digest),
    )
