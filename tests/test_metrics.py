"""The Prometheus endpoint: off by default, on loopback when enabled, counting what the
daemon logs."""

from __future__ import annotations

import socket
import urllib.request
from pathlib import Path

from support.daemons import MilterDaemon
from support.ports import free_port
from test_milter_protocol import body_of, headers


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return response.read().decode()


def test_metrics_are_off_by_default(tmp_path: Path) -> None:
    with MilterDaemon(tmp_path, ""):
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", 9464)) != 0


def test_milter_metrics_count_verdicts_latency_and_records(tmp_path: Path) -> None:
    port = free_port()
    config = f'[metrics]\nenabled = true\nlisten = "127.0.0.1:{port}"\n[log]\nlevel = "debug"\n'
    with MilterDaemon(tmp_path, config) as daemon:
        with daemon.client() as client:
            for number in range(3):
                client.message("a@example.test", ["b@example.test"], headers(f"m{number}"),
                               body_of(), queue_id=f"Q{number}")
        daemon.wait_recorded(1)
        text = scrape(port)
    assert 'dupfilter_messages_total{action="tag",front_end="milter",verdict="unique"} 1.0' \
        in text
    assert 'dupfilter_messages_total{action="tag",front_end="milter",verdict="duplicate"} 2.0' \
        in text
    assert 'dupfilter_check_seconds_count{front_end="milter"} 3.0' in text
    assert 'dupfilter_store_records{front_end="milter"} 1.0' in text
