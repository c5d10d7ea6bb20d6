#!/usr/bin/env python3
"""Coverage-guided fuzzing (atheris/libFuzzer) of parsing, fingerprinting and tagging.

    python3 tests/fuzz/fuzz_pipeline.py -runs=20000 -max_len=65536 [CORPUS_DIR]

Any exception escaping ``analyse`` or ``tag_message`` is a finding (libFuzzer writes the
input to crash-*).  Seeds: a few structured messages so mutation starts from real MIME.
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    from mailfilter.config import FingerprintSettings
    from mailfilter.engine import analyse
    from mailfilter.headers import tag_message

SETTINGS = FingerprintSettings(max_body_bytes=256 * 1024)


def one_input(data: bytes) -> None:
    analysis = analyse(data, SETTINGS)
    fingerprint = analysis.fingerprint
    assert len(fingerprint.histogram) == 36
    assert list(fingerprint.sketch) == sorted(set(fingerprint.sketch))
    assert len(fingerprint.sketch) <= SETTINGS.sketch_size
    tagged = tag_message(data, "unique")
    assert tagged.count(b"X-Dupfilter: unique") >= 1


def main() -> None:
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
