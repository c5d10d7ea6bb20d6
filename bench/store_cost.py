"""CPU a daemon spends on a message outside text analysis, in-process, for this checkout
and others in one run: the check, the plan, the recording and the commit of
``Engine.process``; the group-commit path the daemons take (``service.process_message``:
writer thread, futures); the log line with its observers; and dupfilter-milter's whole
Python side of a message (``DupfilterMilter`` callbacks, libmilter's C side stubbed out).

    python bench/store_cost.py                              # this checkout
    python bench/store_cost.py --compare /tmp/main --rounds 5

Each round runs one worker process per checkout (their order rotating from round to
round), which imports that checkout's ``mailfilter``, makes a fresh LMDB store for every
path and sends ``--warm`` messages, then ``--messages`` messages measured one by one.
The messages are analysed before the clock starts (analysis is ``bench/analyse_cost.py``'s
subject): each path measures only what follows analysis.  Two kinds of mail:

  repeat   smtp-source's message (a 1 KiB body of ``X`` lines, the same every time, a new
           Message-ID each): after the first, each one is a duplicate and bumps one record
           — what bench/milter_load.py and smtpd_load.py send
  fresh    a different text every time (words drawn from a fixed vocabulary): each one is
           unique and adds a record

Paths (CPU per message, ``time.thread_time`` in one thread; ``time.process_time`` where a
second thread does part of the work):

  process      ``Engine.process`` in its own write transaction (synced commit), split into
               check (the detector's lookup and weighing), plan, record (the detector's
               writes) and commit (the rest of the transaction: begin, commit, sync)
  group        ``service.process_message`` with group commit, one message at a time (the
               writer thread, its futures; every message its own commit, as when one
               session is busy)
  log          ``OutcomeLog.log`` of the milter's line, to a file, with status observing
  milter       envfrom … eom of ``DupfilterMilter`` (group commit, a log line to a file)
  sessions     4 threads, each analysing and processing its messages with group commit:
               CPU a message *with* analysis, and ``per_commit``, messages per commit

The table: per checkout and path, the median over rounds of the mean µs a message, and
the ratio to the first checkout's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KINDS = ("repeat", "fresh")
PATHS = ("process", "check", "plan", "record", "commit", "group", "log", "milter",
         "sessions", "per_commit")
SESSIONS = 4

_WORDS = ("the a of to and in is it that for on with as was at by this be from or have an "
          "they which one you had not but what all were when we there can more if no out so "
          "said up its about into than them could only other new some time these two may "
          "then do first any my now such like our over man me even most made after also did "
          "many before must through back years where much your way well down should because "
          "each just those people how too little state good very make world still own see "
          "men work long get here between both life being under never day same another know "
          "while last might us great old year off come since against go came right used take "
          "three report meeting budget server release invoice order customer shipment").split()


def smtp_source_message(number: int, size: int = 1024) -> bytes:
    """smtp-source's message: its headers, a new Message-ID, a body of ``X`` lines."""
    lines, left = [], size
    while left > 0:
        width = min(78, left)
        lines.append((str(len(lines) % 10) + "X" * (width - 1))[:width])
        left -= width + 2
    return (f"From: <sender@source.test>\nTo: <user@sink.test>\n"
            f"Date: Sat, 5 Dec 2026 12:00:00 +0000\nMessage-Id: <{number}.bench@source.test>\n"
            f"Subject: La de da\n\n" + "\n".join(lines) + "\n").encode()


def fresh_message(number: int, size: int = 1024) -> bytes:
    """A text of its own: words of a fixed vocabulary, seeded by ``number``."""
    pick = random.Random(number).choice
    words, length = [], 0
    while length < size:
        word = pick(_WORDS)
        words.append(word)
        length += len(word) + 1
    body = "\n".join(" ".join(words[i:i + 12]) for i in range(0, len(words), 12))
    return (f"From: <sender{number}@source.test>\nTo: <user@sink.test>\n"
            f"Message-Id: <{number}.fresh@source.test>\nSubject: note {number}\n\n"
            f"{body}\n").encode()


# ---------------------------------------------------------------------------- the worker

