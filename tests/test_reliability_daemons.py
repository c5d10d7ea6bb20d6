"""Faults and load of the daemons: a busy dupfilter-milter killed with SIGKILL, a full disk
under the milter and the SMTP filter, and 10,000 messages through each behind real Postfix.

No message may be lost or doubled, no fault may leave the store inconsistent
(`dupfilter-db verify`), and a store failure must not cost mail.  Figures are printed (run
with ``-s``) and recorded in docs/reliability.md.
"""

from __future__ import annotations

import itertools
import random
import shutil
import smtplib
import statistics
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers import make_message, paragraph_text
from miltertest import constants as C
from support.cli import DUPFILTER_DB, run
from support.daemons import MilterDaemon, SmtpdDaemon, parse_fields
from support.milter_client import added_headers, final
from support.ports import free_port, wait_for_port
from support.postfix import PostfixHarness, filter_master_cf

from mailfilter.config import Settings
from mailfilter.engine import Engine

SESSIONS = 16
LOAD_MESSAGES = 10_000
LOAD_TEXTS = 2_500              # each text is sent LOAD_MESSAGES / LOAD_TEXTS times
MESSAGES_PER_SESSION = 10       # then QUIT and a new SMTP session
DEBUG_LOG = '[log]\nlevel = "debug"\n'   # the milter logs each group commit at debug level


def percentile(values: list[float], pct: int) -> float:
    """The ``pct``-th percentile (exclusive method, as statistics.quantiles)."""
    return statistics.quantiles(values, n=100)[pct - 1] if len(values) > 1 else values[0]


def stored_message_ids(store: Path, settings: Settings) -> set[str]:
    """Message-IDs of every record in the store, read as `dupfilter-db` reads it."""
    with Engine(settings, str(store), readonly=True) as engine:
        return {record.message_id for record in engine.store.records() if record.message_id}


def body_lines(seed: int, count: int) -> bytes:
    return paragraph_text(seed, count).replace("\n", "\r\n").encode()


# --------------------------------------------------------------- kill -9 of a busy milter

