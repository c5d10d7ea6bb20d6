"""``raw_histogram`` is byte-identical to the reference ``chisto`` (seed 000, default mode).

(a) stored golden vectors of generated messages (no compiler needed);
(b) chisto compiled from the shared seed text, run on the generated messages and on every
    message of the shared SpamAssassin corpus;
(c) hand-made cases whose answers are worked out by hand.

Nothing here is skipped: without gcc, the seed text or the corpus the tests fail and say why.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from chisto_tool import (
    HISTOGRAM_SIZE,
    ChistoUnavailable,
    build_chisto,
    run_chisto,
)
from golden_messages import KINDS, make_message

from mailfilter.fingerprint import ALPHABET, raw_histogram

VECTOR_PATH = Path(__file__).resolve().parent / "data" / "chisto_vectors.json"
VECTORS: list[dict[str, object]] = json.loads(VECTOR_PATH.read_text(encoding="utf-8"))["vectors"]
LIVE_EXTRA_SEEDS = range(len(VECTORS), len(VECTORS) + 300)
REGENERATE = "regenerate with: python3 tests/make_chisto_vectors.py"


@pytest.fixture(scope="session")
def chisto(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference chisto, compiled once per session from the shared seed text."""
    try:
        return build_chisto(tmp_path_factory.mktemp("chisto"))
    except ChistoUnavailable as error:
        pytest.fail(f"cannot build the reference chisto (CI installs gcc): {error}",
                    pytrace=False)


def _hist(**counts: int) -> str:
    """Expected histogram (hex) from counts by character, e.g. ``_hist(a=3, _7=1)``."""
    bins = bytearray(HISTOGRAM_SIZE)
    for name, value in counts.items():
        bins[ALPHABET.index(name.lstrip("_").encode("ascii"))] = value
    return bins.hex()


def _mismatch_report(mismatches: list[tuple[str, str, str]], total: int) -> str:
    lines = [f"{len(mismatches)} of {total} differ from chisto (first 5):"]
    for name, expected, actual in mismatches[:5]:
        lines.append(f"  {name}\n    chisto       {expected}\n    raw_histogram {actual}")
    return "\n".join(lines)


# --- (a) stored vectors: no compiler needed ------------------------------------------------

def test_vector_file_covers_every_kind() -> None:
    """The vector file is complete: ~200 seeds in order, every generator kind present."""
    assert len(VECTORS) >= 200
    assert [vector["seed"] for vector in VECTORS] == list(range(len(VECTORS)))
    assert {vector["kind"] for vector in VECTORS} == set(KINDS)
    assert all(len(str(vector["histogram"])) == 2 * HISTOGRAM_SIZE for vector in VECTORS)


@pytest.mark.parametrize("vector", VECTORS, ids=lambda v: f"seed{v['seed']}-{v['kind']}")
def test_raw_histogram_matches_stored_vector(vector: dict[str, object]) -> None:
    """raw_histogram of the regenerated message equals chisto's recorded output."""
    seed = int(str(vector["seed"]))
    message = make_message(seed)
    assert hashlib.sha256(message).hexdigest() == vector["sha256"], (
        f"golden_messages.make_message({seed}) changed since the vectors were made; "
        f"{REGENERATE}")
    histogram = raw_histogram(message)
    assert len(histogram) == HISTOGRAM_SIZE
    assert histogram.hex() == vector["histogram"]


# --- (b) the compiled reference ------------------------------------------------------------

def test_stored_vectors_match_live_chisto(chisto: Path) -> None:
    """The JSON is what chisto says today (not stale, not edited by hand)."""
    stale = [vector["seed"] for vector in VECTORS
             if run_chisto(chisto, make_message(int(str(vector["seed"])))).hex()
             != vector["histogram"]]
    assert not stale, f"seeds {stale[:10]} differ from the compiled chisto; {REGENERATE}"


def test_raw_histogram_matches_chisto_on_more_seeds(chisto: Path) -> None:
    """Beyond the stored seeds: generated messages compared with chisto directly."""
    mismatches = []
    for seed in LIVE_EXTRA_SEEDS:
        message = make_message(seed)
        expected = run_chisto(chisto, message).hex()
        actual = raw_histogram(message).hex()
        if actual != expected:
            mismatches.append((f"seed {seed}", expected, actual))
    assert not mismatches, _mismatch_report(mismatches, len(LIVE_EXTRA_SEEDS))


