"""Peer for bench/throughput.py: rensa's RMinHash + RMinHashLSH (Rust) over a list of mail files.

Usage: python rensa_peer.py LISTFILE

The same dedup loop as datasketch_peer.py, with rensa's compiled MinHash: each body
(everything after the first blank line, raw: no MIME decoding, no HTML) is lowercased,
split into ``[^\\W_]+`` tokens and shingled into word 5-grams; an RMinHash(num_perm=128) of
the shingles is queried against an RMinHashLSH(threshold=0.5, 128 permutations, 32 bands
of 4 rows) and, when nothing similar is known, inserted.  rensa wants the bands to divide
the permutations: 32 x 4 puts the S-curve's midpoint at (1/32)^(1/4) = 0.42, the nearest
such split to datasketch's own choice for 0.5 (25 x 5: 0.53; 16 x 8 would be 0.71).
Bodies with fewer than 5 tokens have no shingles and are neither queried nor inserted.
Prints ``messages N`` and ``similar N`` (bodies whose query found something).
"""

from __future__ import annotations

import sys

from raw_shingles import word_shingles
from rensa import RMinHash, RMinHashLSH

NUM_PERM = 128
BANDS = 32
THRESHOLD = 0.5
SEED = 42


def shingles(raw: bytes) -> set[str]:
    """Word 5-grams of the body of one raw message."""
    return word_shingles(raw)


def main(list_file: str) -> None:
    """Run the dedup loop over every file named in ``list_file`` and print the counts."""
    lsh = RMinHashLSH(THRESHOLD, NUM_PERM, BANDS)
    messages = similar = 0
    with open(list_file, encoding="utf-8") as names:
        for key, line in enumerate(names):
            with open(line.rstrip("\n"), "rb") as f:
                grams = shingles(f.read())
            messages += 1
            if not grams:
                continue
            minhash = RMinHash(NUM_PERM, SEED)
            minhash.update(list(grams))
            if lsh.query(minhash):
                similar += 1
                continue
            lsh.insert(key, minhash)
    print(f"messages {messages}\nsimilar {similar}")


if __name__ == "__main__":
    main(sys.argv[1])
