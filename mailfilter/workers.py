"""A work budget for the daemons: a message's analysis off the thread that serves its
protocol, with a deadline.

Parsing and fingerprinting are linear in the input and capped (docs/reliability.md), yet a
large crafted message can still take seconds of CPU, and one long regular-expression call
holds the interpreter for every other session.  So the daemons analyse a message larger
than ``[analysis] offload_bytes`` in a worker process of a small pool: the session's thread
waits for it at most ``[analysis] deadline`` seconds, then the worker is killed (another
starts) and the message is judged on what is known without its body — its Message-ID
(:meth:`mailfilter.engine.Engine.process_known`) — or handled as ``on_error`` says, with a
log line and the ``over budget`` error kind in the metrics.  Small messages, nearly all
mail, are analysed in the session's thread: a round trip to a worker would cost more than
their analysis.

Workers are started with the ``spawn`` method (the daemons run threads; forking a threaded
process is unsafe) and each serves one request at a time over a pipe.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from mailfilter.config import AnalysisSettings, FingerprintSettings

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from mailfilter.engine import Analysis


class OverBudget(RuntimeError):
    """A message's analysis did not finish within its deadline."""


def _serve(connection: Connection, settings: FingerprintSettings) -> None:
    """A worker: analyse what comes, answer (analysis or error text), until the pipe ends."""
    from mailfilter.engine import analyse
    # Patterns compile on first use: pay for that before the first deadline, not in it.
    analyse(_WARM_UP, settings)
    connection.send(_READY)
    while True:
        try:
            raw, whole_body = connection.recv()
        except (EOFError, OSError):
            return
        try:
            answer: Any = analyse(raw, settings, whole_body=whole_body)
        except Exception as error:  # noqa: BLE001 - sent back, raised in the session
            answer = RuntimeError(f"{type(error).__name__}: {error}")
        try:
            connection.send(answer)
        except (OSError, ValueError):
            return


# What a worker says once it has imported what it needs (not part of any deadline).
_READY = "ready"
_WARM_UP = (b"From: warm-up@localhost\nSubject: Re: warm-up\nMessage-ID: <warm-up@localhost>\n"
            b"Content-Type: text/plain\n\nA short text to compile what analysis reads, see "
            b"https://example.org/a\n\n> quoted\n\n-- \nsign-off\n")
STARTUP_SECONDS = 60.0


class _Worker:
    """One worker process and our end of its pipe, started and ready."""

    def __init__(self, context: Any, settings: FingerprintSettings) -> None:
        self.connection, theirs = context.Pipe()
        self.process = context.Process(target=_serve, args=(theirs, settings),
                                       name="dupfilter-analysis", daemon=True)
        self.process.start()
        theirs.close()
        if not self.connection.poll(STARTUP_SECONDS) or self.connection.recv() != _READY:
            self.stop()
            raise OverBudget("an analysis worker did not start")

    def stop(self) -> None:
        try:
            self.connection.close()
        except OSError:
            pass
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5)


class AnalysisPool:
    """Analyse messages within a deadline: large ones in worker processes."""

    def __init__(self, fingerprint: FingerprintSettings, budget: AnalysisSettings) -> None:
        self.fingerprint = fingerprint
        self.budget = budget
        self._context = multiprocessing.get_context("spawn")
        self._idle: deque[_Worker] = deque()
        self._started = 0
        self._lock = threading.Condition()
        self._closed = False
        self.over_budget = 0        # messages whose analysis was cut off (for status)

    def analyse(self, raw: bytes, whole_body: bytes | None = None) -> Analysis:
        """The analysis of ``raw``; :class:`OverBudget` after ``deadline`` seconds."""
        if len(raw) < self.budget.offload_bytes or self.budget.workers == 0:
            from mailfilter.engine import analyse
            return analyse(raw, self.fingerprint, whole_body=whole_body)
        worker = self._take()
        try:
            worker.connection.send((raw, whole_body))
            if not worker.connection.poll(self.budget.deadline):
                raise OverBudget(f"analysis of a {len(raw)}-byte message took longer than "
                                 f"{self.budget.deadline:g} s")
            answer = worker.connection.recv()
        except BaseException:
            self._discard(worker)
            with self._lock:
                self.over_budget += 1
            raise
        self._give_back(worker)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def _take(self) -> _Worker:
        deadline = time.monotonic() + self.budget.deadline
        with self._lock:
            while not self._idle and self._started >= self.budget.workers:
                if self._closed or not self._lock.wait(max(0.0, deadline - time.monotonic())):
                    raise OverBudget("no analysis worker free within the deadline")
            if self._idle:
                return self._idle.popleft()
            self._started += 1
        try:
            return _Worker(self._context, self.fingerprint)
        except BaseException:
            with self._lock:
                self._started -= 1
                self._lock.notify()
            raise

    def _give_back(self, worker: _Worker) -> None:
        with self._lock:
            if self._closed:
                worker.stop()
                return
            self._idle.append(worker)
            self._lock.notify()

    def _discard(self, worker: _Worker) -> None:
        worker.stop()
        with self._lock:
            self._started -= 1
            self._lock.notify()

    def close(self) -> None:
        """Stop every worker (idle ones at once; busy ones when they come back)."""
        with self._lock:
            self._closed = True
            idle, self._idle = list(self._idle), deque()
            self._lock.notify_all()
        for worker in idle:
            worker.stop()
