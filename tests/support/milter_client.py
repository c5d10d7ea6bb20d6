"""The MTA side of one milter connection, as Postfix speaks it (the pure-Python
``miltertest`` package), honouring the negotiated skip (SMFIP_NO*) and no-reply (SMFIP_NR_*)
flags."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterable, Sequence

from miltertest import MilterConnection
from miltertest import constants as C

Reply = tuple[str, dict]
FINAL_REPLIES = frozenset((C.SMFIR_ACCEPT, C.SMFIR_CONTINUE, C.SMFIR_REJECT, C.SMFIR_TEMPFAIL,
                           C.SMFIR_REPLYCODE, C.SMFIR_DISCARD))


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