def _worker(kinds: list[str], messages: int, warm: int) -> dict[str, dict[str, float]]:
    """Every path for every kind in this process; µs a message."""
    import logging

    from mailfilter.config import load_settings
    from mailfilter.decision import MILTER, plan
    from mailfilter.engine import Engine
    from mailfilter.fingerprint import use_numpy
    from mailfilter.logs import setup_logging
    use_numpy()                             # as the daemons do
    results: dict[str, dict[str, float]] = {}
    for kind in kinds:
        make = smtp_source_message if kind == "repeat" else fresh_message
        raws = [make(number) for number in range(warm + messages)]
        with tempfile.TemporaryDirectory(prefix="store-cost-") as scratch:
            settings = load_settings(search=False)
            settings.store.path = str(Path(scratch) / "process")
            engine = Engine(settings)
            analyses = [engine.analyse(raw) for raw in raws]
            recipients = ["user@sink.test"]
            milter = settings.milter

            def planned(verdict, milter=milter, recipients=recipients):  # noqa: ANN001, ANN202
                return plan(verdict, milter, recipients, MILTER)
            out = results[kind] = _process(engine, analyses, planned, warm)
            engine.close()
            settings.store.path = str(Path(scratch) / "group")
            engine = Engine(settings)
            out["group"] = _group(engine, analyses, planned, warm)
            engine.close()
            settings.store.path = str(Path(scratch) / "sessions")
            engine = Engine(settings)
            out["sessions"], out["per_commit"] = _sessions(engine, raws, planned, warm)
            engine.close()
            log_file = open(Path(scratch) / "log", "w")  # noqa: SIM115
            logger = setup_logging(settings.log, f"store-cost-{kind}")   # as the daemons
            for handler in logger.handlers:
                if isinstance(handler, logging.StreamHandler):
                    handler.setStream(log_file)
            settings.store.path = str(Path(scratch) / "milter")
            out["log"], out["milter"] = _milter(settings, logger, raws, warm, scratch)
            log_file.close()
    return results


