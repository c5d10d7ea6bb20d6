"""Soak: deliveries through Postfix and dupfilter-milter on a Redis store, with faults.

    python bench/soak.py                     # 10,000 messages, 8 SMTP sessions
    python bench/soak.py --messages 2000

A private Postfix (tests/support/postfix.py, ``milter_default_action = tempfail``) hands
every message to dupfilter-milter (on_error = accept), whose store is a redis-server on
127.0.0.1 with an append-only file, so that a restart keeps the records.  While 8 client
sessions send (each message once, retried on a 4xx as an SMTP client does), the faults
come in turn: Redis stopped and started again (twice, at 20% and 50% of the messages), and
the milter sent SIGTERM and started again (at 75%).  At each fault ``dupfilter-db status``
is run; its first line and exit code are printed.

At the end it prints (issue 20, "Evidence"): delivered vs sent (must be equal), messages
passed unchecked (no X-Dupfilter: only while Redis was down), accepted (tagged) messages
without a record in the store (must be 0; those whose recording failed as Redis went down,
logged ``recorded=failed`` and counted by status, are listed apart), and the Redis
connections left open (the milter's pool: at most POOL_SIZE + 2).  Exit status 1 when one
of these is not met.
"""

from __future__ import annotations

import argparse
import itertools
import signal
import smtplib
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))     # the repository's root: tests.support
sys.path.insert(0, str(HERE.parent / "tests"))
from helpers import make_message, paragraph_text  # noqa: E402
from redis_servers import REDIS_SERVER, RedisServer  # noqa: E402

from mailfilter.config import Settings  # noqa: E402
from mailfilter.engine import Engine  # noqa: E402
from mailfilter.store.redis import POOL_SIZE  # noqa: E402
from tests.support.cli import DUPFILTER_DB, run  # noqa: E402
from tests.support.daemons import MilterDaemon  # noqa: E402
from tests.support.postfix import PostfixHarness  # noqa: E402

SESSIONS = 8
PER_SESSION = 10


class PersistentRedis(RedisServer):
    """redis-server on 127.0.0.1 with an append-only file: a restart keeps the records."""

    def start(self) -> PersistentRedis:
        self.folder.mkdir(parents=True, exist_ok=True)
        command = [REDIS_SERVER, "--bind", "127.0.0.1", "--port", str(self.port), "--save", "",
                   "--appendonly", "yes", "--appendfsync", "always", "--daemonize", "no",
                   "--dir", str(self.folder), "--logfile", str(self.folder / "redis.log")]
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 15
        while True:
            try:
                with self.client() as client:
                    if client.ping():
                        return self
            except Exception:  # noqa: BLE001 - not up yet
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def connections(self) -> int:
        with self.client() as client:
            return int(client.info("clients")["connected_clients"]) - 1


def message(number: int) -> bytes:
    """Every message its own text (so that each accepted one leaves a record of its own)."""
    return make_message(paragraph_text(number + 700_000, 80), subject=f"soak {number}",
                        message_id=f"<soak{number}@soak.test>", crlf=True)


