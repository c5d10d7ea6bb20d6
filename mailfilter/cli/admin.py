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
from mailfilter.aliases import load_aliases
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
from mailfilter.names import DUPLICATE, NEAR_DUPLICATE, UNIQUE, VERDICTS
from mailfilter.store import DECISIONS, Record, StoreDamaged, StoreError, message_id_key


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
                counts[verdict.kind] += 1
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
        progress = sys.stderr.isatty() and not out.isatty()
        for label, verdict, _size in check_all(engine, args.paths, args.jobs,
                                               record=not args.no_record,
                                               show_progress=progress):
            if isinstance(verdict, Exception):
                print(f"dupfilter-db: {label}: {type(verdict).__name__}: {verdict}",
                      file=sys.stderr)
                if args.json:
                    print(json.dumps({"path": label, "message_id": None, "verdict": "error",
                                      "score": None, "match": None}), file=out)
                continue
            counts[verdict.kind] += 1
            if args.json:
                print(json.dumps(_verdict_row(label, verdict)), file=out)
            else:
                score = "" if verdict.score is None else f"{verdict.score:.2f}"
                match = (verdict.match.message_id or f"#{verdict.match.doc_id}") \
                    if verdict.match else ""
                print(f"{verdict.kind:<15} {score:>5}  {verdict.measure:<11} "
                      f"{label:<50} {match}", file=out)
    if not args.json:
        print(f"\n{sum(counts.values())} messages: {counts[UNIQUE]} unique, "
              f"{counts[DUPLICATE]} duplicate, {counts[NEAR_DUPLICATE]} near-duplicate",
              file=out)
    return 0


def _is_lmdb(location: str) -> bool:
    """True when ``location`` is an LMDB store's folder (not a Redis URL)."""
    return not location.startswith(("redis://", "rediss://", "unix://"))


def _no_lmdb_store_yet(location: str) -> bool:
    """True when ``location`` is an LMDB store that does not exist yet: no folder, or a
    folder without ``data.mdb`` (a Redis URL, a file in the way or an unreadable folder
    is not that)."""
    if not _is_lmdb(location):
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


def _day_ticks(axis: object, days: list[object]) -> None:
    """Date ticks that read for the span shown: each day up to two weeks, each Monday up
    to about two months, then each month; never hours (one day of data is one bar)."""
    import datetime

    import matplotlib.dates as mdates
    first, last = min(days), max(days)
    span = (last - first).days + 1
    if span <= 14:
        locator, style = mdates.DayLocator(), "%a %d %b"
    elif span <= 62:
        locator, style = mdates.WeekdayLocator(byweekday=mdates.MO), "%d %b"
    else:
        locator, style = mdates.MonthLocator(), "%b %Y"
    axis.xaxis.set_major_locator(locator)
    axis.xaxis.set_major_formatter(mdates.DateFormatter(style))
    if span > 14:
        axis.xaxis.set_minor_locator(mdates.DayLocator())
    half = datetime.timedelta(hours=12) if span > 2 else datetime.timedelta(days=1, hours=12)
    axis.set_xlim(first - half, last + half)


