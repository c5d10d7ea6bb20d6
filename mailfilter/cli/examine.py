"""``dupfilter-db fingerprint``, ``compare`` and ``explain``: what the core makes of
messages, printed (``compare`` needs no store, ``explain`` only reads it)."""

from __future__ import annotations

import argparse
import json
import sys

from mailfilter.config import Settings
from mailfilter.engine import Engine, analyse
from mailfilter.sources import iter_messages


def cmd_fingerprint(args: argparse.Namespace, settings: Settings) -> int:
    if args.histogram:
        settings.fingerprint.histogram = args.histogram
    for label, raw in iter_messages(args.paths):
        fp = analyse(raw, settings.fingerprint).fingerprint
        row = {"path": label, "histogram": fp.histogram.hex(),
               "histogram_sum": fp.histogram_sum, "shingles": fp.shingle_count,
               "words": fp.word_count, "digest": fp.digest.hex(),
               "attachment_chunks": len(fp.chunks)}
        if args.json:
            print(json.dumps(row))
        else:
            print(f"{label}\n  histogram {row['histogram']} (sum {fp.histogram_sum})\n"
                  f"  {fp.shingle_count} shingles, {fp.word_count} words, digest "
                  f"{row['digest']}")
    return 0


def _read_one(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    with open(path, "rb") as handle:
        return handle.read()


def cmd_compare(args: argparse.Namespace, settings: Settings) -> int:
    from mailfilter import similarity
    from mailfilter.fingerprint import character_histogram, shingle_hashes, tokenize
    from mailfilter.message import parse

    raws = [_read_one(args.a), _read_one(args.b)]
    messages = [parse(raw, max_body_bytes=settings.fingerprint.max_body_bytes) for raw in raws]
    fps = [analyse(raw, settings.fingerprint).fingerprint for raw in raws]
    stoplist = frozenset(settings.fingerprint.stoplist)
    shingles = [shingle_hashes(tokenize(m.text, stoplist), settings.fingerprint.ngram)
                for m in messages]
    raw_hist = [character_histogram(m.raw_body)[0] for m in messages]
    size = args.chunk_size
    if args.chunking == "fsp":
        chunks = [similarity.fsp_chunks(raw, size) for raw in raws]
    elif args.chunking == "sbc":
        chunks = [similarity.fsp_chunks(raws[0], size), similarity.sbc_chunks(raws[1], raws[0],
                                                                               size)]
    else:
        chunks = [similarity.cdc_chunks(raw, size) for raw in raws]
    sets = [set(int(h) for h in s) for s in shingles]
    positions, largest = similarity.histogram_distance(fps[0].histogram, fps[1].histogram)
    raw_positions, raw_largest = similarity.histogram_distance(*raw_hist)
    try:
        lcs = similarity.lcs_similarity(*chunks)
    except ValueError:
        lcs = None
    k = settings.fingerprint.sketch_size
    result = {
        "a": args.a, "b": args.b,
        "histogram": {"a": fps[0].histogram.hex(), "b": fps[1].histogram.hex(),
                      "sum_a": fps[0].histogram_sum, "sum_b": fps[1].histogram_sum,
                      "positions_differing": positions, "largest_difference": largest},
        "histogram_raw": {"a": raw_hist[0].hex(), "b": raw_hist[1].hex(),
                          "positions_differing": raw_positions,
                          "largest_difference": raw_largest},
        "shingles": {"a": len(sets[0]), "b": len(sets[1]),
                     "resemblance": similarity.resemblance(*sets),
                     "containment_a_in_b": similarity.containment(sets[0], sets[1]),
                     "containment_b_in_a": similarity.containment(sets[1], sets[0]),
                     "sketch_resemblance": similarity.sketch_resemblance(
                         fps[0].sketch, fps[1].sketch, k)},
        "digest_equal": fps[0].digest == fps[1].digest,
        "chunks": {"chunking": args.chunking, "a": len(chunks[0]), "b": len(chunks[1]),
                   "formula1": similarity.chunk_similarity(*chunks), "formula2_lcs": lcs},
    }
    if args.json:
        print(json.dumps(result))
        return 0
    for index in range(36):
        x, y = fps[0].histogram[index], fps[1].histogram[index]
        print(f"r[{index:2d}]={x:6d}\ts[{index:2d}]={y:6d}" + ("" if x == y else "\tDIFF"))
    sh, ch = result["shingles"], result["chunks"]
    print(f"\nhistogram ({settings.fingerprint.histogram}): sums {fps[0].histogram_sum} / "
          f"{fps[1].histogram_sum}, {positions} positions differ, largest difference "
          f"{largest}")
    print(f"histogram (raw, chisto): {raw_positions} positions differ, largest {raw_largest}")
    print(f"shingles: {sh['a']} / {sh['b']}, resemblance {sh['resemblance']:.4f} "
          f"(sketch estimate {sh['sketch_resemblance']:.4f}), containment a in b "
          f"{sh['containment_a_in_b']:.4f}, b in a {sh['containment_b_in_a']:.4f}")
    print(f"exact digest: {'equal' if result['digest_equal'] else 'different'}")
    lcs_text = "n/a (too many chunks)" if lcs is None else f"{lcs:.4f}"
    print(f"chunks ({args.chunking}): {ch['a']} / {ch['b']}, similarity = "
          f"{ch['formula1']:.4f} (formula 1), {lcs_text} (formula 2, LCS)")
    return 0


def cmd_explain(args: argparse.Namespace, settings: Settings) -> int:
    raw = sys.stdin.buffer.read()
    with Engine(settings, readonly=True, create=False) as engine:
        verdict = engine.check(raw, args.recipient, record=False)
    if args.json:
        out = verdict.as_dict()
        out["candidates"] = [
            {"id": e.record.doc_id, "message_id": e.record.message_id, "found_by": e.found_by,
             "verdict": e.verdict, "reason": e.reason or None, "score": e.score,
             "resemblance": e.resemblance, "containment": e.containment,
             "histogram_positions": e.histogram_positions,
             "attachment_similarity": e.attachment_similarity, "note": e.note or None}
            for e in verdict.evidence]
        print(json.dumps(out))
        return 0
    fp = verdict.fingerprint
    print(f"X-Dupfilter: {verdict.header_value()}")
    print(f"message: {verdict.message_id or '(no Message-ID)'}; {fp.word_count} words, "
          f"{fp.shingle_count} shingles, histogram sum {fp.histogram_sum} "
          f"({fp.histogram_chars} characters)")
    if verdict.defects:
        print(f"parsing notes: {'; '.join(verdict.defects)}")
    if not verdict.evidence:
        print("no stored record shares a Message-ID, digest, histogram window or shingle "
              "with this message")
    for e in verdict.evidence:
        measures = []
        if e.resemblance is not None:
            measures.append(f"resemblance {e.resemblance:.2f}")
        if e.containment is not None:
            measures.append(f"containment {e.containment:.2f}")
        measures.append(f"histogram {e.histogram_positions} bins differ")
        if e.attachment_similarity is not None:
            measures.append(f"attachments {e.attachment_similarity:.2f}")
        decision = f"{e.verdict} by {e.reason}" if e.reason else f"no match: {e.note}"
        if e.note and e.reason:
            decision += f" ({e.note})"
        print(f"#{e.record.doc_id} {e.record.message_id or '(no Message-ID)'} seen "
              f"{e.record.seen}x, found by {', '.join(e.found_by)}: {'; '.join(measures)} "
              f"→ {decision}")
    return 0
