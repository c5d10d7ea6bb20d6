#!/usr/bin/env python3
"""Check cost against store size: LMDB at 10k, 100k and 1M records, and a footer storm.

The store is filled with records whose fingerprints follow the shared corpus's
distributions: each synthetic record takes a real corpus message's histogram (a few bins
nudged) and its shingle count, and draws its bottom-k sketch as the k smallest of that many
uniform 64-bit hashes (what a real text of that length gives).  Bulk loading uses large
transactions.  At each size the script measures, on real corpus messages kept out of the
fill: check latency p50/p99 for fresh messages and for near-duplicates of stored ones (and
their recall), records per second when recording, store bytes per record and peak RSS. It
prints a table and writes a PNG plot of latency against store size.

The mass-mail scenario (``--mass``, 10,000) delivers one newsletter personalised for that
many subscribers, each copy to its own mailbox, then checks a second copy for 100 of those
mailboxes (each must be a duplicate) and a copy for 100 new ones (each must be new), and
compares the check's CPU p99 with the same checks against a store holding one copy.

The footer storm stores messages that all end with the same five-line list footer and the
same signature, then checks unrelated messages carrying that footer: latency must stay
flat and none may be called a near-duplicate.

    python3 bench/scale.py                      # 10k, 100k, 1M; footer storm 100k
    python3 bench/scale.py --sizes 10000,100000 --storm 20000 --plot /tmp/scale.png
    python3 bench/scale.py --sizes '' --storm 0 --mass 10000   # the mass-mail scenario alone
    python3 bench/scale.py --checkout ../old    # the same with another checkout's mailfilter

Latencies are wall-clock; the ``cpu`` columns are the checking thread's CPU time, which other
work on a shared machine does not inflate (a busy neighbour can make one wall-clock p99 ten
times another).
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def _code_checkout() -> Path:
    """The checkout whose mailfilter is measured: ``--checkout PATH``, else this one."""
    if "--checkout" in sys.argv[:-1]:
        return Path(sys.argv[sys.argv.index("--checkout") + 1]).resolve()
    return REPO


sys.path.insert(0, str(_code_checkout()))

from mailfilter.config import Settings, load_settings  # noqa: E402
from mailfilter.engine import Analysis, Engine, analyse  # noqa: E402
from mailfilter.store import Record  # noqa: E402

DEFAULT_CORPUS = REPO.parent / "shared" / "corpus" / "spamassassin.tar.gz"
FOOTER = (
    "You received this message because you are subscribed to the dupfilter users group.\n"
    "To unsubscribe from this group and stop receiving emails from it, send an email to\n"
    "dupfilter-users+unsubscribe@lists.example.org. To post, write to the list address.\n"
    "Archives and settings: https://lists.example.org/mailman/listinfo/dupfilter-users\n"
    "Please keep the list rules in mind and be kind to other members of the community.\n"
)
SIGNATURE = "-- \nPat Example, Operations\nExample Hosting Ltd, Harbour Road 1, Portsmouth\n"


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def load_corpus(path: Path, scratch: Path) -> list[bytes]:
    with tarfile.open(path) as tar:
        tar.extractall(scratch, filter="data")
    return [p.read_bytes() for p in sorted(scratch.rglob("*.txt"))]


def analyse_all(raws: list[bytes], settings: Settings) -> list[Analysis]:
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        return list(pool.map(analyse, raws, [settings.fingerprint] * len(raws), chunksize=64))


def synthetic_records(bases: list[Analysis], count: int, start: int, sketch_size: int,
                      rng: np.random.Generator) -> list[Record]:
    """Records shaped like real ones (see the module docstring)."""
    records = []
    for number in range(start, start + count):
        base = bases[number % len(bases)].fingerprint
        histogram = np.frombuffer(base.histogram, dtype=np.uint8).astype(np.int32)
        if base.histogram_chars > 255:
            bins = rng.integers(0, 36, size=3)
            histogram[bins] = np.clip(histogram[bins] + rng.integers(-2, 3, size=3), 0, 255)
        histogram_bytes = histogram.astype(np.uint8).tobytes()
        shingles = max(base.shingle_count, 1)
        k = min(sketch_size, base.shingle_count)
        gaps = rng.exponential(2.0 ** 32 / (shingles + 1), size=k)
        sketch = tuple(sorted({min(int(v), 2 ** 32 - 1) for v in np.cumsum(gaps)}))
        records.append(Record(
            histogram=histogram_bytes, histogram_sum=int(histogram.sum()),
            histogram_chars=base.histogram_chars, sketch=sketch,
            shingle_count=base.shingle_count, word_count=base.word_count,
            digest=rng.bytes(16), message_id_key=rng.bytes(16),
            message_id=f"<synthetic-{number}@bench.example>", first_seen=1_700_000_000,
            last_seen=1_700_000_000 + number // 1000))
    return records


def bulk_load(engine: Engine, records: list[Record], batch: int = 20_000) -> float:
    started = time.perf_counter()
    for offset in range(0, len(records), batch):
        chunk = records[offset:offset + batch]
        engine.store.atomically(lambda chunk=chunk: [engine.store.add(r) for r in chunk])
    return time.perf_counter() - started


def near_duplicate(raw: bytes, rng: random.Random) -> bytes:
    """A resent copy with three words changed and a sentence added: a near-duplicate."""
    head, _, body = raw.replace(b"\r\n", b"\n").partition(b"\n\n")
    words = body.split(b" ")
    for _ in range(3):
        if len(words) > 10:
            words[rng.randrange(len(words))] = b"changed"
    head = b"\n".join(line for line in head.split(b"\n")
                      if not line.lower().startswith(b"message-id:"))
    return head + b"\nMessage-ID: <variant-%d@bench>\n\n" % rng.randrange(1 << 30) + \
        b" ".join(words) + b"\nAdded one more sentence at the end.\n"


def timed_checks(engine: Engine, analyses: list[Analysis], rounds: int = 3
                 ) -> tuple[list[float], int, list[float]]:
    """Per-check milliseconds (``rounds`` passes, so p50/p99 are medians over passes by
    the caller), how many checks found a duplicate in the first pass, and per-check
    milliseconds of the thread's CPU time."""
    latencies, found, cpu = [], 0, []
    for round_number in range(rounds):
        for analysis in analyses:
            started, cpu_started = time.perf_counter(), time.thread_time()
            verdict = engine.decide(analysis, record=False)
            cpu.append((time.thread_time() - cpu_started) * 1000)
            latencies.append((time.perf_counter() - started) * 1000)
            found += verdict.is_duplicate if round_number == 0 else 0
    return latencies, found, cpu


