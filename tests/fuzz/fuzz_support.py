"""What the fuzz harnesses share (no atheris here: the pytest side imports it too)."""

from __future__ import annotations


def body_after_separator(raw: bytes) -> bytes | None:
    """Everything after the first empty line of ``raw``, or None if it has none.

    An empty line is one with nothing before its LF but, at most, a CR: ``parse`` reads
    CRLF as LF, so ``\\n\\n``, ``\\n\\r\\n`` and a message starting ``\\n`` or ``\\r\\n`` all
    end the header there.
    """
    if raw.startswith(b"\n"):
        return raw[1:]
    if raw.startswith(b"\r\n"):
        return raw[2:]
    found = [(at, at + 2) for at in (raw.find(b"\n\n"),) if at >= 0]
    found += [(at, at + 3) for at in (raw.find(b"\n\r\n"),) if at >= 0]
    return raw[min(found)[1]:] if found else None
