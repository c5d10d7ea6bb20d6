"""The Rspamd peer of the benchmarks (bench/peers/rspamd_peer.py), end to end.

A real rspamd (Debian's package, which .ci/run installs) and redis-server are started on
127.0.0.1 from a private folder; a message is learned, its copy and a lightly edited copy
are found, an unrelated message is not; the throughput script prints its report.  Nothing
of the host's rspamd is used or changed: /etc/rspamd, /var/lib/rspamd and /var/log/rspamd
are the same after the test as before it, and no system rspamd is left running.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PEERS = REPO / "bench" / "peers"
sys.path.insert(0, str(PEERS))
import rspamd_peer  # noqa: E402

pytestmark = pytest.mark.slow      # rspamd's first start compiles its patterns (~15 s)

HOST_PATHS = (Path("/etc/rspamd"), Path("/var/lib/rspamd"), Path("/var/log/rspamd"),
              Path("/run/rspamd"))

BODY = """\
The quarterly review of the storage cluster is moved to Thursday afternoon because the
vendor engineer can only join us then. Please bring the capacity figures for the last
three months, the list of disks replaced since the spring, and any notes about the slow
rebuild we saw on the second shelf. Marta will present the new backup schedule and the
cost of keeping snapshots for ninety days instead of thirty. After that we should decide
whether the old archive nodes can be switched off before the end of the year, or whether
the legal team still needs the mail from the acquisition kept on them. If you cannot come,
send your questions to me by Wednesday evening and I will raise them in the meeting.
"""

UNRELATED = """\
Thanks for the photos from the hiking trip, they came out much better than mine. The one
of the lake at sunrise is going on the kitchen wall as soon as I find a frame that fits.
Next month the club is planning a two day walk along the northern ridge, with a night in
the mountain hut near the pass. Tickets for the bus back from the valley are cheap if we
book them early, so let me know soon whether you and your brother want to join. Bring
warm clothes, the forecast says it gets cold at night up there even in late summer.
"""


def message(body: str, message_id: str, to: str = "team@example.org",
            subject: str = "Storage review moved to Thursday") -> bytes:
    return (f"From: Anna Berg <anna@example.org>\nTo: {to}\nSubject: {subject}\n"
            f"Date: Tue, 03 Sep 2024 10:15:00 +0200\nMessage-ID: <{message_id}@example.org>\n"
            "MIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\n\n"
            f"{body}").encode()


def host_state() -> dict[str, list[tuple[str, int, int]] | None]:
    """Every file under the host's rspamd folders (path, size, modification time); None for
    a folder that does not exist."""
    state: dict[str, list[tuple[str, int, int]] | None] = {}
    for root in HOST_PATHS:
        state[str(root)] = [(str(path), path.lstat().st_size, path.lstat().st_mtime_ns)
                            for path in sorted(root.rglob("*"))] if root.exists() else None
    return state


def rspamd_processes() -> list[int]:
    """Every process running /usr/bin/rspamd."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/exe") == rspamd_peer.RSPAMD:
                    found.append(int(entry))
            except OSError:
                continue
    return found


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Rspamd's compiled patterns, shared by the tests of this module."""
    assert os.path.exists(rspamd_peer.RSPAMD), \
        "rspamd is not installed (.ci/run installs the Debian package rspamd)"
    return tmp_path_factory.mktemp("rspamd-cache")


@pytest.fixture
def peer(tmp_path: Path, cache: Path) -> Iterator[rspamd_peer.RspamdFuzzy]:
    before = host_state()
    running = rspamd_processes()
    with rspamd_peer.RspamdFuzzy(tmp_path / "rspamd", cache=cache) as started:
        yield started
    assert rspamd_processes() == running, "rspamd processes left behind"
    assert host_state() == before, "the host's rspamd folders changed"


def test_learned_message_is_found_and_unrelated_one_is_not(
        peer: rspamd_peer.RspamdFuzzy) -> None:
    original = message(BODY, "review-1")
    assert not peer.check(original).matched, "an empty storage matched"
    hashes = peer.learn(original)             # /fuzzyadd, as rspamc fuzzy_add does
    assert hashes, "rspamd computed no fuzzy hash for a 150-word text"
    peer.settle()
    copy = message(BODY, "review-2", to="anna@example.org")
    found = peer.check(copy)
    assert found.matched, found
    assert any(option.startswith(f"{rspamd_peer.FLAG}:") for option in found.options), found
    edited = message(BODY.replace("Thursday afternoon", "Friday morning"), "review-3")
    assert peer.check(edited).matched, "a one-phrase edit of a long text was not found"
    unrelated = message(UNRELATED, "trip-1", subject="Photos from the trip")
    assert not peer.check(unrelated).matched


def test_learning_in_order_sees_every_earlier_message(peer: rspamd_peer.RspamdFuzzy) -> None:
    """check(learn=True) returns once the write is in Redis: the very next check finds it,
    and a reset storage finds nothing."""
    first = peer.check(message(BODY, "order-1"), learn=True)
    assert first.learned and not first.matched
    assert peer.check(message(BODY, "order-2"), learn=True).matched
    assert not peer.check(message(UNRELATED, "order-3"), learn=True).matched
    assert peer.check(message(UNRELATED, "order-4")).matched
    peer.reset()
    assert not peer.check(message(BODY, "order-5")).matched


def test_configuration_stays_on_loopback_in_the_private_folder(
        peer: rspamd_peer.RspamdFuzzy) -> None:
    config = (peer.folder / "rspamd.conf").read_text()
    addresses = re.findall(r'(?:bind_socket|servers|nameserver)\s*=\s*\[?"([^":]+):', config)
    assert addresses and set(addresses) == {"127.0.0.1"}, addresses
    assert "/etc/rspamd" not in config
    for path in re.findall(r'"(/[^"$ ]+)', config):
        assert path.startswith((str(peer.folder), str(peer.cache))), path
    listening = subprocess.run(["ss", "-H", "-lntup"], capture_output=True, text=True,
                               check=True).stdout
    pids = set(map(str, peer.server_pids()))
    for line in listening.splitlines():
        owners = set(re.findall(r"pid=(\d+)", line))
        if owners & pids:
            assert line.split()[4].startswith("127.0.0.1:"), line


def test_throughput_script_reports_a_measured_pass(tmp_path: Path, cache: Path) -> None:
    """bench/throughput.py's rows: the script's report for 40 copies of one message and an
    unrelated one, learned in order (every copy after the first is found)."""
    bodies = [BODY] * 40 + [UNRELATED]
    files = []
    for number, body in enumerate(bodies):
        path = tmp_path / f"{number:02d}.eml"
        path.write_bytes(message(body, f"copy-{number}"))
        files.append(str(path))
    listing = tmp_path / "list"
    listing.write_text("".join(f"{f}\n" for f in files))
    done = subprocess.run([sys.executable, str(PEERS / "rspamd_peer.py"), "ordered",
                           str(listing), "--cache", str(cache)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert report["messages"] == "41" and report["matched"] == "39", report
    # 41 checks and writes: tens of milliseconds of the servers' CPU (10 ms clock ticks).
    assert float(report["seconds"]) > 0 and float(report["cpu_seconds"]) > 0, report
    assert int(report["peak_rss_kb"]) > 1000, report
