"""Fingerprints: histogram, tokens, shingles, sketches, digests and attachment chunks."""

from __future__ import annotations

import os

from helpers import make_message, make_mime, paragraph_text
from hypothesis import given, settings
from hypothesis import strategies as st

from mailfilter.fingerprint import (
    PART_DIGEST_LINES,
    _words,
    character_histogram,
    chunk_digests,
    compute,
    part_digests,
    shingle_array,
    shingle_hashes,
    text_digest,
    tokenize,
)
from mailfilter.message import parse


def fingerprint(raw: bytes, **options: object):  # noqa: ANN201
    return compute(parse(raw), **options)


def test_histogram_counts_and_scales_like_chisto() -> None:
    histogram, counted = character_histogram(b"Hello, World 42!")
    assert counted == 12
    assert histogram[4] == 1 and histogram[2] == 1           # digits 4 and 2
    assert histogram[10 + ord("l") - ord("a")] == 3           # l, lowercased
    scaled, _ = character_histogram(b"a" * 510 + b"b" * 3)
    assert scaled[10] == 255 and scaled[11] == 1              # int(3 * 255/510) = 1


def test_decoded_histogram_sees_through_base64() -> None:
    text = paragraph_text(11)
    plain = fingerprint(make_message(text))
    encoded = fingerprint(make_mime(text, cte="base64"))
    assert plain.histogram == encoded.histogram
    raw_plain = fingerprint(make_message(text), histogram="raw")
    raw_encoded = fingerprint(make_mime(text, cte="base64"), histogram="raw")
    assert raw_plain.histogram != raw_encoded.histogram       # raw mode counts base64 letters


def test_tokens_are_unicode_letters_and_digits_lowercased() -> None:
    assert tokenize("Grüße, MÜNCHEN! 2026_x état-civil") == \
        ["grüße", "münchen", "2026", "x", "état", "civil"]
    assert tokenize("the cat and the hat", stoplist={"the", "and"}) == ["cat", "hat"]


def test_shingle_hashes_are_stable_and_boundary_aware() -> None:
    tokens = "one two three four five six".split()
    first = shingle_hashes(tokens, 5)
    assert len(first) == 2 and all(0 <= value < 2 ** 32 for value in first)
    assert first == sorted(first)
    assert shingle_hashes(["ab", "c", "d", "e", "f"], 5)[0] != \
        shingle_hashes(["a", "bc", "d", "e", "f"], 5)[0]
    assert len(shingle_hashes(["too", "few"], 5)) == 0


def test_shingle_hash_value_is_fixed_across_processes() -> None:
    code = ("from mailfilter.fingerprint import shingle_hashes;"
            "print(int(shingle_hashes('she sells sea shells on'.split(), 5)[0]))")
    outputs = {os.popen(f"PYTHONHASHSEED={seed} python3 -c \"{code}\"").read().strip()
               for seed in (1, 2)}
    assert len(outputs) == 1
    assert outputs == {str(int(shingle_hashes("she sells sea shells on".split(), 5)[0]))}


def test_sketch_is_bottom_k_of_all_shingles() -> None:
    text = paragraph_text(5, count=400)
    fp = fingerprint(make_message(text), sketch_size=32)
    everything = shingle_hashes(tokenize(parse(make_message(text)).text), 5)
    assert list(fp.sketch) == everything[:32]
    assert fp.shingle_count == len(everything)


def test_digest_ignores_whitespace_and_line_endings() -> None:
    text = paragraph_text(9)
    rewrapped = " ".join(text.split())
    assert fingerprint(make_message(text)).digest == fingerprint(make_message(rewrapped)).digest
    assert fingerprint(make_message(text)).digest == \
        fingerprint(make_message(text, crlf=True)).digest
    assert fingerprint(make_message(text)).digest != \
        fingerprint(make_message(text + " extra")).digest


def test_attachments_change_digest_and_give_chunks() -> None:
    data = os.urandom(50_000)
    with_data = fingerprint(make_mime("see attached", attachment=data))
    other = fingerprint(make_mime("see attached", attachment=os.urandom(50_000)))
    assert with_data.chunks and with_data.attachment_bytes == 50_000
    assert with_data.digest != other.digest
    chunks = chunk_digests(data, 4096)
    assert sum(length for _, length in chunks) == len(data)
    assert 4 <= len(chunks) <= 40


def test_shingle_hash_vector_is_pinned() -> None:
    """Stores shared by several hosts (Redis) need the same value everywhere; changing the
    hash means a new `hash` store parameter, so this vector must not move silently."""
    assert shingle_hashes("she sells sea shells on".split(), 5) == [937132920]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=400),
       st.sets(st.sampled_from(["the", "a", "of", "and", "x1"]), max_size=3))
