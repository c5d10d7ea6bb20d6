"""Store connections belong to the process, not the session (issue 20, item 1).

dupfilter-milter on a real redis-server: every SMTP session is a libmilter thread of its
own, and each used to open a Redis connection that was never given back, so that redis-py
8's pool cap (100) answered "Too many connections" after about a hundred sessions and the
rest of the mail was accepted unchecked.  The daemons run as processes (slow tier).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from helpers import make_message, paragraph_text
from redis_servers import RedisServer
from support.daemons import MilterDaemon
from support.milter_client import final
from test_milter_protocol import body_of, headers

from mailfilter.config import Settings
from mailfilter.engine import Engine
from mailfilter.store.redis import POOL_SIZE

pytest_plugins = ("redis_servers",)

SESSIONS = 300
# The milter's own connections: the shared pool (mailfilter.store.redis.POOL_SIZE is far
# more than these one-at-a-time and 8-at-a-time sessions need) and the client's own.
FEW_CONNECTIONS = 12


def connected_clients(server: RedisServer) -> int:
    """Clients connected to the server, this probe not counted."""
    with server.client() as client:
        return int(client.info("clients")["connected_clients"]) - 1


def send_sessions(daemon: MilterDaemon, numbers: range) -> list[str]:
    """One SMTP session (a milter connection) per message; the final replies' commands."""
    answers = []
    for number in numbers:
        with daemon.client() as client:
            replies = client.message("a@example.test", [f"u{number % 7}@example.test"],
                                     headers(f"session {number}"), body_of(),
                                     queue_id=f"Q{number}")
            answers.append(final(replies)[0])
    return answers


@pytest.mark.parametrize("recording", ["group-commit", "sync-record"])
def test_three_hundred_sessions_share_a_few_redis_connections(
        spare_redis: RedisServer, tmp_path: Path, recording: str) -> None:
    """Issue 20 item 1: 300 milter sessions (one at a time, then 8 at once) leave a few
    Redis connections open, not one per session, and no message is accepted with a
    StoreError ("Too many connections"); with the writer thread (the default) and with
    each session recording on its own thread (``--sync-record``)."""
    before = connected_clients(spare_redis)
    flags = ("--sync-record",) if recording == "sync-record" else ()
    daemon = MilterDaemon(tmp_path, db=spare_redis.url,
                          args=("--allow-root", "--status-dir", "", *flags))
    with daemon:
        send_sessions(daemon, range(150))
        after_serial = connected_clients(spare_redis)
        threads = [threading.Thread(target=send_sessions,
                                    args=(daemon, range(150 + k, SESSIONS, 8)))
                   for k in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        lines = daemon.wait_lines(SESSIONS, timeout=60)
        after_all = connected_clients(spare_redis)
    print(f"\nRedis connected_clients: {before} before, {after_serial} after 150 sessions "
          f"one at a time, {after_all} after {SESSIONS} sessions")
    errors = [line for line in lines if line.get("error")]
    assert not errors, errors[:3]
    assert after_serial - before <= FEW_CONNECTIONS
    assert after_all - before <= FEW_CONNECTIONS
    # Stopped: every connection is given back.
    assert connected_clients(spare_redis) == before


def test_milter_checks_again_once_a_restarted_redis_answers(spare_redis: RedisServer,
                                                            tmp_path: Path) -> None:
    """Issue 20 item 1: Redis restarted under a running milter: the 150 messages sent
    while it is down get on_error (each session tried a connection of its own, and
    redis-py's pool counted every one of them, so that after 100 the pool was "full" for
    good), and once it answers again every message is checked, with a few connections."""
    daemon = MilterDaemon(tmp_path, db=spare_redis.url,
                          args=("--allow-root", "--status-dir", ""))
    with daemon:
        send_sessions(daemon, range(20))
        spare_redis.kill()
        send_sessions(daemon, range(20, 170))
        spare_redis.start()
        send_sessions(daemon, range(170, 300))
        lines = daemon.wait_lines(300, timeout=60)
        connections = connected_clients(spare_redis)
    down = [line for line in lines[20:170] if line.get("error")]
    assert len(down) == 150, lines[20:25]
    later = [line for line in lines[170:] if line.get("error")]
    assert not later, later[:3]
    assert connections <= FEW_CONNECTIONS


def test_more_threads_than_the_pool_wait_their_turn(spare_redis: RedisServer,
                                                    settings: Settings) -> None:
    """Issue 20 item 1: 80 threads (more than POOL_SIZE) checking at once, each a thread
    of its own as libmilter's sessions are: all get verdicts, the store never holds more
    than POOL_SIZE connections, and closing the store gives every one back."""
    before = connected_clients(spare_redis)
    engine = Engine(settings, spare_redis.url)
    verdicts: list[str] = []
    failures: list[BaseException] = []

    def check(number: int) -> None:
        try:
            raw = make_message(paragraph_text(number, 40), message_id=f"<t{number}@x>")
            for _ in range(5):
                verdicts.append(str(engine.check(raw, ["u@example.test"]).kind))
        except BaseException as error:  # noqa: BLE001 - reported below
            failures.append(error)

    threads = [threading.Thread(target=check, args=(n,)) for n in range(80)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    during = connected_clients(spare_redis)
    assert engine.store.connections <= POOL_SIZE
    engine.close()
    assert not failures, failures[:3]
    assert len(verdicts) == 400 and verdicts.count("unique") == 80
    assert during - before <= POOL_SIZE + 2
    assert connected_clients(spare_redis) == before
