"""Group commit: store work handed over by many threads, done by one writer thread, many
jobs per write transaction.

A store commit waits for the disk (LMDB syncs at every commit, ~1-10 ms) and writers take
turns: one commit per message would cap a daemon at one message per disk sync.  Callers
therefore only queue a job (record this accepted message; check and record this imported
one); the writer runs whatever has queued up since its last commit in one transaction, so
throughput grows with concurrency and no caller waits for the disk unless it wants to.
Jobs run in the order they were submitted, each seeing what the jobs before it wrote.

:meth:`Recorder.submit` returns a :class:`concurrent.futures.Future` of the job's result:
a thread may wait on it (``concurrent.futures.wait``), an asyncio front end awaits
``asyncio.wrap_future(future)``.  When one job fails, the transaction is rolled back and
every future of that batch gets the error; the writer goes on with the next batch.

The hand-off is on the path of every message, so it uses one plain lock and a deque (no
:class:`queue.Queue`, whose conditions are Python code), and the writer is woken only when
it sleeps, by releasing a lock it waits on.  The queue is bounded: :meth:`submit` answers
None when it is full.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

R = TypeVar("R")
Job = tuple[Callable[[], Any], Future]


class Recorder:
    """One writer thread running jobs in batched transactions of ``atomically``."""

    def __init__(self, atomically: Callable[[Callable[[], Any]], Any], *,
                 max_queue: int = 10000, max_batch: int = 512) -> None:
        self.atomically = atomically          # runs a function in one write transaction
        self.max_queue = max_queue
        self.max_batch = max_batch
        self._jobs: deque[Job] = deque()
        self._mutex = threading.Lock()     # guards _jobs, _sleeping, _closing
        self._wake = threading.Lock()      # held while the writer sleeps; released to wake
        self._wake.acquire()
        self._sleeping = False
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="recorder", daemon=True)
        self._thread.start()

    def submit(self, job: Callable[[], R]) -> Future[R] | None:
        """Queue ``job`` (run later in a write transaction); None when the queue is full."""
        future: Future[R] = Future()
        with self._mutex:
            if len(self._jobs) >= self.max_queue or self._closing:
                return None
            self._jobs.append((job, future))
            wake, self._sleeping = self._sleeping, False
        if wake:
            self._wake.release()
        return future

    @property
    def pending(self) -> int:
        """Jobs queued and not yet taken by the writer."""
        return len(self._jobs)

    def close(self, timeout: float = 10.0) -> bool:
        """Run what is queued, then stop the writer (later submits answer None); False
        when it is still at work after ``timeout`` (the store must not be closed under
        it)."""
        with self._mutex:
            self._closing = True
            wake, self._sleeping = self._sleeping, False
        if wake:
            self._wake.release()
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _take(self) -> list[Job] | None:
        """Up to ``max_batch`` queued jobs, sleeping until there is one (None: closing)."""
        while True:
            with self._mutex:
                jobs = self._jobs
                if jobs:
                    return [jobs.popleft() for _ in range(min(len(jobs), self.max_batch))]
                if self._closing:
                    return None
                self._sleeping = True
            self._wake.acquire()

    def _run(self) -> None:
        while (batch := self._take()) is not None:
            self._commit(batch)

    def _commit(self, batch: list[Job]) -> None:
        # A future cancelled meanwhile (its waiter gave up) still has its job run.
        wanted = [future.set_running_or_notify_cancel() for _, future in batch]

        def run() -> list[Any]:       # may run twice: a store reruns a grown transaction
            return [job() for job, _ in batch]

        try:
            results = self.atomically(run)
        except BaseException as error:  # noqa: BLE001 - reported through the futures
            for (_, future), running in zip(batch, wanted, strict=True):
                if running:
                    future.set_exception(error)
            return
        for (_, future), running, result in zip(batch, wanted, results, strict=True):
            if running:
                future.set_result(result)
