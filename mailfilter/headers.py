"""The one header dupfilter writes, and removing any copy of it that came from outside."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from mailfilter.store import safe_message_id
from mailfilter.values import Fields

if TYPE_CHECKING:
    from mailfilter.detector import Verdict

HEADER_NAME = "X-Dupfilter"
_OURS = re.compile(rb"x-dupfilter[ \t]*:", re.IGNORECASE)
_UNSAFE = re.compile(r"[\r\n\x00]")
BARE_LF = re.compile(rb"(?<!\r)\n")  # an LF with no CR before it (also smtpd.wire.to_crlf)
# The lines at the top of a message that go above our header: an mbox "From " line, then
# lines with leading white space.  (Each with its LF: a CRLF header has none without a CR.)
_ENVELOPE = re.compile(rb"(?:From [^\n]*+(?:\n|\Z))?(?:[ \t][^\n]*+(?:\n|\Z))*+")


def clean_value(value: str) -> str:
    """A header value that cannot break the header block (no CR, LF or NUL)."""
    return _UNSAFE.sub(" ", value)


_UNSAFE_NAME = re.compile(r'[\x00-\x1f\x7f";\\]')


def _safe_name(name: str) -> str:
    """A file name fit for a header value: no quotes, controls or ';', bounded."""
    return _UNSAFE_NAME.sub("_", name)[:80] or "(no name)"


def verdict_value(verdict: Verdict) -> str:
    """The ``X-Dupfilter:`` value of a verdict: kind; score; reason; match; seen, and the
    allow rule or attachment when there is one (no CR/LF)."""
    parts = [verdict.kind.value]
    if verdict.skipped_by:
        parts.append(f"skipped={verdict.skipped_by}")
    if verdict.is_duplicate:
        parts.append(f"score={verdict.score:.2f}" if verdict.score is not None
                     else "score=1.00")
        parts.append(f"reason={verdict.measure}")
        match_id = safe_message_id(verdict.match.message_id if verdict.match else None)
        if match_id:
            parts.append(f"match=<{match_id.strip('<>')}>")
        parts.append(f"seen={verdict.seen}")
        if verdict.attachment is not None:
            parts.append(f"attachment=\"{_safe_name(verdict.attachment.name)}\" "
                         f"({verdict.attachment.size} bytes)")
    if verdict.exempted_by:
        parts.append(f"rule={verdict.exempted_by}")
    return clean_value("; ".join(parts))


def partial_value(verdict: Verdict, had: int, recipients: int) -> str:
    """The ``X-Dupfilter:`` value of a duplicate that only ``had`` of the message's
    ``recipients`` had before: ``partial; rcpts_seen=1/2; verdict=duplicate; …``.  It must
    not start with ``duplicate`` or ``near-duplicate``: the documented recipes file those
    away, and the one copy the MTA delivers to every recipient would be filed away for
    those who never had it."""
    return clean_value(f"partial; rcpts_seen={had}/{recipients}; verdict="
                       + verdict_value(verdict))


class _Split(Fields):
    """A message taken apart around its header, with incoming ``X-Dupfilter:`` fields out."""

    __slots__ = ("newline", "envelope", "kept", "removed", "body", "open_end", "cr_first")

    def __init__(
        self,
        newline: bytes,         # the message's line end: CRLF or LF, as its first line ends
        # (LF for a message whose first line ends in CRLF but whose header has a bare LF:
        # its lines are split at LF, and keep their CRs)
        envelope: list[bytes],  # an mbox ``From `` line, if the message starts with one,
        #                         and lines with leading white space right after it (or at
        #                         the top)
        kept: list[bytes],      # the other header lines, in order (without line ends)
        removed: int,           # lines taken out (fields and their folded continuations)
        body: bytes,            # the blank line and the body, verbatim
        open_end: bool,         # no header/body separator and no final line end
        cr_first: bool = False,  # read by LF although the first line ends in CRLF
    ) -> None:
        self.newline = newline
        self.envelope = envelope
        self.kept = kept
        self.removed = removed
        self.body = body
        self.open_end = open_end
        self.cr_first = cr_first


def _split(raw: bytes) -> _Split:
    """The one place that finds incoming ``X-Dupfilter:`` fields (and their folded lines).

    The header ends at the first empty line; nothing after it is looked at.
    """
    first_end = raw.find(b"\n")
    newline = b"\r\n" if first_end > 0 and raw[first_end - 1:first_end] == b"\r" else b"\n"
    header_end = raw.find(newline + newline)
    cr_first = False
    if newline == b"\r\n" and BARE_LF.search(raw, 0, len(raw) if header_end < 0
                                               else header_end):
        # A bare LF in the header of a CRLF message (mixed line ends) ends a line for mail
        # readers, for ``parse`` and for the SMTP filter's CRLF rewriting: split at LF then
        # (the lines keep their CRs), or a field after it is not seen (a forged one stays),
        # a bare-LF blank line is not the end of the header (a field removed takes the
        # body with it), and our header may land below such a blank line.
        newline, cr_first = b"\n", True
        header_end = raw.find(b"\n\n")
    head, body = (raw, b"") if header_end < 0 else (raw[:header_end + len(newline)],
                                                      raw[header_end + len(newline):])
    # An mbox ``From `` line, then folded lines that continue no field: our header goes
    # below them, or they would become its continuation lines (and be removed with it on
    # the next hop).  (Kept as one piece, found by one pattern: a list of lines popped at
    # its head took 5 s for 260,000 such lines.)
    start = _ENVELOPE.match(head).end()         # type: ignore[union-attr]
    envelope = [head[:start].removesuffix(newline)] if start else []
    kept: list[bytes] = []
    removed = 0
    if start < len(head) and _OURS.search(head, start) is None:
        # No field of ours anywhere: the other lines as they are, in one piece (a header
        # of a million lines is not made a million objects).
        kept.append(head[start:len(head) - len(newline)] if head.endswith(newline)
                    else head[start:])
    elif start < len(head):
        lines = head[start:].split(newline)
        if lines[-1] == b"":
            lines.pop()
        dropping = in_body = False
        for line in lines:
            if in_body or line in (b"", b"\r"):
                # An empty line before the separator found above (a message without
                # header, or mixed line ends): the body starts here and is kept as it is.
                in_body = True
                kept.append(line)
                continue
            if dropping and line[:1] in (b" ", b"\t"):
                removed += 1
                continue
            dropping = bool(_OURS.match(line))
            if dropping:
                removed += 1
            else:
                kept.append(line)
    open_end = header_end < 0 and bool(raw) and not raw.endswith(newline)
    return _Split(newline, envelope, kept, removed, body, open_end, cr_first)


def tag_message(raw: bytes, value: str) -> bytes:
    """``raw`` with every incoming ``X-Dupfilter:`` (and its folded lines) removed and one
    ``X-Dupfilter: value`` added at the top of the header, after any mbox ``From `` line
    (and any folded lines that continue no field).

    The line ending of the message (CRLF or LF, as its first line ends) is kept.
    """
    parts = _split(raw)
    newline = parts.newline
    ours = f"{HEADER_NAME}: {clean_value(value)}".encode("utf-8", "replace")
    if parts.cr_first:
        ours += b"\r"
    if parts.open_end:
        # No header/body separator: everything was header-like text; keep it verbatim.
        return newline.join(parts.envelope + [ours]) + newline + newline.join(parts.kept)
    return newline.join(parts.envelope + [ours] + parts.kept) + newline + parts.body


def remove_ours(raw: bytes) -> bytes:
    """``raw`` with every incoming ``X-Dupfilter:`` (and its folded lines) removed and
    nothing added: for a message passed on without a verdict of ours.

    A message without such a field comes back as it is (the very same bytes); otherwise
    only those lines go, and every other byte is kept.
    """
    parts = _split(raw)
    if not parts.removed:
        return raw
    lines = parts.envelope + parts.kept
    if parts.open_end:
        return parts.newline.join(lines)
    return (parts.newline.join(lines) + parts.newline if lines else b"") + parts.body


def pass_through(raw: bytes) -> tuple[bytes, BaseException | None]:
    """``remove_ours(raw)``, or ``raw`` unchanged if that fails for any reason, with the
    error: a front end passing a message on unchecked must never lose it over this."""
    try:
        return remove_ours(raw), None
    except BaseException as error:  # noqa: BLE001 - even MemoryError, KeyboardInterrupt
        return raw, error
