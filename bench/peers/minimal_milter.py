"""Reference peer for bench/milter_load.py: the least a pymilter milter can do.

Usage: python minimal_milter.py SOCKET        (a libmilter spec: unix:/path or inet:PORT@HOST)

It collects the envelope, the headers and the body the way dupfilter-milter does (no reply
to those events) and adds one header at end of message, and nothing else: no parsing, no
store, no log line.  What Postfix loses with it is what the milter protocol and pymilter
cost on the machine; dupfilter-milter's own share is the difference.
"""

from __future__ import annotations

import sys

import Milter


class MinimalMilter(Milter.Base):
    """One MTA connection: keep what arrives, tag at the end."""

    def __init__(self) -> None:
        self.recipients: list[str] = []
        self.headers: list[tuple[str, bytes]] = []
        self.chunks: list[bytes] = []

    @Milter.noreply
    def envfrom(self, mailfrom: str, *params: str) -> int:
        self.recipients, self.headers, self.chunks = [], [], []
        return Milter.CONTINUE

    @Milter.noreply
    def envrcpt(self, to: str, *params: str) -> int:
        self.recipients.append(to)
        return Milter.CONTINUE

    @Milter.noreply
    @Milter.decode("bytes")
    def header(self, name: str, value: bytes) -> int:
        self.headers.append((name, value))
        return Milter.CONTINUE

    @Milter.noreply
    def eoh(self) -> int:
        return Milter.CONTINUE

    @Milter.noreply
    def body(self, chunk: bytes) -> int:
        self.chunks.append(chunk)
        return Milter.CONTINUE

    def eom(self) -> int:
        self.addheader("X-Reference", "seen")
        return Milter.ACCEPT


def main(socket_spec: str) -> None:
    Milter.factory = MinimalMilter
    Milter.set_flags(Milter.ADDHDRS)
    Milter.runmilter("minimal-milter", socket_spec, 60)


if __name__ == "__main__":
    main(sys.argv[1])
