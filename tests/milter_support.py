"""Test helpers: run ``dupfilter-milter`` as a subprocess and talk to it as an MTA would.

``MilterDaemon`` starts the real daemon (tmp config, tmp store, unix or inet socket) and
waits for it to listen; ``MilterClient`` speaks the MTA side of the milter protocol with the
pure-Python ``miltertest`` package, honouring the negotiated skip (SMFIP_NO*) and no-reply
(SMFIP_NR_*) flags as Postfix does.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from miltertest import MilterConnection
from miltertest import constants as C

sys.path.insert(0, str(Path(__file__).parent))
from postfix_harness import free_port  # noqa: E402

Reply = tuple[str, dict]
FINAL_REPLIES = frozenset((C.SMFIR_ACCEPT, C.SMFIR_CONTINUE, C.SMFIR_REJECT, C.SMFIR_TEMPFAIL,
                           C.SMFIR_REPLYCODE, C.SMFIR_DISCARD))


class MilterDaemon:
    """``python -m mailfilter.milter`` with its own config, store and socket."""

    def __init__(self, root: Path, config: str = "", *, kind: str = "unix",
                 socket_path: Path | None = None, db: Path | str | None = None,
                 args: Sequence[str] = ("--allow-root",), env: dict[str, str] | None = None
                 ) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.config = self.root / "dupfilter.toml"
        self.config.write_text(config)
        self.db = str(db) if db is not None else str(self.root / "db")
        if kind == "unix":
            self.path = socket_path or self.root / "milter.sock"
            self.spec = f"unix:{self.path}"
            self.postfix_spec = self.spec
            self.address: object = str(self.path)
            self.family = socket.AF_UNIX
        else:
            self.port = free_port()
            self.spec = f"inet:{self.port}@127.0.0.1"
            self.postfix_spec = f"inet:127.0.0.1:{self.port}"
            self.address = ("127.0.0.1", self.port)
            self.family = socket.AF_INET
        self.args = list(args)
        self.env = env
        self.logfile = self.root / "milter.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        return [sys.executable, "-m", "mailfilter.milter", "--config", str(self.config),
                "--socket", self.spec, "--db", self.db, *self.args]

    def start(self, timeout: float = 20.0) -> MilterDaemon:
        log = open(self.logfile, "ab")
        env = dict(os.environ, **(self.env or {}))
        self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env)
        log.close()
        deadline = time.monotonic() + timeout
        while "listening on" not in self.log_text():
            if self.proc.poll() is not None:
                raise RuntimeError(f"dupfilter-milter exited {self.proc.returncode}:\n"
                                   f"{self.log_text()}")
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(f"dupfilter-milter did not listen:\n{self.log_text()}")
            time.sleep(0.05)
        self._wait_connectable(deadline)
        return self

    def _wait_connectable(self, deadline: float) -> None:
        while True:
            try:
                with socket.socket(self.family, socket.SOCK_STREAM) as probe:
                    probe.settimeout(1.0)
                    probe.connect(self.address)
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self, timeout: float = 30.0) -> int:
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

    def __enter__(self) -> MilterDaemon:
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
                if " queue=" in line or line.split(" ", 1)[-1].startswith("queue=")]

    def wait_lines(self, count: int, timeout: float = 10.0) -> list[dict[str, str]]:
        deadline = time.monotonic() + timeout
        while len(lines := self.verdict_lines()) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(lines)}/{count} verdict lines:\n{self.log_text()}")
            time.sleep(0.05)
        return lines

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

    def client(self) -> MilterClient:
        return MilterClient(self.family, self.address)


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


class MilterClient:
    """The MTA side of one milter connection (miltertest), Postfix-like."""

    def __init__(self, family: int, address: object, timeout: float = 30.0) -> None:
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(address)
        self.conn = MilterConnection(self.sock)
        self.actions, self.protocol = self.conn.optneg_mta()

    def close(self) -> None:
        try:
            self.conn._send(C.SMFIC_QUIT)
        except OSError:
            pass
        self.sock.close()

    def __enter__(self) -> MilterClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def step(self, skip: int, noreply: int, cmd: str, **kw: object) -> Reply | None:
        """Send one event as negotiated: skipped, fire-and-forget, or wait for the reply."""
        if self.protocol & skip:
            return None
        if self.protocol & noreply:
            self.conn._send(cmd, **kw)
            return None
        return self.conn.send_ar(cmd, **kw)

    def macro(self, stage: str, **values: str) -> None:
        self.conn.send_macro(stage, **values)

    def begin(self, sender: str, recipients: Iterable[str],
              headers: Iterable[tuple[str, str]], queue_id: str | None = None) -> None:
        """Everything up to (and including) the headers and end of headers."""
        self.step(C.SMFIP_NOCONNECT, C.SMFIP_NR_CONN, C.SMFIC_CONNECT,
                  hostname="client.test", family=C.SMFIA_INET, port=25000,
                  address="127.0.0.1")
        self.step(C.SMFIP_NOHELO, C.SMFIP_NR_HELO, C.SMFIC_HELO, helo="client.test")
        self.step(C.SMFIP_NOMAIL, C.SMFIP_NR_MAIL, C.SMFIC_MAIL, args=[f"<{sender}>"])
        for rcpt in recipients:
            self.step(C.SMFIP_NORCPT, C.SMFIP_NR_RCPT, C.SMFIC_RCPT, args=[f"<{rcpt}>"])
        if queue_id:
            self.macro(C.SMFIC_DATA, i=queue_id)
        self.step(C.SMFIP_NODATA, C.SMFIP_NR_DATA, C.SMFIC_DATA)
        for name, value in headers:
            self.step(C.SMFIP_NOHDRS, C.SMFIP_NR_HDR, C.SMFIC_HEADER, name=name, value=value)
        self.step(C.SMFIP_NOEOH, C.SMFIP_NR_EOH, C.SMFIC_EOH)

    def body(self, data: bytes, chunk: int = 65535) -> None:
        """Body chunks as raw bytes (any byte value)."""
        if self.protocol & C.SMFIP_NOBODY:
            return
        for start in range(0, len(data), chunk):
            part = data[start:start + chunk]
            packet = struct.pack("!L", len(part) + 1) + C.SMFIC_BODY.encode() + part
            self.sock.sendall(packet)
            if not self.protocol & C.SMFIP_NR_BODY:
                self.conn.recv()

    def end(self, queue_id: str | None = None) -> list[Reply]:
        if queue_id:
            self.macro(C.SMFIC_BODYEOB, i=queue_id)
        # Not conn.send_eom(): it stops at SMFIR_QUARANTINE, which is not final.
        self.conn._send(C.SMFIC_BODYEOB)
        replies = []
        while True:
            reply = self.conn.recv()
            replies.append(reply)
            if reply[0] in FINAL_REPLIES:
                return replies

    def message(self, sender: str, recipients: Sequence[str],
                headers: Sequence[tuple[str, str]], body: bytes,
                queue_id: str | None = "TESTQ1") -> list[Reply]:
        """One whole message; returns the end-of-message replies."""
        self.begin(sender, recipients, headers, queue_id)
        self.body(body)
        return self.end(queue_id)

    def abort(self) -> None:
        self.conn._send(C.SMFIC_ABORT)


def final(replies: list[Reply]) -> Reply:
    """The disposition (last reply) of an end-of-message answer."""
    return replies[-1]


def added_headers(replies: list[Reply]) -> list[tuple[str, str]]:
    return [(r[1]["name"], r[1]["value"]) for r in replies if r[0] == C.SMFIR_ADDHEADER]
