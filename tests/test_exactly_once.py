"""One recording path for every front end: copies of one message delivered at the same
moment through two connections each of dupfilter-milter and dupfilter-smtpd and the pipe
filter, on one store, leave one record and one message called new — the others are
duplicates.

Check, plan and record are one unit of work (``Engine.process``: one LMDB write
transaction, on each daemon's group-commit writer); before, the daemons checked in a read
transaction and queued the record for later, so two copies checked together were both
"unique" and both recorded.
"""

from __future__ import annotations

import functools
import smtplib
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import make_message, paragraph_text
from support import cli
from support.daemons import MilterDaemon, SmtpdDaemon
from support.milter_client import added_headers
from support.ports import free_port
from support.smtp_sink import SmtpSink

from mailfilter.config import load_settings
from mailfilter.engine import Engine

pytestmark = pytest.mark.slow

ROUNDS = 6
# Two connections to each daemon and one pipe filter, all at once.
FRONTS = ("milter1", "milter2", "smtpd1", "smtpd2", "pipe")


def milter_copy(daemon: MilterDaemon, raw: bytes, number: int) -> str:
    head, _, body = raw.partition(b"\n\n")
    headers = [tuple(line.split(": ", 1)) for line in head.decode().splitlines()]
    with daemon.client() as client:
        replies = client.message("ann@example.org", ["bob@example.net"], headers,
                                 body.replace(b"\n", b"\r\n"), queue_id=f"Q{number}")
    return dict(added_headers(replies))["X-Dupfilter"]


def smtpd_copy(daemon: SmtpdDaemon, raw: bytes) -> str:
    with smtplib.SMTP("127.0.0.1", daemon.port, timeout=60) as client:
        client.sendmail("ann@example.org", ["bob@example.net"], raw)
    return ""   # the verdict is read from what the next hop received


def pipe_copy(store: Path, raw: bytes) -> str:
    done = cli.tag(store, raw, "--recipient", "bob@example.net")
    head = done.stdout.split(b"\n\n", 1)[0].decode()
    return next(line.split(": ", 1)[1] for line in head.splitlines()
                if line.startswith("X-Dupfilter: "))


def at_once(jobs: dict[str, Callable[[], str]]) -> dict[str, str]:
    """Run the jobs in threads started together; their results by name."""
    results: dict[str, str] = {}
    start = threading.Barrier(len(jobs))

    def run(name: str, job: Callable[[], str]) -> None:
        start.wait()
        results[name] = job()
    threads = [threading.Thread(target=run, args=item) for item in jobs.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return results


def test_copies_through_three_front_ends_at_once_are_recorded_once(tmp_path: Path) -> None:
    store = tmp_path / "store"
    Engine(load_settings(search=False), str(store)).close()
    sink = SmtpSink().start()
    milter = MilterDaemon(tmp_path / "milter", "", db=store).start()
    smtpd = SmtpdDaemon(tmp_path / "smtpd", free_port(), sink.port, db=store).start()
    try:
        for number in range(ROUNDS):
            text = paragraph_text(7000 + number, count=150)
            raws = {front: make_message(text, message_id=f"<r{number}.{front}@example.org>")
                    for front in FRONTS}
            verdicts = at_once({
                front: functools.partial(milter_copy, milter, raws[front], number)
                if front.startswith("milter") else
                functools.partial(smtpd_copy, smtpd, raws[front])
                if front.startswith("smtpd") else
                functools.partial(pipe_copy, store, raws[front]) for front in FRONTS})
            for delivery in sink.received(2 * (number + 1))[-2:]:
                front = delivery.header("Message-ID")[0].split(".")[1].split("@")[0]
                verdicts[front] = delivery.header("X-Dupfilter")[0]
            kinds = sorted(value.split(";")[0] for value in verdicts.values())
            assert kinds == ["duplicate"] * (len(FRONTS) - 1) + ["unique"], verdicts
        with Engine(load_settings(search=False), str(store), readonly=True) as engine:
            assert engine.store.stats()["records"] == ROUNDS
            assert sum(record.seen for record in engine.store.records()) \
                == len(FRONTS) * ROUNDS
            assert engine.store.verify() == []
    finally:
        milter.stop()
        smtpd.stop()
        sink.stop()
