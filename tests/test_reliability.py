"""Faults: a full disk, kill -9 in the middle of writing, many writers and a pruner at once.

Nothing here may lose a message or leave the store inconsistent (`dupfilter-db verify`).
"""

from __future__ import annotations

import errno
import json
import os
import random
import re
import shutil
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from helpers import make_message, paragraph_text
from support.cli import DUPFILTER, DUPFILTER_DB, run

from mailfilter.config import Settings
from mailfilter.engine import Engine, remember


def test_full_disk_passes_mail_and_recovers(tiny_filesystem: Path, settings: Settings) -> None:
    """Issue 20 item 8: with the store's disk full, the pipe filter passed 29 of 30 messages
    unchecked ("No space left on device").  Now the store fills the disk itself, then 30 new
    messages and a copy of a stored one go through `dupfilter --tag`: every one is checked
    and tagged (the copy a duplicate), none passes unchecked, and each either is remembered
    (a later copy is found) or says on stderr that it was checked but not remembered."""
    store = tiny_filesystem / "store"
    with Engine(settings, str(store)) as engine:
        failures = 0
        for seed in range(20000):
            # Recording fails; the message still gets its verdict, and says why.
            decision = engine.process(
                engine.analyse(make_message(paragraph_text(seed), message_id=f"<f{seed}@x>")),
                (), remember)
            assert decision.verdict.kind == "unique"
            if decision.record_error:
                failures += 1
                assert str(store) in decision.record_error
                assert decision.recording is None
                if failures == 10:
                    break
        assert failures == 10, "the filesystem never filled up"
        filler = tiny_filesystem / "filler"
        try:                                    # whatever the store left, if anything
            filler.write_bytes(b"\0" * shutil.disk_usage(tiny_filesystem).free)
        except OSError as error:
            assert error.errno == errno.ENOSPC, error
        assert shutil.disk_usage(tiny_filesystem).free < 64 * 1024
        # What was stored before is still found while nothing new can be.
        assert engine.check(make_message(paragraph_text(0), message_id="<copy0@x>")
                            ).kind == "duplicate"
        # The pipe filter, as procmail runs it, once per message.
        # Each says the disk is full, also when LMDB reports the write a full disk cut
        # short as "Input/output error" (it did for 3 of 14 in a trial run).
        forgotten = re.compile(rf"dupfilter: store {re.escape(str(store))}: [^\n]*No space "
                               r"left on device[^\n]*; message checked but not remembered\n")
        said, tags = {}, {}
        for seed in [*range(100000, 100030), 3]:
            raw = make_message(paragraph_text(seed), message_id=f"<pipe{seed}@x>")
            result = run(DUPFILTER, "--db", str(store), "--tag", stdin=raw)
            assert result.returncode == 0, result.stderr
            header, _, rest = result.stdout.partition(b"\n")
            assert header.startswith(b"X-Dupfilter: ") and rest == raw, (seed, result)
            stderr = result.stderr.decode()
            assert stderr == "" or forgotten.fullmatch(stderr), (seed, stderr)
            said[seed], tags[seed] = bool(stderr), header.decode()
        assert tags.pop(3).startswith("X-Dupfilter: duplicate; score=1.00; reason=digest; "
                                      "match=<f3@x>"), said
        assert set(tags.values()) == {"X-Dupfilter: unique"}
        assert sum(said.values()) >= 5, said          # the disk is full: most say so
        # Each said the truth: remembered when it said nothing, not when it said so.
        for seed, told in said.items():
            if seed == 3:
                continue
            again = engine.check(make_message(paragraph_text(seed), message_id=f"<re{seed}@x>"),
                                 record=False)
            assert again.kind == ("unique" if told else "duplicate"), (seed, told, again.kind)
        # Space comes back: the same engine checks and records again, without a restart.
        filler.unlink()
        after = engine.check(make_message(paragraph_text(5000), message_id="<after@x>"))
        assert after.kind == "unique"
        assert engine.check(make_message(paragraph_text(5000), message_id="<again@x>")
                            ).kind == "duplicate"
        assert engine.store.verify() == []


