"""Command line: ``dupfilter`` (the pipe filter) and ``dupfilter-db`` (administration).

No detection logic lives here: commands turn files and flags into calls on
:class:`~mailfilter.engine.Engine` and print what comes back.
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
import time
from collections import Counter, deque
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from itertools import islice
from pathlib import Path

from mailfilter import __version__
from mailfilter.config import (
    ConfigError,
    FingerprintSettings,
    Settings,
    check_milter_settings,
    check_smtpd_settings,
    load_settings,
    parse_duration,
)
from mailfilter.detector import Verdict
from mailfilter.engine import Analysis, Engine, analyse
from mailfilter.headers import pass_through, tag_message
from mailfilter.sources import FileRef, iter_messages, read_file
from mailfilter.store import StoreError

EX_TEMPFAIL = 75
_BATCH = 256
_CHUNK = 32


def _settings(args: argparse.Namespace) -> Settings:
    settings = load_settings(args.config)
    if getattr(args, "db", None):
        settings.store.path = args.db
    return settings


def _fail(program: str, message: str, code: int = 2) -> int:
    print(f"{program}: {message}", file=sys.stderr)
    return code


# -- dupfilter ---------------------------------------------------------------------------

def _filter_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dupfilter",
        description="Check one message (stdin) against the store of seen mail. "
                    "With --tag, write it to stdout with an X-Dupfilter: header "
                    "(any incoming one removed); with --check, answer by exit status.",
        epilog="procmail:  :0 fw  | dupfilter --tag     then  :0  * ^X-Dupfilter: (near-)?"
               "duplicate  duplicates/      or  :0 HB  * ? dupfilter --check  duplicates/. "
               "A filter that fails passes the message through unchecked, without any "
               "X-Dupfilter: header (exit 0); "
               "exit 75 only if even that is impossible.")
    parser.add_argument("--version", action="version", version=f"dupfilter {__version__}")
    parser.add_argument("--db", metavar="DIR|URL",
                        help="store: an LMDB folder or a redis:// URL "
                             "(default: [store] path, else $XDG_STATE_HOME/dupfilter)")
    parser.add_argument("--config", metavar="FILE", help="TOML settings file")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--tag", action="store_true",
                      help="write the message to stdout with one X-Dupfilter: header")
    mode.add_argument("--check", action="store_true",
                      help="exit 0 for duplicate or near-duplicate, 1 for unique or error")
    parser.add_argument("--no-record", action="store_true",
                        help="check without remembering the message")
    parser.add_argument("--json", action="store_true",
                        help="print the verdict as one JSON object (stdout; stderr with --tag)")
    parser.add_argument("--recipient", action="append", default=[], metavar="ADDR",
                        help="envelope recipient for per-recipient scope (repeatable)")
    return parser


def _say(text: str, stream: object = None) -> None:
    """One line on stderr (procmail's log), or on ``stream``; never raises.

    A log that cannot be written (a full disk, a closed descriptor) must not keep the
    message from coming out: a failing stream is swapped for /dev/null.
    """
    target = sys.stderr if stream is None else stream
    if target is None:      # no stderr at all: print() would write to stdout instead
        return
    try:
        print(text, file=target, flush=True)
    except (OSError, ValueError):
        if target is sys.stderr:
            try:
                sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - for the process's life
            except OSError:
                pass


def filter_main(argv: Sequence[str] | None = None) -> int:
    """``dupfilter``: never loses the message — on any failure it passes it through."""
    parser = _filter_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as usage:
        words = sys.argv[1:] if argv is None else list(argv)
        if usage.code in (0, None) or "--tag" not in words:
            raise
        # A bad flag (a typo in .procmailrc, an option an upgrade removed): argparse has
        # said why; the message still goes through.
        args = argparse.Namespace(tag=True, check=False, json=False, usage_error=True)
    try:
        raw = sys.stdin.buffer.read()
    except OSError as error:
        _say(f"dupfilter: cannot read the message: {error}")
        return EX_TEMPFAIL if args.tag else 1
    verdict: Verdict | None = None
    try:
        if getattr(args, "usage_error", False):
            _say("dupfilter: bad command line; message passed through unchecked")
        else:
            settings = _settings(args)
            with Engine(settings) as engine:
                verdict = engine.check(raw, args.recipient, record=not args.no_record)
            if verdict.defects:
                _say(f"dupfilter: note: {verdict.message_id or 'message without Message-ID'}: "
                     f"{'; '.join(verdict.defects[:4])}")
    except (ConfigError, StoreError) as error:
        _say(f"dupfilter: {error}; message passed through unchecked")
    except MemoryError:
        _say("dupfilter: out of memory; message passed through unchecked")
    except Exception as error:  # noqa: BLE001 - never lose mail over a bug
        _say(f"dupfilter: internal error ({type(error).__name__}: {error}); "
             "message passed through unchecked")
    except BaseException as error:  # KeyboardInterrupt, SystemExit: the message first
        if not args.tag:
            raise
        _say(f"dupfilter: interrupted ({type(error).__name__}); "
             "message passed through unchecked")
    if args.json and verdict is not None:
        try:
            line = json.dumps(verdict.as_dict())
        except Exception as error:  # noqa: BLE001
            line = json.dumps({"error": f"{type(error).__name__}: {error}"})
        _say(line, sys.stderr if args.tag else sys.stdout)
    if args.tag:
        output = None
        if verdict is not None:
            try:
                output = tag_message(raw, verdict.header_value())
            except Exception as error:  # noqa: BLE001
                _say(f"dupfilter: cannot add the header ({error}); passing through")
        if output is None:
            # Unchecked: passed on without our header, and without any that came in (a
            # forged "duplicate" would be filed away) — or unchanged if even that fails.
            output, failure = pass_through(raw)
            if failure is not None:
                _say(f"dupfilter: cannot remove the incoming X-Dupfilter header "
                     f"({type(failure).__name__}: {failure}); passed through unchanged")
        try:
            sys.stdout.buffer.write(output)
            sys.stdout.buffer.flush()
        except OSError as error:
            _say(f"dupfilter: cannot write the message: {error}")
            return EX_TEMPFAIL
        return 0
    if args.check:
        return 0 if verdict is not None and verdict.is_duplicate else 1
    return 0 if verdict is not None else 1


# -- dupfilter-db ------------------------------------------------------------------------

_WORKER_NICE = 5


def _worker_init() -> None:
    """Fingerprinting workers yield the CPU to the main process: it alone does the store
    work, in message order, so it is the critical path; the workers fill the rest."""
    try:
        os.nice(_WORKER_NICE)
    except OSError:
        pass


def _analyse_chunk(raws: list[bytes], settings: FingerprintSettings, keep_headers: bool = True
                   ) -> list[Analysis | Exception]:
    """Worker side: analyse several messages per round trip (less pickling overhead)."""
    out: list[Analysis | Exception] = []
    for raw in raws:
        try:
            out.append(analyse(raw, settings, keep_headers=keep_headers))
        except Exception as error:  # noqa: BLE001 - report, go on with the rest
            out.append(error)
    return out


def _analyse_units(units: list[bytes | FileRef], settings: FingerprintSettings,
                   keep_headers: bool) -> list[list[tuple[str | None, int,
                                                          Analysis | Exception | None]]]:
    """Worker side: read the files among ``units`` and analyse every message in them.

    One list per unit, of (label, size, analysis) per message: label None means the
    unit's own; a file that is not mail gives (None, 0, None); a file that cannot be read,
    (None, 0, its error).
    """
    out: list[list[tuple[str | None, int, Analysis | Exception | None]]] = []
    for unit in units:
        if not isinstance(unit, FileRef):
            out.append([(None, len(unit), _analyse_chunk([unit], settings, keep_headers)[0])])
            continue
        try:
            messages, skipped = read_file(unit)
        except OSError as error:
            out.append([(None, 0, error)])
            continue
        out.append([(None, 0, None)] if skipped else [
            (label, len(raw), _analyse_chunk([raw], settings, keep_headers)[0])
            for label, raw in messages])
    return out


def _analysed(messages: Iterator[tuple[str, bytes | FileRef]], settings: Settings,
              jobs: int, skipped: list[str]) -> Iterator[tuple[str, int, Analysis | Exception]]:
    """(label, size, analysis) in input order; reading and fingerprinting fan out over
    ``jobs`` worker processes.

    Chunks of messages (or of files, which the workers read) stay in flight ahead of the
    consumer, so the workers keep fingerprinting while the caller does the store work.
    """
    fp_settings = settings.fingerprint
    keep_headers = bool(settings.policy.rules)   # only allow rules read them
    if jobs <= 1:
        for label, raw in messages:
            assert not isinstance(raw, FileRef)
            yield label, len(raw), _analyse_chunk([raw], fp_settings)[0]
        return
    in_flight: deque = deque()
    with ProcessPoolExecutor(max_workers=jobs, initializer=_worker_init) as pool:
        while True:
            while len(in_flight) < jobs * 4:
                chunk = list(islice(messages, _CHUNK))
                if not chunk:
                    break
                in_flight.append((chunk, pool.submit(
                    _analyse_units, [data for _, data in chunk], fp_settings, keep_headers)))
            if not in_flight:
                return
            chunk, future = in_flight.popleft()
            for (unit_label, _), results in zip(chunk, future.result(), strict=True):
                for label, size, analysis in results:
                    if analysis is None:
                        skipped.append(unit_label)
                    else:
                        yield label or unit_label, size, analysis


def _progress(total_hint: int | None, enabled: bool):  # noqa: ANN202 - tqdm or a stub
    if enabled:
        from tqdm import tqdm
        return tqdm(total=total_hint, unit="msg", file=sys.stderr, dynamic_ncols=True)
    return None


def _run_over(engine: Engine, paths: list[str], jobs: int, *, record: bool,
              show_progress: bool) -> Iterator[tuple[str, Verdict | Exception, int]]:
    """Check (and record) every message under ``paths`` in order, in batched transactions."""
    skipped: list[str] = []
    messages = iter_messages(paths, skipped, defer_files=jobs > 1)
    results = _analysed(messages, engine.settings, jobs, skipped)
    bar = _progress(None, show_progress)
    now = int(time.time())
    try:
        while True:
            batch = list(islice(results, _BATCH))
            if not batch:
                break

            def run(batch: list = batch) -> list[tuple[str, Verdict | Exception, int]]:
                out: list[tuple[str, Verdict | Exception, int]] = []
                for label, size, analysis in batch:
                    if isinstance(analysis, Exception):
                        out.append((label, analysis, size))
                        continue
                    out.append((label, engine.decide(analysis, record=record, now=now), size))
                return out

            done = engine.store.atomically(run) if record else run()
            if bar is not None:
                bar.update(len(done))
            yield from done
    finally:
        if bar is not None:
            bar.close()
        for name in skipped:
            print(f"dupfilter-db: skipped {name}: does not look like a mail message",
                  file=sys.stderr)


def _verdict_row(label: str, verdict: Verdict) -> dict[str, object]:
    row = {"path": label}
    row.update(verdict.as_dict())
    return row


def cmd_import(args: argparse.Namespace, settings: Settings) -> int:
    counts: Counter[str] = Counter()
    started = time.perf_counter()
    total_bytes = errors = 0
    with Engine(settings) as engine:
        for label, verdict, size in _run_over(engine, args.paths, args.jobs, record=True,
                                              show_progress=sys.stderr.isatty()):
            total_bytes += size
            if isinstance(verdict, Exception):
                errors += 1
                print(f"dupfilter-db: {label}: {type(verdict).__name__}: {verdict}",
                      file=sys.stderr)
            else:
                counts[verdict.verdict] += 1
        records = engine.store.stats()["records"]
    elapsed = time.perf_counter() - started
    total = sum(counts.values())
    print(f"imported {total} messages ({counts['unique']} unique, {counts['duplicate']} "
          f"duplicate, {counts['near-duplicate']} near-duplicate, {errors} failed) in "
          f"{elapsed:.1f} s: {total / elapsed if elapsed else 0:.0f} msg/s, "
          f"{total_bytes / 1e6 / elapsed if elapsed else 0:.1f} MB/s; store has {records} "
          "records")
    return 1 if errors and not total else 0


def cmd_scan(args: argparse.Namespace, settings: Settings) -> int:
    counts: Counter[str] = Counter()
    out = sys.stdout
    if not args.json:
        print(f"{'verdict':<15} {'score':>5}  {'reason':<11} {'path':<50} match", file=out)
    with Engine(settings) as engine:
        for label, verdict, _size in _run_over(engine, args.paths, args.jobs,
                                               record=not args.no_record, show_progress=False):
            if isinstance(verdict, Exception):
                print(f"dupfilter-db: {label}: {type(verdict).__name__}: {verdict}",
                      file=sys.stderr)
                if args.json:
                    print(json.dumps({"path": label, "message_id": None, "verdict": "error",
                                      "score": None, "match": None}), file=out)
                continue
            counts[verdict.verdict] += 1
            if args.json:
                print(json.dumps(_verdict_row(label, verdict)), file=out)
            else:
                score = "" if verdict.score is None else f"{verdict.score:.2f}"
                match = (verdict.match.message_id or f"#{verdict.match.doc_id}") \
                    if verdict.match else ""
                print(f"{verdict.verdict:<15} {score:>5}  {verdict.reason:<11} "
                      f"{label:<50} {match}", file=out)
    if not args.json:
        print(f"\n{sum(counts.values())} messages: {counts['unique']} unique, "
              f"{counts['duplicate']} duplicate, {counts['near-duplicate']} near-duplicate",
              file=out)
    return 0


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


def _no_lmdb_store_yet(location: str) -> bool:
    """True when ``location`` is an LMDB store that does not exist yet: no folder, or a
    folder without ``data.mdb`` (a Redis URL, a file in the way or an unreadable folder
    is not that)."""
    if location.startswith(("redis://", "rediss://", "unix://")):
        return False
    folder = Path(location)
    try:
        os.stat(folder / "data.mdb")
    except FileNotFoundError:
        try:
            return stat.S_ISDIR(os.stat(folder).st_mode)
        except FileNotFoundError:
            return True
        except OSError:
            return False
    except OSError:
        return False
    return False


def cmd_prune(args: argparse.Namespace, settings: Settings) -> int:
    age = parse_duration(args.older_than or settings.store.retention)
    before = int(time.time() - age)
    try:
        engine = Engine(settings, create=False)
    except StoreError:
        location = settings.store.location()
        if not _no_lmdb_store_yet(location):
            raise
        # A fresh install before its first message (the prune timer must not fail): the
        # store is created by the first delivery or import, not here.
        print(f"nothing to prune: no dupfilter store at {location} yet (the first message "
              "or `dupfilter-db import` creates it)")
        return 0
    with engine:
        removed = engine.store.prune(before)
        stats = engine.store.stats()
        left = stats["records"]
    if stats.get("prune") == "by Redis TTL":
        print(f"nothing to prune: records in {stats['location']} expire by Redis TTL "
              f"({settings.store.retention}); {left} records")
        return 0
    print(f"pruned {removed} records last seen before "
          f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(before))}; {left} remain")
    return 0


def _plot_per_day(stats: dict[str, object], path: str) -> None:
    """Messages per day by verdict, as a PNG (matplotlib, the `plot` extra)."""
    try:
        import matplotlib
    except ImportError:
        raise ValueError("--plot needs matplotlib: pip install 'dupfilter[plot]'") from None
    matplotlib.use("Agg")
    import datetime

    import matplotlib.pyplot as plt
    per_day = stats.get("verdicts_per_day") or {}
    days = [datetime.date.fromtimestamp(int(day)) for day in per_day]
    figure, axis = plt.subplots(figsize=(8, 4))
    bottom = [0] * len(days)
    for verdict, colour in (("unique", "#9bbbd4"), ("near-duplicate", "#f0a35e"),
                            ("duplicate", "#d1495b")):
        values = [counts.get(verdict, 0) for counts in per_day.values()]
        axis.bar(days, values, bottom=bottom, label=verdict, color=colour)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    axis.set_ylabel("messages per day")
    axis.set_title(f"dupfilter verdicts per day ({stats['location']})")
    axis.legend()
    figure.autofmt_xdate()
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def cmd_stats(args: argparse.Namespace, settings: Settings) -> int:
    with Engine(settings, readonly=True, create=False) as engine:
        stats = engine.store.stats()
    if args.plot:
        _plot_per_day(stats, args.plot)
    if args.json:
        print(json.dumps(stats))
        return 0

    def when(value: object) -> str:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(value)) if value else "-"

    print(f"store      {stats['location']} ({stats['backend']})")
    print(f"records    {stats['records']}")
    print(f"size       {stats.get('file_bytes', 0) / 1e6:.1f} MB on disk, "
          f"{stats.get('used_bytes', 0) / 1e6:.1f} MB used")
    print(f"age range  {when(stats.get('oldest'))} .. {when(stats.get('newest'))}")
    for day, counts in list(stats.get("verdicts_per_day", {}).items())[-14:]:
        print(f"  {time.strftime('%Y-%m-%d', time.gmtime(int(day)))}  "
              + "  ".join(f"{name} {count}" for name, count in sorted(counts.items())))
    return 0


def cmd_verify(args: argparse.Namespace, settings: Settings) -> int:
    with Engine(settings, readonly=True, create=False) as engine:
        problems = engine.store.verify()
        records = engine.store.stats()["records"]
    for problem in problems:
        print(problem)
    print(f"{records} records checked: {len(problems)} problems")
    return 1 if problems else 0


def cmd_forget(args: argparse.Namespace, settings: Settings) -> int:
    with Engine(settings, create=False) as engine:
        if args.message_id:
            ids = engine.store.find_message_id(args.message_id)
        else:
            verdict = engine.check(sys.stdin.buffer.read(), record=False)
            ids = [e.record.doc_id for e in verdict.evidence if e.verdict != "unique"]
        removed = engine.store.forget(ids)
    print(f"forgot {removed} record{'s' if removed != 1 else ''}")
    return 0 if removed else 1


def _flatten(prefix: str, values: dict[str, object]) -> list[tuple[str, object]]:
    rows: list[tuple[str, object]] = []
    for key, value in values.items():
        if isinstance(value, dict) and key != "rules":
            rows.extend(_flatten(f"{prefix}{key}.", value))
        else:
            rows.append((f"{prefix}{key}", value))
    return rows


def cmd_config(args: argparse.Namespace, settings: Settings) -> int:
    print(f"# settings from {settings.source or 'built-in defaults'}")
    if not args.show:
        # What only a daemon would refuse at start, said here too.
        check_milter_settings(settings)
        check_smtpd_settings(settings)
        print("configuration is valid")
        return 0
    for section, values in asdict(settings).items():
        if section == "source":
            continue
        print(f"\n[{section}]")
        for key, value in _flatten("", values):
            where = settings.origin(f"{section}.{key}")
            if section == "store" and key == "path" and getattr(args, "db", None):
                where = "--db"
            print(f"{key} = {json.dumps(value)}  # {where}")
    return 0


def _db_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dupfilter-db",
        description="Administer dupfilter's store: import and scan mailboxes, fingerprint and "
                    "compare messages, explain verdicts, prune old records.")
    parser.add_argument("--version", action="version", version=f"dupfilter {__version__}")
    parser.add_argument("--db", metavar="DIR|URL", help="store: LMDB folder or redis:// URL")
    parser.add_argument("--config", metavar="FILE", help="TOML settings file")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    jobs = max(1, min(4, os.cpu_count() or 1))

    sub = commands.add_parser("import", help="remember every message of mailboxes")
    sub.add_argument("paths", nargs="+", metavar="PATH", help="mbox, Maildir or folder")
    sub.add_argument("--jobs", type=int, default=jobs, help="fingerprinting processes")
    sub.set_defaults(run=cmd_import)

    sub = commands.add_parser("scan", help="check messages in order, print verdicts, record")
    sub.add_argument("paths", nargs="+", metavar="PATH", help="mbox, Maildir or folder")
    sub.add_argument("--json", action="store_true", help="one JSON object per line")
    sub.add_argument("--no-record", action="store_true", help="check only")
    sub.add_argument("--jobs", type=int, default=jobs, help="fingerprinting processes")
    sub.set_defaults(run=cmd_scan)

    sub = commands.add_parser("fingerprint", help="print fingerprints of messages")
    sub.add_argument("paths", nargs="+", metavar="PATH")
    sub.add_argument("--json", action="store_true")
    sub.add_argument("--histogram", choices=("raw", "decoded"))
    sub.set_defaults(run=cmd_fingerprint, no_store=True)

    sub = commands.add_parser("compare", help="every measure between two messages or files")
    sub.add_argument("a", metavar="A")
    sub.add_argument("b", metavar="B")
    sub.add_argument("--chunking", choices=("fsp", "cdc", "sbc"), default="cdc")
    sub.add_argument("--chunk-size", type=int, default=4096, help="block or average size")
    sub.add_argument("--json", action="store_true")
    sub.set_defaults(run=cmd_compare, no_store=True)

    sub = commands.add_parser("explain", help="why a message (stdin) is or is not a duplicate")
    sub.add_argument("--json", action="store_true")
    sub.add_argument("--recipient", action="append", default=[], metavar="ADDR")
    sub.set_defaults(run=cmd_explain)

    sub = commands.add_parser("prune", help="remove records not seen for a while")
    sub.add_argument("--older-than", metavar="AGE", help="e.g. 30d, 12h, 90m (default: "
                     "[store] retention)")
    sub.set_defaults(run=cmd_prune)

    sub = commands.add_parser("stats", help="records, size, age range, verdicts per day")
    sub.add_argument("--json", action="store_true")
    sub.add_argument("--plot", metavar="FILE.png", help="draw messages per day by verdict")
    sub.set_defaults(run=cmd_stats)

    sub = commands.add_parser("verify", help="check every index against the records")
    sub.set_defaults(run=cmd_verify)

    sub = commands.add_parser("forget", help="remove a record (by Message-ID or stdin)")
    sub.add_argument("--message-id", metavar="ID")
    sub.set_defaults(run=cmd_forget)

    sub = commands.add_parser("config", help="validate or show the effective settings")
    group = sub.add_mutually_exclusive_group()
    group.add_argument("--check", action="store_true", help="validate (the default)")
    group.add_argument("--show", action="store_true", help="print every setting")
    sub.set_defaults(run=cmd_config, no_store=True)
    return parser


def db_main(argv: Sequence[str] | None = None) -> int:
    args = _db_parser().parse_args(argv)
    try:
        settings = _settings(args)
        if getattr(args, "jobs", 1) < 1:
            return _fail("dupfilter-db", "--jobs must be at least 1")
        return args.run(args, settings)
    except (ConfigError, StoreError, FileNotFoundError, IsADirectoryError,
            PermissionError) as error:
        return _fail("dupfilter-db", str(error))
    except ValueError as error:
        return _fail("dupfilter-db", str(error))
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(db_main())
