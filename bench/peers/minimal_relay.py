"""Reference peer for bench/smtpd_load.py: the least an aiosmtpd content filter can do.

Usage: python minimal_relay.py LISTEN_PORT NEXT_HOP_PORT     (both on 127.0.0.1)

It takes each message over SMTP with aiosmtpd, as dupfilter-smtpd does, and passes it on
to the next hop over kept-open connections (MAIL, RCPT and DATA sent in one write, as
PIPELINING allows; the content dot-stuffed), answering with the next hop's reply.  No
parsing, no store, no log line, no per-recipient relaying: what Postfix's loop loses with
it is what an SMTP filter in Python costs the machine at the least; dupfilter-smtpd's own
share is the difference (the SMTP-filter counterpart of minimal_milter.py).
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections import deque
from typing import Any

from aiosmtpd.smtp import SMTP, Envelope


class NextHop:
    """Idle connections to the next hop, opened as needed and kept."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.idle: deque[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = deque()

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        await _reply(reader)                                    # greeting
        writer.write(b"EHLO minimal-relay\r\n")
        await _reply(reader)
        return reader, writer

    async def send(self, sender: str, recipients: list[str], content: bytes) -> bytes:
        """Relay one message; the next hop's final reply line (without CRLF)."""
        reader, writer = self.idle.popleft() if self.idle else await self._open()
        commands = [f"MAIL FROM:<{sender}>\r\n".encode()]
        commands += [f"RCPT TO:<{rcpt}>\r\n".encode() for rcpt in recipients]
        commands.append(b"DATA\r\n")
        writer.write(b"".join(commands))
        replies = [await _reply(reader) for _ in commands]
        if not replies[-1].startswith(b"354"):
            writer.write(b"RSET\r\n")
            await _reply(reader)
            self.idle.append((reader, writer))
            return b"451 4.3.0 next hop refused the message"
        if not content.endswith(b"\r\n"):
            content += b"\r\n"
        if content.startswith(b"."):
            content = b"." + content
        writer.write(content.replace(b"\r\n.", b"\r\n..") + b".\r\n")
        final = await _reply(reader)
        self.idle.append((reader, writer))
        return final


async def _reply(reader: asyncio.StreamReader) -> bytes:
    """One SMTP reply (its last line)."""
    while True:
        line = await reader.readline()
        if not line:
            raise ConnectionError("next hop closed the connection")
        if line[3:4] != b"-":
            return line.rstrip(b"\r\n")


class Handler:
    def __init__(self, next_hop: NextHop) -> None:
        self.next_hop = next_hop

    async def handle_DATA(self, server: Any, session: Any, envelope: Envelope) -> str:
        try:
            final = await self.next_hop.send(envelope.mail_from, envelope.rcpt_tos,
                                             envelope.original_content or b"")
        except (OSError, ConnectionError):
            return "451 4.3.0 next hop unavailable"
        return final.decode("ascii", "replace")


async def main(listen: int, next_port: int) -> None:
    handler = Handler(NextHop(next_port))
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: SMTP(handler, hostname="minimal-relay"),
                                      "127.0.0.1", listen)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    async with server:
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))