def _plot_per_day(stats: dict[str, object], path: str) -> None:
    """Messages per day by verdict, and the daemons' decisions per day, as a PNG
    (matplotlib, the `plot` extra)."""
    try:
        import matplotlib
    except ImportError:
        raise ValueError("--plot needs matplotlib: pip install 'dupfilter-mail[plot]'") from None
    matplotlib.use("Agg")
    import datetime

    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator
    per_day = stats.get("verdicts_per_day") or {}
    decided = stats.get("decisions_per_day") or {}

    def day_of(stamp: object) -> datetime.datetime:       # midnight UTC, naive
        return datetime.datetime.fromtimestamp(int(stamp), datetime.UTC).replace(tzinfo=None)

    panels = [("verdicts of the messages recorded", per_day,
               ((UNIQUE, "#9bbbd4"), (NEAR_DUPLICATE, "#f0a35e"), (DUPLICATE, "#d1495b")))]
    if decided:
        names = sorted({name for counts in decided.values() for name in counts})
        colours = dict(zip(DECISIONS, ("#cccccc", "#9bbbd4", "#d1495b", "#e6a0a8", "#6c757d",
                                       "#b07aa1", "#f0a35e", "#59a14f", "#222222", "#edc948"),
                           strict=True))
        panels.append(("the daemons' decisions", decided,
                       tuple((name, colours.get(name, "#888888")) for name in names)))
    figure, axes = plt.subplots(len(panels), 1, figsize=(9, 3.2 * len(panels)), sharex=True,
                                squeeze=False)
    every_day = sorted({day_of(stamp) for _, table, _ in panels for stamp in table}) or \
        [day_of(time.time() // 86400 * 86400)]
    for axis, (title, table, series) in zip(axes[:, 0], panels, strict=True):
        days = [day_of(stamp) for stamp in table]
        bottom = [0] * len(days)
        for name, colour in series:
            values = [counts.get(name, 0) for counts in table.values()]
            if any(values):
                axis.bar(days, values, bottom=bottom, label=name, color=colour, width=0.8)
                bottom = [b + v for b, v in zip(bottom, values, strict=True)]
        axis.set_ylabel("messages per day")
        axis.set_title(title)
        axis.yaxis.set_major_locator(MaxNLocator(integer=True))
        if any(bottom):
            axis.legend(fontsize="small", ncol=2)
        _day_ticks(axis, every_day)
    figure.suptitle(f"dupfilter ({stats['location']}), days in UTC")
    figure.autofmt_xdate()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


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
    per_day = stats.get("verdicts_per_day", {}) or {}
    decided = stats.get("decisions_per_day", {}) or {}
    days = sorted({int(day) for day in (*per_day, *decided)})[-args.days:]
    if not days:
        return 0
    print("per day (UTC): verdicts of recorded messages | decisions of the daemons "
          "(every message they handled: also those rejected, discarded or unchecked)")
    for day in days:
        verdicts = per_day.get(day) or per_day.get(str(day)) or {}
        decisions = decided.get(day) or decided.get(str(day)) or {}
        left = "  ".join(f"{name} {verdicts[name]}" for name in VERDICTS if name in verdicts)
        right = "  ".join(f"{name} {decisions[name]}" for name in DECISIONS
                          if name in decisions)
        print(f"  {time.strftime('%Y-%m-%d', time.gmtime(day))}  {left or '-'}"
              + (f"  |  {right}" if right else ""))
    return 0


def _since(value: float | None, now: float) -> str:
    if not value:
        return "-"
    seconds = int(now - value)
    parts = [(seconds // 86400, "d"), (seconds % 86400 // 3600, "h"),
             (seconds % 3600 // 60, "m"), (seconds % 60, "s")]
    shown = [f"{n}{unit}" for n, unit in parts if n][:2] or ["0s"]
    return f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(value))} ({' '.join(shown)} ago)"


def cmd_status(args: argparse.Namespace, settings: Settings | None) -> int:
    """Each daemon's status file (service.DaemonStatus), judged as a monitoring plugin is:
    exit 0 (OK) when every daemon found is healthy or was stopped cleanly, 1 (WARNING: a
    restart needed, errors in the last minutes, a configuration that did not load), 2
    (CRITICAL: not running, hung, store not open, messages unchecked or not recorded in the
    last minutes), 3 (UNKNOWN: no status file, or one that cannot be read).  A settings file
    that does not load is a WARNING even with no daemon status (a pipe-filter-only host)."""
    from mailfilter.service import (
        CRITICAL,
        OK,
        SEVERITY_NAMES,
        UNKNOWN,
        WARNING,
        read_status,
    )
    folder = Path(args.status_dir)
    try:
        files = sorted(p for p in folder.glob("*.json") if not p.name.startswith("."))
    except OSError as error:
        return _fail("dupfilter-db", f"status: cannot read {folder}: {error.strerror}",
                     UNKNOWN)
    if args.program:
        files = [p for p in files if p.stem in args.program
                 or p.stem.partition("@")[0] in args.program]
    daemons = []
    for path in files:
        try:
            daemons.append(read_status(path))
        except (OSError, ValueError, TypeError) as error:
            daemons.append({"path": str(path), "program": path.stem, "healthy": False,
                            "severity": "UNKNOWN", "exit_code": UNKNOWN,
                            "problems": [f"unreadable status file: {error}"]})
    codes = {d["exit_code"] for d in daemons}
    code = UNKNOWN if not daemons else CRITICAL if CRITICAL in codes else \
        WARNING if WARNING in codes else UNKNOWN if UNKNOWN in codes else OK
    config_error = getattr(args, "config_error", None)
    if config_error and (code == OK or not daemons):
        # A known problem, daemons or not: a pipe filter reading the file passes mail on
        # unchecked, a daemon (re)started now would refuse to start.
        code = WARNING
    if args.json:
        print(json.dumps({"status_dir": str(folder), "healthy": code == OK,
                          "severity": SEVERITY_NAMES[code], "exit_code": code,
                          "config_error": config_error, "daemons": daemons}))
        return code
    if config_error:
        print(f"WARNING: the settings do not load (a daemon (re)started now would refuse "
              f"to start; a pipe filter reading them passes mail through unchecked): "
              f"{config_error}")
    if not daemons:
        print(f"no dupfilter daemon status in {folder} (not started, or started with another "
              "--status-dir)")
    now = time.time()
    for d in daemons:
        if "pid" not in d:
            print(f"{d['program']}  UNKNOWN  {'; '.join(d['problems'])}")
            continue
        name = d["program"] + (f"@{d['instance']}" if d.get("instance") else "")
        if d.get("clean_stop") and not d["problems"]:
            state = f"STOPPED (cleanly, {_since(d.get('stopped') or d.get('updated'), now)})"
        elif d["problems"]:
            state = f"{d['severity']}: " + "; ".join(d["problems"])
        else:
            state = "OK"
        print(f"{name} {d.get('version', '')}: {state}")
        print(f"  process    pid {d['pid']} as {d.get('user', '?')}, {d.get('state')}, up since "
              f"{_since(d.get('started'), now)}; status written {d['age_seconds']:.0f} s ago")
        print(f"  listening  {d.get('listening', '-')}")
        store = d.get("store") or {}
        opened = "open" if store.get("open") else "NOT open"
        line = (f"  store      {store.get('location', '-')}: {opened} since "
                f"{_since(store.get('since'), now)}"
                + (f"; {store['error']}" if store.get("error") and not store.get("open")
                   else "")
                + ("" if store.get("open") else f"; messages get on_error={d.get('on_error')}"))
        last_ok, last_failure = store.get("last_ok"), store.get("last_failure")
        if last_failure and (not last_ok or last_failure["time"] > last_ok):
            line += (f"; last operation failed at {_when(int(last_failure['time']))}: "
                     f"{last_failure['error']}")
        elif last_ok:
            line += f"; last operation ok at {_when(int(last_ok))}"
        print(line)
        verdicts = ", ".join(f"{k} {v}" for k, v in sorted(d.get("verdicts", {}).items()))
        decisions = ", ".join(f"{k} {v}" for k, v in sorted(d.get("decisions", {}).items()))
        print(f"  messages   {d.get('messages', 0)} since start"
              + (f"; verdicts: {verdicts}" if verdicts else "")
              + (f"; decisions: {decisions}" if decisions else ""))
        recent = d.get("recent") or {}
        if recent:
            print(f"  last {int(recent.get('seconds', 300)) // 60} min "
                  f"{recent.get('messages', 0)} messages, {recent.get('unchecked', 0)} "
                  f"unchecked, {recent.get('record_failures', 0)} not recorded "
                  f"(recording failed), {recent.get('errors', 0)} errors")
        last = d.get("last_error")
        print(f"  errors     {d.get('errors', 0)} since start; recording failed "
              f"{d.get('record_failures', 0)}" + (
                  f"; last at {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(last['time']))}"
                  + (f" (queue {last['queue']})" if last.get("queue") else "")
                  + f": {last['error']}" if last else ""))
    return code


def cmd_verify(args: argparse.Namespace, settings: Settings) -> int:
    """Exit 1 on any problem; a damaged store (refused at open, or pages that cannot be
    read) is listed as problems, with how to restore it from an ``mdb_copy`` backup."""
    location = settings.store.location()
    try:
        with Engine(settings, readonly=True, create=False) as engine:
            problems = engine.store.verify()
            records = engine.store.stats()["records"]
    except StoreDamaged as error:
        problems, records = [str(error)], None
    for problem in problems:
        print(problem)
    if records is not None:
        print(f"{records} records checked: {len(problems)} problems")
    if problems and _is_lmdb(location):
        print(_restore_advice(location))
    return 1 if problems else 0


def _restore_advice(location: str) -> str:
    """How to put a backup made with ``mdb_copy`` in place of the store at ``location``
    (docs/operations.md, "A damaged store"), with the store folder's owner."""
    import grp
    import pwd
    folder = Path(location).resolve()
    try:
        info = folder.stat()
        owner = pwd.getpwuid(info.st_uid).pw_name
        group = grp.getgrgid(info.st_gid).gr_name
    except (OSError, KeyError):
        owner = group = "dupfilter"
    return (f"to restore the store from a backup made with `mdb_copy -c {folder} BACKUP` "
            "(docs/operations.md, \"A damaged store\"): stop the daemons, then\n"
            f"  mv {folder} {folder}.damaged\n"
            f"  install -d -o {owner} -g {group} -m 0700 {folder}\n"
            f"  install -o {owner} -g {group} -m 0600 BACKUP/data.mdb {folder}/\n"
            f"  runuser -u {owner} -- dupfilter-db --db {folder} verify\n"
            "and start the daemons.  Without a backup, move the store aside (the first two "
            "lines): the next message starts an empty one.")


def _same_message(verdict: Verdict) -> list[tuple[Record, str]]:
    """The records of this very message: the same Message-ID, or the same text (its digest,
    judged a duplicate), with what the message is to each."""
    key = message_id_key(verdict.message_id)
    found = []
    for item in verdict.evidence:
        record = item.record
        if key is not None and record.message_id_key == key:
            found.append((record, "the same Message-ID"))
        elif record.digest == verdict.fingerprint.digest and item.kind is DUPLICATE:
            found.append((record, f"the same text ({item.measure})"))
    return found


def _near_matches(verdict: Verdict) -> list[tuple[Record, str]]:
    """The records this message is a near-duplicate of (``--near``)."""
    return [(item.record, f"{item.kind} {item.score or 0:.2f} ({item.measure})")
            for item in verdict.evidence if item.kind is NEAR_DUPLICATE]


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
            # Every stored copy like it, not only the few a check weighs.
            analysis = engine.analyse(sys.stdin.buffer.read())
            verdict = engine.detector.check(analysis.fingerprint, analysis.message_id,
                                            every_copy=True)
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
        return _config_check(args, settings)
    defaults = dict(_flatten_all(asdict(Settings())))
    shown = 0
    for section, values in asdict(settings).items():
        if section == "source":
            continue
        rows = []
        for key, value in _flatten("", values):
            name = f"{section}.{key}"
            where = settings.origin(name)
            if section == "store" and key == "path" and getattr(args, "db", None):
                where = "--db"
            if args.changed and where == "default" and defaults.get(name) == value:
                continue
            rows.append(f"{key} = {json.dumps(value)}  # {where}")
        if rows or not args.changed:
            print(f"\n[{section}]")
            print("\n".join(rows))
            shown += len(rows)
    if args.changed and not shown:
        print("# every setting has its default value")
    return 0


def _flatten_all(values: dict[str, object]) -> list[tuple[str, object]]:
    return [(f"{section}.{key}", value) for section, table in values.items()
            if isinstance(table, dict) for key, value in _flatten("", table)]


def _config_check(args: argparse.Namespace, settings: Settings) -> int:
    """The settings as the daemons would take them, then the system around them."""
    from mailfilter.cli.checks import postfix_checks, system_checks
    # What only a daemon would refuse at start, said here too.
    check_milter_settings(settings)
    check_smtpd_settings(settings)
    load_aliases(settings.detector.aliases)
    print("configuration is valid")
    findings = system_checks(settings, args.user, args.mta_user)
    if args.postfix is not None:
        findings += postfix_checks(settings, args.postfix)
    for ok, text in findings:
        print(f"{'ok     ' if ok else 'PROBLEM'}  {text}")
    return 0 if all(ok for ok, _ in findings) else 1


DB_HELP = "store: an LMDB folder or a redis:// URL (overrides [store] path)"
CONFIG_HELP = ("TOML settings file (default: $DUPFILTER_CONFIG, "
               "~/.config/dupfilter/dupfilter.toml, then /etc/dupfilter/dupfilter.toml)")


def _global_options(parser: argparse.ArgumentParser, default: object) -> None:
    parser.add_argument("--db", metavar="DIR|URL", default=default, help=DB_HELP)
    parser.add_argument("--config", metavar="FILE", default=default, help=CONFIG_HELP)


class _CommandParser(argparse.ArgumentParser):
    """A command's parser: it takes --db and --config too (``dupfilter-db stats --db DIR``),
    without overriding the ones given before the command when they are not repeated."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)     # type: ignore[arg-type]
        _global_options(self, argparse.SUPPRESS)


def _db_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dupfilter-db",
        description="Administer dupfilter's store: import and scan mailboxes, fingerprint and "
                    "compare messages, explain verdicts, prune old records.")
    parser.add_argument("--version", action="version", version=f"dupfilter {__version__}")
    _global_options(parser, None)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                     parser_class=_CommandParser)
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

    sub = commands.add_parser("compare", help="the verdict on B with only A stored, and "
                              "every measure between them")
    sub.add_argument("a", metavar="A", help="the first message (- for stdin)")
    sub.add_argument("b", metavar="B", help="the second message")
    sub.add_argument("--chunking", choices=("fsp", "cdc", "sbc"), default="cdc",
                     help="whole-message chunking: fixed-size, content-defined (default) "
                          "or sliding-block")
    sub.add_argument("--chunk-size", type=int, default=4096, help="block or average size")
    sub.add_argument("--bins", action="store_true",
                     help="also print the 36 character-histogram bins side by side")
    sub.add_argument("--json", action="store_true")
    sub.set_defaults(run=cmd_compare, no_store=True)

    sub = commands.add_parser("explain", help="why messages are or are not duplicates: the "
                              "rule that decided and every stored message weighed")
    sub.add_argument("paths", nargs="*", metavar="FILE",
                     help="messages, mboxes or Maildirs (default: one message on stdin)")
    sub.add_argument("--json", action="store_true", help="one JSON object per message")
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

    sub = commands.add_parser("stats", help="records, size, age range, verdicts and the "
                              "daemons' decisions per day")
    sub.add_argument("--json", action="store_true")
    sub.add_argument("--plot", metavar="FILE.png", help="draw messages per day by verdict "
                     "and decision (needs matplotlib: the plot extra)")
    sub.add_argument("--days", type=int, default=14, metavar="N",
                     help="days listed (default %(default)s; --json and --plot have all)")
    sub.set_defaults(run=cmd_stats)

    from mailfilter.service import default_status_dir
    sub = commands.add_parser("status", help="each daemon: up since, store open or not and "
                              "its last operation, messages and verdicts since start, "
                              "errors, unchecked and unrecorded messages in the last "
                              "minutes; exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN (none "
                              "found), as monitoring plugins")
    sub.add_argument("program", nargs="*", metavar="PROGRAM",
                     help="only these (dupfilter-milter, dupfilter-smtpd)")
    sub.add_argument("--status-dir", metavar="DIR", default=default_status_dir(),
                     help="where the daemons keep their status (default %(default)s)")
    sub.add_argument("--json", action="store_true")
    sub.set_defaults(run=cmd_status, no_store=True)

    from mailfilter.cli.dedupe import add_parser as add_dedupe
    add_dedupe(commands)

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

    sub = commands.add_parser("config", help="validate the settings and the system around "
                              "them, or show the effective settings")
    group = sub.add_mutually_exclusive_group()
    group.add_argument("--check", action="store_true",
                       help="validate (the default): the settings as the daemons take them, "
                            "users, groups, the socket folder for the MTA's user; exit 1 on "
                            "a problem")
    group.add_argument("--show", action="store_true",
                       help="print every setting with where it came from (FILE:LINE)")
    sub.add_argument("--changed", action="store_true",
                     help="with --show: only the settings that differ from the defaults "
                          "(as postconf -n)")
    sub.add_argument("--postfix", nargs="?", const="/etc/postfix", metavar="DIR",
                     help="with --check: also compare Postfix's settings in DIR (default "
                          "/etc/postfix: postconf -n, postconf -M) with dupfilter's")
    sub.add_argument("--user", metavar="NAME",
                     help="with --check: the daemons' --user (checked to exist and to own "
                          "the store folder; default: dupfilter, when that user exists)")
    sub.add_argument("--mta-user", metavar="NAME", default="postfix",
                     help="with --check: the MTA's user that must reach the milter socket "
                          "(default %(default)s)")
    sub.set_defaults(run=cmd_config, no_store=True)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``dupfilter-db``."""
    args = _db_parser().parse_args(argv)
    try:
        try:
            settings = settings_from(args)
        except ConfigError as error:
            if args.run is not cmd_status:
                raise
            # The daemons' health is in their status files: shown all the same.
            args.config_error, settings = str(error), None
        if settings is not None and not getattr(args, "db", None):
            # As root or the units' user on their settings file: the daemons' own store,
            # socket and listeners, as their units pass them (not root's per-user store).
            from mailfilter.service import system_daemon_settings
            system_daemon_settings(settings)
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

