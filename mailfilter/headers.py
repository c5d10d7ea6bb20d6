"""The one header dupfilter writes, and removing any copy of it that came from outside."""

from __future__ import annotations

import re

HEADER_NAME = "X-Dupfilter"
_OURS = re.compile(rb"x-dupfilter[ \t]*:", re.IGNORECASE)
_UNSAFE = re.compile(r"[\r\n\x00]")


def clean_value(value: str) -> str:
    """A header value that cannot break the header block (no CR, LF or NUL)."""
    return _UNSAFE.sub(" ", value)


def tag_message(raw: bytes, value: str) -> bytes:
    """``raw`` with every incoming ``X-Dupfilter:`` (and its folded lines) removed and one
    ``X-Dupfilter: value`` added at the top of the header, after any mbox ``From `` line.

    The line ending of the message (CRLF or LF, as its first line ends) is kept.
    """
    first_end = raw.find(b"\n")
    newline = b"\r\n" if first_end > 0 and raw[first_end - 1:first_end] == b"\r" else b"\n"
    header_end = raw.find(newline + newline)
    head, body = (raw, b"") if header_end < 0 else (raw[:header_end + len(newline)],
                                                      raw[header_end + len(newline):])
    lines = head.split(newline)
    if lines and lines[-1] == b"":
        lines.pop()
    kept: list[bytes] = []
    envelope: list[bytes] = []
    if lines and lines[0].startswith(b"From "):
        envelope.append(lines.pop(0))
    dropping = False
    for line in lines:
        if dropping and line[:1] in (b" ", b"\t"):
            continue
        dropping = bool(_OURS.match(line))
        if not dropping:
            kept.append(line)
    ours = f"{HEADER_NAME}: {clean_value(value)}".encode("utf-8", "replace")
    rebuilt = newline.join(envelope + [ours] + kept) + newline
    if header_end < 0 and raw and not raw.endswith(newline):
        # No header/body separator: everything was header-like text; keep it verbatim.
        return newline.join(envelope + [ours]) + newline + newline.join(kept)
    return rebuilt + body
