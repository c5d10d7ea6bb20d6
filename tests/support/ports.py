"""Free TCP ports on loopback, and waiting until something listens on one."""

from __future__ import annotations

import socket
import time

_HANDED_OUT: set[int] = set()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago on ``host``, and not handed out before.

    Tests often pick several ports before anything binds them (a master.cf with four
    services); once closed, a probed port is free again and the kernel picks it again
    now and then (about 1 in 14,000), so ports already handed out are never returned."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((host, 0))
            port = probe.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


def wait_for_port(host: str, port: int, timeout: float = 30.0) -> None:
    """Block until something accepts TCP connections on host:port (30 s by default: a
    Python daemon starting on a busy 2-CPU CI machine may take several seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=1.0):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on {host}:{port} after {timeout}s"
                                   ) from None
            time.sleep(0.05)
