"""``dupfilter-smtpd``: an SMTP content filter on aiosmtpd.

Postfix (after-queue ``content_filter``, or before-queue ``smtpd_proxy_filter``) hands a
message to this daemon; it runs the core once, acts on the verdict, and re-injects the
message into the next hop with the original envelope.  The next hop sees each command as the
upstream sends it: MAIL opens a transaction there at the first RCPT, every RCPT gets the
next hop's own answer (so per-recipient refusals reach Postfix as such), and at the end of
DATA the (tagged) message goes on, or the transaction is dropped (discard, reject, tempfail).

No mail is lost: when the next hop is down or refuses, the upstream gets a 4xx (or the next
hop's own 5xx) and keeps the message; an internal error falls back to ``on_error``
(pass through untagged, or 451), never to reject or discard.  Only messages the next hop
accepted are recorded in the store.

    dupfilter-smtpd --config /etc/dupfilter/dupfilter.toml --listen 127.0.0.1:10025 \\
        --next-hop 127.0.0.1:10026 --db /var/lib/dupfilter
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import functools
import logging
import re
import signal
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aiosmtpd.smtp import MISSING, SMTP, Envelope, syntax

from mailfilter import __version__, metrics
from mailfilter.config import ConfigError, Settings, check_smtpd_settings, parse_hostport
from mailfilter.daemon import (
    STORE_RETRY_SECONDS,
    DaemonError,
    LazyEngine,
    ThrottledWarning,
    add_daemon_arguments,
    check_privileges,
    exit_on_config_error,
    load_daemon_settings,
    log_failure,
    log_verdict,
    reload_settings,
    sd_notify,
    setup_logging,
    verdict_fields,
)
from mailfilter.detector import Verdict
from mailfilter.engine import Engine
from mailfilter.headers import BARE_LF, pass_through, tag_message
from mailfilter.store import recipient_key

PROG = "dupfilter-smtpd"
# Kept-open connections to the next hop (each holds one of its smtpd processes).
DEFAULT_CONNECTIONS = 10
# An idle next-hop connection is closed after this many seconds.
IDLE_SECONDS = 5.0
# On SIGTERM, transactions in flight get this long to finish.
DRAIN_SECONDS = 30.0
CONNECT_TIMEOUT = 30.0
# XFORWARD attributes we accept from Postfix and pass on (when the next hop offers them).
XFORWARD_ATTRIBUTES = ("NAME", "ADDR", "PORT", "PROTO", "HELO", "IDENT", "SOURCE")
# MAIL FROM parameters passed on to the next hop (aiosmtpd refuses any other).
FORWARDED_MAIL_PARAMETERS = ("SIZE", "BODY", "SMTPUTF8")

_LEADING_DOT = re.compile(rb"^\.", re.MULTILINE)
_QUEUED_AS = re.compile(r"queued as ([0-9A-Za-z]+)")
# A plain <local@domain> path (no quotes, route, literal or comment): parsed without the
# email package; anything else goes to aiosmtpd's own parser.
_ATOM = r"[^\x00-\x20\x7f<>()\[\]\\,;:@\".]+"
_PLAIN_PATH = re.compile(rf"<({_ATOM}(?:\.{_ATOM})*@{_ATOM}(?:\.{_ATOM})*)>(?:[ \t]+(.*))?",
                         re.DOTALL)
# A dot that starts a line of DATA (CRLF-delimited lines only, as aiosmtpd reads them).
_STUFFED_DOT = re.compile(rb"(?:^|(?<=\r\n))\.")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# aiosmtpd's own replies that deserve an enhanced status code.
_REWRITES = {
    "552 Error: Too much mail data":
        "552 5.3.4 Message size exceeds fixed limit",
    "552 Error: message size exceeds fixed maximum message size":
        "552 5.3.4 Message size exceeds fixed maximum message size",
}

# [smtpd] keys that SIGHUP cannot change: the listening socket, the next-hop pool and
# the mode are set up at start.
_RESTART_KEYS = ("listen", "next_hop", "mode")


# ----------------------------------------------------------------------------- replies

@dataclass(frozen=True, slots=True)
class Reply:
    """One SMTP reply: a code and its text lines (without the code)."""

    code: int
    lines: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return 200 <= self.code < 300

    def text(self) -> str:
        """The reply on one line, for logs."""
        return f"{self.code} " + " / ".join(self.lines)

    def __str__(self) -> str:
        lines = self.lines or ("",)
        return "\r\n".join(f"{self.code}{'-' if i < len(lines) - 1 else ' '}{line}"
                           for i, line in enumerate(lines))


def tempfail(detail: str) -> Reply:
    """The 451 that makes the upstream keep the message and retry."""
    return Reply(451, (f"4.3.0 {_CONTROL.sub(' ', detail)}",))


def upstream_reply(reply: Reply) -> Reply:
    """A next-hop reply fit to pass upstream: 421 (closing) becomes 451, odd codes 451."""
    if reply.code == 421 or not 200 <= reply.code < 600 or 300 <= reply.code < 400:
        return tempfail(f"next hop said: {reply.text()}")
    return reply


class NextHopError(Exception):
    """Talking to the next hop failed; the message was not passed on."""


class NextHopUnsure(NextHopError):
    """The connection failed after the final dot: the next hop may have the message."""


# ----------------------------------------------------------------------------- wire format

def to_crlf(data: bytes) -> bytes:
    """Message bytes with every line ending in CRLF (a bare LF becomes CRLF).

    RFC 5321 knows no other line end; this way a bare-LF ``.`` line cannot end the message
    early at a next hop that takes bare LF for a line end.
    """
    if b"\n" in data and BARE_LF.search(data):
        data = BARE_LF.sub(b"\r\n", data)
    if data and not data.endswith(b"\r\n"):
        data += b"\r\n"
    return data


def dot_stuff(message: bytes) -> bytes:
    """A CRLF message → DATA payload: lines starting with ``.`` doubled, final ``.``."""
    if message.startswith(b".") or b"\n." in message:
        message = _LEADING_DOT.sub(b"..", message)
    return message + b".\r\n"


def to_wire(data: bytes) -> bytes:
    """Message bytes → SMTP DATA payload (CRLF line ends, dot-stuffed, final ``.``)."""
    return dot_stuff(to_crlf(data))


def _address(address: str) -> bytes:
    """An envelope address as aiosmtpd gave it (``<>`` for the null sender) → ``<...>``."""
    if address in ("", "<>"):
        return b"<>"
    return b"<" + address.encode("utf-8", "surrogateescape") + b">"


# ----------------------------------------------------------------------------- next hop

class Connection:
    """One SMTP client connection to the next hop (after greeting and EHLO)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 timeout: float) -> None:
        self.reader = reader
        self.writer = writer
        self.timeout = timeout
        self.capabilities: dict[str, str] = {}
        self.broken = False     # state unknown: close it, never reuse it
        self.dirty = False      # a transaction may be open: send RSET before reusing
        self.reused = False     # came from the idle pool (may have gone stale)
        self.busy = False       # an exchange is in flight
        self.last_used = time.monotonic()

    @classmethod
    async def open(cls, host: str, port: int, helo: str, timeout: float) -> Connection:
        try:
            async with asyncio.timeout(min(timeout, CONNECT_TIMEOUT)):
                reader, writer = await asyncio.open_connection(host, port, limit=1 << 16)
        except (OSError, TimeoutError) as error:
            raise NextHopError(f"cannot connect to {host}:{port}: "
                               f"{getattr(error, 'strerror', None) or error!r}") from None
        conn = cls(reader, writer, timeout)
        try:
            greeting = await conn.exchange([])
            if greeting[0].code != 220:
                raise NextHopError(f"next hop greeting: {greeting[0].text()}")
            [ehlo] = await conn.exchange([b"EHLO " + helo.encode("ascii", "replace") + b"\r\n"])
            if ehlo.code != 250:
                raise NextHopError(f"next hop refused EHLO: {ehlo.text()}")
        except BaseException:
            conn.close(quit=False)
            raise
        for line in ehlo.lines[1:]:
            keyword, _, params = line.partition(" ")
            conn.capabilities[keyword.upper()] = params
        return conn

    async def _read_reply(self) -> Reply:
        lines: list[str] = []
        while True:
            raw = await self.reader.readline()
            if not raw.endswith(b"\n"):
                raise NextHopError("connection closed by the next hop")
            text = raw.decode("utf-8", "replace").rstrip("\r\n")
            if len(text) < 3 or not text[:3].isdigit() or text[3:4] not in ("", " ", "-"):
                raise NextHopError(f"malformed reply from the next hop: {text[:80]!r}")
            lines.append(text[4:])
            if text[3:4] != "-":
                return Reply(int(text[:3]), tuple(lines))

    async def exchange(self, commands: Sequence[bytes], payload: bytes | None = None
                       ) -> list[Reply]:
        """Send ``commands`` in one write (pipelined) and read one reply per command.

        With no commands, read one reply (the greeting); with ``payload`` (the message after
        a 354, or a whole BDAT command), send it and read its one reply.  Any failure marks
        the connection broken, and so does a 421 (raised when it is the first reply).
        """
        self.busy = True
        try:
            async with asyncio.timeout(self.timeout):
                if payload is not None:
                    self.writer.write(payload)
                elif commands:
                    self.writer.write(b"".join(commands))
                await self.writer.drain()
                count = 1 if payload is not None or not commands else len(commands)
                replies = [await self._read_reply() for _ in range(count)]
        except NextHopError:
            self.broken = True
            raise
        except (OSError, TimeoutError, EOFError, ValueError, asyncio.IncompleteReadError,
                asyncio.LimitOverrunError) as error:
            self.broken = True
            raise NextHopError(f"next hop connection failed: {error!r}") from None
        except BaseException:
            self.broken = True
            raise
        finally:
            self.busy = False
        self.last_used = time.monotonic()
        if any(reply.code == 421 for reply in replies):
            self.broken = True
            if replies[0].code == 421:
                raise NextHopError(f"next hop is closing the connection: {replies[0].text()}")
        return replies

    def close(self, quit: bool = True) -> None:
        if quit and not self.broken and not self.writer.is_closing():
            try:
                self.writer.write(b"QUIT\r\n")
            except OSError:
                pass
        self.writer.close()


