"""CPU of the store part of ``dupfilter-db scan`` a message (the check, the pair rules and
the recording in LMDB, in scan's batched transactions), for this checkout and others, in
one run; the cost of weighing one stored candidate; and whether every verdict is the same.

``scan --jobs N`` analyses messages in N worker processes, but checks and records them in
one process, in order: that part is its critical path, and it is what the daemons do for
each message after its analysis.  This bench runs it over the corpus in a new worker
process per checkout and round (the order of the checkouts rotating from round to round).
Each worker imports the ``mailfilter`` of its checkout, analyses every message once (not
timed), then checks and records them all into a new LMDB store ``--passes`` times, 256 a
transaction through ``Engine.decide_later`` as scan does, with the process's CPU time
measured (``time.process_time``: the writer thread's too).  A last pass times each weigh
of a stored candidate (``Detector._weigh``: every measure, then the pair rules).

Identity: each message's verdict (kind, score, measure, deciding rule, the matched
record's id) is hashed in order; the checkouts must agree.

    python bench/detector_cost.py --compare /tmp/main
    python bench/detector_cost.py --compare /tmp/main --rounds 5 --passes 3
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from analyse_cost import checkout_arguments, message_paths, run_worker

BATCH = 256                    # messages a transaction, as dupfilter-db scan
NOW = 1_796_521_317            # one clock for every pass: the verdicts do not drift


# ---------------------------------------------------------------------------- the worker

def _kind(verdict: object) -> str:
    """The verdict's kind (older checkouts name it ``verdict``)."""
    return str(getattr(verdict, "kind", None) or getattr(verdict, "verdict", ""))


def _verdict_key(verdict: object) -> list:
    match = getattr(verdict, "match", None)
    score = getattr(verdict, "score", None)
    return [_kind(verdict), None if score is None else round(score, 6),
            str(getattr(verdict, "measure", "")), str(getattr(verdict, "decided_by", "")),
            None if match is None else match.doc_id]


def worker(root: Path, files: Path, passes: int, out: Path) -> None:
    """Analyse the messages listed in ``files`` with ``root``'s mailfilter, then time the
    store part over them; results as JSON in ``out``."""
    import time

    sys.path.insert(0, str(root))
    import mailfilter
    from mailfilter.config import Settings
    from mailfilter.detector import Detector
    from mailfilter.engine import Engine, analyse
    from mailfilter.fingerprint import use_numpy

    if not Path(mailfilter.__file__).resolve().is_relative_to(root.resolve()):
        raise SystemExit(f"imported {mailfilter.__file__}, not {root}'s mailfilter")
    use_numpy()
    settings = Settings()
    analyses = [analyse(Path(name).read_bytes(), settings.fingerprint)
                for name in files.read_text().splitlines()]
    scratch = Path(tempfile.mkdtemp(prefix="detector-cost-"))

    def check_all(number: int) -> list:
        settings.store.path = str(scratch / f"store{number}")
        verdicts: list = []
        with Engine(settings) as engine:
            for start in range(0, len(analyses), BATCH):
                verdicts += engine.decide_later(analyses[start:start + BATCH],
                                                now=NOW).result()
        return verdicts

    check_all(-1)                                       # warm-up: imports, patterns
    seconds = []
    for number in range(passes):
        started = time.process_time()
        verdicts = check_all(number)
        seconds.append(time.process_time() - started)
    weighs: list[int] = []
    original = Detector._weigh

    def timed(*args: object, **kwargs: object) -> object:
        started = time.perf_counter_ns()
        result = original(*args, **kwargs)
        weighs.append(time.perf_counter_ns() - started)
        return result

    Detector._weigh = timed                             # type: ignore[method-assign]
    check_all(passes)
    digest = hashlib.sha256(json.dumps([_verdict_key(v) for v in verdicts]).encode())
    kinds: dict[str, int] = {}
    for verdict in verdicts:
        kinds[_kind(verdict)] = kinds.get(_kind(verdict), 0) + 1
    out.write_text(json.dumps({
        "module": mailfilter.__file__, "messages": len(analyses),
        "store_us": min(seconds) / len(analyses) * 1e6, "weighs": weighs,
        "verdicts": digest.hexdigest()[:16], "kinds": kinds}))


# ---------------------------------------------------------------------------- the runner

def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    return checkout_arguments(__doc__.split("\n\n")[0]).parse_args(argv)


def _percentile(values: list[int], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))] / 1000 if ordered \
        else 0.0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        worker(args.worker, args.files, args.passes, args.out)
        return 0
    checkouts = [Path(__file__).resolve().parent.parent, *args.compare]
    names = ["this checkout", *(str(path) for path in args.compare)]
    with tempfile.TemporaryDirectory(prefix="dupfilter-detector-") as tmp_name:
        tmp = Path(tmp_name)
        paths = message_paths(args.corpus, [], tmp, args.limit)
        files = tmp / "files.txt"
        files.write_text("".join(f"{path}\n" for path in paths))
        results: list[list[dict]] = [[] for _ in checkouts]
        for round_number in range(args.rounds):
            order = list(range(len(checkouts)))
            shift = round_number % len(order)
            for index in order[shift:] + order[:shift]:
                work = tmp / f"w{round_number}-{index}"
                work.mkdir()
                result = run_worker(checkouts[index], files, args.passes, False, work,
                                    Path(__file__))
                results[index].append(result)
                print(f"round {round_number + 1}/{args.rounds}: {names[index]}: "
                      f"{result['store_us']:.0f} µs a message", file=sys.stderr)
    load = os.getloadavg()
    print(f"{len(paths):,} messages, {args.rounds} rounds x {args.passes} passes, {BATCH} a "
          f"transaction; load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the end")
    header = ("checkout", "store µs/msg", "x first", "weighs/msg", "weigh median µs",
              "weigh p90 µs", "weigh µs/msg", "verdicts")
    rows = []
    first = statistics.median(r["store_us"] for r in results[0])
    for name, runs in zip(names, results, strict=True):
        store = statistics.median(r["store_us"] for r in runs)
        weighs = runs[-1]["weighs"]
        rows.append((name, f"{store:.0f}", f"{store / first:.2f}",
                     f"{len(weighs) / runs[-1]['messages']:.2f}",
                     f"{_percentile(weighs, 0.5):.1f}", f"{_percentile(weighs, 0.9):.1f}",
                     f"{sum(weighs) / 1000 / runs[-1]['messages']:.1f}",
                     runs[-1]["verdicts"]))
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))
    print("store µs/msg: median over rounds of the best pass's CPU a message (process_time, "
          "the writer thread included); weigh: one stored candidate weighed "
          "(Detector._weigh), from the last round")
    hashes = {runs[-1]["verdicts"] for runs in results}
    kinds = results[0][-1]["kinds"]
    print(f"verdicts: {', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))}; "
          + ("the same in every checkout" if len(hashes) == 1 else
             "THE CHECKOUTS DISAGREE (hashes above)"))
    return 0 if len(hashes) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