def status_line(folder: Path) -> str:
    done = run(DUPFILTER_DB, "status", "--status-dir", str(folder))
    first = (done.stdout.decode().splitlines() or ["(nothing)"])[0]
    return f"exit {done.returncode}: {first}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=10_000)
    args = parser.parse_args()
    count = args.messages
    root = Path(tempfile.mkdtemp(prefix="dupfilter-soak-"))
    root.chmod(0o755)
    status_dir = root / "run"
    status_dir.mkdir()
    redis_server = PersistentRedis(root / "redis").start()
    pf = PostfixHarness(root / "postfix", main_cf=[
        "smtpd_milters = unix:{root}/milter/milter.sock", "milter_default_action = tempfail",
        "milter_protocol = 6"])
    (pf.root / "milter").mkdir(parents=True, mode=0o755)
    pf.start()
    milter_args = ("--allow-root", "--status-dir", str(status_dir))

    def new_milter(name: str) -> MilterDaemon:
        return MilterDaemon(root / name, '[log]\nlevel = "info"\n', db=redis_server.url,
                            socket_path=pf.root / "milter" / "milter.sock",
                            args=milter_args).start()

    milters = [new_milter("milter-1")]
    work = iter(range(count))
    lock = threading.Lock()
    sent = [0]
    retries = [0]
    failures: list[str] = []
    faults_at = {count // 5: "redis", count // 2: "redis", 3 * count // 4: "sigterm"}
    reports: list[str] = []
    started = time.monotonic()

    def worker() -> None:
        while True:
            with lock:
                batch = list(itertools.islice(work, PER_SESSION))
            if not batch:
                return
            pending = list(batch)
            for _attempt in range(200):
                try:
                    with pf.smtp(timeout=120) as client:
                        while pending:
                            client.sendmail("soak@example.org", ["soak@sink.test"],
                                            message(pending[0]))
                            pending.pop(0)
                            with lock:
                                sent[0] += 1
                    break
                except (smtplib.SMTPException, OSError):
                    with lock:
                        retries[0] += 1
                    time.sleep(0.5)
            else:
                failures.append(f"gave up on {pending}")

    def faults() -> None:
        for at, kind in sorted(faults_at.items()):
            while sent[0] < at and any(t.is_alive() for t in threads):
                time.sleep(0.05)
            if kind == "redis":
                redis_server.stop()                 # SIGTERM: a clean shutdown
                time.sleep(2)
                reports.append(f"Redis down after {sent[0]} sent: {status_line(status_dir)}")
                time.sleep(1)
                redis_server.start()
                time.sleep(2)
                reports.append(f"Redis back: {status_line(status_dir)}")
            else:
                milter = milters[-1]
                assert milter.proc is not None
                milter.proc.send_signal(signal.SIGTERM)
                code = milter.proc.wait(60)
                reports.append(f"milter SIGTERM after {sent[0]} sent: exit {code}; "
                               f"{status_line(status_dir)}")
                milters.append(new_milter(f"milter-{len(milters) + 1}"))
                time.sleep(2)
                reports.append(f"milter started again: {status_line(status_dir)}")

    threads = [threading.Thread(target=worker) for _ in range(SESSIONS)]
    for thread in threads:
        thread.start()
    fault_thread = threading.Thread(target=faults)
    fault_thread.start()
    for thread in threads:
        thread.join()
    fault_thread.join()
    pf.flush()
    delivered_all = pf.sink.wait(count, 300)
    pf.wait_queue_empty(60)
    time.sleep(3)
    seconds = time.monotonic() - started
    deliveries = list(pf.sink.messages)
    copies: Counter[str] = Counter()
    tagged: set[str] = set()
    unchecked = 0
    for delivery in deliveries:
        [message_id] = delivery.header("Message-ID")
        copies[message_id] += 1
        if delivery.header("X-Dupfilter"):
            tagged.add(message_id)
        else:
            unchecked += 1
    connections = redis_server.connections()
    final = status_line(status_dir)
    for milter in milters:
        milter.stop()
    settings = Settings()
    with Engine(settings, redis_server.url, readonly=True) as engine:
        stored = {r.message_id for r in engine.store.records() if r.message_id}
    # What the milter said of each message it checked: recorded=yes, or failed (the
    # store went away between the check and the write: counted in status as such).
    said: dict[str, str] = {}
    for milter in milters:
        for line in milter.verdict_lines():
            if line.get("msgid"):
                said[line["msgid"]] = line.get("recorded", "")
    failed = sorted(m for m in tagged if said.get(m) == "failed")
    without_record = sorted(m for m in tagged - stored if said.get(m) != "failed")
    errors_logged = sum(milter.log_text().count(" error=") for milter in milters)
    unchecked_logged = sum(milter.log_text().count("action=accept error=") for milter in milters)
    pf.stop()
    redis_server.stop()
    print(f"{count} sent in {seconds:.0f} s by {SESSIONS} sessions ({retries[0]} retries "
          f"after a 4xx or a dropped connection)")
    for line in reports:
        print(f"  {line}")
    print(f"  at the end: {final}")
    duplicates = sum(n - 1 for n in copies.values() if n > 1)
    print(f"delivered {len(deliveries)} of {count} sent ({len(copies)} distinct, "
          f"{duplicates} extra copies)")
    print(f"unchecked (no X-Dupfilter): {unchecked}; the milter logged {unchecked_logged} "
          f"accepted unchecked, {errors_logged} error lines")
    print(f"accepted and tagged without a record: {len(without_record)}"
          + (f" (e.g. {without_record[:3]})" if without_record else "")
          + f"; checked but their recording failed as Redis went down (logged "
            f"recorded=failed, counted by status): {len(failed)}")
    print(f"Redis connections at the end: {connections} (pool {POOL_SIZE} + 2 allowed)")
    ok = (delivered_all and len(copies) == count and not failures and not without_record
          and connections <= POOL_SIZE + 2)
    if failures:
        print(f"FAILED sends: {failures[:5]}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