class NextHop:
    """A bounded pool of kept-open connections to the next hop.

    At most ``size`` connections exist at once (keep it at or below the next hop smtpd's
    ``maxproc``: each connection holds one of its processes); idle ones close after
    :data:`IDLE_SECONDS`.
    """

    def __init__(self, host: str, port: int, *, helo: str, timeout: float,
                 size: int = DEFAULT_CONNECTIONS) -> None:
        self.host, self.port, self.helo, self.timeout = host, port, helo, timeout
        self.size = size
        self._slots = asyncio.Semaphore(size)
        self._idle: deque[Connection] = deque()
        self._reaper: asyncio.Task[None] | None = None
        self._closed = False

    def start(self) -> None:
        self._reaper = asyncio.get_running_loop().create_task(self._reap())

    async def acquire(self, fresh: bool = False) -> Connection:
        """A connection for one transaction; NextHopError when none can be had."""
        if self._closed:
            raise NextHopError("shutting down")
        try:
            async with asyncio.timeout(self.timeout):
                await self._slots.acquire()
        except TimeoutError:
            raise NextHopError("no free connection to the next hop") from None
        try:
            while self._idle and not fresh:
                conn = self._idle.pop()
                if not conn.broken and not conn.writer.is_closing() \
                        and not conn.reader.at_eof():
                    conn.reused = True
                    return conn
                conn.close(quit=False)
            conn = await Connection.open(self.host, self.port, self.helo, self.timeout)
            conn.reused = False
            return conn
        except BaseException:
            self._slots.release()
            raise

    def release(self, conn: Connection) -> None:
        """Give a connection back: kept for reuse unless broken (then closed)."""
        if conn.broken or self._closed or conn.writer.is_closing():
            conn.close(quit=not conn.broken)
        else:
            conn.last_used = time.monotonic()
            self._idle.append(conn)
        self._slots.release()

    async def _reap(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            limit = time.monotonic() - IDLE_SECONDS
            while self._idle and self._idle[0].last_used < limit:
                self._idle.popleft().close()

    def close(self) -> None:
        self._closed = True
        if self._reaper is not None:
            self._reaper.cancel()
        while self._idle:
            self._idle.pop().close()


class Relay:
    """One mail transaction at the next hop, opened at the upstream's first RCPT."""

    def __init__(self, pool: NextHop, sender: str, mail_options: Sequence[str],
                 xforward: dict[str, str]) -> None:
        self.pool = pool
        params = [option for option in mail_options
                  if option.partition("=")[0] in FORWARDED_MAIL_PARAMETERS]
        self.mail_line = (b"MAIL FROM:" + _address(sender)
                          + b"".join(b" " + p.encode("ascii", "replace") for p in params)
                          + b"\r\n")
        self.xforward = xforward
        self.conn: Connection | None = None
        self.accepted: list[str] = []       # recipients the next hop took
        self.failed: Reply | None = None    # the MAIL refusal or failure every RCPT gets

    @staticmethod
    def rcpt_line(address: str) -> bytes:
        return b"RCPT TO:" + _address(address) + b"\r\n"

    def _prelude(self, conn: Connection) -> list[bytes]:
        commands = [b"RSET\r\n"] if conn.dirty else []
        offered = set(conn.capabilities.get("XFORWARD", "").upper().split())
        attrs = [f"{name}={value}" for name, value in self.xforward.items() if name in offered]
        line = ""
        for attr in attrs:
            if line and len(line) + len(attr) > 400:
                commands.append(f"XFORWARD {line}\r\n".encode("utf-8", "surrogateescape"))
                line = ""
            line = f"{line} {attr}".strip()
        if line:
            commands.append(f"XFORWARD {line}\r\n".encode("utf-8", "surrogateescape"))
        return commands + [self.mail_line]

    async def _open(self, recipients: Sequence[str]) -> tuple[Reply, list[Reply]]:
        """Start the transaction (RSET, XFORWARD, MAIL, RCPTs in one write).

        A stale connection from the pool is replaced once by a fresh one.
        Returns the MAIL reply and the RCPT replies; leaves ``self.conn`` set.
        """
        for attempt in (0, 1):
            conn = await self.pool.acquire(fresh=attempt > 0)
            commands = self._prelude(conn)
            commands += [self.rcpt_line(r) for r in recipients]
            try:
                replies = await conn.exchange(commands)
            except NextHopError:
                self.pool.release(conn)
                if conn.reused and attempt == 0:
                    continue
                raise
            except BaseException:
                self.pool.release(conn)
                raise
            conn.dirty = True
            self.conn = conn
            skip = len(commands) - len(recipients) - 1
            return replies[skip], replies[skip + 1:]
        raise NextHopError("unreachable")  # pragma: no cover

    async def add_recipient(self, address: str) -> Reply:
        """Forward one RCPT; the next hop's reply (or a 451) is the upstream's answer."""
        if self.failed is not None:
            return self.failed
        try:
            if self.conn is None:
                mail, [reply] = await self._open([address])
                if not mail.ok:
                    self.failed = upstream_reply(mail)
                    self.release()
                    return self.failed
            else:
                [reply] = await self.conn.exchange([self.rcpt_line(address)])
        except NextHopError as error:
            self.drop()
            self.failed = tempfail(str(error))
            return self.failed
        except BaseException:
            self.drop()
            raise
        if reply.ok:
            self.accepted.append(address)
        return upstream_reply(reply)

    async def deliver(self, message: bytes, recipients: Sequence[str] | None = None
                      ) -> Reply:
        """Send the message (CRLF lines) to the accepted recipients, or to a subset.

        With CHUNKING, one ``BDAT n LAST`` write (no 354 round trip, no dot-stuffing, and a
        refused chunk cannot be taken for commands); else DATA.  A connection lost before
        the message went out is replaced once and the transaction replayed.  Raises
        NextHopError (nothing delivered) or NextHopUnsure (maybe delivered).
        """
        subset = recipients is not None and len(recipients) != len(self.accepted)
        wanted = list(self.accepted if recipients is None else recipients)
        try:
            for attempt in (0, 1):
                try:
                    if self.conn is None or subset or attempt:
                        if self.conn is not None:
                            self.conn.dirty = True
                            self.release()
                        mail, rcpts = await self._open(wanted)
                        refused = [r for r in rcpts if not r.ok]
                        if not mail.ok:
                            return upstream_reply(mail)
                        if refused:
                            return tempfail("next hop refused a recipient it had accepted: "
                                            + refused[0].text())
                    assert self.conn is not None
                    if self.conn.writer.is_closing() or self.conn.reader.at_eof():
                        # It hung up while the upstream sent DATA: nothing went out yet.
                        raise NextHopError("next hop closed the connection")
                    if "CHUNKING" in self.conn.capabilities:
                        return await self._send(b"BDAT %d LAST\r\n" % len(message) + message)
                    [reply] = await self.conn.exchange([b"DATA\r\n"])
                    break
                except NextHopUnsure:
                    raise
                except NextHopError:
                    self.drop()
                    if attempt:
                        raise
            if reply.code != 354:
                return upstream_reply(reply)
            if len(message) > 1 << 20:
                payload = await asyncio.to_thread(dot_stuff, message)
            else:
                payload = dot_stuff(message)
            return await self._send(payload)
        except BaseException:
            self.drop()
            raise
        finally:
            self.release()

    async def _send(self, payload: bytes) -> Reply:
        """Send the message and read the reply that ends the transaction."""
        assert self.conn is not None
        try:
            [reply] = await self.conn.exchange([], payload=payload)
        except NextHopError as error:
            raise NextHopUnsure(str(error)) from None
        self.conn.dirty = not reply.ok
        return upstream_reply(reply)

    def release(self) -> None:
        """Give the connection back (a pending transaction is RSET at its next use)."""
        if self.conn is not None:
            conn, self.conn = self.conn, None
            self.pool.release(conn)

    def drop(self) -> None:
        """Close the connection: its state is unknown."""
        if self.conn is not None:
            self.conn.broken = True
            self.release()

    def abort(self) -> None:
        """The upstream gave up on the transaction (RSET, EHLO, lost connection)."""
        self.release()


# ----------------------------------------------------------------------------- recording

class GroupRecorder:
    """Remembers delivered messages, many per store transaction (group commit).

    A store commit waits for the disk (LMDB syncs at every commit, and writers take turns),
    so one commit per message would cap the filter at one message per disk sync.  One
    commit runs at a time; whatever is submitted meanwhile goes into the next one.  Each
    caller still waits for its own commit, so a message is remembered before the upstream
    hears that it was accepted.
    """

    def __init__(self, engines: LazyEngine, executor: concurrent.futures.Executor,
                 logger: logging.Logger, tasks: set[asyncio.Future[Any]]) -> None:
        self.engines = engines
        self.executor = executor
        self.logger = logger
        self.tasks = tasks
        # Store failures repeat for every message while they last: said once a minute.
        self.store_warnings = ThrottledWarning(logger)
        self._pending: list[tuple[Verdict, asyncio.Future[bool]]] = []
        self._running = False

    async def record(self, verdict: Verdict) -> bool:
        """True once remembered; False when it failed or an allow rule says no."""
        done = asyncio.get_running_loop().create_future()
        self._pending.append((verdict, done))
        if not self._running:
            self._running = True
            task = asyncio.ensure_future(self._commit_all())
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        return await asyncio.shield(done)

    async def _commit_all(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                try:
                    results = await loop.run_in_executor(self.executor, self._commit,
                                                         [verdict for verdict, _ in batch])
                except Exception as error:
                    self.store_warnings.warn(
                        "record", "cannot record %d delivered message(s): %s: %s",
                        len(batch), type(error).__name__, error)
                    results = [False] * len(batch)
                for (_, done), result in zip(batch, results, strict=True):
                    if not done.done():
                        done.set_result(result)
        finally:
            self._running = False

    def _commit(self, verdicts: list[Verdict]) -> list[bool]:
        """One write transaction for the batch (engine.record joins it)."""
        engine = self.engines.get()
        if engine is None:
            raise RuntimeError("store unavailable")

        def run() -> list[bool]:
            return [engine.record(verdict) is not None for verdict in verdicts]

        atomically = getattr(getattr(engine, "store", None), "atomically", None)
        return atomically(run) if atomically is not None else run()


# ----------------------------------------------------------------------------- decisions

@dataclass(slots=True)
class Decision:
    """What to do with one message, worked out in a worker thread."""

    action: str                     # accept | tag | discard | reject | tempfail
    verdict: Verdict | None
    payload: bytes | None = None    # the message to pass on (CRLF lines)
    keep: list[str] | None = None   # the recipients it goes to (None: all accepted)
    note: str | None = None
    error: str | None = None


class FilterHandler:
    """aiosmtpd handler: relay MAIL/RCPT as they come, decide and act at end of DATA."""

    def __init__(self, settings: Settings, engines: LazyEngine, pool: NextHop,
                 executor: concurrent.futures.Executor, logger: logging.Logger,
                 server: FilterServer) -> None:
        self.settings = settings
        self.smtpd = settings.smtpd
        self.engines = engines
        self.pool = pool
        self.executor = executor
        self.logger = logger
        self.server = server
        self.recorder = GroupRecorder(engines, executor, logger, server.tasks)

    async def handle_EHLO(self, server: FilterSMTP, session: Any, envelope: Envelope,
                          hostname: str, responses: list[str]) -> list[str]:
        session.host_name = hostname
        return responses[:-1] + ["250-PIPELINING",
                                 "250-XFORWARD " + " ".join(XFORWARD_ATTRIBUTES), "250 HELP"]

    async def handle_MAIL(self, server: FilterSMTP, session: Any, envelope: RelayEnvelope,
                          address: str, mail_options: list[str]) -> str:
        if self.server.draining:
            asyncio.get_running_loop().call_soon(server.close_transport)
            return "421 4.3.2 Service shutting down, try again later"
        envelope.mail_from = address
        envelope.mail_options.extend(mail_options)
        return "250 2.1.0 Ok"

    async def handle_RCPT(self, server: FilterSMTP, session: Any, envelope: RelayEnvelope,
                          address: str, rcpt_options: list[str]) -> str:
        if envelope.relay is None:
            envelope.relay = Relay(self.pool, envelope.mail_from or "",
                                   envelope.mail_options, envelope.xforward)
        reply = await envelope.relay.add_recipient(address)
        if reply.ok:
            envelope.rcpt_tos.append(address)
            envelope.rcpt_options.extend(rcpt_options)
        return str(reply)

    async def handle_DATA(self, server: FilterSMTP, session: Any,
                          envelope: RelayEnvelope) -> str:
        relay, envelope.relay = envelope.relay, None
        if relay is None:       # pragma: no cover - aiosmtpd needs a RCPT first
            return str(tempfail("no transaction at the next hop"))
        server.processing = True
        try:
            # Shielded: an upstream that hangs up mid-way does not leave a half-done job.
            task = asyncio.ensure_future(self._process(session, envelope, relay))
            self.server.tasks.add(task)
            task.add_done_callback(self.server.tasks.discard)
            return str(await asyncio.shield(task))
        finally:
            server.processing = False

    async def handle_exception(self, error: Exception) -> str:
        # Must not raise: aiosmtpd would answer "500 Error: ..." (a bounce) instead.
        try:
            self.logger.exception("internal error in the SMTP session: %r", error)
        except Exception as failure:  # noqa: BLE001
            log_failure(PROG, failure)
        return str(tempfail("internal error"))

    # -- the work of one message ---------------------------------------------------

    def _decide(self, raw: bytes, recipients: list[str], sender: str) -> Decision:
        """Core call and payload building (CPU work: runs in the executor).

        Per-recipient scope: when only some recipients already had the message, ``discard``
        drops just those (the others get it as the new message it is for them, under the
        ``unique`` action), and ``reject`` becomes ``tag`` (one reply at the end of DATA
        cannot refuse some recipients only).
        """
        engine = self.engines.get()
        if engine is None:          # the store could not be opened (yet): on_error
            raise RuntimeError("store unavailable")
        verdict = engine.check(raw, recipients, record=False, sender=sender)
        action = self.smtpd.actions.for_verdict(verdict.verdict)
        decision = Decision(action, verdict)
        deliver_as, header = action, verdict.header_value()
        if action in ("discard", "reject") and verdict.is_duplicate \
                and not verdict.all_recipients_seen:
            seen = {recipient_key(r) for r in verdict.recipients_seen}
            rest = [r for r in recipients if recipient_key(r) not in seen]
            if rest and action == "reject":
                decision.action = deliver_as = "tag"
                decision.note = "partial-duplicate-tagged"
            elif rest and self.smtpd.actions.for_verdict("unique") in ("accept", "tag"):
                decision.keep, decision.note = rest, "discard-seen-recipients"
                deliver_as, header = self.smtpd.actions.for_verdict("unique"), "unique"
        if deliver_as == "tag":
            decision.payload = to_crlf(tag_message(raw, header))
        elif deliver_as == "accept":
            decision.payload = self._untagged(raw)
        return decision

    def _untagged(self, raw: bytes) -> bytes:
        """The message as it goes on without our header (``accept``, ``on_error``): any
        incoming ``X-Dupfilter:`` removed (a forged ``duplicate`` would be filed away), or
        unchanged if removing it fails for any reason: never lose the message over it."""
        payload, failure = pass_through(raw)
        if failure is not None:
            try:
                self.logger.warning("cannot remove an incoming X-Dupfilter header (%s: %s); "
                                    "passed on unchanged", type(failure).__name__, failure)
            except Exception as error:  # noqa: BLE001
                log_failure(PROG, error)
        return to_crlf(payload)

    async def _process(self, session: Any, envelope: RelayEnvelope, relay: Relay) -> Reply:
        try:
            return await self._process_message(session, envelope, relay)
        finally:
            # Whatever happened, the next-hop connection is given back (a no-op once the
            # message was delivered or dropped): a leaked one is a pool slot lost for good.
            relay.abort()

    async def _process_message(self, session: Any, envelope: RelayEnvelope, relay: Relay
                               ) -> Reply:
        started = time.monotonic()
        loop = asyncio.get_running_loop()
        raw: bytes = envelope.original_content or b""
        recipients = list(envelope.rcpt_tos)
        fields: dict[str, Any] = {
            "queue": envelope.xforward.get("IDENT"),      # the upstream's queue id
            "client": envelope.xforward.get("ADDR") or _peer(session),
            "from": envelope.mail_from or "<>",
            "rcpts": len(recipients),
            "bytes": len(raw),
        }
        try:
            sender = "" if envelope.mail_from in (None, "<>") else envelope.mail_from
            decision = await loop.run_in_executor(self.executor, self._decide, raw,
                                                  recipients, sender)
        except asyncio.CancelledError:
            raise
        except BaseException as error:  # the store, a parser bug, memory, even SystemExit
            # from a library in the worker thread (not a signal: those go to the main
            # thread): on_error
            decision = Decision("tempfail" if self.smtpd.on_error == "tempfail" else "accept",
                                None, error=f"{type(error).__name__}: {error}")
            if decision.action == "accept":
                decision.payload = await loop.run_in_executor(self.executor, self._untagged,
                                                              raw)
        if decision.verdict is not None:
            fields.update(verdict_fields(decision.verdict))
        else:
            fields["verdict"] = "error"
        fields["action"] = decision.action
        if decision.keep is not None:
            fields["dropped"] = len(recipients) - len(decision.keep)
        if decision.note:
            fields["note"] = decision.note
        if decision.error:
            fields["error"] = decision.error
        reply, next_hop, recorded = await self._act(decision, relay, fields)
        if recorded is None:
            # Remembered before the upstream hears 250, so that a copy sent right after
            # this one's acceptance is known as a duplicate.
            recorded = reply.ok and decision.verdict is not None \
                and await self.recorder.record(decision.verdict)
        fields["reply"] = reply.code
        fields["next_hop"] = next_hop
        queued = _QUEUED_AS.search(next_hop or "")
        fields["queued_as"] = queued.group(1) if queued else None
        fields["recorded"] = recorded
        fields["ms"] = round((time.monotonic() - started) * 1000, 1)
        level = logging.WARNING if decision.error or reply.code >= 400 else logging.INFO
        try:
            log_verdict(self.logger, level, **fields)
        except Exception as failure:  # noqa: BLE001 - the reply stands (it may be delivered)
            log_failure(PROG, failure)
        return reply

    async def _act(self, decision: Decision, relay: Relay, fields: dict[str, Any]
                   ) -> tuple[Reply, str | None, bool | None]:
        """Carry out the decision: (reply upstream, next hop's reply, recorded or None)."""
        if decision.action == "discard" and decision.keep is None:
            relay.abort()
            return Reply(250, ("2.0.0 Ok: discarded by dupfilter",)), None, False
        if decision.action == "reject":
            relay.abort()
            message = _CONTROL.sub(" ", self.smtpd.reject_message)
            return Reply(550, (f"5.7.1 {message}",)), None, False
        if decision.action == "tempfail" or decision.payload is None:
            relay.abort()
            return tempfail("dupfilter could not check the message, try again later"), \
                None, False
        try:
            reply = await relay.deliver(decision.payload, decision.keep)
        except NextHopUnsure as error:
            fields["maybe_delivered"] = True
            return tempfail(f"next hop: {error}"), str(error), False
        except NextHopError as error:
            return tempfail(f"next hop: {error}"), str(error), False
        return reply, reply.text(), None


def _peer(session: Any) -> str | None:
    peer = getattr(session, "peer", None)
    if isinstance(peer, tuple) and peer:
        return str(peer[0])
    return None if peer is None else str(peer)


# ----------------------------------------------------------------------------- protocol

class RelayEnvelope(Envelope):
    """aiosmtpd's envelope plus the transaction at the next hop and XFORWARD data."""

    def __init__(self) -> None:
        super().__init__()
        self.relay: Relay | None = None
        self.xforward: dict[str, str] = {}


class FilterSMTP(SMTP):
    """aiosmtpd's SMTP with XFORWARD, enhanced size-limit replies, and relay clean-up.

    Whenever aiosmtpd starts a new envelope (RSET, HELO/EHLO, end of DATA, a size error)
    or the connection goes, an open transaction at the next hop is given up.
    """

    def __init__(self, handler: FilterHandler, server: FilterServer, **kwargs: Any) -> None:
        # Accept long lines (and bare-LF messages, which look like one long line) up to
        # the size limit: the next hop decides, we pass them on.
        limit = kwargs.get("data_size_limit") or 1 << 26
        self.line_length_limit = max(1001, min(limit + 8, 1 << 26))
        self.filter_server = server
        self.processing = False
        self._held: list[bytes] = []
        super().__init__(handler, **kwargs)

    def _create_envelope(self) -> RelayEnvelope:
        old = getattr(self, "envelope", None)
        if isinstance(old, RelayEnvelope) and old.relay is not None:
            old.relay.abort()
            old.relay = None
        return RelayEnvelope()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.filter_server.sessions.add(self)

    def connection_lost(self, error: Exception | None) -> None:
        self.filter_server.sessions.discard(self)
        envelope = self.envelope
        if isinstance(envelope, RelayEnvelope) and envelope.relay is not None:
            relay, envelope.relay = envelope.relay, None
            if relay.conn is not None and relay.conn.busy:
                # The RCPT in flight is cancelled with this session and gives the
                # connection up then; it must not be reused meanwhile.
                relay.conn.broken = True
            else:
                relay.abort()
        super().connection_lost(error)

    def idle(self) -> bool:
        """No transaction in progress (safe to close at shutdown)."""
        return not self.processing and not (self.envelope and self.envelope.mail_from)

    def close_transport(self) -> None:
        if self.transport is not None:
            self.transport.close()

    async def push(self, status: str | bytes) -> None:
        """Send a reply; while more pipelined commands wait, hold it (RFC 2920, 3.2)."""
        if isinstance(status, str):
            if status in _REWRITES:
                status = _REWRITES[status]
                log_verdict(self.filter_server.logger, logging.WARNING,
                            client=_peer(self.session), action="refused", reason="size",
                            limit=self.data_size_limit, reply=552)
            status = status.encode("utf-8" if self.enable_SMTPUTF8 else "ascii")
        self._held.append(status + b"\r\n")
        buffered = getattr(self._reader, "_buffer", None)
        if buffered is not None and b"\n" in buffered and status[:3] not in (b"354", b"421"):
            return      # another complete command is waiting: answer it first
        replies, self._held = b"".join(self._held), []
        self._writer.write(replies)
        await self._writer.drain()

    def _getaddr(self, arg: str) -> tuple[str | None, str | None]:
        """aiosmtpd's address parsing, with a fast path for plain ``<local@domain>``."""
        if not self.local_part_limit:
            plain = _PLAIN_PATH.fullmatch(arg.strip())
            if plain is not None:
                return plain.group(1), (plain.group(2) or "").strip()
        return super()._getaddr(arg)

    def _reset_timeout(self, duration: float | None = None) -> None:
        """The idle timeout, pushed back per command without a new timer each time."""
        self._deadline = self.loop.time() + (duration or self._timeout_duration)
        handle = self._timeout_handle
        if handle is None or handle.cancelled() or handle.when() > self._deadline:
            if handle is not None:
                handle.cancel()
            self._timeout_handle = self.loop.call_at(self._deadline, self._check_timeout)

    def _check_timeout(self) -> None:
        if self.loop.time() >= self._deadline:
            self._timeout_cb()
        else:
            self._timeout_handle = self.loop.call_at(self._deadline, self._check_timeout)

    @syntax("DATA")
    async def smtp_DATA(self, arg: str | None) -> None:
        """aiosmtpd's DATA, reading the message in a few large pieces, not line by line.

        Same replies and limits: 552 once all of an oversized message was read, one dot
        removed from lines that start with one (CRLF lines), the handler's DATA hook.
        """
        if await self.check_helo_needed() or await self.check_auth_needed("DATA"):
            return
        assert self.envelope is not None
        if not self.envelope.rcpt_tos:
            await self.push("503 Error: need RCPT command")
            return
        if arg:
            await self.push("501 Syntax: DATA")
            return
        await self.push("354 End data with <CR><LF>.<CR><LF>")
        limit = self.data_size_limit
        parts: list[bytes] = []
        size, too_much, line_start = 0, False, True
        while True:
            try:
                part = await self._reader.readuntil(b".\r\n")
            except asyncio.LimitOverrunError as error:
                # No ".\r\n" within the reader's limit (the size limit): too much data.
                skipped = await self._reader.read(error.consumed)
                size += len(skipped)
                too_much, line_start = True, skipped.endswith(b"\r\n")
                parts.clear()
                continue
            # The end is a line that is just ".": after a CRLF, or at the very start.
            if part == b".\r\n" and line_start or part.endswith(b"\r\n.\r\n"):
                size += len(part) - 3
                if not too_much:
                    parts.append(part[:-3])
                break
            size += len(part)
            line_start = True           # every part ends with ".\r\n"
            too_much = too_much or bool(limit and size > limit)
            if too_much:
                parts.clear()
            else:
                parts.append(part)
        if too_much or (limit and size > limit):
            self._set_post_data_state()
            await self.push("552 Error: Too much mail data")
            return
        data = b"".join(parts)
        if data.startswith(b".") or b"\r\n." in data:
            data = _STUFFED_DOT.sub(b"", data)
        self.envelope.content = self.envelope.original_content = data
        status = await self._call_handler_hook("DATA")
        self._set_post_data_state()
        await self.push("250 OK" if status is MISSING else status)

    @syntax("XFORWARD attribute=value ...")
    async def smtp_XFORWARD(self, arg: str | None) -> None:
        """Postfix's XFORWARD: the original client, kept for the next hop and the log."""
        if await self.check_helo_needed("EHLO"):
            return
        assert self.envelope is not None
        if not arg:
            await self.push("501 5.5.4 Syntax: XFORWARD attribute=value...")
            return
        if self.envelope.mail_from:
            await self.push("503 5.5.1 Error: MAIL transaction in progress")
            return
        pairs = {}
        for item in arg.split():
            name, eq, value = item.partition("=")
            if not eq or name.upper() not in XFORWARD_ATTRIBUTES:
                await self.push(f"501 5.5.4 Bad XFORWARD attribute: {name[:40]}")
                return
            pairs[name.upper()] = value
        self.envelope.xforward.update(pairs)
        await self.push("250 2.0.0 Ok")


# ----------------------------------------------------------------------------- server

class FilterServer:
    """The listening server, its next-hop pool and worker threads; start and stop."""

    def __init__(self, settings: Settings, engine: Engine | LazyEngine, logger: logging.Logger,
                 *, connections: int = DEFAULT_CONNECTIONS, hostname: str | None = None
                 ) -> None:
        check_smtpd_settings(settings)
        self.settings = settings
        # An open engine (tests, embedding) or the daemon's, opened when the store can be.
        self.engines = engine if isinstance(engine, LazyEngine) else LazyEngine(
            settings, logger, "smtpd", engine=engine)
        self.logger = logger
        self.connections = connections
        self.hostname = hostname or socket.gethostname() or "localhost"
        self.sessions: set[FilterSMTP] = set()
        self.tasks: set[asyncio.Future[Any]] = set()
        self.draining = False
        self.pool: NextHop | None = None
        self.executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._server: asyncio.base_events.Server | None = None
        self.address: tuple[str, int] | None = None

    async def start(self, sock: socket.socket | None = None) -> None:
        """Listen (on ``sock``, or ``smtpd.listen``) and start serving."""
        smtpd = self.settings.smtpd
        hop_host, hop_port = parse_hostport(smtpd.next_hop, "smtpd.next_hop")
        self.pool = NextHop(hop_host, hop_port, helo=self.hostname, timeout=smtpd.timeout,
                            size=self.connections)
        self.pool.start()
        self.executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=max(2, min(4, self.connections)), thread_name_prefix="dupfilter")
        handler = FilterHandler(self.settings, self.engines, self.pool, self.executor,
                                self.logger, self)

        def factory() -> FilterSMTP:
            return FilterSMTP(handler, self, data_size_limit=smtpd.max_message_bytes or None,
                              enable_SMTPUTF8=True, decode_data=False,
                              hostname=self.hostname, ident=f"dupfilter-smtpd {__version__}",
                              timeout=smtpd.timeout)

        loop = asyncio.get_running_loop()
        if sock is None:
            host, port = parse_hostport(smtpd.listen, "smtpd.listen")
            self._server = await loop.create_server(factory, host, port, backlog=128,
                                                    reuse_address=True)
        else:
            self._server = await loop.create_server(factory, sock=sock, backlog=128)
        self.address = self._server.sockets[0].getsockname()[:2]

    @property
    def port(self) -> int:
        assert self.address is not None
        return self.address[1]

    async def stop(self, grace: float = DRAIN_SECONDS) -> None:
        """Stop listening, let transactions in flight finish (up to ``grace``), close."""
        self.draining = True
        if self._server is not None:
            self._server.close()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        while self.sessions or self.tasks:
            for session in list(self.sessions):
                if session.idle() and session.transport is not None:
                    session.transport.write(b"421 4.3.2 Service shutting down\r\n")
                    session.close_transport()
            if loop.time() > deadline:
                self.logger.warning("shutdown: giving up on %d sessions in flight",
                                    len(self.sessions))
                for session in list(self.sessions):
                    session.close_transport()
                break
            await asyncio.sleep(0.02)
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=5)
        if self._server is not None:
            await self._server.wait_closed()
        if self.pool is not None:
            self.pool.close()
        if self.executor is not None:
            self.executor.shutdown(wait=True)


