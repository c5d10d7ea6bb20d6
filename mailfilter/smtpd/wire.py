"""dupfilter-smtpd's wire format: SMTP replies, and message bytes as they go to the next
hop (CRLF lines, dot-stuffed after DATA).  Pure functions, no I/O."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mailfilter.headers import BARE_LF

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


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


def to_crlf(data: bytes) -> bytes:
    """Message bytes with every line ending in CRLF (a bare LF becomes CRLF).

    RFC 5321 knows no other line end; this way a bare-LF ``.`` line cannot end the message
    early at a next hop that takes bare LF for a line end.
    """
    if b"\n" in data and BARE_LF.search(data):
        # (Two C passes: a substitution kept an object for each of a crafted message's
        # millions of bare LFs, 360 MB for 4 MiB.)
        data = data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
    if data and not data.endswith(b"\r\n"):
        data += b"\r\n"
    return data


def dot_stuff(message: bytes) -> bytes:
    """A CRLF message → DATA payload: lines starting with ``.`` doubled, final ``.``."""
    if message.startswith(b"."):
        message = b"." + message
    # (Every line start but the first follows an LF: one C pass, not a substitution that
    # kept an object for each of a million dot lines, 300 MB for 4 MiB.)
    return message.replace(b"\n.", b"\n..") + b".\r\n"


def envelope_path(address: str) -> bytes:
    """An envelope address as aiosmtpd gave it (``<>`` for the null sender) → ``<...>``."""
    if address in ("", "<>"):
        return b"<>"
    return b"<" + address.encode("utf-8", "surrogateescape") + b">"
