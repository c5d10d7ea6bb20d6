"""``dupfilter-db dedupe``: read the sources, group the copies, then report, move, flag or
delete them; and ``--undo LOG``, which replays an undo log backwards.

Nothing is changed before every source has been read and judged; ``--dry-run`` and the
default ``report`` stop there.  A run that changes anything writes its undo log first (one
JSON object a line, synced before each change), so that even a run killed half-way leaves
a log of everything it may have done.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from queue import Queue
from typing import IO

from mailfilter.config import Settings, default_state_dir
from mailfilter.dedupe.plan import ExactGrouper, Group, Grouper, Seen, choose
from mailfilter.dedupe.sources import (
    Folder,
    ImapAccount,
    ImapFolder,
    ImapOptions,
    SourceError,
    StoredMessage,
    check_imap_url,
    imap_password,
    open_folders,
    undo_imap,
    undo_mbox,
    undo_rename,
)
from mailfilter.engine import Analysis, Engine
from mailfilter.store import message_id_key

ACTIONS = ("report", "move", "flag", "delete")
DEFAULT_TARGET = "Duplicates"
DONE = {"move": "moved", "flag": "flagged", "delete": "deleted"}
LOG_FORMAT = "dupfilter-dedupe-undo/1"
# Messages checked and recorded in one transaction of the engine's writer thread.
BATCH = 128


class UndoLog:
    """The undo log of one run: a header line, then one line per change, each synced to
    disk before the change is made."""

    def __init__(self, path: Path, argv: list[str]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.file: IO[str] = open(path, "x", encoding="utf-8")  # noqa: SIM115 - closed in close
        self.changes = 0
        self._write({"format": LOG_FORMAT, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                    time.gmtime()),
                     "argv": argv})

    def _write(self, entry: dict[str, object]) -> None:
        """The header line: written, not synced (the first change's sync takes it along;
        a log with no change has nothing to undo)."""
        self.file.write(json.dumps(entry, sort_keys=True) + "\n")
        self.file.flush()

    def __call__(self, entries: dict[str, object] | list[dict[str, object]]) -> None:
        """Write one entry, or several with one sync, before the change they name."""
        for entry in [entries] if isinstance(entries, dict) else entries:
            if entry.get("op") != "mbox-rewritten":
                self.changes += 1
            self.file.write(json.dumps(entry, sort_keys=True) + "\n")
        self.file.flush()
        os.fsync(self.file.fileno())

    def close(self) -> None:
        self.file.close()


def default_log_path() -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return default_state_dir() / "dedupe" / f"{stamp}-{os.getpid()}.undo.jsonl"


def _imap_options(args: argparse.Namespace) -> ImapOptions | None:
    urls = [s for s in args.sources if s.startswith(("imap://", "imaps://"))]
    if not urls:
        return None
    for url in urls:
        check_imap_url(url)
    return ImapOptions(password=imap_password(args.password_file), ca_file=args.tls_ca,
                       rate=args.rate, expunge=args.expunge,
                       keyword=args.keyword or "\\Flagged",
                       writable=args.action != "report" and not args.dry_run)


def _when(seconds: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(seconds)) if seconds else "-"


def _row(seen: Seen) -> dict[str, object]:
    return {"folder": seen.folder.label, "folder_name": seen.folder.name, "key": seen.key,
            "message_id": seen.message_id, "date": _when(seen.date), "size": seen.size,
            "subject": seen.subject}


def _progress(total: int | None) -> object | None:
    if not sys.stderr.isatty():
        return None
    from tqdm import tqdm
    return tqdm(total=total, unit="msg", file=sys.stderr, dynamic_ncols=True,
                mininterval=0.5, desc="checking")


def _candidates(folders: list[Folder], across: bool) -> tuple[dict[str, set[str]], int]:
    """Exact runs: the messages worth reading whole, by folder, and how many there are in
    all.  An exact copy has the same Message-ID (or none), so a message whose Message-ID
    no other message of its scope has cannot be one: only its Message-ID is read (on IMAP
    one header field, not the body)."""
    listed: list[tuple[str, str, str | None]] = []
    for folder in folders:
        for key, message_id in folder.message_ids():
            listed.append((folder.label, key, message_id_key(message_id)))
    counts = Counter((("" if across else label), mid) for label, _key, mid in listed
                     if mid is not None)
    wanted: dict[str, set[str]] = defaultdict(set)
    for label, key, mid in listed:
        if mid is None or counts[("" if across else label), mid] > 1:
            wanted[label].add(key)
    return wanted, len(listed)


_END = object()


def _ahead(messages: Iterator[StoredMessage], depth: int = 256) -> Iterator[StoredMessage]:
    """``messages`` read on a thread of their own, up to ``depth`` ahead, so that waiting
    for the server or the disk overlaps with analysing the ones already read."""
    queue: Queue[object] = Queue(maxsize=depth)

    def read() -> None:
        try:
            for message in messages:
                queue.put(message)
            queue.put(_END)
        except BaseException as error:  # noqa: BLE001 - handed to the reading side
            queue.put(error)

    threading.Thread(target=read, name="dedupe-reader", daemon=True).start()
    while True:
        item = queue.get()
        if item is _END:
            return
        if isinstance(item, BaseException):
            raise item
        yield item      # type: ignore[misc]


def _read_all(folders: list[Folder], grouper: Grouper | ExactGrouper, near: bool,
              across: bool) -> int:
    """Check the messages of every folder, in order, with a progress bar on a terminal (its
    total counted first, so that it shows the time left); how many messages there are."""
    wanted: dict[str, set[str]] | None = None
    if near:
        total = sum(folder.count() for folder in folders)
    else:
        wanted, total = _candidates(folders, across)
    shown = sum(len(keys) for keys in wanted.values()) if wanted is not None else total
    bar = _progress(shown)
    batch: list[tuple[StoredMessage, Analysis]] = []
    for folder in folders:
        only = wanted.get(folder.label, set()) if wanted is not None else None
        if only is not None and not only:
            continue
        for message in _ahead(folder.messages(only)):
            if isinstance(grouper, ExactGrouper):
                grouper.add(message)
            else:
                batch.append((message, grouper.analyse(message.raw)))
                if len(batch) == BATCH:
                    grouper.add_many(batch)
                    batch = []
            if bar is not None:
                bar.update(1)       # type: ignore[attr-defined]
    if isinstance(grouper, Grouper):
        grouper.add_many(batch)
    if bar is not None:
        bar.close()                 # type: ignore[attr-defined]
    return total


def _print_report(groups: list[Group], args: argparse.Namespace, out: IO[str],
                  verb: str) -> None:
    target = args.to
    for group in groups:
        if args.json:
            print(json.dumps({"keep": _row(group.keep), "copies": [
                _row(copy.seen) | {"reason": copy.reason, "action": verb,
                                   "to": copy.seen.folder.target_label(target)
                                   if args.action == "move" else None}
                for copy in group.copies]}), file=out)
            continue
        keep = group.keep
        print(f"keep    {keep.where}  {_when(keep.date)}  {keep.size} B  "
              f"{keep.message_id or '(no Message-ID)'}  {keep.subject[:60]}", file=out)
        for copy in group.copies:
            seen = copy.seen
            to = f" -> {seen.folder.target_label(target)}" if args.action == "move" else ""
            print(f"  {verb:<12} {seen.where}{to}  {_when(seen.date)}  {seen.size} B  "
                  f"{copy.reason}", file=out)


def _verb(args: argparse.Namespace) -> str:
    if args.action == "report":
        return "copy"
    done = {"move": "move", "flag": "flag", "delete": "delete"}[args.action]
    return f"would {done}" if args.dry_run else done


def run(args: argparse.Namespace, settings: Settings, argv: list[str]) -> int:
    """The dedupe command (see :mod:`mailfilter.dedupe`)."""
    out = sys.stdout
    if args.undo:
        return undo(Path(args.undo), args, out)
    if not args.sources:
        raise SourceError("dedupe needs a SOURCE: a Maildir, an mbox or an IMAP URL")
    choose(args.keep)       # a mistyped --keep fails before anything is read
    if args.action == "delete" and not args.dry_run and not args.yes and any(
            not s.startswith(("imap://", "imaps://")) for s in args.sources):
        raise SourceError("--action delete on a Maildir or mbox removes the copies for "
                          "good: add --yes (or --dry-run to see them, or --action move)")
    if args.expunge and not args.yes and not args.dry_run:
        raise SourceError("--expunge removes the copies from the IMAP server for good: add "
                          "--yes")
    imap = _imap_options(args)
    target = args.to
    folders: list[Folder] = []
    seen_labels = set()
    for source in args.sources:
        for folder in open_folders(source, exclude=target, imap=imap):
            if folder.label not in seen_labels:
                seen_labels.add(folder.label)
                folders.append(folder)
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        grouper: Grouper | ExactGrouper
        if args.near:
            scratch = stack.enter_context(tempfile.TemporaryDirectory(
                prefix="dupfilter-dedupe-"))
            if not args.db:
                settings.store.path = scratch
            grouper = Grouper(stack.enter_context(Engine(settings)),
                              across_folders=args.across_folders)
        else:               # no store, no engine (see mailfilter.dedupe.plan)
            grouper = ExactGrouper(settings, across_folders=args.across_folders)
        total = _read_all(folders, grouper, args.near, args.across_folders)
    elapsed = time.perf_counter() - started
    groups = grouper.groups(args.keep)
    copies = sum(len(group.copies) for group in groups)
    verb = _verb(args)
    _print_report(groups, args, out, verb)
    rate = total / elapsed if elapsed else 0.0
    analysed = f", {grouper.analysed} analysed" if isinstance(grouper, ExactGrouper) else ""
    summary = (f"{total} messages in {len(folders)} folders checked in {elapsed:.1f} s "
               f"({rate:.0f} msg/s; {grouper.checked} read whole{analysed}): {len(groups)} with "
               f"copies, {copies} copies")
    counts: dict[str, object] = {"messages": total, "read_whole": grouper.checked,
                                 "folders": len(folders), "groups": len(groups),
                                 "copies": copies, "seconds": round(elapsed, 3), "changed": 0}
    if isinstance(grouper, ExactGrouper):
        counts["analysed"] = grouper.analysed
    if args.action == "report" or args.dry_run or not copies:
        tail = "" if args.action == "report" else (
            f"; --dry-run: nothing {DONE[args.action]}" if args.dry_run and copies else "")
        if args.json:
            print(json.dumps({"summary": counts}), file=out)
        else:
            print(f"\n{summary}{tail}", file=out)
        _close(folders)
        return 0
    log = UndoLog(Path(args.undo_log) if args.undo_log else default_log_path(), argv)
    try:
        _apply(groups, args, log)
    finally:
        log.close()
        reconnections = _reconnections(folders)
        _close(folders)
    if reconnections:
        summary += f"; reconnected {reconnections} times"
    if args.json:
        counts |= {"changed": log.changes, "undo_log": str(log.path),
                   "reconnections": reconnections}
        print(json.dumps({"summary": counts}), file=out)
    else:
        print(f"\n{summary}; {DONE[args.action]} {log.changes}; undo log {log.path} "
              f"(dupfilter-db dedupe --undo {log.path})", file=out)
    return 0


def _apply(groups: list[Group], args: argparse.Namespace, log: UndoLog) -> None:
    """The action on each folder's copies, folder by folder, in the order they were read."""
    by_folder: dict[str, list[Seen]] = defaultdict(list)
    folders: dict[str, Folder] = {}
    for group in groups:
        for copy in group.copies:
            by_folder[copy.seen.folder.label].append(copy.seen)
            folders[copy.seen.folder.label] = copy.seen.folder
    for label, copies in by_folder.items():
        folder = folders[label]
        messages = [seen.handle for seen in copies]
        if args.action == "move":
            folder.move(messages, args.to, log)
        elif args.action == "flag":
            folder.flag(messages, log)
        else:
            folder.delete(messages, log)