class SmtpdController:
    """Run a :class:`FilterServer` in a thread with its own loop (tests, embedding).

        with SmtpdController(settings, engine) as filt:
            smtplib.SMTP("127.0.0.1", filt.port)
    """

    def __init__(self, settings: Settings, engine: Engine,
                 logger: logging.Logger | None = None, **options: Any) -> None:
        self.server = FilterServer(settings, engine, logger or logging.getLogger("dupfilter"),
                                   **options)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self.server.port

    def start(self) -> SmtpdController:
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

    def stop(self, grace: float = DRAIN_SECONDS) -> None:
        if self._loop is None or self._thread is None:
            return
        done = asyncio.run_coroutine_threadsafe(self.server.stop(grace), self._loop)
        done.result(grace + 15)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop = None

    def __enter__(self) -> SmtpdController:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


# ----------------------------------------------------------------------------- main

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="SMTP content filter: tag, reject or drop duplicate and "
                               "near-duplicate mail, then pass it on to the next hop.")
    add_daemon_arguments(parser)
    parser.add_argument("--listen", metavar="HOST:PORT",
                        help="where to accept mail (overrides smtpd.listen)")
    parser.add_argument("--next-hop", metavar="HOST:PORT",
                        help="where to re-inject it (overrides smtpd.next_hop)")
    parser.add_argument("--store-retry", metavar="SECONDS", type=float,
                        default=STORE_RETRY_SECONDS,
                        help="when the store cannot be opened, try again this often "
                             "(default %(default)g; meanwhile messages get on_error)")
    parser.add_argument("--connections", type=int, default=DEFAULT_CONNECTIONS, metavar="N",
                        help="at most N kept-open connections to the next hop; keep it at "
                             "or below that smtpd's maxproc (default %(default)s)")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    return parser