def test_raw_histogram_matches_chisto_on_corpus(chisto: Path,
                                                corpus_messages: list[Path]) -> None:
    """Every message of the shared SpamAssassin corpus: raw_histogram == chisto."""
    mismatches = []
    excluded = []
    for path in corpus_messages:
        raw = path.read_bytes()
        if b"\x00" in raw:
            # chisto's strchr(alphabet, 0) matches the terminating NUL and increments
            # work[36], past the end of the array: undefined behaviour, nothing to compare.
            excluded.append(path.name)
            continue
        expected = run_chisto(chisto, raw).hex()
        actual = raw_histogram(raw).hex()
        if actual != expected:
            mismatches.append((str(path.relative_to(path.parents[1])), expected, actual))
    assert len(excluded) <= 10, f"{len(excluded)} corpus messages contain NUL: {excluded[:10]}"
    assert not mismatches, _mismatch_report(mismatches, len(corpus_messages) - len(excluded))


# --- (c) hand-made cases -------------------------------------------------------------------

HAND_CASES: list[tuple[str, bytes, str]] = [
    ("aaa", b"Subject: x\n\naaa", _hist(a=3)),
    # max 510 > 255: factor 255/510 = 0.5 exactly; a = 255, b = int(0.5) = 0.
    ("scaled-510", b"Subject: x\n\n" + b"a" * 510 + b"b", _hist(a=255, b=0)),
    ("no-blank-line", b"Subject: hello\nFrom: someone\nbody without separator\n", _hist()),
    # "\r\n\r\n" holds no "\n\n", so chisto never leaves the header: nothing counted.
    ("crlf-blank-line", b"Subject: hi\r\nTo: x\r\n\r\nbody text\r\n", _hist()),
    ("empty", b"", _hist()),
    ("separator-only", b"\n\n", _hist()),
    ("case-folded", b"H: v\n\nAbC 123 aBc", _hist(a=2, b=2, c=2, _1=1, _2=1, _3=1)),
    # The header's letters never count, however many there are.
    ("header-ignored", b"Subject: zzzzzzzzzzzz\n\nz", _hist(z=1)),
    # A single leading "\n" is not a separator: counting starts after the later "\n\n".
    ("blank-first", b"\nabc\n\nxyz", _hist(x=1, y=1, z=1)),
    ("blank-first-double", b"\n\nabc", _hist(a=1, b=1, c=1)),
    # Three newlines: the first two separate, the third is body (and not counted).
    ("three-newlines", b"H: v\n\n\nab", _hist(a=1, b=1)),
    ("lf-cr-lf-is-no-separator", b"H: v\n\r\nab\n\ncd", _hist(c=1, d=1)),
    # Only ASCII folds (C locale): Latin-1 \xc4 and UTF-8 "Ä" count for nothing.
    ("eight-bit", b"H: v\n\n\xc4\xe4\xff\xe9Z\xc3\x84", _hist(z=1)),
    # KELVIN SIGN and "İ" in UTF-8: str.lower() would make them "k" and "i"; chisto does not.
    ("unicode-fold-is-not-ascii", b"H: v\n\n\xe2\x84\xaa\xc4\xb0", _hist()),
    ("punctuation", b"H: v\n\n!@#$%^&*()_+-=[]{};':\",./<>?`~\\|\t\x7f 7", _hist(_7=1)),
    ("max-255-unscaled", b"H: v\n\n" + b"a" * 255 + b"B" * 7, _hist(a=255, b=7)),
    # 255/256 = 0.99609375 exactly: a = 255, b = int(99.609375) = 99.
    ("max-256", b"H: v\n\n" + b"a" * 256 + b"b" * 100, _hist(a=255, b=99)),
    # 255/100000: b = int(2.55) = 2, c = int(0.9996) = 0, d = int(1.00215) = 1.
    ("max-100000", b"H: v\n\n" + b"e" * 100000 + b"b" * 1000 + b"c" * 392 + b"d" * 393,
     _hist(e=255, b=2, c=0, d=1)),
    # In doubles (255/319)*319 = 254.99999999999997, which truncates to 254.
    ("max-319-truncates-to-254", b"H: v\n\n" + b"q" * 319, _hist(q=254)),
]


@pytest.mark.parametrize(("message", "expected"), [case[1:] for case in HAND_CASES],
                         ids=[case[0] for case in HAND_CASES])
def test_raw_histogram_hand_cases(message: bytes, expected: str) -> None:
    """raw_histogram gives the hand-computed answer."""
    assert raw_histogram(message).hex() == expected


@pytest.mark.parametrize(("message", "expected"), [case[1:] for case in HAND_CASES],
                         ids=[case[0] for case in HAND_CASES])
def test_chisto_hand_cases(chisto: Path, message: bytes, expected: str) -> None:
    """chisto itself gives the hand-computed answer (our reading of the C is right)."""
    assert run_chisto(chisto, message).hex() == expected
