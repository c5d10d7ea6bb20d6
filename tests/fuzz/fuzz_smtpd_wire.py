#!/usr/bin/env python3
"""Coverage-guided fuzzing (atheris/libFuzzer) of what dupfilter-smtpd sends the next hop.

    python3 tests/fuzz/fuzz_smtpd_wire.py -runs=20000 -max_len=65536 [CORPUS_DIR]

Each input is a message as aiosmtpd hands it over (already un-dot-stuffed).  The filter
relays ``to_crlf(tag_message(raw, header))`` (tag) or ``to_crlf(pass_through(raw)[0])``
(accept, on_error), after DATA with ``dot_stuff``, or as is with ``BDAT n LAST``
(``mailfilter/smtpd/wire.py``).  Any exception escaping them is a finding, and so is a broken
invariant that a postmaster relies on, each one no more than the code itself promises:

* the payload has CRLF line ends only (no bare LF) and ends in CRLF, unless empty
  (``to_crlf``: "every line ending in CRLF"), so ``BDAT`` sends the same lines;
* the DATA bytes (``dot_stuff(payload)``, as ``Relay.deliver`` sends them) end with the
  one ``<CRLF>.<CRLF>`` terminator (for an empty payload ``.<CRLF>`` right after the DATA
  command's CRLF) and contain no earlier one;
  every line ends in CRLF; a server that un-dot-stuffs them (RFC 5321 4.5.2: the final
  ``.`` line goes, one leading dot of any other line goes) gets ``payload`` back exactly;
* a next hop that also takes a bare LF for a line end (``to_crlf``'s docstring promises
  "a bare-LF ``.`` line cannot end the message early" there) sees the same lines, the
  end at the same place.  Nothing is promised about a bare CR (RFC 5321 knows no such
  line end, and ``to_crlf`` leaves it alone), so that is not checked;
* the body of ``raw`` (after the first empty line, as ``parse`` finds it once CRLF is read
  as LF) ends the payload, with its bare LFs made CRLF and, if it did not end in CRLF, a
  CRLF after it: the documented conversion, nothing else;
* ``to_crlf(raw)`` itself obeys the same.

Seeds: see ``EDGE_CASES``; add real mail (the SpamAssassin corpus) to the corpus dir.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fuzz_support import body_after_separator  # noqa: E402

if __name__ == "__main__":
    import atheris

    with atheris.instrument_imports(include=["mailfilter"]):
        from mailfilter.headers import pass_through, tag_message
        from mailfilter.smtpd import wire as smtp_wire
else:
    from mailfilter.headers import pass_through, tag_message
    from mailfilter.smtpd import wire as smtp_wire

# Hand-made edge cases of the wire format (also run by tests/test_smtpd_wire.py).
EDGE_CASES: tuple[bytes, ...] = (
    b"",
    b".",
    b".\r\n",
    b".\n",
    b"..\r\n",
    b"\r\n.\r\n",
    b"\n.\n",
    b"Subject: dots\r\n\r\n.\r\n..\r\n...\r\n. \r\n.x\r\n",
    b"Subject: dots\n\n.\n..\n.\nend\n",
    b"Subject: lf dot crlf\r\n\r\nline\n.\r\nafter\r\n",
    b"Subject: cr dot\r\n\r\nline\r.\r\nafter\r\n",
    b"Subject: no final newline\r\n\r\nbody without newline",
    b"Subject: ends in dot\r\n\r\nlast line\r\n.",
    b"Subject: ends in lone cr\r\n\r\nbody\r",
    b"Subject: lone cr\r\n\r\na\rb\r\n\r",
    b"Subject: nul\r\n\r\na\x00b\r\n\x00.\r\n.\x00\r\n",
    b"Subject: cr cr lf\r\n\r\nline\r\r\n.\r\r\n..\r\r\n",
    b"Subject: x\r\r\n\r\nbody\r\n",
    b"\r\r\n.\r\r\n",
    b"\n\nbody after a blank first line\n.\n",
    b"\r\nbody after a blank first line\r\n.\r\n",
    b"From ann@example.org Mon Nov 30 10:00:00 2026\n\n.\nbody\n",
    b"X-Dupfilter: duplicate\r\nSubject: forged\r\n\r\n.\r\nbody\r\n",
    b"Subject: mixed\r\nX-Dupfilter: duplicate\n\n.\n\r\n.\r\n",
    b".Subject: dot header\r\n.\r\n\r\n.body\r\n",
    b"Subject: crlf dot at end\r\n\r\nbody\r\n.\r\n",
    b"Subject: lf then crlf\n\r\n.\r\n",
    b"\n.\r\n.\n\r.\r",
    b"\r.\r\n\n.\r\r\n.\n.",
)


def crlf_lines(data: bytes) -> bytes:
    """``data`` with every LF that has no CR before it made CRLF (written out byte by byte,
    not with the code under test).  A lone CR stays as it is."""
    out = bytearray()
    previous = -1
    for byte in data:
        if byte == 0x0A and previous != 0x0D:
            out += b"\r\n"
        else:
            out.append(byte)
        previous = byte
    return bytes(out)


def server_reads(wire: bytes, *, bare_lf: bool) -> bytes:
    """What a next hop stores of DATA bytes ``wire`` (RFC 5321 4.5.2), lines CRLF-ended.

    Lines end at CRLF; with ``bare_lf`` (a lenient server, Postfix's smtpd) at any LF, one
    CR before it dropped.  The first line that is just ``.`` ends the data: it must be the
    last of ``wire``.  One leading dot of any other line is removed.
    """
    if bare_lf:
        lines = wire.split(b"\n")
        lines = [line[:-1] if line.endswith(b"\r") else line for line in lines]
    else:
        lines = wire.split(b"\r\n")
    assert lines[-1] == b"", f"the DATA bytes do not end with a line end: {wire[-20:]!r}"
    lines.pop()
    assert b"." in lines, "no final '.' line"
    end = lines.index(b".")
    assert end == len(lines) - 1, \
        f"the data ends early, at line {end} of {len(lines)} (bare_lf={bare_lf})"
    lines.pop()
    return b"".join((line[1:] if line.startswith(b".") else line) + b"\r\n"
                    for line in lines)


def check_wire(payload: bytes, wire: bytes) -> None:
    """``wire`` is ``payload`` as DATA: one terminator, at the end; CRLF lines; undone,
    it gives ``payload`` back (also at a server that takes a bare LF for a line end)."""
    # The DATA command (or the 354 reply the client waited for) ended with CRLF: an empty
    # message is just ".\r\n".
    stream = b"\r\n" + wire
    assert stream.endswith(b"\r\n.\r\n"), f"no final CRLF.CRLF: {wire[-20:]!r}"
    early = stream.find(b"\r\n.\r\n")
    assert early == len(stream) - 5, f"an early CRLF.CRLF at {early - 2} of {len(wire)}"
    assert b"\n" not in wire.replace(b"\r\n", b""), "a bare LF on the wire"
    assert server_reads(wire, bare_lf=False) == payload, "un-dot-stuffing changes it"
    assert server_reads(wire, bare_lf=True) == payload, \
        "a server that takes bare LF for a line end reads something else"


def check_payload(payload: bytes, body: bytes | None, what: str) -> None:
    assert b"\n" not in payload.replace(b"\r\n", b""), f"{what}: a bare LF in the payload"
    assert not payload or payload.endswith(b"\r\n"), f"{what}: no final CRLF"
    assert smtp_wire.to_crlf(payload) == payload, f"{what}: to_crlf changes its own output"
    stuffed = smtp_wire.dot_stuff(payload)      # what Relay.deliver sends after DATA
    check_wire(payload, stuffed)
    if body is not None:
        kept = crlf_lines(body)
        if kept and not kept.endswith(b"\r\n"):
            kept += b"\r\n"
        assert payload.endswith(kept), f"{what}: the body is lost or changed"


def check(raw: bytes) -> None:
    """All the invariants on one message ``raw`` as aiosmtpd gives it."""
    body = body_after_separator(raw)
    passed, _ = pass_through(raw)
    check_payload(smtp_wire.to_crlf(passed), body, "untagged")
    check_payload(smtp_wire.to_crlf(tag_message(raw, "unique")), body, "tagged")
    check_payload(smtp_wire.to_crlf(raw), body, "raw")


def main() -> None:
    atheris.Setup(sys.argv, check)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
