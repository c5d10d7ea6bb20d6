"""dupfilter's daemons for tests and benchmarks: ``dupfilter-milter`` and ``dupfilter-smtpd``
as processes, as they run in production (``python -m``, their own config, store and log),
and dupfilter-smtpd's server in a thread of the test (for an engine the test makes fail).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .ports import free_port


class DaemonProcess:
    """A daemon as a process: ``ROOT/NAME.toml`` its config (empty: all defaults), the store
    ``ROOT/NAME.db`` unless ``db`` is given, stdout and stderr in ``ROOT/NAME.log``;
    ``args`` are extra flags (``--allow-root`` by default, since the tests run as root)."""

    module = ""                     # python -m MODULE
    family = socket.AF_INET
    address: Any = None             # what to connect to once it listens

    def __init__(self, root: Path, config: str = "", name: str = "daemon", *,
                 db: Path | str | None = None, args: Sequence[str] = ("--allow-root",),
                 env: dict[str, str] | None = None) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.config = self.root / f"{name}.toml"
        self.config.write_text(config)
        self.db = str(db) if db is not None else str(self.root / f"{name}.db")
        self.logfile = self.root / f"{name}.log"
        self.args = list(args)
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None

    def flags(self) -> list[str]:
        """The daemon's own flags (socket, ports)."""
        return []

    def command(self) -> list[str]:
        # Never the host's /run/dupfilter: a status folder of the test's own unless given
        # (ROOT/run, which does not exist: no status file, one info line).
        status = [] if "--status-dir" in self.args else ["--status-dir", str(self.root / "run")]
        return [sys.executable, "-m", self.module, "--config", str(self.config),
                *self.flags(), "--db", self.db, *self.args, *status]

    def start(self, timeout: float = 30.0) -> DaemonProcess:
        """Start it; return once it says it listens and takes connections."""
        with open(self.logfile, "ab") as log:
            self.proc = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **(self.env or {})})
        deadline = time.monotonic() + timeout
        while "listening on" not in self.log_text():
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.module} exited {self.proc.returncode}:\n"
                                   f"{self.log_text()}")
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(f"{self.module} did not listen:\n{self.log_text()}")
            time.sleep(0.05)
        while True:
            try:
                with socket.socket(self.family, socket.SOCK_STREAM) as probe:
                    probe.settimeout(1.0)
                    probe.connect(self.address)
                    return self
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self, timeout: float = 40.0) -> int:
        """SIGTERM and wait; returns the exit status."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def __enter__(self) -> DaemonProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.stop(15)
            except subprocess.TimeoutExpired:
                pass

    def log_text(self) -> str:
        try:
            return self.logfile.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def verdict_lines(self) -> list[dict[str, str]]:
        """The per-message log lines, parsed into dicts (values unquoted)."""
        return [parse_fields(line.split(" ", 1)[1]) for line in self.log_text().splitlines()
                if " action=" in line]

    def wait_lines(self, count: int, timeout: float = 10.0) -> list[dict[str, str]]:
        deadline = time.monotonic() + timeout
        while len(lines := self.verdict_lines()) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(lines)}/{count} verdict lines:\n{self.log_text()}")
            time.sleep(0.05)
        return lines


class MilterDaemon(DaemonProcess):
    """``python -m mailfilter.milter`` on a unix socket (``ROOT/milter.sock`` unless
    ``socket_path``) or, with ``kind="inet"``, on a free loopback port."""

    module = "mailfilter.milter"

    def __init__(self, root: Path, config: str = "", *, kind: str = "unix",
                 socket_path: Path | None = None, **options: Any) -> None:
        super().__init__(root, config, "milter", **options)
        if kind == "unix":
            self.path = socket_path or self.root / "milter.sock"
            self.spec = f"unix:{self.path}"
            self.postfix_spec = self.spec
            self.address = str(self.path)
            self.family = socket.AF_UNIX
        else:
            self.port = free_port()
            self.spec = f"inet:{self.port}@127.0.0.1"
            self.postfix_spec = f"inet:127.0.0.1:{self.port}"
            self.address = ("127.0.0.1", self.port)

    def flags(self) -> list[str]:
        return ["--socket", self.spec]

    def recorded(self) -> int:
        """Messages committed to the store so far (needs ``[log] level = "debug"``)."""
        return sum(int(m.group(1)) for m in re.finditer(r"DEBUG recorded (\d+) message",
                                                         self.log_text()))

    def wait_recorded(self, count: int, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while self.recorded() < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.recorded()}/{count} recorded:\n{self.log_text()}")
            time.sleep(0.02)

    def client(self) -> Any:
        from .milter_client import MilterClient  # miltertest: the test extra
        return MilterClient(self.family, self.address)


class SmtpdDaemon(DaemonProcess):
    """``python -m mailfilter.smtpd`` listening on ``port``, relaying to ``next_hop``."""

    module = "mailfilter.smtpd"

    def __init__(self, root: Path, port: int, next_hop: int, config: str = "",
                 name: str = "dupfilter-smtpd", **options: Any) -> None:
        super().__init__(root, config, name, **options)
        self.port, self.next_hop = port, next_hop
        self.address = ("127.0.0.1", port)

    def flags(self) -> list[str]:
        return ["--listen", f"127.0.0.1:{self.port}", "--next-hop",
                f"127.0.0.1:{self.next_hop}"]


class FilterThread:
    """dupfilter-smtpd's server in a thread with its own event loop, for an engine the test
    makes (a real one, or one that fails)::

        with FilterThread(settings, engine) as running:
            smtplib.SMTP("127.0.0.1", running.port)
    """

    def __init__(self, settings: Any, engine: Any, logger: logging.Logger | None = None,
                 **options: Any) -> None:
        from mailfilter.smtpd.server import FilterServer
        self.server = FilterServer(settings, engine, logger or logging.getLogger("dupfilter"),
                                   **options)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self.server.port

    def start(self) -> FilterThread:
        ready = concurrent.futures.Future[None]()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self.server.start())
            except BaseException as error:
                ready.set_exception(error)
                loop.close()
                return
            ready.set_result(None)
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="dupfilter-smtpd", daemon=True)
        self._thread.start()
        ready.result(10)
        return self

    def stop(self, grace: float = 30.0) -> None:
        if self._loop is None or self._thread is None:
            return
        done = asyncio.run_coroutine_threadsafe(self.server.stop(grace), self._loop)
        done.result(grace + 15)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop = None

    def __enter__(self) -> FilterThread:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def parse_fields(text: str) -> dict[str, str]:
    """``key=value key="quoted value"`` → dict."""
    out: dict[str, str] = {}
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i] == " ":
            i += 1
        eq = text.find("=", i)
        if eq < 0:
            break
        key = text[i:eq]
        i = eq + 1
        if i < n and text[i] == '"':
            i += 1
            value = []
            while i < n and text[i] != '"':
                if text[i] == "\\" and i + 1 < n:
                    i += 1
                value.append(text[i])
                i += 1
            i += 1
            out[key] = "".join(value)
        else:
            end = text.find(" ", i)
            end = n if end < 0 else end
            out[key] = text[i:end]
            i = end
    return out