def tail_work(engine: Engine, analyses: list[Analysis], latencies: list[float],
              rounds: int = 3) -> dict[str, float]:
    """What the slowest 1% of checks do that the others do not: records weighed and
    histogram-window entries compared (medians), from an untimed lookup of each message."""
    per = [statistics.median(latencies[i::len(analyses)]) for i in range(len(analyses))]
    slow = sorted(range(len(analyses)), key=per.__getitem__)[-max(1, len(analyses) // 100):]
    work = []
    for analysis in analyses:
        query = engine.detector.query(analysis.fingerprint, analysis.message_id)
        found = engine.store.lookup(query)
        weighed = engine.detector.candidates(analysis.fingerprint, query, found)
        work.append((len(weighed.records), found.histogram_window_size))
    return {"slow_records": statistics.median(work[i][0] for i in slow),
            "slow_window": statistics.median(work[i][1] for i in slow),
            "all_records": statistics.median(w[0] for w in work),
            "all_window": statistics.median(w[1] for w in work),
            "max_window": max(w[1] for w in work)}


def round_percentile(latencies: list[float], rounds: int, fraction: float) -> float:
    """Median over passes of each pass's percentile (machine noise hits one pass)."""
    size = len(latencies) // rounds
    return statistics.median(percentile(latencies[i * size:(i + 1) * size], fraction)
                             for i in range(rounds))


def store_bytes(engine: Engine) -> tuple[float, float]:
    """(bytes of B-tree pages, bytes of the data file) per record.

    Bulk loading in large transactions leaves up to half the file as free pages (LMDB
    copies every page it changes and reuses the old ones only two transactions later);
    `mdb_copy -c` or deliveries in small transactions bring the file back to the tree.
    """
    env = engine.store.env
    with env.begin() as txn:
        pages = sum(txn.stat(db)["branch_pages"] + txn.stat(db)["leaf_pages"]
                    + txn.stat(db)["overflow_pages"]
                    for db in [engine.store.docs, engine.store.by_time,
                               *engine.store.index.values()])
    stats = engine.store.stats()
    return pages * env.stat()["psize"] / stats["records"], stats["file_bytes"] / stats["records"]


def run_scale(args: argparse.Namespace, settings: Settings, analyses: list[Analysis],
              raws: list[bytes], scratch: Path) -> list[dict[str, float]]:
    rng = random.Random(5)
    order = list(range(len(raws)))
    rng.shuffle(order)
    fresh_ids, original_ids, record_ids = order[:500], order[500:800], order[800:1800]
    bases = [analyses[i] for i in order[1800:]]
    fresh = [analyses[i] for i in fresh_ids]
    variants = analyse_all([near_duplicate(raws[i], rng) for i in original_ids], settings)
    to_record = [analyses[i] for i in record_ids]
    rows = []
    generator = np.random.default_rng(11)
    with Engine(settings, str(scratch / "scale-store")) as engine:
        engine.store.atomically(lambda: [engine.decide(analyses[i], record=True, now=1)
                                         for i in original_ids])
        filled = engine.store.stats()["records"]
        for size in args.sizes:
            need = size - filled
            load_seconds = 0.0
            loaded = max(need, 0)
            while need > 0:
                step = min(need, 100_000)
                records = synthetic_records(bases, step, filled, settings.fingerprint.sketch_size,
                                            generator)
                load_seconds += bulk_load(engine, records)
                filled += step
                need -= step
            fresh_ms, fresh_false, fresh_cpu = timed_checks(engine, fresh, args.rounds)
            near_ms, near_found, near_cpu = timed_checks(engine, variants, args.rounds)
            tail = tail_work(engine, fresh, fresh_ms)
            started = time.perf_counter()
            for analysis in to_record[:200]:     # one durable transaction each, as procmail
                engine.decide(analysis, record=True)
            single_rate = 200 / (time.perf_counter() - started)
            started = time.perf_counter()
            engine.store.atomically(lambda: [engine.decide(a, record=True)
                                             for a in to_record[200:1000]])
            batch_rate = 800 / (time.perf_counter() - started)
            filled = engine.store.stats()["records"]
            used, on_disk = store_bytes(engine)
            rows.append({
                "records": filled, "fresh_p50": round_percentile(fresh_ms, args.rounds, 0.5),
                "fresh_p99": round_percentile(fresh_ms, args.rounds, 0.99),
                "near_p50": round_percentile(near_ms, args.rounds, 0.5),
                "near_p99": round_percentile(near_ms, args.rounds, 0.99),
                "fresh_cpu_p99": round_percentile(fresh_cpu, args.rounds, 0.99),
                "near_cpu_p99": round_percentile(near_cpu, args.rounds, 0.99),
                "recall": near_found / len(variants),
                "fresh_flagged": fresh_false / len(fresh), "record_single": single_rate,
                "record_batch": batch_rate, "used_per_record": used,
                "file_per_record": on_disk,
                "load_rate": loaded / load_seconds if load_seconds else 0,
                "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, **tail})
            print_row(rows[-1])
            engine.store.forget([doc_id for analysis in to_record if analysis.message_id
                                 for doc_id in engine.store.find_message_id(
                                     analysis.message_id)])
            filled = engine.store.stats()["records"]
    return rows


def print_header() -> None:
    print(f"{'records':>9} {'fresh p50':>9} {'p99':>6} {'cpu p99':>7} {'near p50':>9} "
          f"{'p99':>6} {'cpu p99':>7} "
          f"{'recall':>7} {'flagged':>7} {'rec/s 1txn':>10} {'rec/s batch':>11} "
          f"{'B/rec tree':>10} {'B/rec file':>10} {'load/s':>8} {'RSS MB':>7}")


def print_row(row: dict[str, float]) -> None:
    print(f"{row['records']:>9,} {row['fresh_p50']:>8.2f}m {row['fresh_p99']:>5.2f}m "
          f"{row['fresh_cpu_p99']:>6.2f}m "
          f"{row['near_p50']:>8.2f}m {row['near_p99']:>5.2f}m {row['near_cpu_p99']:>6.2f}m "
          f"{row['recall']:>7.1%} "
          f"{row['fresh_flagged']:>7.1%} {row['record_single']:>10.0f} "
          f"{row['record_batch']:>11.0f} {row['used_per_record']:>10.0f} "
          f"{row['file_per_record']:>10.0f} {row['load_rate']:>8.0f} {row['rss_mb']:>7.0f}",
          flush=True)


def storm_text(rng: random.Random, vocabulary: list[str]) -> str:
    words = [rng.choice(vocabulary) for _ in range(rng.randint(25, 250))]
    lines = [" ".join(words[i:i + 12]) for i in range(0, len(words), 12)]
    return "Hello all,\n\n" + "\n".join(lines) + "\n\n" + FOOTER + SIGNATURE


def storm_message(number: int, text: str) -> bytes:
    return (f"From: member{number % 977}@example.org\nTo: dupfilter-users@lists.example.org\n"
            f"Subject: [dupfilter-users] topic {number}\nMessage-ID: <storm-{number}@example.org>"
            f"\nList-Id: <dupfilter-users.lists.example.org>\n\n{text}").encode()


def run_storm(args: argparse.Namespace, settings: Settings, raws: list[bytes],
              scratch: Path) -> dict[str, float]:
    vocabulary = sorted({w for raw in raws[:1500] for w in raw.decode("latin-1").split()
                         if w.isalpha() and 3 <= len(w) <= 12})
    rng = random.Random(3)
    messages = [storm_message(n, storm_text(rng, vocabulary)) for n in range(args.storm)]
    probes = [storm_message(10_000_000 + n, storm_text(rng, vocabulary)) for n in range(500)]
    stored = analyse_all(messages, settings)
    checked = analyse_all(probes, settings)
    with Engine(settings, str(scratch / "storm-store")) as engine:
        for offset in range(0, len(stored), 20_000):
            chunk = stored[offset:offset + 20_000]
            engine.store.atomically(lambda chunk=chunk: [engine.decide(a, record=True, now=1)
                                                         for a in chunk])
        records = engine.store.stats()["records"]
        latencies, flagged, _cpu = timed_checks(engine, checked)
    result = {"records": records, "p50": round_percentile(latencies, 3, 0.5),
              "p99": round_percentile(latencies, 3, 0.99), "flagged": flagged / len(checked)}
    print(f"\nfooter storm: {records:,} stored messages sharing one 5-line footer and "
          f"signature; 500 unrelated messages with the same footer checked:\n"
          f"  check p50 {result['p50']:.2f} ms, p99 {result['p99']:.2f} ms; called "
          f"near-duplicate: {flagged} ({result['flagged']:.1%})")
    return result


NEWSLETTER_NAMES = ["Ann", "Bob", "Carol", "Dan", "Eve", "Finn", "Gus", "Hal", "Ida", "Jo"]


def newsletter_copy(text: str, subscriber: int, copy: int = 0) -> bytes:
    """One subscriber's personalised copy of one newsletter issue: their greeting, their
    unsubscribe token and address in the body, a Message-ID of its own."""
    name = NEWSLETTER_NAMES[subscriber % len(NEWSLETTER_NAMES)]
    token = f"{subscriber * 2654435761 % 2 ** 32:08x}{copy:02x}"
    return (f"From: Weekly Letter <letters@news.example.com>\nTo: sub{subscriber}@example.net"
            f"\nSubject: The Weekly Letter, issue 214\nMessage-ID: <i214.{subscriber}.{copy}"
            f"@news.example.com>\nList-Unsubscribe: <https://news.example.com/u/{token}>\n\n"
            f"Hi {name},\n\n{text}\n\nYou receive this as sub{subscriber}@example.net. "
            f"Unsubscribe: https://news.example.com/u/{token}\n").encode()


def timed_recipient_checks(engines: list[Engine], probes: list[tuple[Analysis, str]],
                           rounds: int) -> tuple[list[list[float]], list[list[str]]]:
    """Per-check CPU milliseconds of the thread (``rounds`` passes) and the first pass's
    verdict kinds, each probe checked for its own mailbox, nothing recorded — in every
    engine's store in turn, probe by probe, so that a busy neighbour on the machine weighs
    on all of them alike."""
    cpu: list[list[float]] = [[] for _ in engines]
    kinds: list[list[str]] = [[] for _ in engines]
    for round_number in range(rounds):
        for analysis, mailbox in probes:
            for number, engine in enumerate(engines):
                started = time.thread_time()
                verdict = engine.decide(analysis, [mailbox], record=False)
                cpu[number].append((time.thread_time() - started) * 1000)
                if round_number == 0:
                    kinds[number].append(str(verdict.kind))
    return cpu, kinds


def run_mass_mail(args: argparse.Namespace, settings: Settings, raws: list[bytes],
                  scratch: Path) -> dict[str, float]:
    """One newsletter personalised for ``--mass`` subscribers, each copy delivered to its
    own mailbox (per-recipient scope), then checked: a second copy for 100 of those
    mailboxes (each must be a duplicate) and a copy for 100 mailboxes that never had it
    (each must be new).  The same 200 checks against a store holding only the first
    subscriber's copy give the empty-store cost the busy one is compared with (the two
    stores checked in turn, probe by probe)."""
    assert settings.detector.scope == "recipient", "the scenario needs per-recipient scope"
    vocabulary = sorted({w for raw in raws[:1500] for w in raw.decode("latin-1").split()
                         if w.isalpha() and 3 <= len(w) <= 12})
    rng = random.Random(7)
    words = [rng.choice(vocabulary) for _ in range(420)]
    text = "\n".join(" ".join(words[i:i + 12]) for i in range(0, len(words), 12))
    copies = analyse_all([newsletter_copy(text, n) for n in range(args.mass)], settings)
    again = rng.sample(range(args.mass), 100)
    probes = [(a, f"sub{n}@example.net") for a, n in zip(analyse_all(
        [newsletter_copy(text, n, copy=1) for n in again], settings), again, strict=True)]
    probes += [(a, f"sub{n}@example.net") for a, n in zip(analyse_all(
        [newsletter_copy(text, n) for n in range(args.mass, args.mass + 100)], settings),
        range(args.mass, args.mass + 100), strict=True)]
    expected = ["duplicate-or-near"] * 100 + ["unique"] * 100
    results = {}
    labels = ("empty", "busy")
    engines = [Engine(settings, str(scratch / f"mass-{label}")) for label in labels]
    try:
        for engine, stored in zip(engines, (copies[:1], copies), strict=True):
            for offset in range(0, len(stored), 2_000):
                chunk = stored[offset:offset + 2_000]
                mailboxes = range(offset, offset + len(chunk))
                engine.store.atomically(lambda engine=engine, chunk=chunk,
                                        mailboxes=mailboxes: [
                    engine.decide(a, [f"sub{n}@example.net"], record=True, now=1)
                    for a, n in zip(chunk, mailboxes, strict=True)])
        timings, verdicts = timed_recipient_checks(engines, probes, args.rounds)
        for label, engine, cpu, kinds in zip(labels, engines, timings, verdicts, strict=True):
            right = sum((kind != "unique") == (want != "unique")
                        for kind, want in zip(kinds, expected, strict=True))
            results[label] = {"records": engine.store.stats()["records"],
                              "p50": round_percentile(cpu, args.rounds, 0.5),
                              "p99": round_percentile(cpu, args.rounds, 0.99),
                              "again_found": sum(k != "unique" for k in kinds[:100]),
                              "new_unique": sum(k == "unique" for k in kinds[100:]),
                              "right": right}
    finally:
        for engine in engines:
            engine.close()
    empty, busy = results["empty"], results["busy"]
    print(f"\nmass mail: one newsletter personalised for {args.mass:,} subscribers, each "
          f"copy to its own mailbox; 100 second copies and 100 copies for new mailboxes "
          f"checked (per-recipient scope, CPU time of the check):")
    print(f"{'store':>6} {'records':>8} {'p50 ms':>7} {'p99 ms':>7} {'again found':>12} "
          f"{'new unique':>11}")
    for label, row in results.items():
        print(f"{label:>6} {row['records']:>8,} {row['p50']:>7.2f} {row['p99']:>7.2f} "
              f"{row['again_found']:>8}/100 {row['new_unique']:>7}/100")
    print(f"busy / empty check CPU p99: {busy['p99'] / empty['p99']:.2f}x (target <= 2x); "
          f"p50 {busy['p50'] / empty['p50']:.2f}x")
    return results


def plot(rows: list[dict[str, float]], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    sizes = [r["records"] for r in rows]
    figure, axis = plt.subplots(figsize=(7, 4.5))
    for key, label, style in (("fresh_p50", "fresh p50", "o-"), ("fresh_p99", "fresh p99", "o--"),
                              ("near_p50", "near-duplicate p50", "s-"),
                              ("near_p99", "near-duplicate p99", "s--")):
        axis.plot(sizes, [r[key] for r in rows], style, label=label)
    axis.axhline(5.0, color="grey", linewidth=0.8, linestyle=":", label="5 ms target (p99)")
    axis.axhline(2 * rows[0]["fresh_p99"], color="tab:orange", linewidth=0.8, linestyle=":",
                 label=f"2 x fresh p99 at {rows[0]['records']:,} (target)")
    axis.set_xscale("log")
    axis.set_xlabel("records in the LMDB store")
    axis.set_ylabel("check latency (ms, lookup + scoring)")
    axis.set_title("dupfilter check latency against store size")
    axis.legend()
    axis.grid(True, which="both", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    print(f"\nplot written to {path}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--sizes", default="10000,100000,1000000",
                        type=lambda s: [int(v) for v in s.split(",") if v],
                        help="store sizes (empty: skip)")
    parser.add_argument("--storm", type=int, default=100_000,
                        help="messages in the footer storm (0: skip)")
    parser.add_argument("--plot", type=Path, default=Path("scale.png"))
    parser.add_argument("--checkout", type=Path, default=REPO,
                        help="measure the mailfilter of another checkout")
    parser.add_argument("--rounds", type=int, default=3, help="passes over the checks")
    parser.add_argument("--mass", type=int, default=10_000,
                        help="subscribers of the mass-mail scenario (0: skip)")
    args = parser.parse_args()
    settings = load_settings(search=False)
    with tempfile.TemporaryDirectory(prefix="dupfilter-scale-") as scratch_name:
        scratch = Path(scratch_name)
        raws = load_corpus(args.corpus, scratch / "corpus")
        analyses = analyse_all(raws, settings)
        print(f"corpus: {len(raws)} messages; default settings (sketch "
              f"{settings.fingerprint.sketch_size}, index {settings.fingerprint.index_size}, "
              f"threshold {settings.detector.resemblance_threshold}, candidates "
              f"{settings.detector.max_candidates}, histogram candidates "
              f"{settings.detector.histogram_candidates})\n")
        rows = []
        if args.sizes:
            print_header()
            rows = run_scale(args, settings, analyses, raws, scratch)
        if rows:
            print("\nfresh checks, slowest 1% against all (medians): records weighed, "
                  "histogram-window entries compared")
            for row in rows:
                print(f"{row['records']:>9,}: slowest {row['slow_records']:.0f} records, "
                      f"{row['slow_window']:,.0f} entries; all {row['all_records']:.0f} "
                      f"records, {row['all_window']:,.0f} entries (largest window "
                      f"{row['max_window']:,.0f})")
            base, top = rows[0], rows[-1]
            print(f"\np99 fresh at {top['records']:,} / at {base['records']:,}: "
                  f"{top['fresh_p99'] / base['fresh_p99']:.2f}x; near-duplicate p99 ratio "
                  f"{top['near_p99'] / base['near_p99']:.2f}x; recall "
                  f"{base['recall']:.1%} → {top['recall']:.1%}")
            print(f"CPU-time p99 fresh at {top['records']:,} / at {base['records']:,}: "
                  f"{top['fresh_cpu_p99'] / base['fresh_cpu_p99']:.2f}x; near-duplicate "
                  f"{top['near_cpu_p99'] / base['near_cpu_p99']:.2f}x")
            plot(rows, args.plot)
        if args.storm:
            run_storm(args, settings, raws, scratch)
        if args.mass:
            run_mass_mail(args, settings, raws, scratch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
