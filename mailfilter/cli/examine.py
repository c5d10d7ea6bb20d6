"""``dupfilter-db fingerprint``, ``compare`` and ``explain``: what the core makes of
messages, printed (``compare`` needs no store, ``explain`` only reads it).

User-facing text names each measure for what it is (docs/design.md cites where each comes
from): *word-shingle resemblance* (Broder, estimated from the bottom-k sketches),
*containment*, the *character histogram* (bins of 0-9a-z that differ), the *exact digest*
of the whitespace-folded text, and the *length-weighted chunk similarity* and *LCS chunk
similarity* of content-defined chunks.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
from collections.abc import Iterator
from typing import TYPE_CHECKING

from mailfilter.config import Settings
from mailfilter.engine import Engine, analyse
from mailfilter.fingerprint import ALPHABET, HISTOGRAM_BINS
from mailfilter.headers import verdict_value
from mailfilter.rules import describe
from mailfilter.sources import iter_messages

if TYPE_CHECKING:
    from mailfilter.detector import Evidence, Verdict

def rule_words(rule: str | None) -> str:
    """``rule`` and what it decides, for text output."""
    if not rule:
        return "no rule matched"
    meaning = describe(rule)
    return f"{rule} ({meaning})" if meaning else rule


# ------------------------------------------------------------------------- fingerprint

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


# ---------------------------------------------------------------------------- evidence

def evidence_dict(e: Evidence) -> dict[str, object]:
    """One weighed candidate, for ``--json``: every measure, the rule and why."""
    def rounded(value: float | None) -> float | None:
        return None if value is None else round(float(value), 4)

    return {"id": e.record.doc_id, "message_id": e.record.message_id, "seen": e.record.seen,
            "found_by": list(e.found_by), "verdict": e.kind, "rule": e.rule,
            "reason": e.measure or None, "score": rounded(e.score), "note": e.note or None,
            "resemblance": rounded(e.resemblance), "containment": rounded(e.containment),
            "histogram_bins_differing": e.histogram_positions,
            "histogram_largest_difference": e.histogram_largest,
            "attachment_chunk_similarity": rounded(e.attachment_similarity),
            "attachment": None if e.attachment is None else {
                "name": e.attachment.name, "size": e.attachment.size},
            "recipients_seen": list(e.recipients_seen)}


def evidence_measures(e: Evidence) -> str:
    """The measures of one weighed candidate, named for what they are."""
    measures = []
    if e.resemblance is not None:
        measures.append(f"word-shingle resemblance {e.resemblance:.2f}")
    if e.containment is not None:
        measures.append(f"containment {e.containment:.2f}")
    if e.histogram_positions is not None:
        measures.append(f"character histogram: {e.histogram_positions} of {HISTOGRAM_BINS} "
                        "bins differ")
    if e.attachment_similarity is not None:
        measures.append(f"attachments' length-weighted chunk similarity "
                        f"{e.attachment_similarity:.2f}")
    return "; ".join(measures) or "no measure applies"


def evidence_decision(e: Evidence) -> str:
    """What the rules made of one candidate: the verdict, the rule, and why (or why not)."""
    if e.is_duplicate:
        score = f", score {e.score:.2f}" if e.score is not None else ""
        text = f"{e.kind} by rule {e.rule or e.measure}{score}"
    else:
        text = f"not a duplicate: {'rule ' + e.rule if e.rule else 'no rule matched'}"
    return f"{text}: {e.note}" if e.note else text


def verdict_json(verdict: Verdict) -> dict[str, object]:
    """``Verdict.as_dict()`` with the fingerprint summary and every weighed candidate."""
    out = verdict.as_dict()
    fp = verdict.fingerprint
    out["header"] = verdict_value(verdict)
    out["decided_by"] = verdict.evidence[0].rule if verdict.evidence else None
    out["fingerprint"] = {"words": fp.word_count, "shingles": fp.shingle_count,
                          "histogram_sum": fp.histogram_sum,
                          "histogram_characters": fp.histogram_chars,
                          "attachment_chunks": len(fp.chunks)}
    out["defects"] = list(verdict.defects)
    out["candidates"] = [evidence_dict(e) for e in verdict.evidence]
    out["boilerplate"] = [{"hash": f"{value:08x}", "different_texts": count}
                          for value, count in verdict.boilerplate]
    return out


def print_verdict(verdict: Verdict, label: str | None, *, common: int) -> None:
    """``explain``'s text: the header, the message, what decided, every candidate
    (``common``: the setting common_postings, for the boilerplate line)."""
    fp = verdict.fingerprint
    if label is not None:
        print(f"== {label}")
    print(f"X-Dupfilter: {verdict_value(verdict)}")
    print(f"message: {verdict.message_id or '(no Message-ID)'}; {fp.word_count} words, "
          f"{fp.shingle_count} shingles, character histogram sum {fp.histogram_sum} "
          f"({fp.histogram_chars} characters)")
    if verdict.defects:
        print(f"parsing notes: {'; '.join(verdict.defects)}")
    if verdict.skipped_by:
        print(f"not checked: allow rule {verdict.skipped_by!r} skips it")
    if verdict.boilerplate:
        counts = ", ".join(f"{value:08x} ({count}{'+' if count >= common else ''})"
                           for value, count in verdict.boilerplate[:8])
        print(f"boilerplate: {len(verdict.boilerplate)} of its shingles were left out of "
              f"lookup and resemblance: each is held by {common} or more different stored "
              f"texts (copies of one text count once): {counts}"
              + (", …" if len(verdict.boilerplate) > 8 else ""))
    if not verdict.evidence:
        print("why: no stored record shares a Message-ID, digest, histogram window, shingle "
              "or attachment chunk with this message"
              + (" (but for the boilerplate above)" if verdict.boilerplate else ""))
        return
    best = verdict.evidence[0]
    if verdict.is_duplicate:
        match = verdict.match
        print(f"why: {verdict.kind} of #{match.doc_id} "
              f"{match.message_id or '(no Message-ID)'} by rule {rule_words(best.rule)}"
              + (f": {best.note}" if best.note else ""))
        if verdict.attachment is not None:
            print(f"attachment matched: {verdict.attachment.name or '(no name)'} "
                  f"({verdict.attachment.size} bytes)")
    else:
        print(f"why unique: the closest candidate, #{best.record.doc_id}, was kept apart by "
              f"{rule_words(best.rule)}" + (f": {best.note}" if best.note else ""))
    print(f"candidates weighed: {len(verdict.evidence)}")
    for e in verdict.evidence:
        print(f"  #{e.record.doc_id} {e.record.message_id or '(no Message-ID)'} seen "
              f"{e.record.seen}x, found by {', '.join(e.found_by) or '-'}")
        print(f"    measures: {evidence_measures(e)}")
        print(f"    → {evidence_decision(e)}")


# ----------------------------------------------------------------------------- explain

def _explain_inputs(paths: list[str]) -> Iterator[tuple[str, bytes]]:
    if not paths or paths == ["-"]:
        yield "-", sys.stdin.buffer.read()
        return
    yield from iter_messages(paths)


def cmd_explain(args: argparse.Namespace, settings: Settings) -> int:
    paths = list(getattr(args, "paths", None) or [])
    several = len(paths) > 1
    with Engine(settings, readonly=True, create=False) as engine:
        for label, raw in _explain_inputs(paths):
            verdict = engine.check(raw, args.recipient, record=False)
            if args.json:
                out = verdict_json(verdict)
                if paths:
                    out = {"path": label, **out}
                print(json.dumps(out))
            else:
                print_verdict(verdict, label if several or (paths and label != "-") else None,
                              common=settings.detector.common_postings)
                if several:
                    print()
    return 0


# ----------------------------------------------------------------------------- compare

def _pair_verdict(raws: list[bytes], settings: Settings) -> Verdict:
    """The detector's verdict on B with only A stored: a throw-away store, no allow rules,
    global scope (the pair, not the envelope, is compared)."""
    trial = copy.deepcopy(settings)
    trial.policy.rules = []
    trial.detector.scope = "global"
    with tempfile.TemporaryDirectory(prefix="dupfilter-compare-") as scratch:
        trial.store.path = scratch
        trial.store.map_size_mb = 4
        with Engine(trial) as engine:
            engine.check(raws[0], record=True)
            return engine.check(raws[1], record=False)


def cmd_compare(args: argparse.Namespace, settings: Settings) -> int:
    from mailfilter import similarity
    from mailfilter.fingerprint import character_histogram, shingle_hashes, tokenize
    from mailfilter.message import parse

    raws = [_read_one(args.a), _read_one(args.b)]
    messages = [parse(raw, max_body_bytes=settings.fingerprint.max_body_bytes) for raw in raws]
    fps = [analyse(raw, settings.fingerprint).fingerprint for raw in raws]
    verdict = _pair_verdict(raws, settings)
    evidence = verdict.evidence[0] if verdict.evidence else None
    detector = settings.detector
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
    one_chunk_each = len(chunks[0]) <= 1 and len(chunks[1]) <= 1
    histogram_applies = min(fp.histogram_chars for fp in fps) >= detector.histogram_min_chars
    sketch_resemblance = similarity.sketch_resemblance(fps[0].sketch, fps[1].sketch, k)
    result = {
        "a": args.a, "b": args.b,
        "verdict": verdict.kind,
        "rule": evidence.rule if evidence else None,
        "score": None if verdict.score is None else round(float(verdict.score), 4),
        "why": (evidence.note or None) if evidence else
        "nothing in common: no shared Message-ID, digest, histogram window or shingle",
        "candidate": evidence_dict(evidence) if evidence else None,
        "thresholds": {"resemblance": detector.resemblance_threshold,
                       "histogram_max_bins": detector.histogram_max_positions,
                       "histogram_min_characters": detector.histogram_min_chars,
                       "min_words": detector.min_words,
                       "attachment_chunk_similarity": detector.attachment_threshold},
        "words": {"a": fps[0].word_count, "b": fps[1].word_count},
        "histogram": {"a": fps[0].histogram.hex(), "b": fps[1].histogram.hex(),
                      "sum_a": fps[0].histogram_sum, "sum_b": fps[1].histogram_sum,
                      "characters_a": fps[0].histogram_chars,
                      "characters_b": fps[1].histogram_chars,
                      "positions_differing": positions, "largest_difference": largest,
                      "rule_applies": histogram_applies},
        "histogram_raw": {"a": raw_hist[0].hex(), "b": raw_hist[1].hex(),
                          "positions_differing": raw_positions,
                          "largest_difference": raw_largest},
        "shingles": {"a": len(sets[0]), "b": len(sets[1]),
                     "resemblance": similarity.resemblance(*sets),
                     "containment_a_in_b": similarity.containment(sets[0], sets[1]),
                     "containment_b_in_a": similarity.containment(sets[1], sets[0]),
                     "sketch_resemblance": sketch_resemblance},
        "digest_equal": fps[0].digest == fps[1].digest,
        "chunks": {"chunking": args.chunking, "a": len(chunks[0]), "b": len(chunks[1]),
                   "length_weighted_similarity": similarity.chunk_similarity(*chunks),
                   "lcs_similarity": lcs, "one_chunk_each": one_chunk_each},
    }
    if args.json:
        print(json.dumps(result))
        return 0
    sh, ch = result["shingles"], result["chunks"]
    if verdict.is_duplicate:
        print(f"verdict: B is a {verdict.kind} of A, by rule "
              f"{rule_words(evidence.rule)}" + (f", score {verdict.score:.2f}"
                                                 if verdict.score is not None else ""))
    else:
        print("verdict: unique: B is not a duplicate of A ("
              + (rule_words(evidence.rule) if evidence else "nothing in common") + ")")
    if result["why"]:
        print(f"why: {result['why']}")
    if verdict.attachment is not None:
        print(f"attachment matched: {verdict.attachment.name or '(no name)'} "
              f"({verdict.attachment.size} bytes)")
    print("\nthe measures the detector weighs:")
    same = "equal" if result["digest_equal"] else "different"
    print(f"  exact digest of the folded text    {same}")
    short = min(fps[0].word_count, fps[1].word_count) < detector.min_words
    print(f"  word-shingle resemblance (sketch)  {sketch_resemblance:.2f}"
          f"   threshold {detector.resemblance_threshold:.2f}"
          + (f"; words {fps[0].word_count} / {fps[1].word_count}: fewer than "
             f"{detector.min_words} on one side: the short-text rules apply" if short else ""))
    print(f"  character histogram                {positions} of {HISTOGRAM_BINS} bins differ "
          "(largest "
          f"{largest}); sums {fps[0].histogram_sum} / {fps[1].histogram_sum}; "
          + (f"a near-duplicate at most {detector.histogram_max_positions} bins apart"
             if histogram_applies else
             f"not used: under {detector.histogram_min_chars} counted characters "
             f"({fps[0].histogram_chars} / {fps[1].histogram_chars})"))
    if fps[0].chunks and fps[1].chunks:
        attachment = similarity.chunk_similarity(fps[0].chunks, fps[1].chunks)
        print(f"  attachments' chunk similarity      {attachment:.2f}   threshold "
              f"{detector.attachment_threshold:.2f} (length-weighted, sampled chunks)")
    else:
        print("  attachments                        "
              + ("none on either side" if not fps[0].chunks and not fps[1].chunks
                 else "on one side only"))
    print("\nother measures (reported, not acted on):")
    print(f"  exact shingle resemblance {sh['resemblance']:.4f} ({sh['a']} / {sh['b']} "
          f"shingles); containment of A in B {sh['containment_a_in_b']:.4f}, of B in A "
          f"{sh['containment_b_in_a']:.4f}")
    print(f"  character histogram of the raw body (as chisto): {raw_positions} bins differ, "
          f"largest {raw_largest}")
    lcs_text = "n/a (too many chunks)" if lcs is None else f"{lcs:.4f}"
    print(f"  whole messages in {args.chunking} chunks ({ch['a']} / {ch['b']}, {size} bytes "
          f"{'average' if args.chunking == 'cdc' else 'blocks'}): length-weighted chunk "
          f"similarity {ch['length_weighted_similarity']:.4f}, LCS chunk similarity "
          f"{lcs_text}")
    if one_chunk_each:
        print(f"    (each message is a single chunk: under {size} bytes, any difference "
              "makes these 0; they mean something for large messages and attachments)")
    if args.bins:
        print(f"\ncharacter histogram bins ({settings.fingerprint.histogram}), A and B:")
        for index, name in enumerate(ALPHABET.decode()):
            x, y = fps[0].histogram[index], fps[1].histogram[index]
            print(f"  {name} r[{index:2d}]={x:6d}\ts[{index:2d}]={y:6d}"
                  + ("" if x == y else "\tDIFF"))
    return 0
