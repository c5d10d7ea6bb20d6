"""Message builders shared by the tests: realistic, deterministic, distinct texts."""

from __future__ import annotations

import gc
import random
import re
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from email.message import EmailMessage
from email.policy import SMTP, default
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

# A vocabulary big enough that two generated texts share few 5-word shingles by chance.
_WORDS = (
    "account action address agenda answer april archive attach backup balance batch "
    "board branch budget buffer build cache calendar campaign change channel chapter "
    "client cluster commit compile config contract copy cursor customer daemon damage "
    "deadline debug default delivery deploy design detail device digest domain draft "
    "driver editor effort engine estimate event export feature filter finance folder "
    "format forward friday garden gateway handle harbour header history holiday host "
    "index invoice issue journal kernel ladder launch ledger letter library license "
    "limit lunch machine mailbox manual market meeting memory merge method migrate "
    "minute mirror module monday monitor network notice office option orange packet "
    "parcel parser patch payment people planet policy portal postmaster printer "
    "problem profile project proposal queue quota random reader record refund region "
    "release remote report request review river router salary sample schedule screen "
    "script season secret select sender server session signal socket source spring "
    "station status storage summer supply switch system table ticket timer token "
    "traffic travel update upgrade upload useful vendor version volume warning weekly "
    "window winter worker yellow"
).split()


def words(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return [rng.choice(_WORDS) for _ in range(count)]


def paragraph_text(seed: int, count: int = 120, width: int = 72) -> str:
    """``count`` random words wrapped at ``width`` columns, in sentences."""
    rng = random.Random(seed ^ 0x5EED)
    chosen = words(seed, count)
    lines, line = [], ""
    for index, word in enumerate(chosen):
        if index % rng.randint(8, 14) == 0:
            word = word.capitalize()
        piece = word + ("." if rng.random() < 0.08 else "")
        if len(line) + len(piece) + 1 > width:
            lines.append(line)
            line = piece
        else:
            line = f"{line} {piece}".strip()
    lines.append(line)
    return "\n".join(lines) + "\n"


def make_message(body: str | bytes, *, subject: str = "Test message",
                 message_id: str | None = "<test@example.org>", sender: str = "ann@example.org",
                 to: str = "bob@example.net", headers: dict[str, str] | None = None,
                 crlf: bool = False) -> bytes:
    """A simple single-part raw message (LF line endings unless ``crlf``)."""
    lines = [f"From: {sender}", f"To: {to}", f"Subject: {subject}",
             "Date: Mon, 30 Nov 2026 10:00:00 +0000"]
    if message_id:
        lines.append(f"Message-ID: {message_id}")
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}")
    head = "\n".join(lines).encode() + b"\n\n"
    raw = head + (body.encode("utf-8") if isinstance(body, str) else body)
    return raw.replace(b"\n", b"\r\n") if crlf else raw


def make_mime(text: str, *, html: str | None = None, attachment: bytes | None = None,
              message_id: str = "<mime@example.org>", charset: str = "utf-8",
              cte: str | None = None) -> bytes:
    """A MIME message built with the standard library (alternative and attachment)."""
    msg = EmailMessage(policy=default)
    msg["From"] = "ann@example.org"
    msg["To"] = "bob@example.net"
    msg["Subject"] = "MIME test"
    msg["Message-ID"] = message_id
    msg.set_content(text, charset=charset, cte=cte)
    if html is not None:
        msg.add_alternative(html, subtype="html")
    if attachment is not None:
        msg.add_attachment(attachment, maintype="application", subtype="octet-stream",
                           filename="data.bin")
    return msg.as_bytes(policy=SMTP.clone(linesep="\n"))


def run_fuzzer(harness: Path, corpus: Path, runs: int, artifacts: Path) -> None:
    """Run an atheris harness of tests/fuzz for ``runs`` inputs mutated from ``corpus``;
    any finding (an exception or a broken invariant: libFuzzer writes crash-*) fails.

    libFuzzer exits 0 without finishing when a signal from outside interrupts it ("run
    interrupted"): that is no finding and no clean run either, so it runs once more; what it
    printed is in every failure message.
    """
    for attempt in (1, 2):
        result = subprocess.run(
            [sys.executable, str(harness), f"-runs={runs}", "-max_len=65536",
             "-rss_limit_mb=2048", f"-artifact_prefix={artifacts}/", str(corpus)],
            capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr[-3000:]
        assert not list(artifacts.glob("crash-*")), result.stderr[-3000:]
        interrupted = "run interrupted" in result.stderr or "KeyboardInterrupt" in result.stderr
        if interrupted and attempt == 1:
            continue
        done = re.search(r"^Done (\d+) runs", result.stderr, re.MULTILINE)
        assert done and int(done.group(1)) >= runs, \
            f"the fuzzer stopped before {runs} runs (attempt {attempt}):\n" \
            + result.stderr[-3000:]
        return


# One person's announcement, the original that resends, follow-ups and replies quote
# (tests/test_recall.py, tests/test_recall_campaigns.py).
ANNOUNCEMENT = """Hello team,

the quarterly review of the storage cluster is moved to Thursday afternoon because the
vendor engineer can only join then. We will go through the capacity plan, the failed disk
replacements of last month and the proposal to move the backups to the new site. Please
read the plan before the meeting and add your comments to the shared document so that we
can decide on the budget request in the same session.

Thanks,
Ann
"""


def peak_allocated(work: Callable[[], T]) -> tuple[T, int]:
    """``work()``'s result and the most memory Python held for it at once (tracemalloc):
    a step that keeps an object for each line of its input shows there."""
    tracemalloc.start()
    try:
        result = work()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def best_cpu_seconds(work: Callable[[], object], rounds: int = 3) -> float:
    """The least CPU time ``work()`` took in ``rounds`` runs, the garbage collector held off
    (its passes over a large input's objects are the interpreter's, not the step's), the
    best of a few because a machine whose other work evicts our caches makes single runs
    unlucky: what the tests of linear cost compare between two sizes."""
    best = float("inf")
    gc.collect()
    gc.disable()
    try:
        for _ in range(rounds):
            started = time.process_time()
            work()
            best = min(best, time.process_time() - started)
    finally:
        gc.enable()
    return best
