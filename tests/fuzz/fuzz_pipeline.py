#!/usr/bin/env python3
"""Coverage-guided fuzzing (atheris/libFuzzer) of parsing, fingerprinting and tagging.

    python3 tests/fuzz/fuzz_pipeline.py -runs=20000 -max_len=65536 [CORPUS_DIR]

Any exception escaping ``analyse``, ``tag_message``, ``remove_ours`` or ``pass_through``
is a finding (libFuzzer writes the input to crash-*), and so is a broken invariant that a
postmaster relies on, each one no more than the code itself promises:

* ``remove_ours`` and ``pass_through`` never raise (``pass_through`` reports no error),
  and a message without any ``x-dupfilter`` text comes back as the very same bytes;
* nothing after the first empty line (the header/body separator, as ``parse`` finds it
  once CRLF is read as LF) is lost or changed: it ends the output of ``remove_ours``,
  ``pass_through`` and ``tag_message``, byte for byte;
* no incoming ``X-Dupfilter:`` field is left in the header as ``parse`` reads it (bare LF
  and CRLF both end a line): none after ``remove_ours``, only ours after ``tag_message``;
* ``tag_message`` adds one ``X-Dupfilter:`` line, and removing ours from its output gives
  what removing ours from the input gives (both remove the same incoming fields), give or
  take the line end that tagging puts after our header in an input without a final one;
* the exact digest is the same whether the message's lines end in CRLF or LF
  (``parse`` reads CRLF as LF; ``test_digest_ignores_whitespace_and_line_endings``).

Seeds: a few structured messages so mutation starts from real MIME.
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fuzz_support import body_after_separator  # noqa: E402

with atheris.instrument_imports():
    from mailfilter.config import FingerprintSettings
    from mailfilter.engine import analyse
    from mailfilter.headers import pass_through, remove_ours, tag_message
    from mailfilter.message import parse

SETTINGS = FingerprintSettings(max_body_bytes=256 * 1024)


def line_endings(raw: bytes) -> tuple[bytes, bytes]:
    """(``raw`` with every line ending LF, the same with every line ending CRLF).

    CRs before an LF are line-end CRs and go; a CR elsewhere in a line stays in both.
    """
    lf = raw
    while b"\r\n" in lf:
        lf = lf.replace(b"\r\n", b"\n")
    return lf, lf.replace(b"\n", b"\r\n")


def fields(raw: bytes) -> int:
    """How many ``X-Dupfilter:`` fields ``parse`` finds in the header of ``raw``."""
    return sum(name == "x-dupfilter" for name, _ in parse(raw).headers)


def check_headers(data: bytes) -> None:
    removed = remove_ours(data)
    passed, error = pass_through(data)
    assert error is None, repr(error)
    assert passed == removed
    if b"dupfilter" not in data.lower():
        assert removed is data
    tagged = tag_message(data, "unique")
    assert tagged.count(b"X-Dupfilter: unique") >= 1
    again = remove_ours(tagged)
    # Tagging ends our header's line: an input without a final line end may come back
    # from tagging-then-removing with one (``tag_message(b"From x")``).
    assert again == removed or (not data.endswith(b"\n") and again.startswith(removed)
                                and again[len(removed):] in (b"\n", b"\r\n")), \
        "tagging and removing take out different lines"
    # No incoming field survives, as a mail reader finds fields (``parse`` reads a bare LF
    # as a line end, as the SMTP filter's CRLF rewriting makes it one): none after
    # removing, ours alone after tagging.
    assert fields(removed) == 0, "an incoming X-Dupfilter survived remove_ours"
    assert fields(tagged) <= 1, "an incoming X-Dupfilter survived tag_message"
    body = body_after_separator(data)
    if body is not None:
        assert removed.endswith(body), "remove_ours lost or changed the body"
        assert tagged.endswith(body), "tag_message lost or changed the body"


def one_input(data: bytes) -> None:
    analysis = analyse(data, SETTINGS)
    fingerprint = analysis.fingerprint
    assert len(fingerprint.histogram) == 36
    assert list(fingerprint.sketch) == sorted(set(fingerprint.sketch))
    assert len(fingerprint.sketch) <= SETTINGS.sketch_size
    check_headers(data)
    if b"\n" in data:
        lf, crlf = line_endings(data)
        digests = {analyse(variant, SETTINGS).fingerprint.digest if variant != data
                   else fingerprint.digest for variant in (lf, crlf)}
        assert len(digests) == 1, "CRLF and LF copies have different digests"


def main() -> None:
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
