"""dupfilter-smtpd's SMTP server side: aiosmtpd's :class:`~aiosmtpd.smtp.SMTP` with what
a content filter needs.  Every override of aiosmtpd's private methods is here, and nowhere
else (aiosmtpd is pinned to its major version in pyproject.toml):

* ``_create_envelope``: a :class:`RelayEnvelope`, and the next-hop transaction of the old
  one given up (RSET, HELO/EHLO, end of DATA, a size error);
* ``push``: replies to pipelined commands held and sent together; aiosmtpd's size-limit
  replies with an enhanced status code;
* ``_getaddr``: a fast path for plain ``<local@domain>`` (else aiosmtpd's own parser);
* ``_reset_timeout``: the idle timeout pushed back without a new timer per command;
* ``smtp_DATA``: the message read in a few large pieces, not line by line;
* ``smtp_XFORWARD``: Postfix's XFORWARD (the original client).

tests/test_smtpd.py checks DATA and address parsing against stock aiosmtpd.
"""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING, Any

from aiosmtpd.smtp import MISSING, SMTP, Envelope, syntax

from mailfilter.logs import SMTPD_REFUSED_LINE, Outcome
from mailfilter.names import Action

if TYPE_CHECKING:
    from mailfilter.smtpd.lifecycle import Lifecycle
    from mailfilter.smtpd.nexthop import Relay

# XFORWARD attributes we accept from Postfix and pass on (when the next hop offers them).
XFORWARD_ATTRIBUTES = ("NAME", "ADDR", "PORT", "PROTO", "HELO", "IDENT", "SOURCE")
# A plain <local@domain> path (no quotes, route, literal or comment): parsed without the
# email package; anything else goes to aiosmtpd's own parser.
_ATOM = r"[^\x00-\x20\x7f<>()\[\]\\,;:@\".]+"
_PLAIN_PATH = re.compile(rf"<({_ATOM}(?:\.{_ATOM})*@{_ATOM}(?:\.{_ATOM})*)>(?:[ \t]+(.*))?",
                         re.DOTALL)
# The dot a client added to a line of DATA that starts with one (RFC 5321, 4.5.2): after
# CRLF, as aiosmtpd removes it; after a bare LF only before a second dot (see smtp_DATA).
_STUFFED_DOT = re.compile(rb"(?:^|(?<=\r\n))\.|(?<=\n)(?<!\r\n)\.(?=\.)")
_ROUND = 65536


def _without_stuffed_dots(data: bytes) -> bytes:
    """``data`` less the dots :data:`_STUFFED_DOT` finds, 64 KiB at a time: one
    substitution over all of it kept an object for each of a million dot lines (300 MB
    for 4 MiB).  (Each round's search sees the bytes before it, as the look-behinds
    need, and one byte after it, as the look-ahead does.)"""
    if not (data.startswith(b".") or b"\n." in data):
        return data
    rounds = []
    for start in range(0, len(data), _ROUND):
        end = min(start + _ROUND, len(data))
        pieces, last = [], start
        for dot in _STUFFED_DOT.finditer(data, start, end + 1):
            if dot.start() >= end:
                break
            pieces.append(data[last:dot.start()])
            last = dot.end()
        pieces.append(data[last:end])
        rounds.append(b"".join(pieces))
    return b"".join(rounds)


# aiosmtpd's own replies that deserve an enhanced status code.
_REWRITES = {
    "552 Error: Too much mail data":
        "552 5.3.4 Message size exceeds fixed limit",
    "552 Error: message size exceeds fixed maximum message size":
        "552 5.3.4 Message size exceeds fixed maximum message size",
}


def peer(session: Any) -> str | None:
    """The client's address of an aiosmtpd session, for the log."""
    address = getattr(session, "peer", None)
    if isinstance(address, tuple) and address:
        return str(address[0])
    return None if address is None else str(address)


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

    def __init__(self, handler: Any, life: Lifecycle, **kwargs: Any) -> None:
        # Accept long lines (and bare-LF messages, which look like one long line) up to
        # the size limit: the next hop decides, we pass them on.
        limit = kwargs.get("data_size_limit") or 1 << 26
        self.line_length_limit = max(1001, min(limit + 8, 1 << 26))
        self.life = life
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
        self.life.sessions.add(self)

    def connection_lost(self, error: Exception | None) -> None:
        self.life.sessions.discard(self)
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
                self.life.outcomes.log(Outcome(
                    SMTPD_REFUSED_LINE, action=Action.REFUSED, client=peer(self.session),
                    refused_for="size", limit=self.data_size_limit, reply=552))
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
        removed from lines that start with one, the handler's DATA hook.  The message ends
        only at CRLF "." CRLF (a bare-LF "." line cannot end it: no SMTP smuggling).

        Lines that end in a bare LF (not RFC 5321, but Python's smtplib sends them, and
        dot-stuffs after each LF) are lines: the handler passes them on with CRLF.  After a
        bare LF one leading dot is removed only when the line starts with two: a client
        that stuffs such lines doubled every leading dot, so "..x" was ".x" and ".."
        was "."; a single dot there was not stuffed and stays.  aiosmtpd reads only CRLF
        lines and would pass "..x" on, for the next hop to deliver as "..x" (issue 14).
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
        data = _without_stuffed_dots(b"".join(parts))
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
