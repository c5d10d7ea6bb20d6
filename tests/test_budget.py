"""The work budget (mailfilter/workers.py): a large message is analysed in a worker
process within ``[analysis] deadline``; past it the message is judged by its Message-ID, or
handled as on_error says, and other sessions are served meanwhile.

Before, dupfilter-milter analysed every message on its connection's thread, however long it
took: a crafted message held the end-of-message reply for minutes (Postfix's
milter_content_timeout then deferred it and retried, burning a CPU each time).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from helpers import make_message, paragraph_text
from support.cli import DUPFILTER, run, tag
from support.daemons import MilterDaemon
from support.milter_client import added_headers, final

from mailfilter.config import AnalysisSettings, FingerprintSettings
from mailfilter.workers import AnalysisPool, OverBudget

pytestmark = pytest.mark.slow

# Enough text that its analysis takes far longer than the deadline below on any machine.
LARGE = ("\n".join(paragraph_text(seed, count=400) for seed in range(900))).encode()


def send(daemon: MilterDaemon, raw: bytes) -> tuple[dict[str, str], str, float]:
    """One message through the milter: its added headers, its final reply, seconds."""
    head, _, body = raw.partition(b"\n\n")
    headers = [tuple(line.split(": ", 1)) for line in head.decode().splitlines()]
    started = time.monotonic()
    with daemon.client() as client:
        replies = client.message("ann@example.org", ["bob@example.net"], headers,
                                 body.replace(b"\n", b"\r\n"))
    return dict(added_headers(replies)), final(replies)[0], time.monotonic() - started


def test_past_its_deadline_a_message_is_judged_by_its_message_id(tmp_path: Path) -> None:
    config = "[analysis]\ndeadline = 0.05\nworkers = 1\noffload_bytes = 65536\n"
    with MilterDaemon(tmp_path, config) as daemon:
        first = make_message(paragraph_text(5, count=200), message_id="<known@example.org>")
        headers, _, _ = send(daemon, first)
        assert headers["X-Dupfilter"] == "unique"
        # The same Message-ID on a body too large to analyse in time: a duplicate all the
        # same; while it is analysed, another connection's message is answered at once.
        again = make_message(LARGE.decode(), message_id="<known@example.org>")
        results: dict[str, tuple[dict[str, str], str, float]] = {}
        slow = threading.Thread(target=lambda: results.update(slow=send(daemon, again)))
        slow.start()
        time.sleep(0.05)
        small = make_message(paragraph_text(6, count=200), message_id="<small@example.org>")
        results["small"] = send(daemon, small)
        slow.join(60)
        assert results["small"][0]["X-Dupfilter"] == "unique"
        assert results["slow"][0]["X-Dupfilter"].startswith("duplicate; score=1.00; "
                                                            "reason=message-id")
        assert results["slow"][2] < 10 and results["small"][2] < 10
        # A new Message-ID says nothing: on_error (accept), untagged, and the log says why.
        new = make_message(LARGE.decode(), message_id="<new@example.org>")
        headers, reply, seconds = send(daemon, new)
        assert "X-Dupfilter" not in headers and reply == "a" and seconds < 30
        lines = daemon.wait_lines(4)
        assert any("OverBudget" in line.get("error", "") for line in lines), lines


def test_a_worker_past_its_deadline_is_replaced() -> None:
    # LARGE takes 0.09-0.25 s to analyse on these machines (its words are capped), a small
    # message 1 ms in a worker that has compiled its patterns before it says it is ready.
    pool = AnalysisPool(FingerprintSettings(), AnalysisSettings(deadline=0.05, workers=1,
                                                                offload_bytes=1000))
    try:
        with pytest.raises(OverBudget, match="longer than 0.05 s"):
            pool.analyse(make_message(LARGE.decode()))
        analysis = pool.analyse(make_message(paragraph_text(7, count=300),
                                             message_id="<fine@example.org>"))
        assert analysis.message_id == "<fine@example.org>" and analysis.fingerprint.word_count
        assert pool.over_budget == 1
    finally:
        pool.close()


def test_the_pipe_filter_past_its_deadline_judges_by_message_id_or_passes_through(
        tmp_path: Path) -> None:
    """``dupfilter`` has one message and one thread: its analysis runs under a timer of
    ``[analysis] deadline``; past it the message is judged by its Message-ID, or passed
    through unchecked (``--check``: exit 1), with a line on stderr (procmail's log)."""
    config = tmp_path / "dupfilter.toml"
    config.write_text("[analysis]\ndeadline = 0.02\n")
    db = tmp_path / "db"
    first = make_message(paragraph_text(5, count=200), message_id="<known@example.org>")
    done = tag(db, first, "--config", str(config))
    assert done.returncode == 0 and b"X-Dupfilter: unique" in done.stdout
    again = make_message(LARGE.decode(), message_id="<known@example.org>")
    done = tag(db, again, "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert b"X-Dupfilter: duplicate; score=1.00; reason=message-id" in done.stdout
    assert b"longer than 0.02 s" in done.stderr and b"Message-ID alone" in done.stderr
    new = make_message(LARGE.decode(), message_id="<new@example.org>")
    done = tag(db, new, "--config", str(config))
    assert done.returncode == 0 and done.stdout == new
    assert b"longer than 0.02 s" in done.stderr and b"passed through unchecked" in done.stderr
    checked = run(DUPFILTER, "--db", str(db), "--config", str(config), "--check", stdin=new)
    assert checked.returncode == 1 and b"not checked" in checked.stderr
    # Within the deadline nothing changes: the same message with the default deadline.
    done = tag(db, new)
    assert b"X-Dupfilter: unique" in done.stdout and not done.stderr
