"""The group-commit writer (mailfilter/recorder.py) and the engine's use of it."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import make_message, paragraph_text

from mailfilter.config import Settings
from mailfilter.engine import Engine, remember
from mailfilter.recorder import Recorder


class SlowStore:
    """``atomically`` that counts transactions; the first one waits until released (the
    disk is slow), so that jobs pile up behind it."""

    def __init__(self, fail: BaseException | None = None) -> None:
        self.transactions: list[list[object]] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.fail = fail

    def atomically(self, fn: Callable[[], list[object]]) -> list[object]:
        self.entered.set()
        self.release.wait(10)
        results = fn()
        self.transactions.append(results)
        if self.fail is not None:
            failure, self.fail = self.fail, None
            raise failure
        return results


def test_jobs_queued_meanwhile_share_one_transaction_and_the_queue_is_bounded() -> None:
    store = SlowStore()
    recorder = Recorder(store.atomically, max_queue=3)
    first = recorder.submit(lambda: "v1")
    assert first is not None and store.entered.wait(10)     # the writer is committing v1
    rest = [recorder.submit(lambda n=n: f"v{n}") for n in (2, 3, 4)]
    assert recorder.submit(lambda: "v5") is None            # queue full: not taken
    assert not first.done() and recorder.pending == 3
    store.release.set()
    assert first.result(10) == "v1"
    assert [future.result(10) for future in rest if future] == ["v2", "v3", "v4"]
    assert store.transactions == [["v1"], ["v2", "v3", "v4"]]
    last = recorder.submit(lambda: "v6")
    recorder.close()                                        # commits what is queued
    assert last is not None and last.done() and store.transactions[-1] == ["v6"]
    assert recorder.submit(lambda: "v7") is None            # closed


@pytest.mark.parametrize("error", [RuntimeError("disk full"), SystemExit("a library gave up")],
                         ids=repr)
def test_a_failed_transaction_fails_its_batch_and_the_writer_goes_on(
        error: BaseException) -> None:
    store = SlowStore(fail=error)
    store.release.set()
    recorder = Recorder(store.atomically)
    first = recorder.submit(lambda: "v1")
    assert first is not None
    concurrent.futures.wait([first], timeout=10)
    assert first.exception() is error                       # given up on, not waited for
    second = recorder.submit(lambda: "v2")
    assert second is not None and second.result(10) == "v2"
    recorder.close()


def test_an_asyncio_front_end_awaits_its_commit() -> None:
    """dupfilter-smtpd awaits each delivered message's record: 20 messages that arrive
    while a commit is under way all go in the next transaction."""
    store = SlowStore()
    recorder = Recorder(store.atomically)

    async def run() -> list[object]:
        first = recorder.submit(lambda: "v0")
        assert first is not None
        waiting = asyncio.ensure_future(asyncio.wrap_future(first))
        await asyncio.sleep(0.05)                           # the first commit is under way
        futures = [recorder.submit(lambda n=n: f"v{n}") for n in range(1, 21)]
        store.release.set()
        return [await waiting, *await asyncio.gather(
            *(asyncio.wrap_future(future) for future in futures if future))]

    assert asyncio.run(run()) == [f"v{n}" for n in range(21)]
    assert len(store.transactions) == 2                     # 1 message, then the 20
    recorder.close()


def test_a_cancelled_waiter_does_not_stop_its_record() -> None:
    store = SlowStore()
    recorder = Recorder(store.atomically)
    done: list[str] = []
    first = recorder.submit(lambda: done.append("first"))
    assert store.entered.wait(10)
    second = recorder.submit(lambda: done.append("second"))
    assert second is not None and second.cancel()           # its waiter gave up
    store.release.set()
    recorder.close()
    assert first is not None and done == ["first", "second"]


def test_engine_decide_later_checks_in_order_and_process_later_remembers(
        tmp_path: Path) -> None:
    with Engine(Settings(), str(tmp_path / "store")) as engine:
        raws = [make_message(paragraph_text(seed), message_id=f"<m{n}@example.org>")
                for n, seed in enumerate((1, 2, 1))]
        checked = engine.decide_later([engine.analyse(raw) for raw in raws], now=1000)
        assert checked is not None
        verdicts = checked.result(10)
        # The third is the first again: the writer checked it after recording the first.
        assert [v.kind for v in verdicts] == ["unique", "unique", "duplicate"]
        future = engine.process_later(engine.analyse(make_message(paragraph_text(3))), (),
                                      remember)
        assert future is not None and future.result(10).recording is not None
        started = time.monotonic()
        again = engine.check(make_message(paragraph_text(3), message_id="<x@example.org>"),
                             record=False)
        assert again.kind == "duplicate" and time.monotonic() - started < 5


def test_a_lone_waiting_caller_commits_its_own_job_in_its_own_thread() -> None:
    """Recorder.run with no batch under way: the transaction runs in the caller's thread,
    no hand-off to the writer (the old path woke the writer thread and waited on two
    futures for every message: a fifth of a small message's CPU outside analysis)."""
    threads: list[int] = []

    def atomically(fn: Callable[[], list[object]]) -> list[object]:
        threads.append(threading.get_ident())
        return fn()
    recorder = Recorder(atomically)
    assert [recorder.run(lambda n=n: f"v{n}", 10) for n in range(3)] == ["v0", "v1", "v2"]
    assert threads == [threading.get_ident()] * 3
    recorder.close()


def test_waiting_callers_that_arrive_during_a_commit_share_the_next_one_in_order() -> None:
    """Group commit stays: three sessions that queue while a commit waits for the disk
    are committed together, in the order they came, by one of them; each gets its own
    result only once its transaction is committed."""
    store = SlowStore()
    recorder = Recorder(store.atomically)
    results: dict[str, object] = {}

    def session(name: str) -> None:
        results[name] = recorder.run(lambda: name, 10)
    first = threading.Thread(target=session, args=("v1",))
    first.start()
    assert store.entered.wait(10)                           # v1 is being committed
    others = []
    for number, name in enumerate(("v2", "v3", "v4"), start=1):
        thread = threading.Thread(target=session, args=(name,))
        thread.start()
        others.append(thread)
        deadline = time.monotonic() + 10
        while recorder.pending < number and time.monotonic() < deadline:
            time.sleep(0.001)
    assert results == {}                                    # nothing answered before commit
    store.release.set()
    for thread in (first, *others):
        thread.join(10)
    assert results == {"v1": "v1", "v2": "v2", "v3": "v3", "v4": "v4"}
    assert store.transactions == [["v1"], ["v2", "v3", "v4"]]
    recorder.close()


def test_a_waiting_caller_gets_its_transactions_error_and_a_full_queue_says_not_taken(
        ) -> None:
    """The error that rolled a batch back is raised in its caller (the daemon then checks
    the message unrecorded); a full or closed queue runs nothing and says so."""
    from mailfilter.recorder import NOT_TAKEN
    store = SlowStore(fail=RuntimeError("disk full"))
    store.release.set()
    recorder = Recorder(store.atomically, max_queue=1)
    with pytest.raises(RuntimeError, match="disk full"):
        recorder.run(lambda: "v1", 10)
    assert recorder.run(lambda: "v2", 10) == "v2"
    recorder._jobs.append((lambda: "queued", concurrent.futures.Future()))  # the queue full
    ran: list[str] = []
    assert recorder.run(lambda: ran.append("v3"), 10) is NOT_TAKEN and ran == []
    recorder.close()
    assert recorder.run(lambda: ran.append("v4"), 10) is NOT_TAKEN and ran == []


def test_close_waits_for_a_caller_that_is_committing() -> None:
    """The store must not be closed under a transaction a session is committing itself:
    close() returns once it is done (and says False while it is still at work)."""
    store = SlowStore()
    recorder = Recorder(store.atomically)
    caller = threading.Thread(target=recorder.run, args=(lambda: "v1", 10))
    caller.start()
    assert store.entered.wait(10)
    assert recorder.close(timeout=0.2) is False             # still committing
    store.release.set()
    assert recorder.close(timeout=10) is True and store.transactions == [["v1"]]
    caller.join(10)


def test_a_commit_waits_for_the_messages_being_analysed_but_not_for_one_that_fails() -> None:
    """Recorder.expect: a session about to commit waits (up to gather_seconds) for the
    jobs of messages being analysed at that moment, so that they share its commit (a
    sync's CPU is paid per commit); a message that fails before its job (closed unused)
    ends the wait at once, and with nothing being analysed there is no wait at all."""
    transactions: list[list[object]] = []

    def atomically(fn: Callable[[], list[object]]) -> list[object]:
        transactions.append(fn())
        return transactions[-1]
    recorder = Recorder(atomically, gather_seconds=30)
    started = time.monotonic()
    assert recorder.run(lambda: "alone", 10) == "alone"     # nothing coming: no wait
    analysing = recorder.expect()
    results: dict[str, object] = {}
    first = threading.Thread(target=lambda: results.update(a=recorder.run(lambda: "a", 10)))
    first.start()
    time.sleep(0.2)
    assert "a" not in results                               # waiting for the other
    assert recorder.run(lambda: "b", 10, analysing) == "b"
    first.join(10)
    assert results == {"a": "a"} and transactions[1:] == [["a", "b"]]
    failing = recorder.expect()
    other = threading.Thread(target=lambda: results.update(c=recorder.run(lambda: "c", 10)))
    other.start()
    time.sleep(0.2)
    with failing:                                           # its analysis failed
        pass
    other.join(10)
    assert results["c"] == "c" and transactions[-1] == ["c"]
    assert time.monotonic() - started < 10                  # never the 30 s
    recorder.close()