def _process(engine, analyses, planned, warm):  # noqa: ANN001, ANN202
    """Engine.process, split by wrapping the detector's check and record, the plan and
    the store's transaction."""
    clock = time.thread_time
    spent = dict.fromkeys(("check", "plan", "record", "inside", "atomic"), 0.0)
    detector, store = engine.detector, engine.store

    def timed(name, function):  # noqa: ANN001, ANN202
        def run(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            start = clock()
            try:
                return function(*args, **kwargs)
            finally:
                spent[name] += clock() - start
        return run
    atomically = store.atomically

    def transaction(fn):  # noqa: ANN001, ANN202
        if store._txn() is not None:          # nested: part of the outer one
            return fn()
        start = clock()
        try:
            return atomically(timed("inside", fn))
        finally:
            spent["atomic"] += clock() - start
    detector.check = timed("check", detector.check)
    detector.record = timed("record", detector.record)
    store.atomically = transaction
    plan = timed("plan", planned)
    for analysis in analyses[:warm]:
        engine.process(analysis, ["user@sink.test"], plan, sender="sender@source.test")
    for name in spent:
        spent[name] = 0.0
    start = clock()
    for analysis in analyses[warm:]:
        engine.process(analysis, ["user@sink.test"], plan, sender="sender@source.test")
    total = clock() - start
    count = len(analyses) - warm
    micro = 1e6 / count
    return {"process": total * micro, "check": spent["check"] * micro,
            "plan": spent["plan"] * micro,
            "record": spent["record"] * micro,
            "commit": (spent["atomic"] - spent["inside"]) * micro}


def _group(engine, analyses, planned, warm):  # noqa: ANN001, ANN202
    """service.process_message, group commit, one message at a time."""
    from mailfilter.service import process_message
    for analysis in analyses[:warm]:
        process_message(engine, analysis, ["user@sink.test"], planned,
                        sender="sender@source.test")
    start = time.process_time()
    for analysis in analyses[warm:]:
        process_message(engine, analysis, ["user@sink.test"], planned,
                        sender="sender@source.test")
    return (time.process_time() - start) * 1e6 / (len(analyses) - warm)


def _sessions(engine, raws, planned, warm, sessions=SESSIONS):  # noqa: ANN001, ANN202
    """``sessions`` threads, each analysing its messages and processing them with group
    commit (a milter's sessions): CPU a message, analysis included, and messages a commit
    (LMDB's transaction ids)."""
    import threading

    from mailfilter.service import process_message
    for raw in raws[:warm]:
        process_message(engine, engine.analyse(raw), ["user@sink.test"], planned,
                        sender="sender@source.test")
    rest = raws[warm:]
    first_txn = engine.store.env.info()["last_txnid"]

    expect = getattr(engine, "expect", contextlib.nullcontext)    # as the daemons do

    def session(share: list[bytes]) -> None:
        for raw in share:
            with expect() as coming:
                process_message(engine, engine.analyse(raw), ["user@sink.test"], planned,
                                sender="sender@source.test",
                                **({"coming": coming} if coming is not None else {}))
    threads = [threading.Thread(target=session, args=(rest[n::sessions],))
               for n in range(sessions)]
    start = time.process_time()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    spent = time.process_time() - start
    commits = engine.store.env.info()["last_txnid"] - first_txn
    return spent * 1e6 / len(rest), len(rest) / max(1, commits)


def _milter(settings, logger, raws, warm, scratch):  # noqa: ANN001, ANN202
    """The log line alone, and the milter's callbacks for a whole message."""
    import Milter

    from mailfilter.milter.session import DupfilterMilter, Runtime
    from mailfilter.service import DaemonStatus
    runtime = Runtime(settings, logger, group_commit=True)
    status = DaemonStatus("dupfilter-milter", None, logger, listening="bench",
                          store=settings.store.location(), on_error="accept")
    runtime.outcomes.observers += [status.observe, runtime.engines.count_decision]

    class Stubbed(DupfilterMilter):
        """libmilter's side a no-op: the Python work only."""

        def getsymval(self, name):  # noqa: ANN001, ANN202
            return "4ABCDEF"

        def addheader(self, *args):  # noqa: ANN002, ANN202
            return None

        chgheader = delrcpt = quarantine = setreply = addheader
    Stubbed.runtime = runtime
    session = Stubbed()
    session._protocol = 0                   # every callback answers (no NOREPLY)

    def one(raw: bytes) -> None:
        head, _, body = raw.partition(b"\n\n")
        session.envfrom("<sender@source.test>")
        session.envrcpt("<user@sink.test>")
        for line in head.split(b"\n"):
            name, _, value = line.partition(b": ")
            session.header(name.decode(), value)
        session.eoh()
        session.body(body)
        assert session.eom() == Milter.ACCEPT
    for raw in raws[:warm]:
        one(raw)
    count = len(raws) - warm
    # The log line, as eom writes it, for an outcome like the last message's.
    from mailfilter.logs import MILTER_LINE, Outcome
    engine = runtime.engine()
    analysis = engine.analyse(raws[0])
    verdict = engine.process(analysis, ["user@sink.test"], lambda v: None).verdict
    outcome = Outcome(MILTER_LINE, action="tag", verdict=verdict, queue="4ABCDEF", size=1100,
                      capped=False, rcpts=1, dropped=0, recorded="yes", ms=1.2, counted=True)
    start = time.thread_time()
    for _ in range(count):
        runtime.outcomes.log(outcome)
    log = (time.thread_time() - start) * 1e6 / count
    analysed = 0.0
    start = time.process_time()
    for raw in raws[warm:]:
        one(raw)
    whole = time.process_time() - start
    # Less the analysis of those messages, measured apart (the milter path's own cost).
    begin = time.process_time()
    for raw in raws[warm:]:
        engine.analyse(raw)
    analysed = time.process_time() - begin
    runtime.close()
    return log, (whole - analysed) * 1e6 / count


# ---------------------------------------------------------------------------- the driver

def run_worker(checkout: Path, kinds: list[str], messages: int, warm: int) -> dict:
    environment = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(
            [kinds, messages, warm])], env=environment, capture_output=True, text=True,
        check=False, cwd=str(checkout))
    if done.returncode:
        raise SystemExit(f"worker for {checkout} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compare", metavar="CHECKOUT", action="append", default=[],
                        help="another checkout to run in the same rounds (repeatable)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--messages", type=int, default=400)
    parser.add_argument("--warm", type=int, default=20)
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        kinds, messages, warm = json.loads(args.worker)
        print(json.dumps(_worker(kinds, messages, warm)))
        return
    checkouts = [REPO, *(Path(c).resolve() for c in args.compare)]
    runs: dict[Path, list[dict]] = {c: [] for c in checkouts}
    for number in range(args.rounds):
        order = checkouts[number % len(checkouts):] + checkouts[:number % len(checkouts)]
        for checkout in order:
            runs[checkout].append(run_worker(checkout, args.kinds, args.messages, args.warm))
        print(f"round {number + 1} done", file=sys.stderr, flush=True)
    load = os.getloadavg()[0]
    print(f"store_cost: {args.messages} messages after {args.warm}, {args.rounds} round(s), "
          f"µs CPU a message (median of rounds), load {load:.1f}")
    for kind in args.kinds:
        print(f"\n{kind}")
        print(f"{'checkout':<32}" + "".join(f"{p:>11}" for p in PATHS))
        first = None
        for checkout in checkouts:
            medians = {p: statistics.median(r[kind][p] for r in runs[checkout]) for p in PATHS}
            print(f"{str(checkout)[-32:]:<32}" + "".join(
                f"{medians[p]:>11.{1 if p == 'per_commit' else 0}f}" for p in PATHS))
            if first is None:
                first = medians
            else:
                print(f"{'  ratio to ' + REPO.name:<32}" + "".join(
                    f"{first[p] / medians[p]:>11.2f}" if medians[p] else f"{'-':>11}"
                    for p in PATHS))


if __name__ == "__main__":
    main()
