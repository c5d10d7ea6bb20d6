"""Checking many messages (``dupfilter-db import`` and ``scan``): reading and fingerprinting
fan out over a pool of worker processes (:func:`~mailfilter.engine.analyse` is pure and
picklable); the store work stays in this process, in message order, on the engine's
group-commit writer thread (many messages per transaction, each seeing those before it).
"""

from __future__ import annotations

import os
import stat
import sys
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from itertools import islice

from mailfilter.config import FingerprintSettings, Settings
from mailfilter.detector import Verdict
from mailfilter.engine import Analysis, Engine, analyse
from mailfilter.fingerprint import use_numpy
from mailfilter.sources import FileRef, iter_messages, read_file

# Messages per round trip to a worker process.
_CHUNK = 32
# Messages checked (and recorded) in one transaction of the writer thread.
_BATCH = 256
# Fingerprinting workers run at this much lower priority than the main process.
_WORKER_NICE = 5
Batch = list[tuple[str, int, Analysis | Exception]]


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


def input_bytes(paths: list[str]) -> int | None:
    """The bytes of mail under ``paths`` (files, folders, Maildirs), from the file sizes
    alone; None when a size cannot be known beforehand (stdin, a pipe)."""
    total = 0
    for name in paths:
        if name == "-":
            return None
        for root, dirs, files in os.walk(name) if os.path.isdir(name) else [("", [], [name])]:
            dirs[:] = [d for d in dirs if not d.startswith(".") and d != "tmp"]
            for file in files:
                if root and file.startswith("."):
                    continue
                try:
                    info = os.stat(os.path.join(root, file))
                except OSError:
                    continue
                if not stat.S_ISREG(info.st_mode):
                    return None
                total += info.st_size
    return total


class Progress:
    """A progress bar on stderr (tqdm) in bytes of mail, with the total and the time left
    when the inputs' size is known, and the messages done so far."""

    def __init__(self, total_bytes: int | None) -> None:
        from tqdm import tqdm
        self.total = total_bytes
        self.messages = 0
        self.bar = tqdm(total=total_bytes, unit="B", unit_scale=True, unit_divisor=1024,
                        file=sys.stderr, dynamic_ncols=True, mininterval=0.5,
                        bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining},"
                                   " {rate_fmt}{postfix}]" if total_bytes else None)

    def update(self, messages: int, size: int) -> None:
        self.messages += messages
        self.bar.set_postfix_str(f"{self.messages} msg", refresh=False)
        self.bar.update(size)

    def close(self) -> None:
        if self.total is not None and self.bar.n < self.total:
            self.bar.update(self.total - self.bar.n)   # mbox separators, skipped files
        self.bar.close()


def _progress(paths: list[str], enabled: bool) -> Progress | None:
    return Progress(input_bytes(paths)) if enabled else None


def check_all(engine: Engine, paths: list[str], jobs: int, *, record: bool,
              show_progress: bool) -> Iterator[tuple[str, Verdict | Exception, int]]:
    """(label, verdict or error, size) for every message under ``paths``, in order:
    checked, and with ``record`` remembered.

    Messages go to the engine's writer thread a batch at a time (one hand-off and one
    transaction per batch); while it checks one batch, this thread gathers the next.
    """
    use_numpy()     # many messages: numpy's import pays (and the workers inherit it)
    skipped: list[str] = []
    messages = iter_messages(paths, skipped, defer_files=jobs > 1)
    results = _analysed(messages, engine.settings, jobs, skipped)
    bar = _progress(paths, show_progress)
    now = int(time.time())
    pending: deque[tuple[Batch, Future[list[Verdict]] | list[Verdict]]] = deque()
    try:
        while True:
            batch = list(islice(results, _BATCH))
            if batch:
                analyses = [a for _, _, a in batch if not isinstance(a, Exception)]
                if record:
                    checked = engine.decide_later(analyses, now=now)
                    if checked is None:
                        raise RuntimeError("the record queue is full")
                else:
                    checked = [engine.decide(a, record=False, now=now) for a in analyses]
                pending.append((batch, checked))
            while pending and (len(pending) > 1 or not batch):
                yield from _taken(*pending.popleft(), bar)
            if not batch:
                return
    finally:
        if bar is not None:
            bar.close()
        for name in skipped:
            print(f"dupfilter-db: skipped {name}: does not look like a mail message",
                  file=sys.stderr)


def _taken(batch: Batch, checked: Future[list[Verdict]] | list[Verdict],
           bar: Progress | None) -> Iterator[tuple[str, Verdict | Exception, int]]:
    """A batch's results in order, once the writer has them (a store error is raised)."""
    verdicts = iter(checked.result() if isinstance(checked, Future) else checked)
    for label, size, analysis in batch:
        yield label, analysis if isinstance(analysis, Exception) else next(verdicts), size
    if bar is not None:
        bar.update(len(batch), sum(size for _, size, _ in batch))