def _reconnections(folders: list[Folder]) -> int:
    accounts = {id(f.account): f.account for f in folders if isinstance(f, ImapFolder)}
    return sum(account.reconnections for account in accounts.values())


def _close(folders: list[Folder]) -> None:
    for folder in folders:
        if isinstance(folder, ImapFolder):
            folder.account.close()


def _read_log(path: Path) -> list[dict[str, object]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    entries = []
    for number, line in enumerate(lines, 1):
        try:
            entries.append(json.loads(line))
        except json.JSONDecodeError:
            if number == len(lines):        # the last line, cut short by a crash
                break
            raise SourceError(f"{path}:{number}: not an undo log line") from None
    if not entries or entries[0].get("format") != LOG_FORMAT:
        raise SourceError(f"{path}: not a dupfilter-db dedupe undo log")
    return entries[1:]


def undo(path: Path, args: argparse.Namespace, out: IO[str]) -> int:
    """Replay the undo log at ``path`` backwards: every move and flag put back; deletes
    (Maildir, mbox, expunged IMAP) are listed as what cannot come back."""
    entries = _read_log(path)
    said: list[str] = []
    # mbox rewrites: the entries of each, and whether its rename happened.
    mbox_batches: list[tuple[Path, list[dict[str, object]], bool]] = []
    pending: dict[str, list[dict[str, object]]] = defaultdict(list)
    imap_entries: dict[str, list[dict[str, object]]] = defaultdict(list)
    plan: list[tuple[str, object]] = []
    for entry in entries:
        op = entry.get("op")
        if op == "rename":
            plan.append(("rename", entry))
        elif op == "delete":
            plan.append(("gone", entry))
        elif op in ("mbox-move", "mbox-edit", "mbox-delete"):
            pending[str(entry.get("path") or entry.get("from"))].append(entry)
        elif op == "mbox-rewritten":
            key = str(entry["path"])
            mbox_batches.append((Path(key), pending.pop(key, []), True))
            plan.append(("mbox", len(mbox_batches) - 1))
        elif str(op).startswith("imap-"):
            imap_entries[str(entry["account"])].append(entry)
    for key, rest in pending.items():
        mbox_batches.append((Path(key), rest, False))
        plan.append(("mbox", len(mbox_batches) - 1))
    for kind, item in reversed(plan):
        if kind == "rename":
            said.append(undo_rename(item))          # type: ignore[arg-type]
        elif kind == "gone":
            said.append(f"CANNOT undo: {item['path']} was deleted")  # type: ignore[index]
        else:
            mbox_path, batch, completed = mbox_batches[item]        # type: ignore[index]
            gone = [e for e in batch if e["op"] == "mbox-delete"]
            if gone and completed:
                said.extend(f"CANNOT undo: a message of {mbox_path} was deleted"
                            for _ in gone)
            said.extend(undo_mbox(mbox_path, [e for e in batch if e["op"] != "mbox-delete"],
                                  completed))
    for account_label, items in imap_entries.items():
        account = ImapAccount(account_label + "/", ImapOptions(
            password=imap_password(args.password_file), ca_file=args.tls_ca,
            rate=args.rate))
        try:
            said.extend(undo_imap(account, items))
        finally:
            account.close()
    for line in said:
        print(line, file=out)
    failed = [line for line in said if line.startswith(("MISSING", "CHANGED"))]
    print(f"\nundid {path}: {len(said) - len(failed)} put back, {len(failed)} not found",
          file=out)
    return 1 if failed else 0
