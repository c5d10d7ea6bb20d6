"""``dupfilter-db``: administration of the store (import and scan mailboxes, prune, stats,
verify, forget, config) and, through :mod:`.examine`, of messages (fingerprint, compare,
explain)."""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from mailfilter import __version__
from mailfilter.cli import settings_from
from mailfilter.cli.batch import check_all
from mailfilter.cli.examine import cmd_compare, cmd_explain, cmd_fingerprint
from mailfilter.config import (
    ConfigError,
    Refused,
    Settings,
    check_duration,
    check_milter_settings,
    check_smtpd_settings,
)
from mailfilter.detector import Verdict
from mailfilter.engine import Engine
from mailfilter.names import DUPLICATE, NEAR_DUPLICATE, UNIQUE
from mailfilter.store import Record, StoreError, message_id_key


def _fail(program: str, message: str, code: int = 2) -> int:
    print(f"{program}: {message}", file=sys.stderr)
    return code


def _verdict_row(label: str, verdict: Verdict) -> dict[str, object]:
    row = {"path": label}
    row.update(verdict.as_dict())
    return row


def cmd_import(args: argparse.Namespace, settings: Settings) -> int:
    counts: Counter[str] = Counter()
    started = time.perf_counter()
    total_bytes = errors = 0
    with Engine(settings) as engine:
        for label, verdict, size in check_all(engine, args.paths, args.jobs, record=True,
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
    print(f"imported {total} messages ({counts[UNIQUE]} unique, {counts[DUPLICATE]} "
          f"duplicate, {counts[NEAR_DUPLICATE]} near-duplicate, {errors} failed) in "
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
        for label, verdict, _size in check_all(engine, args.paths, args.jobs,
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
        print(f"\n{sum(counts.values())} messages: {counts[UNIQUE]} unique, "
              f"{counts[DUPLICATE]} duplicate, {counts[NEAR_DUPLICATE]} near-duplicate",
              file=out)
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


def _when(seconds: int | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds)) if seconds else "-"


def _record_line(record: Record, verdict: str = "") -> str:
    """One record as forget and prune list it: its number, Message-ID, first and last
    seen, how many copies arrived, and (forget by message) what the message is to it."""
    times = "time" if record.seen == 1 else "times"
    line = (f"  #{record.doc_id} {record.message_id or '(no Message-ID)'}  first seen "
            f"{_when(record.first_seen)}, last seen {_when(record.last_seen)}, seen "
            f"{record.seen} {times}")
    return f"{line}; {verdict}" if verdict else line


def _older_than(args: argparse.Namespace, settings: Settings) -> float:
    """``--older-than`` (a duration with its unit, more than zero), else ``[store]
    retention``."""
    if args.older_than is None:
        return settings.store.retention_seconds()
    try:
        return check_duration(args.older_than)
    except Refused as refused:
        raise ConfigError(f"--older-than {refused}") from None


def cmd_prune(args: argparse.Namespace, settings: Settings) -> int:
    age = _older_than(args, settings)
    before = int(time.time() - age)
    since = _when(before)
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
        store = engine.store
        stats = store.stats()
        total = stats["records"]
        if stats.get("prune") == "by Redis TTL":
            print(f"nothing to prune: records in {stats['location']} expire by Redis TTL "
                  f"({settings.store.retention}); {total} records")
            return 0
        newest = stats.get("newest")
        # An age typed on the command line that takes every record is more likely a slip
        # (0s, 1s, 30 meant as days) than a wish; [store] retention is the policy itself
        # (the daily timer applies it to a store that got no mail for that long).
        if total and newest is not None and newest < before and args.older_than \
                and not (args.yes or args.dry_run):
            return _fail("dupfilter-db", f"prune --older-than {args.older_than} would remove "
                         f"every record ({total}, the newest last seen {_when(newest)}); add "
                         "--yes to empty the store, or --dry-run to list them")
        if args.dry_run:
            count = 0
            for record in store.stale(before):
                if not count:
                    print(f"records last seen before {since}, which prune would remove "
                          "(--dry-run: nothing removed):")
                count += 1
                print(_record_line(record))
            print(f"would prune {count} records last seen before {since}; {total} in the "
                  "store")
            return 0
        listed = []

        def removed(record: Record) -> None:
            if not listed:
                print(f"pruning records last seen before {since}:")
            listed.append(record.doc_id)
            print(_record_line(record))

        count = store.prune(before, removed=removed)
        left = store.stats()["records"]
    print(f"pruned {count} records last seen before {since}; {left} remain")
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
    for verdict, colour in ((UNIQUE, "#9bbbd4"), (NEAR_DUPLICATE, "#f0a35e"),
                            (DUPLICATE, "#d1495b")):
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


def _same_message(verdict: Verdict) -> list[tuple[Record, str]]:
    """The records of this very message: the same Message-ID, or the same text (its digest,
    judged a duplicate), with what the message is to each."""
    key = message_id_key(verdict.message_id)
    found = []
    for item in verdict.evidence:
        record = item.record
        if key is not None and record.message_id_key == key:
            found.append((record, "the same Message-ID"))
        elif record.digest == verdict.fingerprint.digest and item.verdict == DUPLICATE:
            found.append((record, f"the same text ({item.reason})"))
    return found


def _near_matches(verdict: Verdict) -> list[tuple[Record, str]]:
    """The records this message is a near-duplicate of (``--near``)."""
    return [(item.record, f"{item.verdict} {item.score or 0:.2f} ({item.reason})")
            for item in verdict.evidence if item.verdict == NEAR_DUPLICATE]


def cmd_forget(args: argparse.Namespace, settings: Settings) -> int:
    if args.message_id is not None:
        if args.near:
            return _fail("dupfilter-db", "forget --near finds near matches of a message on "
                         "stdin; with --message-id ID it forgets that Message-ID's record")
        if message_id_key(args.message_id) is None:
            return _fail("dupfilter-db", f"forget --message-id {args.message_id!r} names no "
                         "Message-ID; expected one, with or without angle brackets, e.g. "
                         "--message-id '<20240101.1234@example.org>'")
    elif sys.stdin.isatty():
        return _fail("dupfilter-db", "forget needs --message-id ID or the message on stdin, "
                     "e.g. dupfilter-db forget < message.eml")
    with Engine(settings, create=False) as engine:
        store = engine.store
        if args.message_id is not None:
            found = [(record, "") for record in map(store.get,
                                                     store.find_message_id(args.message_id))
                     if record is not None]
            what = f"with Message-ID {args.message_id}"
            hint = ("; a record keeps the Message-ID of the first copy only: give a copy of "
                    "the message on stdin (dupfilter-db forget < message.eml)")
            kept = ""
        else:
            verdict = engine.check(sys.stdin.buffer.read(), record=False)
            found = _same_message(verdict)
            exact = {record.doc_id for record, _ in found}
            near = [(r, why) for r, why in _near_matches(verdict) if r.doc_id not in exact]
            if args.near:
                found += near
            what = "of this message" + (" or like it" if args.near else "")
            them = "it" if len(near) == 1 else "them"
            plural = "" if len(near) == 1 else "s"
            hint = (f"; it is a near-duplicate of {len(near)} record{plural}: --near forgets "
                    f"{them} (--dry-run lists {them})") if near and not args.near else ""
            kept = (f"kept: {len(near)} record{plural} this message is a near-duplicate of "
                    f"(--near forgets {them} too)") if near and not args.near else ""
        if not found:
            print(f"no record {what}{hint}")
            return 1
        records = "record" if len(found) == 1 else "records"
        if args.dry_run:
            print(f"would forget {len(found)} {records} (--dry-run: nothing removed):")
            for record, why in found:
                print(_record_line(record, why))
            if kept:
                print(kept)
            return 0
        store.forget([record.doc_id for record, _ in found])
        gone = [(record, why) for record, why in found if store.get(record.doc_id) is None]
    print(f"forgot {len(gone)} {'record' if len(gone) == 1 else 'records'}:")
    for record, why in gone:
        print(_record_line(record, why))
    if kept:
        print(kept)
    return 0 if gone else 1


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
    sub.add_argument("--dry-run", action="store_true",
                     help="list the records that would go, remove nothing")
    sub.add_argument("--yes", action="store_true",
                     help="remove them even when that is every record in the store")
    sub.set_defaults(run=cmd_prune)

    sub = commands.add_parser("stats", help="records, size, age range, verdicts per day")
    sub.add_argument("--json", action="store_true")
    sub.add_argument("--plot", metavar="FILE.png", help="draw messages per day by verdict")
    sub.set_defaults(run=cmd_stats)

    sub = commands.add_parser("verify", help="check every index against the records")
    sub.set_defaults(run=cmd_verify)

    sub = commands.add_parser("forget", help="remove a message's record (by Message-ID or "
                              "the message on stdin)")
    sub.add_argument("--message-id", metavar="ID",
                     help="the record with this Message-ID (angle brackets optional)")
    sub.add_argument("--near", action="store_true",
                     help="also the records the message on stdin is a near-duplicate of")
    sub.add_argument("--dry-run", action="store_true",
                     help="list the records that would go, remove nothing")
    sub.set_defaults(run=cmd_forget)

    sub = commands.add_parser("config", help="validate or show the effective settings")
    group = sub.add_mutually_exclusive_group()
    group.add_argument("--check", action="store_true", help="validate (the default)")
    group.add_argument("--show", action="store_true", help="print every setting")
    sub.set_defaults(run=cmd_config, no_store=True)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``dupfilter-db``."""
    args = _db_parser().parse_args(argv)
    try:
        settings = settings_from(args)
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

