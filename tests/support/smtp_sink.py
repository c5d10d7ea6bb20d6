"""One SMTP server for the tests: the sink behind a private Postfix, and the scriptable next
hop of dupfilter-smtpd.

It runs its own event loop in a thread, keeps (or only counts) what it receives, and can be
told to refuse, stall or hang up at any step of a transaction.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Delivery:
    """One delivered copy: where it went, envelope, and the bytes as delivered."""

    where: str                       # "sink" or "maildir"
    sender: str
    recipients: tuple[str, ...]
    data: bytes                      # the message (dot-stuffing undone)
    received: float = 0.0            # time.monotonic() at the sink's 250 (0: unknown)
    # As the sink saw it on the wire:
    mail: bytes = b""                # the MAIL FROM line
    xforward: tuple[bytes, ...] = ()  # XFORWARD lines
    wire: bytes = b""                # DATA payload (dot-stuffed, no final ".") or BDAT
    connection: int = 0              # which connection (1, 2, ...)
    bdat: bool = False

    def header(self, name: str) -> list[str]:
        """Values of every ``name:`` header of the delivered copy (unfolded)."""
        head = self.data.split(b"\r\n\r\n", 1)[0].split(b"\n\n", 1)[0]
        text = re.sub(r"\r?\n[ \t]+", " ", head.decode("utf-8", "replace"))
        prefix = name.lower() + ":"
        return [line[len(prefix):].strip() for line in text.splitlines()
                if line.lower().startswith(prefix)]


@dataclass
class SmtpSink:
    """An asyncio SMTP server on loopback.

    Offers PIPELINING, 8BITMIME and SMTPUTF8 so that Postfix relays anything to it, and on
    request XFORWARD (the attributes named) and CHUNKING (BDAT).  The knobs script
    failures: a reply to MAIL, to given recipients or to the final dot, a delay before that
    reply, hanging up at DATA, after RCPT or after the dot, or at the command after a
    message.  ``messages``, ``count`` and ``commands`` are safe to read from tests.
    """

    host: str = "127.0.0.1"
    port: int = 0
    keep: bool = True                                   # keep messages, or only count
    chunking: bool = False                              # offer CHUNKING (BDAT)
    xforward: str | None = None                         # offer XFORWARD with these
    mail_reply: str | None = None                       # e.g. "553 5.1.8 bad sender"
    rcpt_replies: dict[str, str] = field(default_factory=dict)   # by lowercase address
    data_reply: str | None = None                       # reply to the final dot
    data_delay: float = 0.0
    close_at_data: int = 0          # hang up on the next N DATA (or BDAT) commands
    close_after_rcpt: int = 0       # hang up after answering the next N RCPT commands
    close_after_dot: int = 0        # hang up on the next N final dots, without replying
    stale_after_message: bool = False   # after a message, hang up at the next command
    messages: list[Delivery] = field(default_factory=list)
    commands: list[bytes] = field(default_factory=list)
    count: int = 0                  # messages accepted
    recipient_count: int = 0        # recipients accepted, over all messages
    connections: int = 0
    started_data: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._lock = threading.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> SmtpSink:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            server = loop.run_until_complete(
                asyncio.start_server(self._session, self.host, self.port, backlog=256))
            self.port = server.sockets[0].getsockname()[1]
            ready.set()
            loop.run_forever()
            server.close()
            loop.run_until_complete(server.wait_closed())
            loop.close()

        self._thread = threading.Thread(target=run, name="smtp-sink", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("SMTP sink did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop = None

    def reset(self) -> None:
        with self._lock:
            self.messages.clear()
            self.count = self.recipient_count = 0

    def wait(self, count: int, timeout: float = 10.0) -> bool:
        """Wait until at least ``count`` messages arrived in total."""
        with self._lock:
            return self._lock.wait_for(lambda: self.count >= count, timeout)

    def received(self, count: int, timeout: float = 10.0) -> list[Delivery]:
        """The messages kept, once there are ``count`` (or ``timeout`` passed)."""
        self.wait(count, timeout)
        with self._lock:
            return list(self.messages)

    async def _session(self, reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        mail, sender, rcpts, xforward, stale = b"", "", [], [], False

        def say(line: str) -> None:
            writer.write(line.encode("utf-8") + b"\r\n")

        try:
            say("220 sink.test ESMTP")
            await writer.drain()
            while True:
                line = await reader.readline()
                if not line:
                    return
                self.commands.append(line)
                if stale:
                    return
                verb = line[:4].upper()
                if verb == b"EHLO":
                    extensions = ["sink.test", "PIPELINING", "SIZE 104857600", "8BITMIME",
                                  "SMTPUTF8"]
                    if self.xforward:
                        extensions.append(f"XFORWARD {self.xforward}")
                    if self.chunking:
                        extensions.append("CHUNKING")
                    for extension in extensions:
                        say(f"250-{extension}")
                    say("250 ENHANCEDSTATUSCODES")
                elif verb == b"HELO":
                    say("250 sink.test")
                elif verb == b"XFOR":
                    xforward.append(line)
                    say("250 2.0.0 Ok")
                elif verb == b"MAIL":
                    mail, sender, rcpts = line.rstrip(b"\r\n"), _address(line), []
                    say(self.mail_reply or "250 2.1.0 Ok")
                elif verb == b"RCPT":
                    address = _address(line)
                    reply = self.rcpt_replies.get(address.lower())
                    if reply is None:
                        rcpts.append(address)
                    say(reply or "250 2.1.5 Ok")
                    if self.close_after_rcpt:
                        self.close_after_rcpt -= 1
                        await writer.drain()
                        return
                elif verb in (b"DATA", b"BDAT"):
                    if verb == b"BDAT":
                        assert self.chunking and line.rstrip().upper().endswith(b" LAST")
                        chunks = [await reader.readexactly(int(line.split()[1]))]
                    if self.close_at_data:
                        self.close_at_data -= 1
                        return
                    if not rcpts or self.mail_reply:
                        say("554 5.5.1 Error: no valid recipients")
                        await writer.drain()
                        continue
                    if verb == b"DATA":
                        say("354 End data with <CR><LF>.<CR><LF>")
                        await writer.drain()
                        chunks = []
                        self.started_data.set()
                        while (chunk := await reader.readline()) != b".\r\n":
                            if not chunk:
                                return
                            chunks.append(chunk)
                    self.started_data.set()
                    if self.data_delay:
                        await asyncio.sleep(self.data_delay)
                    if self.close_after_dot:
                        self.close_after_dot -= 1
                        return
                    if self.data_reply:
                        say(self.data_reply)
                    else:
                        wire = b"".join(chunks)
                        data = wire if verb == b"BDAT" else b"".join(
                            chunk[1:] if chunk.startswith(b".") else chunk for chunk in chunks)
                        with self._lock:
                            self.count += 1
                            self.recipient_count += len(rcpts)
                            if self.keep:
                                self.messages.append(Delivery(
                                    "sink", sender, tuple(rcpts), data, time.monotonic(),
                                    mail, tuple(xforward), wire, number, verb == b"BDAT"))
                            queued = self.count
                            self._lock.notify_all()
                        say(f"250 2.0.0 Ok: queued as Q{queued}")
                    mail, sender, rcpts, xforward = b"", "", [], []
                    stale = self.stale_after_message
                elif verb == b"RSET":
                    mail, sender, rcpts, xforward = b"", "", [], []
                    say("250 2.0.0 Ok")
                elif verb == b"NOOP":
                    say("250 2.0.0 Ok")
                elif verb == b"QUIT":
                    say("221 2.0.0 Bye")
                    await writer.drain()
                    return
                else:
                    say("502 5.5.2 Error: command not recognized")
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()


def _address(line: bytes) -> str:
    text = line.decode("utf-8", "replace")
    found = re.search(r"<([^>]*)>", text)
    return found.group(1) if found else text.split(":", 1)[-1].strip()