@pytest.mark.slow
def test_kill_9_during_import_never_corrupts_the_store(tmp_path: Path) -> None:
    """50 times: an import killed at a random moment; the store opens and verifies, and
    every delivery that was acknowledged (exit 0) is found again."""
    folder = tmp_path / "mail"
    folder.mkdir()
    for index in range(400):
        (folder / f"{index:04d}.eml").write_bytes(
            make_message(paragraph_text(index + 10_000, count=120), message_id=f"<i{index}@x>"))
    store = str(tmp_path / "store")
    rng = random.Random(9)
    acknowledged = []
    for attempt in range(50):
        importer = subprocess.Popen([DUPFILTER_DB, "--db", store, "import", "--jobs", "1",
                                     str(folder)], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.05, 0.6))
        raw = make_message(paragraph_text(attempt + 50_000, count=80),
                           message_id=f"<ack{attempt}@x>")
        if run(DUPFILTER, "--db", store, "--tag", stdin=raw).returncode == 0:
            acknowledged.append(raw)
        importer.send_signal(signal.SIGKILL)
        importer.wait()
        verify = run(DUPFILTER_DB, "--db", store, "verify")
        assert verify.returncode == 0, (attempt, verify.stdout[-2000:], verify.stderr)
    assert len(acknowledged) == 50
    for raw in acknowledged:
        assert run(DUPFILTER, "--db", store, "--check", "--no-record",
                   stdin=raw).returncode == 0


@pytest.mark.slow
def test_32_writers_and_a_pruner(tmp_path: Path) -> None:
    """32 `dupfilter --tag` processes, 200 messages each, `dupfilter-db prune` meanwhile:
    no error, every message recorded exactly once, the duplicates among them found."""
    store = str(tmp_path / "store")
    writers, per_writer, distinct = 32, 200, 1600
    # Each distinct text is delivered four times, by different writers, in shuffled order.
    plan = [seed % distinct for seed in range(writers * per_writer)]
    random.Random(4).shuffle(plan)
    texts = {seed: paragraph_text(seed + 70_000, count=60) for seed in range(distinct)}

    def writer(number: int) -> list[bytes]:
        verdicts = []
        for index in range(per_writer):
            seed = plan[number * per_writer + index]
            raw = make_message(texts[seed], message_id=f"<w{number}.{index}@x>")
            result = run(DUPFILTER, "--db", store, "--tag", stdin=raw)
            assert result.returncode == 0 and not result.stderr, result.stderr
            verdicts.append(result.stdout.split(b"\n", 1)[0])
        return verdicts

    stop = False

    def pruner() -> int:
        runs = 0
        while not stop:
            result = run(DUPFILTER_DB, "--db", store, "prune", "--older-than", "30d")
            assert result.returncode in (0, 2), result.stderr
            runs += 1
            time.sleep(0.2)
        return runs

    with ThreadPoolExecutor(max_workers=writers + 1) as pool:
        pruning = pool.submit(pruner)
        results = list(pool.map(writer, range(writers)))
        stop = True
        assert pruning.result() > 0
    headers = [line for verdicts in results for line in verdicts]
    assert len(headers) == writers * per_writer
    unique = sum(1 for h in headers if h == b"X-Dupfilter: unique")
    duplicates = sum(1 for h in headers if h.startswith(b"X-Dupfilter: duplicate;"))
    assert unique == distinct and duplicates == writers * per_writer - distinct
    stats = json.loads(run(DUPFILTER_DB, "--db", store, "stats", "--json").stdout)
    assert stats["records"] == distinct
    assert run(DUPFILTER_DB, "--db", store, "verify").returncode == 0


def test_sigterm_during_delivery_leaves_a_consistent_store(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    for seed in range(20):
        proc = subprocess.Popen([DUPFILTER, "--db", store, "--tag"], stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        proc.stdin.write(make_message(paragraph_text(seed)))
        proc.stdin.close()
        time.sleep(random.Random(seed).uniform(0, 0.2))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    if Path(store, "data.mdb").exists():
        assert run(DUPFILTER_DB, "--db", store, "verify").returncode == 0