def test_fast_ascii_words_are_the_tokens_of_tokenize(text: str, stoplist: set[str]) -> None:
    """Most mail is ASCII and takes the byte-translation path; its tokens (and so every
    shingle) must be exactly those of the Unicode regex."""
    stop = frozenset(stoplist)
    words = _words(text, stop)
    assert [word.decode() for word in words] == tokenize(text, stop)
    assert shingle_array(words, 3).tolist() == shingle_array(tokenize(text, stop), 3).tolist()


def test_unicode_text_keeps_its_letters_as_tokens() -> None:
    text = "Grüße aus Köln — naïve café №5 東京 x_y"
    assert _words(text, frozenset()) == ["grüße", "aus", "köln", "naïve", "café", "5", "東京",
                                         "x", "y"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["mail", "dup", "filter", "x", "42", "été", "東京", "a" * 30]),
                max_size=300),
       st.integers(min_value=1, max_value=8),
       st.binary(max_size=3000))
def test_python_and_numpy_arithmetic_agree(words: list[str], ngram: int, data: bytes) -> None:
    """The pipe filter hashes shingles and counts the histogram in Python (no numpy import
    for one message), batch work and daemons with numpy: the values must be the same."""
    from mailfilter import fingerprint as fp
    assert fp.shingle_list(words, ngram) == (shingle_array(words, ngram).tolist()
                                            if len(words) >= ngram else [])
    counts = fp._bin_counts_numpy(data)
    folded = data.translate(fp._FOLD_CASE)
    assert counts == [folded.count(value) for value in fp._BIN_VALUES]
    for tail_from in (0, max(0, len(words) - 20)):
        saved = fp._VECTOR_MIN_TOKENS
        try:
            fp._VECTOR_MIN_TOKENS = 10 ** 9       # Python
            python = fp._shingles(words, ngram, 64, tail_from)
            fp._VECTOR_MIN_TOKENS = 0             # numpy (imported by this test process)
            assert fp._shingles(words, ngram, 64, tail_from) == python
        finally:
            fp._VECTOR_MIN_TOKENS = saved


def test_a_short_text_spread_over_a_thousand_lines_gets_no_part_digests() -> None:
    """Part digests let a short message re-sent with a line added be found; a text of so
    few words over thousands of rule or blank lines is crafted, and reading each of its
    lines cost 0.75 s a MB: it gets none (PART_DIGEST_LINES), the short text keeps its."""
    short = "Hello Ann,\n\nare we still on for ten tomorrow?\n\nBob\n"
    assert len(part_digests(short, [], text_digest(short))) == 6
    spread = short + "_" * 32 + "\n\n" + ("_" * 32 + "\n") * PART_DIGEST_LINES
    assert part_digests(spread, [], text_digest(spread)) == ()
    # Below the cap such a text still gets them (its lines and paragraphs with words).
    fewer = short + "_" * 32 + "\n\n" + ("_" * 32 + "\n") * (PART_DIGEST_LINES - 20)
    assert part_digests(fewer, [], text_digest(fewer))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="aé日1 \n\t\r\u00a0\u2003\u3000\x1c\x85\x0b", max_size=80),
       st.integers(1, 9))
def test_a_long_text_is_folded_for_its_digest_as_a_short_one_is(text: str, size: int) -> None:
    """A long text is whitespace-folded a round at a time, by a substitution (split and
    join made a list of its words: 70 MB for 4 MiB; one substitution over all of it an
    object for each run it replaced, 137 MB): the same digest as split and join, ASCII or
    not, whatever the rounds' size."""
    import mailfilter.fingerprint as module
    ascii_text = text.encode("ascii", "ignore").decode()
    digests = [module.text_digest(piece) for piece in (text + "é", ascii_text)]
    assert digests[0] == module.text_digest(" ".join((text + "é").split()))
    saved = module._FOLD_ROUND
    module._FOLD_ROUND = size
    try:
        assert [module.text_digest(piece) for piece in (text + "é", ascii_text)] == digests
    finally:
        module._FOLD_ROUND = saved


def test_a_long_texts_tokens_are_hashed_a_round_at_a_time_alike() -> None:
    """The tokens of a long non-ASCII text are encoded a round at a time (1.4 million at
    once took 80 MB): the same shingles, across a round's edge too."""
    import mailfilter.fingerprint as module
    tokens = [f"wörd{number % 97}" for number in range(1000)]
    whole = module.shingle_list(tokens, 5)
    saved = module._ENCODE_ROUND
    module._ENCODE_ROUND = 7
    try:
        assert module.shingle_list(tokens, 5) == whole
        assert module.shingle_array(tokens, 5).tolist() == whole
    finally:
        module._ENCODE_ROUND = saved
