"""dupfilter-smtpd's SMTP client: kept-open connections to the next hop, a bounded pool of
them, and one mail transaction relayed command by command (:class:`Relay`)."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Sequence

from mailfilter.smtpd.wire import Reply, dot_stuff, envelope_path, tempfail, upstream_reply

# Kept-open connections to the next hop (each holds one of its smtpd processes).
DEFAULT_CONNECTIONS = 10
# An idle next-hop connection is closed after this many seconds.
IDLE_SECONDS = 5.0
CONNECT_TIMEOUT = 30.0
# MAIL FROM parameters passed on to the next hop (aiosmtpd refuses any other).
FORWARDED_MAIL_PARAMETERS = ("SIZE", "BODY", "SMTPUTF8")


class NextHopError(Exception):
    """Talking to the next hop failed; the message was not passed on."""


class NextHopUnsure(NextHopError):
    """The connection failed after the final dot: the next hop may have the message."""


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
        self.mail_line = (b"MAIL FROM:" + envelope_path(sender)
                          + b"".join(b" " + p.encode("ascii", "replace") for p in params)
                          + b"\r\n")
        self.xforward = xforward
        self.conn: Connection | None = None
        self.accepted: list[str] = []       # recipients the next hop took
        self.failed: Reply | None = None    # the MAIL refusal or failure every RCPT gets

    @staticmethod
    def rcpt_line(address: str) -> bytes:
        return b"RCPT TO:" + envelope_path(address) + b"\r\n"

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
