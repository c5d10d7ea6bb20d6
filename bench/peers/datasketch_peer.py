"""Peer for bench/throughput.py: datasketch MinHash + MinHashLSH over a list of mail files.

Usage: python datasketch_peer.py LISTFILE

LISTFILE names one message file per line. Each body (everything after the first blank line)
is lowercased, split into ``[^\\W_]+`` tokens and shingled into word 5-grams; a
MinHash(num_perm=128) of the shingles is queried against a MinHashLSH(threshold=0.5) and,
when nothing similar is known, inserted (the same dedup loop as Text::DeDuper's SYNOPSIS).
Bodies with fewer than 5 tokens have no shingles and are neither queried nor inserted.
Prints ``messages N`` and ``similar N`` (bodies whose query found something).
"""

from __future__ import annotations

import sys

from datasketch import MinHash, MinHashLSH
from raw_shingles import word_shingles

NUM_PERM = 128
THRESHOLD = 0.5


def shingles(raw: bytes) -> set[bytes]:
    """Word 5-grams of the body of one raw message, UTF-8 encoded for hashing."""
    return {gram.encode() for gram in word_shingles(raw)}


def main(list_file: str) -> None:
    """Run the dedup loop over every file named in ``list_file`` and print the counts."""
    lsh = MinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM)
    messages = similar = 0
    with open(list_file, encoding="utf-8") as names:
        for key, line in enumerate(names):
            with open(line.rstrip("\n"), "rb") as f:
                grams = shingles(f.read())
            messages += 1
            if not grams:
                continue
            minhash = MinHash(num_perm=NUM_PERM)
            minhash.update_batch(grams)
            if lsh.query(minhash):
                similar += 1
                continue
            lsh.insert(key, minhash)
    print(f"messages {messages}\nsimilar {similar}")


if __name__ == "__main__":
    main(sys.argv[1])
