"""What every peer in bench/ hashes: lower-case word 5-grams of a raw message's body (the
bytes after the first blank line; no MIME, no HTML), as the peers' own examples do."""

from __future__ import annotations

import re

NGRAM = 5
_TOKEN = re.compile(r"[^\W_]+")
_BLANK_LINE = re.compile(rb"\n\r?\n")


def word_shingles(raw: bytes) -> set[str]:
    """Word 5-grams of the body of one raw message."""
    split = _BLANK_LINE.search(raw)
    body = raw[split.end():] if split else b""
    tokens = _TOKEN.findall(body.decode("utf-8", "replace").lower())
    return {" ".join(tokens[i:i + NGRAM]) for i in range(len(tokens) - NGRAM + 1)}