@dataclass
class MilterTraffic:
    """Sessions driving a milter until it dies: what was sent and what was acknowledged."""

    daemon: MilterDaemon
    numbers: Iterator[int]
    sessions: int = 8
    per_connection: int = 20
    sent: set[str] = field(default_factory=set)
    acknowledged: dict[str, bytes] = field(default_factory=dict)   # Message-ID → message
    errors: list[tuple[float, str]] = field(default_factory=list)
    killed_at: float = float("inf")

    def __post_init__(self) -> None:
        self._lock = threading.Condition()
        self._threads = [threading.Thread(target=self._session, daemon=True)
                         for _ in range(self.sessions)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def wait_acknowledged(self, count: int, timeout: float = 30.0) -> None:
        with self._lock:
            assert self._lock.wait_for(lambda: len(self.acknowledged) >= count, timeout), \
                (self.errors, self.daemon.log_text()[-2000:])

    def kill(self) -> None:
        self.killed_at = time.monotonic()
        self.daemon.kill()                      # SIGKILL
        for thread in self._threads:
            thread.join(30)

    def _session(self) -> None:
        while True:
            try:
                client = self.daemon.client()
            except Exception as error:  # noqa: BLE001 - the daemon is gone (refused, or EOF
                self.errors.append((time.monotonic(), repr(error)))  # in negotiation)
                return
            try:
                for _ in range(self.per_connection):
                    number = next(self.numbers)
                    message_id = f"<k{number}@crash.test>"
                    head = [("From", "ann@example.org"), ("To", "bob@example.net"),
                            ("Subject", f"crash {number}"), ("Message-ID", message_id)]
                    body = body_lines(number + 300_000, 60)
                    self.sent.add(message_id)
                    replies = client.message("ann@example.org", ["bob@example.net"], head,
                                             body, queue_id=f"Q{number}")
                    if final(replies)[0] == C.SMFIR_ACCEPT and added_headers(replies):
                        raw = b"".join(f"{n}: {v}\r\n".encode() for n, v in head)
                        with self._lock:
                            self.acknowledged[message_id] = raw + b"\r\n" + body
                            self._lock.notify_all()
            except Exception as error:  # noqa: BLE001 - the daemon was killed (or failed)
                self.errors.append((time.monotonic(), repr(error)))
                return
            finally:
                client.close()


@pytest.mark.slow
def test_kill_9_of_a_busy_milter_never_corrupts_the_store(tmp_path: Path,
                                                          settings: Settings) -> None:
    """50 times: dupfilter-milter, 8 sessions busy on one LMDB store, is SIGKILLed at a
    random moment.  After each kill the store opens and verifies, and every message whose
    recording was acknowledged is in it.  Odd rounds run with --sync-record (end of message
    is answered after the commit: every accepted message counts); even rounds with the
    default group commit (the record is committed just after the answer; the commits the
    milter logged count)."""
    store = tmp_path / "store"
    rng = random.Random(7)
    numbers = itertools.count()
    strict: dict[str, bytes] = {}       # accepted under --sync-record: must all be stored
    last_strict: list[bytes] = []       # the last of them before each kill
    lost_after_answer: list[int] = []   # group commit: accepted, killed before the commit
    started = time.monotonic()
    for attempt in range(50):
        sync = attempt % 2 == 1
        daemon = MilterDaemon(tmp_path / f"m{attempt}", DEBUG_LOG, db=store,
                              args=("--allow-root", "--sync-record") if sync
                              else ("--allow-root",)).start()
        before = stored_message_ids(store, settings) if store.exists() else set()
        traffic = MilterTraffic(daemon, numbers)
        traffic.start()
        traffic.wait_acknowledged(10)           # busy: sessions in every stage
        time.sleep(rng.uniform(0.0, 0.4))
        traffic.kill()
        assert not [e for at, e in traffic.errors if at < traffic.killed_at], traffic.errors
        assert "Traceback" not in daemon.log_text()
        verify = run(DUPFILTER_DB, "--db", str(store), "verify")
        assert verify.returncode == 0, (attempt, verify.stdout[-2000:], verify.stderr)
        stored = stored_message_ids(store, settings)
        new = stored - before
        assert new <= traffic.sent, new - traffic.sent      # nothing stored that was not sent
        assert before <= stored                             # nothing committed went away
        if sync:
            missing = set(traffic.acknowledged) - stored
            assert not missing, (attempt, sorted(missing)[:5])
            strict.update(traffic.acknowledged)
            last_strict.append(list(traffic.acknowledged.values())[-1])
        else:
            assert len(new) >= daemon.recorded(), (attempt, len(new), daemon.recorded())
            lost_after_answer.append(len(set(traffic.acknowledged) - stored))
    elapsed = time.monotonic() - started
    # As a user would check it: each round's last accepted message is found by the CLI.
    folder = tmp_path / "last"
    folder.mkdir()
    for index, raw in enumerate(last_strict):
        (folder / f"{index:02d}.eml").write_bytes(raw)
    scan = run(DUPFILTER_DB, "--db", str(store), "scan", "--json", "--no-record", str(folder))
    assert scan.returncode == 0, scan.stderr
    verdicts = [line for line in scan.stdout.decode().splitlines() if line.startswith("{")]
    assert len(verdicts) == len(last_strict) == 25
    assert all('"verdict": "duplicate"' in line for line in verdicts), verdicts
    print(f"\nmilter kill -9: 50 kills in {elapsed:.0f} s; {len(strict)} messages accepted "
          f"under --sync-record, all stored; group commit: accepted but not yet committed "
          f"at the kill: max {max(lost_after_answer)}, median "
          f"{statistics.median(lost_after_answer):g} per kill; records "
          f"{len(stored_message_ids(store, settings))}")


# ---------------------------------------------------------------- a private Postfix

@dataclass
class Mta:
    """One Postfix: its main smtpd uses the milter socket; ``entry_port`` runs the content
    filter loop (dupfilter-smtpd on ``filter_port``, re-injection on ``reinject_port``)."""

    pf: PostfixHarness
    root: Path
    milter_socket: Path
    entry_port: int
    filter_port: int
    reinject_port: int


@pytest.fixture(scope="module")
def mta() -> Iterator[Mta]:
    # Postfix's unprivileged processes reach the milter socket: a world-traversable folder.
    root = Path(tempfile.mkdtemp(prefix="dupfilter-daemons-"))
    root.chmod(0o755)
    entry_port, filter_port, reinject_port = (free_port() for _ in range(3))
    pf = PostfixHarness(
        root / "postfix",
        main_cf=["smtpd_milters = unix:{root}/milter/milter.sock",
                 "milter_default_action = tempfail",
                 "milter_protocol = 6",
                 "reinject_recipient_restrictions = permit_mynetworks, reject"],
        master_cf=filter_master_cf(filter_port, reinject_port, entry_port=entry_port,
                                   maxproc=SESSIONS))
    (pf.root / "milter").mkdir(parents=True, mode=0o755)
    pf.start()
    try:
        wait_for_port("127.0.0.1", entry_port)
        wait_for_port("127.0.0.1", reinject_port)
        yield Mta(pf, root, pf.root / "milter" / "milter.sock", entry_port, filter_port,
                  reinject_port)
    finally:
        pf.stop()
        shutil.rmtree(root, ignore_errors=True)


# ------------------------------------------------------------------------- full disk

def fill(folder: Path) -> Path:
    """Fill the filesystem of ``folder`` to the last byte; returns the filler file."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as out:
        for size in (1 << 20, 1 << 16, 1 << 12, 1 << 9, 1):
            try:
                while True:
                    out.write(b"\0" * size)
            except OSError:
                continue
    assert shutil.disk_usage(folder).free < 4096
    return filler


def full_disk_message(number: int, tag: str) -> bytes:
    return make_message(paragraph_text(number + 400_000, 400),
                        message_id=f"<{tag}{number}@full.test>", crlf=True)


def warnings_allowed(since: float) -> int:
    """How many times a store failure that lasted from ``since`` until now may be logged:
    once, and once more per minute it went on (logs.ThrottledWarning's interval).  A
    slow CI machine can take over a minute for the 30 messages."""
    return 1 + int((time.monotonic() - since) // 60)


def said_once(log: str, failed: int, filled_at: float, daemon: str, sent: int) -> None:
    """Records failed (at least 5 of ``sent``) and the log said so once a minute, no more."""
    warnings = [line for line in log.splitlines() if "cannot record" in line]
    assert failed >= 5, log[-3000:]
    assert 1 <= len(warnings) <= warnings_allowed(filled_at), warnings
    assert "No space left on device" in warnings[0], warnings
    print(f"\n{daemon}, disk full: {sent} delivered tagged, {failed} not recorded, "
          f"{len(warnings)} warning line")


def dupfilter_header(pf: PostfixHarness, recipient: str, count: int) -> list[str]:
    """The X-Dupfilter header of each of ``count`` copies for ``recipient`` (one each)."""
    copies = pf.wait_for_delivery(count, recipient=recipient, timeout=60)
    values = [copy.header("X-Dupfilter") for copy in copies]
    assert all(len(value) == 1 for value in values), values
    return [value[0] for value in values]


@pytest.mark.parametrize("mode", ["group-commit", "sync-record"])
def test_full_disk_under_the_milter_passes_mail_and_recovers(
        mta: Mta, tiny_filesystem: Path, tmp_path: Path, settings: Settings,
        mode: str) -> None:
    """The milter's store fills its disk: every message is still delivered, tagged; the
    failure is logged once, not per message; recording resumes when space returns."""
    pf = mta.pf
    pf.clear()
    store = tiny_filesystem / "store"
    daemon = MilterDaemon(tmp_path / "milter", DEBUG_LOG, socket_path=mta.milter_socket,
                          db=store, args=("--allow-root", "--sync-record")
                          if mode == "sync-record" else ("--allow-root",))
    sent = 30
    with daemon:
        pf.send(full_disk_message(0, mode), "ann@example.org", ["full@sink.test"])
        assert dupfilter_header(pf, "full@sink.test", 1) == ["unique"]
        filled_at = time.monotonic()
        filler = fill(tiny_filesystem)
        for number in range(1, sent + 1):       # one at a time: each its own commit
            pf.send(full_disk_message(number, mode), "ann@example.org", ["full@sink.test"])
            daemon.wait_lines(number + 1)
            time.sleep(0.05)
        headers = dupfilter_header(pf, "full@sink.test", sent + 1)
        assert all(value == "unique" for value in headers), headers
        lines = daemon.wait_lines(sent + 1)
        if mode == "sync-record":
            failed = sum(1 for line in lines if line["recorded"] == "failed")
        else:
            failed = sent + 1 - daemon.recorded()
        said_once(daemon.log_text(), failed, filled_at, f"milter ({mode})", sent)
        # Space returns: the same process records again, and finds the copy.
        filler.unlink()
        pf.send(full_disk_message(999, mode), "ann@example.org", ["back@sink.test"])
        lines = daemon.wait_lines(sent + 2)
        if mode == "sync-record":
            assert lines[-1]["recorded"] == "yes"
        else:
            daemon.wait_recorded(sent + 2 - failed)
        copy = full_disk_message(999, mode).replace(b"<" + mode.encode() + b"999@",
                                                    b"<again-" + mode.encode() + b"999@")
        pf.send(copy, "ann@example.org", ["back@sink.test"])
        first, second = dupfilter_header(pf, "back@sink.test", 2)
        assert first == "unique" and second.startswith("duplicate; score=1.00; reason=digest")
        assert len(pf.deliveries()) == sent + 3
    assert "Traceback" not in daemon.log_text()
    assert run(DUPFILTER_DB, "--db", str(store), "verify").returncode == 0


def test_full_disk_under_the_smtp_filter_passes_mail_and_recovers(
        mta: Mta, tiny_filesystem: Path, tmp_path: Path) -> None:
    """dupfilter-smtpd's store fills its disk: every message is still delivered, tagged;
    the failure is logged once, not per message; recording resumes when space returns."""
    pf = mta.pf
    pf.clear()
    store = tiny_filesystem / "store"
    daemon = SmtpdDaemon(tmp_path, mta.filter_port, mta.reinject_port, db=store)
    sent = 30

    def wait_lines(count: int) -> list[dict[str, str]]:
        return daemon.wait_lines(count, timeout=60)

    daemon.start()
    try:
        pf.send(full_disk_message(0, "smtpd"), "ann@example.org", ["full@sink.test"],
                port=mta.entry_port)
        assert dupfilter_header(pf, "full@sink.test", 1) == ["unique"]
        assert wait_lines(1)[0]["recorded"] == "yes"
        filled_at = time.monotonic()
        filler = fill(tiny_filesystem)
        for number in range(1, sent + 1):
            pf.send(full_disk_message(number, "smtpd"), "ann@example.org",
                    ["full@sink.test"], port=mta.entry_port)
            wait_lines(number + 1)
        headers = dupfilter_header(pf, "full@sink.test", sent + 1)
        assert all(value == "unique" for value in headers), headers
        found = wait_lines(sent + 1)
        assert all(line["reply"] == "250" for line in found)
        # recorded=failed, as the milter says it (issue 20: it said "no", and status and
        # the metrics did not count it)
        failed = sum(1 for line in found if line["recorded"] == "failed")
        assert not [line for line in found if line["recorded"] == "no"], found
        said_once(daemon.log_text(), failed, filled_at, "smtpd", sent)
        filler.unlink()
        pf.send(full_disk_message(999, "smtpd"), "ann@example.org", ["back@sink.test"],
                port=mta.entry_port)
        assert wait_lines(sent + 2)[-1]["recorded"] == "yes"
        copy = full_disk_message(999, "smtpd").replace(b"<smtpd999@", b"<again999@")
        pf.send(copy, "ann@example.org", ["back@sink.test"], port=mta.entry_port)
        first, second = dupfilter_header(pf, "back@sink.test", 2)
        assert first == "unique" and second.startswith("duplicate; score=1.00; reason=digest")
        assert len(pf.deliveries()) == sent + 3
    finally:
        assert daemon.stop() == 0
    assert "Traceback" not in daemon.log_text()
    assert run(DUPFILTER_DB, "--db", str(store), "verify").returncode == 0


# ------------------------------------------------------------------------------ load

@dataclass
class LoadResult:
    seconds: float                      # first connection until the last delivery
    smtp_ms: list[float]                # each message's SMTP transaction, as the client saw it
    delivery_ms: list[float]            # from the start of its transaction to the sink
    retries: int                        # 4xx answers the client retried
    copies: Counter[str]                # token → copies delivered
    verdicts: Counter[str]              # X-Dupfilter verdict → copies

    def figures(self, name: str, daemon_ms: list[float]) -> str:
        delivered = sum(self.copies.values())
        return (f"{name}: {delivered} delivered in {self.seconds:.0f} s "
                f"({delivered / self.seconds:.0f} msg/s), {SESSIONS} sessions; SMTP "
                f"transaction p50 {percentile(self.smtp_ms, 50):.0f} ms, p99 "
                f"{percentile(self.smtp_ms, 99):.0f} ms; to the sink p50 "
                f"{percentile(self.delivery_ms, 50):.0f} ms, p99 "
                f"{percentile(self.delivery_ms, 99):.0f} ms; filter (log ms) p50 "
                f"{percentile(daemon_ms, 50):.1f} ms, p99 {percentile(daemon_ms, 99):.1f} ms;"
                f" client retries {self.retries}; verdicts {dict(self.verdicts)}")


def load_message(token: str, number: int) -> bytes:
    """A message whose Message-ID carries ``token``; every LOAD_TEXTS-th one repeats,
    under the same subject (a number in the subject is data: with the token there, each
    repeat would be another message)."""
    return make_message(paragraph_text(number % LOAD_TEXTS + 500_000, 120),
                        subject=f"load test {number % LOAD_TEXTS:05d}",
                        message_id=f"<{token}@load.test>", crlf=True)


def drive(pf: PostfixHarness, port: int, name: str, count: int = LOAD_MESSAGES,
          timeout: float = 900.0) -> LoadResult:
    """``SESSIONS`` client threads send ``count`` messages to ``port``, each session
    ``MESSAGES_PER_SESSION`` in a row; waits for the sink to have them and a little more."""
    pf.clear()
    tokens = [f"{name}-{number:05d}" for number in range(count)]
    messages = [load_message(token, number) for number, token in enumerate(tokens)]
    work = iter(range(count))
    lock = threading.Lock()
    started_at: dict[str, float] = {}
    smtp_ms: list[float] = []
    retries = [0]
    failures: list[str] = []

    def session_worker() -> None:
        while True:
            with lock:
                batch = list(itertools.islice(work, MESSAGES_PER_SESSION))
            if not batch:
                return
            pending = list(batch)
            for _attempt in range(20):
                try:
                    with pf.smtp(timeout=120, port=port) as client:
                        while pending:
                            number = pending[0]
                            began = time.monotonic()
                            started_at.setdefault(tokens[number], began)
                            client.sendmail("load@example.org", ["load@sink.test"],
                                            messages[number])
                            smtp_ms.append((time.monotonic() - began) * 1000)
                            pending.pop(0)
                    break
                except smtplib.SMTPResponseException as error:
                    if not 400 <= error.smtp_code < 500:
                        failures.append(f"{tokens[pending[0]]}: {error}")
                        pending.pop(0)
                    else:
                        with lock:
                            retries[0] += 1
                        time.sleep(0.5)
                except (OSError, smtplib.SMTPException) as error:
                    with lock:
                        retries[0] += 1
                    failures.append(f"{tokens[pending[0]]}: {error!r} (retried)")
                    time.sleep(0.5)
            else:
                failures.append(f"gave up on {[tokens[n] for n in pending]}")

    began = time.monotonic()
    threads = [threading.Thread(target=session_worker) for _ in range(SESSIONS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not [f for f in failures if "(retried)" not in f], failures[:10]
    assert pf.sink.wait(count, timeout), f"{pf.sink.count}/{count} delivered"
    seconds = time.monotonic() - began
    # Late extra copies would show up here: let the queue run empty, then wait a little.
    assert pf.wait_queue_empty(60)
    time.sleep(3)
    copies: Counter[str] = Counter()
    verdicts: Counter[str] = Counter()
    delivery_ms = []
    for delivery in pf.sink.messages:
        [message_id] = delivery.header("Message-ID")
        token = message_id.strip("<>").split("@")[0]
        copies[token] += 1
        [value] = delivery.header("X-Dupfilter")
        verdicts[value.split(";")[0]] += 1
        delivery_ms.append((delivery.received - started_at[token]) * 1000)
    return LoadResult(seconds, smtp_ms, delivery_ms, retries[0], copies, verdicts)


def check_exactly_once(result: LoadResult, name: str) -> None:
    """Every token delivered once; the repeats found (each text was sent four times)."""
    doubled = [token for token, n in result.copies.items() if n > 1]
    missing = {f"{name}-{number:05d}" for number in range(LOAD_MESSAGES)} - set(result.copies)
    assert not doubled and not missing, (doubled[:10], sorted(missing)[:10])
    assert sum(result.copies.values()) == LOAD_MESSAGES
    assert result.verdicts == {"unique": LOAD_TEXTS,
                               "duplicate": LOAD_MESSAGES - LOAD_TEXTS}, result.verdicts


@pytest.mark.slow
def test_load_milter_behind_postfix_delivers_every_message_once(
        mta: Mta, tmp_path: Path) -> None:
    """16 concurrent SMTP sessions, 10,000 messages through Postfix + dupfilter-milter."""
    daemon = MilterDaemon(tmp_path / "milter", "", socket_path=mta.milter_socket)
    with daemon:
        result = drive(mta.pf, mta.pf.port, "milter")
        lines = daemon.wait_lines(LOAD_MESSAGES)
    check_exactly_once(result, "milter")
    assert len(lines) == LOAD_MESSAGES and not [line for line in lines if "error" in line]
    assert "Traceback" not in daemon.log_text()
    print("\n" + result.figures("milter", [float(line["ms"]) for line in lines]))


@pytest.mark.slow
def test_load_smtp_filter_behind_postfix_delivers_every_message_once(
        mta: Mta, tmp_path: Path) -> None:
    """16 concurrent SMTP sessions, 10,000 messages through Postfix's content-filter loop
    with dupfilter-smtpd (16 next-hop connections)."""
    daemon = SmtpdDaemon(tmp_path, mta.filter_port, mta.reinject_port,
                         args=("--allow-root", "--connections", str(SESSIONS)))
    daemon.start()
    start = len(mta.pf.log_text())
    try:
        result = drive(mta.pf, mta.entry_port, "smtpd")
    finally:
        assert daemon.stop() == 0
    check_exactly_once(result, "smtpd")
    log = daemon.log_text()
    lines = [parse_fields(line.split(" ", 1)[1]) for line in log.splitlines()
             if " msgid=" in line]
    assert len(lines) == LOAD_MESSAGES, len(lines)
    assert all(line["reply"] == "250" and line["recorded"] == "yes" for line in lines)
    assert "Traceback" not in log
    deferred = mta.pf.log_text()[start:].count("status=deferred")
    print("\n" + result.figures("smtpd", [float(line["ms"]) for line in lines])
          + f"; deferred by Postfix {deferred}")
