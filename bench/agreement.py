"""Does a corpus scan still agree with exact resemblance?  (issue 13's recall guard)

The shared corpus is scanned in order, as ``dupfilter-db scan`` does (check, then record,
global scope).  For every message, the exact word 5-gram resemblance (Jaccard of the full
shingle sets of the canonical texts, no sketch) to every earlier message is computed; a
message whose best earlier match reaches 0.8 is a *pair*, and dupfilter should call it a
duplicate or near-duplicate.  Recall is the share of pairs it calls so.

The rules that keep look-alikes apart also keep some of these pairs apart, on purpose: two
issues of a daily newsletter whose only words that differ are the date, an offer of 8
against one of 25, an error at line 94 against one at line 207 (the data differ); the same
eight words from two senders under two subjects (a short text without context: two RSS
items whose links, reduced to their site, read alike).  So the misses are listed with the
rule that decided, and recall is given twice: over all pairs, and over the pairs no such
rule keeps apart.  Third, the pairs that are the same text again (exact digest equal, or
exact resemblance of 0.95 or more) and not a reply to the earlier message: those must be
found whatever the rules (recall on them >= 0.98), and each miss is listed.

    python bench/agreement.py [--threshold 0.8] [--limit N] [--examples 20]
"""

from __future__ import annotations

import argparse
import collections
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from mailfilter.config import load_settings
from mailfilter.engine import Engine
from mailfilter.fingerprint import shingle_hashes, tokenize
from mailfilter.message import parse

BENCH = Path(__file__).resolve().parent
DEFAULT_CORPUS = BENCH.parents[1] / "shared" / "corpus" / "spamassassin.tar.gz"
TARGET = 0.98
SAME_TEXT = 0.95


def corpus_messages(tarball: Path, into: Path, limit: int | None) -> list[tuple[str, bytes]]:
    with tarfile.open(tarball) as archive:
        archive.extractall(into, filter="data")
    files = sorted(into.rglob("*.txt"))[:limit]
    root = next((p.parent.parent for p in files), into)
    return [(str(p.relative_to(root)), p.read_bytes()) for p in files]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--threshold", type=float, default=0.8)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--examples", type=int, default=20)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    settings = load_settings(search=False)
    settings.detector.scope = "global"
    with tempfile.TemporaryDirectory(prefix="dupfilter-agreement-") as folder:
        messages = corpus_messages(args.corpus, Path(folder) / "corpus", args.limit)
        shingles: list[set[int]] = []
        postings: dict[int, list[int]] = collections.defaultdict(list)
        pairs = flagged = 0
        agreeing_pairs = agreeing_flagged = 0
        misses: collections.Counter[str] = collections.Counter()
        examples: list[str] = []
        # The same text again: exact digest equal, or exact resemblance >= SAME_TEXT,
        # and not a reply to the earlier message.
        same_pairs = same_flagged = 0
        same_examples: list[str] = []
        same_apart: collections.Counter[str] = collections.Counter()
        first_by_digest: dict[bytes, int] = {}
        message_ids: list[str | None] = []
        with Engine(settings, str(Path(folder) / "store")) as engine:
            for number, (path, raw) in enumerate(messages):
                analysis = engine.analyse(raw)
                verdict = engine.decide(analysis)
                parsed = parse(raw)
                own = set(shingle_hashes(tokenize(parsed.text), 5))
                shared: collections.Counter[int] = collections.Counter()
                for value in own:
                    for earlier in postings[value]:
                        shared[earlier] += 1
                best, partner = max(((count / len(own | shingles[earlier]), earlier)
                                     for earlier, count in shared.items()),
                                    default=(0.0, -1))
                digest = analysis.fingerprint.digest
                if digest in first_by_digest and analysis.fingerprint.word_count:
                    best, partner = max(best, 1.0), first_by_digest[digest]
                first_by_digest.setdefault(digest, number)
                shingles.append(own)
                message_ids.append(parsed.message_id)
                for value in own:
                    postings[value].append(number)
                if best >= SAME_TEXT and partner >= 0 and \
                        message_ids[partner] not in parsed.thread:
                    same_pairs += 1
                    same_flagged += verdict.is_duplicate
                    top = verdict.evidence[0] if verdict.evidence else None
                    if not verdict.is_duplicate and top is not None and (
                            top.rule == "short-text" or (top.rule == "identifiers" and
                                                         top.note.startswith("same text"))):
                        # On purpose: a short text without context; one text whose data
                        # differ in the subject alone (a daily issue, another offer).
                        same_apart[str(top.rule)] += 1
                    elif not verdict.is_duplicate and len(same_examples) < args.examples:
                        why = f"{top.rule or 'no rule'}: {top.note}" if top else "no candidate"
                        same_examples.append(f"  {path}  after {messages[partner][0]}  "
                                             f"exact {best:.2f}  {why}"[:220])
                if best < args.threshold:
                    continue
                pairs += 1
                called = verdict.is_duplicate
                flagged += called
                top = verdict.evidence[0] if verdict.evidence else None
                rule = (top.rule or "no rule") if top is not None else "no candidate"
                on_purpose = top is not None and top.rule in ("identifiers", "short-text")
                if not on_purpose:
                    agreeing_pairs += 1
                    agreeing_flagged += called
                if not called:
                    misses[rule] += 1
                    if len(examples) < args.examples:
                        note = top.note if top is not None else ""
                        examples.append(f"  {path}  exact {best:.2f}  {rule}: {note}"[:190])
    seconds = time.perf_counter() - started
    recall = flagged / pairs if pairs else 1.0
    agreeing = agreeing_flagged / agreeing_pairs if agreeing_pairs else 1.0
    print(f"corpus: {len(messages)} messages scanned in order, {seconds:.0f} s")
    print(f"pairs with exact resemblance >= {args.threshold}: {pairs}; called duplicate or "
          f"near-duplicate: {flagged} (recall {recall:.3f})")
    print(f"of them, pairs no rule keeps apart on purpose (data that differ, a short text "
          f"without context): {agreeing_pairs}; called: {agreeing_flagged} "
          f"(recall {agreeing:.3f}, target {TARGET})")
    print("misses by the rule that decided: " + (", ".join(
        f"{rule} {count}" for rule, count in misses.most_common()) or "none"))
    if examples:
        print("examples:")
        print("\n".join(examples))
    same = same_flagged / same_pairs if same_pairs else 1.0
    apart = sum(same_apart.values())
    same_kept = same_flagged / (same_pairs - apart) if same_pairs > apart else 1.0
    print(f"the same text again (exact digest equal or exact resemblance >= {SAME_TEXT}, "
          f"not a reply to the earlier message): {same_pairs}; called: {same_flagged} "
          f"(recall {same:.3f}); kept apart on purpose: {apart} ("
          + (", ".join(f"{rule} {count}" for rule, count in same_apart.most_common())
             or "none") + f"); recall on the others {same_kept:.3f}, target {TARGET}")
    if same_examples:
        print("its other misses:")
        print("\n".join(same_examples))
    return 0 if agreeing >= TARGET and same_kept >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
