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

A thread that waits for its job anyway (a daemon's session: the message's answer waits for
its record) calls :meth:`run` instead: when no batch is being committed it commits what is
queued itself, its own job with it, in its own thread (a session alone saves two thread
hand-offs and two futures, about a fifth of what a small message costs outside its
analysis); otherwise it waits for the committing lock and then finds its job done, or
commits the next batch itself (no thread hand-off either).  Batches are taken from the
queue and committed under that one lock, so jobs still run in submission order and one
batch at a time, whoever commits.  A sync costs its CPU (in the kernel, and on a virtual
machine more outside the process) whatever the batch, so before committing, a thread in
run() waits a moment (at most ``gather_seconds``) for the jobs of the messages being
analysed at that time (:meth:`Recorder.expect`): with four sessions, more messages share
each commit.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

R = TypeVar("R")


class _Waiter:
    """The slot of a job whose caller is in :meth:`Recorder.run`: what a Future does for a
    batch (``set_result``, ``set_exception``), no lock: the caller holds the committing
    lock until its job is done, so nobody waits on the slot."""

    __slots__ = ("done", "result", "error")

    def __init__(self) -> None:
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None

    def set_running_or_notify_cancel(self) -> bool:
        return True

    def set_result(self, result: Any) -> None:
        self.result, self.done = result, True

    def set_exception(self, error: BaseException) -> None:
        self.error, self.done = error, True


class Coming:
    """A job on its way to :meth:`Recorder.run` (its message is being analysed): a thread
    about to commit waits a moment for it.  Closed when its job is queued, or by
    ``close`` (``with``) when it never comes."""

    __slots__ = ("_recorder", "open")

    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder
        self.open = True

    def close(self) -> None:
        if self.open:
            self._recorder._abandoned(self)

    def __enter__(self) -> Coming:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


Job = tuple[Callable[[], Any], "Future[Any] | _Waiter"]
# What :meth:`Recorder.run` answers when the queue is full or closed (the job did not run).
NOT_TAKEN: Any = object()
# How long a commit in run() waits for the jobs of messages being analysed (a 1 KiB
# message's analysis is ~0.3 ms of CPU; a commit's sync 1-10 ms of wall time).
GATHER_SECONDS = 0.002


class Recorder:
    """Jobs run in batched transactions of ``atomically``, in order: by its writer thread
    (:meth:`submit`) or by a caller that waits (:meth:`run`)."""

    def __init__(self, atomically: Callable[[Callable[[], Any]], Any], *,
                 max_queue: int = 10000, max_batch: int = 512,
                 gather_seconds: float = GATHER_SECONDS) -> None:
        self.atomically = atomically          # runs a function in one write transaction
        self.max_queue = max_queue
        self.max_batch = max_batch
        self.gather_seconds = gather_seconds
        self._coming = 0                   # Coming jobs not yet queued
        self._gathering = False            # a thread in run() waits for them ...
        self._gather_target = 0            # ... until the queue holds this many jobs
        self._gathered = threading.Lock()  # held while it waits; released to wake it
        self._gathered.acquire()
        self._jobs: deque[Job] = deque()
        self._mutex = threading.Lock()     # guards _jobs, _sleeping, _closing
        self._wake = threading.Lock()      # held while the writer sleeps; released to wake
        self._wake.acquire()
        self._sleeping = False
        self._closing = False
        # Held while a batch is taken from the queue and committed (by the writer or by a
        # thread in run()): one batch at a time, in order.
        self._committing = threading.Lock()
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

    def expect(self) -> Coming:
        """Say that a job is coming (a message is being analysed): :meth:`run` with it."""
        with self._mutex:
            self._coming += 1
        return Coming(self)

    def _abandoned(self, coming: Coming) -> None:
        """``coming``'s job will never come (its message failed before it): the thread
        that gathers waits for it no more."""
        with self._mutex:
            if not coming.open:
                return
            coming.open = False
            self._coming -= 1
            self._gather_target -= 1
            wake = self._gathering and (len(self._jobs) >= self._gather_target
                                        or not self._coming)
            if wake:
                self._gathering = False
        if wake:
            self._gathered.release()

    def _gather(self) -> None:
        """Before a commit in :meth:`run`: wait, at most ``gather_seconds``, until the
        jobs of the messages being analysed now are queued too."""
        with self._mutex:
            if not self._coming or len(self._jobs) >= self.max_batch:
                return
            self._gathering = True
            self._gather_target = min(len(self._jobs) + self._coming, self.max_batch)
        if self._gathered.acquire(timeout=self.gather_seconds):
            return
        with self._mutex:
            woken = not self._gathering
            self._gathering = False
        if woken:                             # woken as the wait ran out: held again
            self._gathered.acquire()

    def run(self, job: Callable[[], R], timeout: float, coming: Coming | None = None) -> R:
        """Run ``job`` in a write transaction with whatever else is queued, committed by
        this thread when no other is committing; its result (:data:`NOT_TAKEN`: the queue
        is full or closed, the job did not run).  Raises what failed the transaction, or
        TimeoutError after ``timeout`` seconds (the job still runs later).  ``coming``:
        what :meth:`expect` gave for it."""
        waiter = _Waiter()
        wake = False
        with self._mutex:
            if len(self._jobs) >= self.max_queue or self._closing:
                return NOT_TAKEN
            self._jobs.append((job, waiter))
            if coming is not None and coming.open:
                coming.open = False
                self._coming -= 1
            if self._gathering and (len(self._jobs) >= self._gather_target
                                    or not self._coming):
                self._gathering, wake = False, True
        if wake:
            self._gathered.release()
        if not self._committing.acquire(timeout=timeout):
            self._wake_writer()              # someone must commit it: the writer will
            raise TimeoutError(f"the store did not commit within {timeout:g} s")
        try:                                 # its job is done, or still queued: commit
            if not waiter.done:
                self._gather()
            while not waiter.done and (batch := self._take_now()):
                self._commit(batch)
        finally:
            self._committing.release()
        if waiter.error is not None:
            raise waiter.error
        return waiter.result

    def _wake_writer(self) -> None:
        with self._mutex:
            wake, self._sleeping = self._sleeping, False
        if wake:
            self._wake.release()

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
        self._wake_writer()
        started = time.monotonic()
        self._thread.join(timeout)
        if self._thread.is_alive():
            return False
        # A thread in run() may be committing a batch: closed once it is done.
        left = max(0.0, timeout - (time.monotonic() - started))
        if not self._committing.acquire(timeout=left):
            return False
        self._committing.release()
        return True

    def _take_now(self) -> list[Job]:
        """Up to ``max_batch`` queued jobs, oldest first (none: an empty list)."""
        with self._mutex:
            jobs = self._jobs
            return [jobs.popleft() for _ in range(min(len(jobs), self.max_batch))]

    def _wait(self) -> bool:
        """Sleep until a job is queued (False: closing and nothing is left)."""
        while True:
            with self._mutex:
                if self._jobs:
                    return True
                if self._closing:
                    return False
                self._sleeping = True
            self._wake.acquire()

    def _run(self) -> None:
        while self._wait():
            with self._committing:
                batch = self._take_now()     # empty when a thread in run() took them
                if batch:
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
