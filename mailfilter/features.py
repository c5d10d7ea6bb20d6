"""What the detector knows of a message beyond its text: who sent it, which thread it
belongs to, what it quotes, its data (identifiers), its calendar event and its attachments.

These decide whether two messages that *look* alike are one message twice or two messages
(see mailfilter/rules/).  A record keeps them as one small opaque field
(``Record.features``, encoded here, ~60–300 bytes); the store never reads it.  Pure
functions, no I/O.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import xxhash

FORMAT_VERSION = 1
# Attachments smaller than this (signature logos, vCards) never decide anything.
MIN_ATTACHMENT_BYTES = 1024
MAX_ATTACHMENTS = 8
MAX_THREAD_KEYS = 6
MAX_FORWARDED = 4
_NAME_MAX = 60
# A record keeps at most this much of them (the store's limit, store.FEATURES_MAX).
ENCODED_MAX = 1024
_HEAD = struct.Struct(">BBQQQQQQIQQIB")
_ATTACHMENT = struct.Struct(">QIB")
_BITS_BYTES = 128       # identifiers.IDENTIFIER_BITS // 8


def key64(text: str | bytes | None) -> int:
    """64-bit key of a string (0 for nothing)."""
    if not text:
        return 0
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    return xxhash.xxh3_64_intdigest(data) or 1


@dataclass(frozen=True, slots=True)
class AttachmentSummary:
    """One attachment worth naming: its digest, size and file name."""

    digest: int          # xxh3-64 of its decoded bytes
    size: int            # decoded bytes
    name: str            # file name as sent ("" when it has none)


@dataclass(frozen=True, slots=True)
class CalendarSummary:
    """The iCalendar content of a message (see mailfilter/calendar.py)."""

    key: int             # every event's identity, sequence, times and responses
    uid: int             # key64 of the first event's UID
    sequence: int        # the first event's SEQUENCE
    method: str          # REQUEST, CANCEL, REPLY, …


@dataclass(frozen=True, slots=True)
class Features:
    """Everything the pair rules compare besides text measures."""

    sender: int = 0                  # key64 of the From address, lower case
    sender_name: int = 0             # key64 of the From display name ("X via list": X)
    sender_domain: int = 0           # key64 of its registrable domain
    subject: int = 0                 # key64 of the subject without Re:/Fwd:/[tags]
    thread: tuple[int, ...] = ()     # key64 of In-Reply-To and References ids
    quoted: int = 0                  # key64 of the quoted text, folded (0: none)
    identifiers: tuple[int, ...] = ()   # identifier hashes, when few (identifiers.py)
    identifier_bits: bytes = b""        # else their 1024-bit map
    calendar: CalendarSummary | None = None
    attachments: tuple[AttachmentSummary, ...] = ()
    attachment_bytes: int = 0        # decoded bytes of all non-calendar attachments
    text_bytes: int = 0              # bytes of the whole decoded text (quotes included)
    automated: bool = False          # sent by a program (message.Message.automated)
    is_reply: bool = False           # answers a message (In-Reply-To, or a Re: subject)
    forwarded_from: tuple[int, ...] = ()   # key64 of the names and addresses it forwards

    @property
    def attachment_share(self) -> float:
        """Share of the message's decoded bytes that its attachments make up."""
        total = self.attachment_bytes + self.text_bytes
        return self.attachment_bytes / total if total else 0.0

    def encode(self) -> bytes:
        calendar = self.calendar
        flags = (1 if self.identifier_bits else 0) | (2 if calendar else 0) | \
            (4 if self.automated else 0) | (8 if self.is_reply else 0) | \
            (16 if self.forwarded_from else 0)
        method = (calendar.method.encode("ascii", "replace")[:16] if calendar else b"")
        parts = [
            _HEAD.pack(FORMAT_VERSION, flags, self.sender, self.sender_name,
                       self.sender_domain, self.subject,
                       self.quoted, calendar.key if calendar else 0,
                       min(calendar.sequence, 0xFFFFFFFF) if calendar else 0,
                       calendar.uid if calendar else 0, self.attachment_bytes,
                       min(self.text_bytes, 0xFFFFFFFF), len(method)),
            method,
            struct.pack(f">B{min(len(self.thread), MAX_THREAD_KEYS)}Q",
                        min(len(self.thread), MAX_THREAD_KEYS),
                        *self.thread[:MAX_THREAD_KEYS]),
            struct.pack(f">B{len(self.identifiers)}I", len(self.identifiers),
                        *self.identifiers),
            self.identifier_bits,
            struct.pack(">B", min(len(self.attachments), MAX_ATTACHMENTS)),
        ]
        for attachment in self.attachments[:MAX_ATTACHMENTS]:
            # The first _NAME_MAX bytes, cut between characters (never half of one).
            name = attachment.name.encode("utf-8", "replace")[:_NAME_MAX] \
                .decode("utf-8", "ignore").encode("utf-8")
            parts.append(_ATTACHMENT.pack(attachment.digest, min(attachment.size, 0xFFFFFFFF),
                                          len(name)))
            parts.append(name)
        if self.forwarded_from:
            writers = self.forwarded_from[:MAX_FORWARDED]
            parts.append(struct.pack(f">B{len(writers)}Q", len(writers), *writers))
        return b"".join(parts)

    @classmethod
    def decode(cls, data: bytes) -> Features:
        """The features in ``data``; empty features for records made before they existed
        (or of a format this version does not know)."""
        if not data or data[0] != FORMAT_VERSION:
            return EMPTY
        (_version, flags, sender, sender_name, sender_domain, subject, quoted, calendar_key,
         sequence, uid,
         attachment_bytes, text_bytes, method_length) = _HEAD.unpack_from(data, 0)
        offset = _HEAD.size
        method = data[offset:offset + method_length].decode("ascii", "replace")
        offset += method_length
        count = data[offset]
        thread = struct.unpack_from(f">{count}Q", data, offset + 1)
        offset += 1 + 8 * count
        count = data[offset]
        identifiers = struct.unpack_from(f">{count}I", data, offset + 1)
        offset += 1 + 4 * count
        identifier_bits = b""
        if flags & 1:
            identifier_bits = bytes(data[offset:offset + _BITS_BYTES])
            offset += _BITS_BYTES
        count = data[offset]
        offset += 1
        attachments = []
        for _ in range(count):
            digest, size, name_length = _ATTACHMENT.unpack_from(data, offset)
            offset += _ATTACHMENT.size
            name = data[offset:offset + name_length].decode("utf-8", "replace")
            offset += name_length
            attachments.append(AttachmentSummary(digest, size, name))
        forwarded_from: tuple[int, ...] = ()
        if flags & 16:
            count = data[offset]
            forwarded_from = struct.unpack_from(f">{count}Q", data, offset + 1)
        calendar = CalendarSummary(calendar_key, uid, sequence, method) if flags & 2 else None
        return cls(sender, sender_name, sender_domain, subject, thread, quoted, identifiers,
                   identifier_bits, calendar, tuple(attachments), attachment_bytes,
                   text_bytes, bool(flags & 4), bool(flags & 8), forwarded_from)


EMPTY = Features()