def _bind(listen: str) -> socket.socket:
    host, port = parse_hostport(listen, "smtpd.listen")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        family, _, _, _, address = infos[0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as error:
        raise DaemonError(f"cannot listen on {listen}: {error.strerror or error}") from None
    sock.setblocking(False)
    return sock


async def serve(settings: Settings, args: argparse.Namespace, logger: logging.Logger) -> int:
    """Bind, drop privileges, open the store, serve until SIGTERM/SIGINT."""
    sock = _bind(settings.smtpd.listen)
    try:
        check_privileges(args.user, args.allow_root, logger)
    except BaseException:
        sock.close()
        raise
    engines = LazyEngine(settings, logger, "smtpd", retry_seconds=args.store_retry)
    engines.open()          # or: one clear line, on_error per message, tried again later
    server = FilterServer(settings, engines, logger, connections=args.connections)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    loop.add_signal_handler(signal.SIGHUP, functools.partial(
        reload_settings, settings, _settings_loader(args, settings, logger), "smtpd",
        _RESTART_KEYS,
        logger))
    try:
        await server.start(sock=sock)
        serving = metrics.start(settings.metrics, "smtpd",
                                records=engines.records)
        if serving:
            logger.info("metrics on http://%s/metrics", serving)
        logger.info("%s %s listening on %s, next hop %s, mode %s, store %s", PROG,
                    __version__, settings.smtpd.listen, settings.smtpd.next_hop,
                    settings.smtpd.mode, settings.store.location())
        sd_notify("READY=1", f"STATUS=listening on {settings.smtpd.listen}")
        await stop.wait()
        sd_notify("STOPPING=1")
        logger.info("shutting down: finishing transactions in flight")
        await server.stop()
    finally:
        engines.close()
    logger.info("stopped")
    return 0


def _settings_loader(args: argparse.Namespace, running: Settings,
                     logger: logging.Logger) -> Callable[[], Settings]:
    """The settings as at start-up (file, then flags), for SIGHUP; the mode stays."""
    def load() -> Settings:
        fresh = load_daemon_settings(args)
        if args.listen:
            fresh.smtpd.listen = args.listen
        if args.next_hop:
            fresh.smtpd.next_hop = args.next_hop
        if fresh.smtpd.mode != running.smtpd.mode:
            logger.warning("SIGHUP: smtpd.mode changed; it takes effect after a restart")
        fresh.smtpd.mode = running.smtpd.mode
        check_smtpd_settings(fresh)
        return fresh
    return load


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``dupfilter-smtpd``."""
    args = build_parser().parse_args(argv)
    try:
        settings = load_daemon_settings(args)
        if args.listen:
            settings.smtpd.listen = args.listen
        if args.next_hop:
            settings.smtpd.next_hop = args.next_hop
        check_smtpd_settings(settings)
        if args.connections < 1:
            raise ConfigError("--connections must be at least 1")
    except ConfigError as error:
        return exit_on_config_error(PROG, error)
    logger = setup_logging(settings.log)
    logging.getLogger("mail.log").setLevel(logging.WARNING)   # aiosmtpd's chatter
    try:
        return asyncio.run(serve(settings, args, logger))
    except DaemonError as error:
        return exit_on_config_error(PROG, error)
    except Exception as error:      # the store cannot be opened, and the like
        print(f"{PROG}: {type(error).__name__}: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":      # pragma: no cover
    sys.exit(main())
