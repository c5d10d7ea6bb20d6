"""What the detector knows of a message beyond its text: who sent it, which thread it
belongs to, what it quotes, its data (identifiers), its calendar event and its attachments.

These decide whether two messages that *look* alike are one message twice or two messages
(see mailfilter/rules/).  :func:`message_features` derives them from a parsed message; a
record keeps them as one small opaque field (``Record.features``, encoded here, ~60–300
bytes, at most the store's ``FEATURES_MAX``); the store never reads it.  Pure functions,
no I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING

import xxhash

from mailfilter.identifiers import (
    DIGIT,
    IDENTIFIER_BITS,
    identifier_summary,
    identifiers,
    subject_stem,
)
from mailfilter.normalise import bare_message_id, normal_subject, site_of
from mailfilter.store import FEATURES_MAX
from mailfilter.text import encoded, words_of
from mailfilter.values import Value, fill, init

if TYPE_CHECKING:
    from mailfilter.message import Message

__all__ = ["CALENDAR_TYPES", "DIGIT_WORD", "EMPTY", "FACT_WORD", "FACT_WORDS",
           "AttachmentSummary", "CalendarSummary", "Features", "is_calendar", "key64",
           "message_features", "message_id_key64", "name_key", "normal_subject",
           "registrable_domain", "word_keys"]

FORMAT_VERSION = 1
# Attachments smaller than this (signature logos, vCards) never decide anything.
MIN_ATTACHMENT_BYTES = 1024
MAX_ATTACHMENTS = 8
MAX_THREAD_KEYS = 6
MAX_FORWARDED = 4
# An attachment name is only shown (in explain's notes), never compared: 59 bytes of it
# keep the largest possible features, a tracker's event key included, in the store's
# FEATURES_MAX (1,024 bytes).
_NAME_MAX = 59
# A text of at most this many words keeps its words' keys (Features.words): two short
# texts of one sender a few words apart are compared word by word (rules/edited_copy.py),
# where five-word shingles see nothing (three edits in twenty words can leave no shingle in
# common).  At most 81 bytes; left out when the rest of the features leave no room in
# the store's FEATURES_MAX.
WORDS_MAX = 40
DIGIT_WORD = 0x8000     # a word key's top bit: the word holds a digit
FACT_WORD = 0x4000      # the next bit: the word is one of FACT_WORDS
_DIGITS = b"0123456789"
# Words that carry a fact as a number does: a negation ("don't" is read as "don" + "t"),
# a day or a month, a decision.  Two short notes of one writer that differ in one of
# them say different things ("the build is broken" / "… is not broken", "Thursday" /
# "Friday", "approved" / "rejected"): rules/facts.py.  ("may" is no month here: it is
# a verb first.)
FACT_WORDS = frozenset((
    "not", "no", "never", "t", "cannot", "nor", "neither", "none", "nothing", "nobody",
    "without", "nicht", "kein", "keine", "keinen", "nie", "niemals", "pas", "jamais",
    "nunca", "niet", "geen", "non", "nein",
    "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
    "mon", "tue", "tues", "wed", "thu", "thur", "thurs", "fri", "sat", "sun",
    "montag", "dienstag", "mittwoch", "donnerstag", "freitag", "samstag", "sonntag",
    "lundi", "mardi", "mercredi", "jeudi", "vendredi", "samedi", "dimanche",
    "lunes", "martes", "miércoles", "miercoles", "jueves", "viernes", "sábado", "sabado",
    "domingo", "today", "tomorrow", "yesterday", "tonight", "heute", "morgen", "gestern",
    "january", "february", "march", "april", "june", "july", "august", "september",
    "october", "november", "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug",
    "sep", "sept", "oct", "nov", "dec",
    "approved", "rejected", "accepted", "declined", "denied", "granted", "postponed",
    "cancelled", "canceled", "confirmed", "passed", "failed", "yes"))
_FACT_KEYS = FACT_WORDS | frozenset(word.encode("utf-8") for word in FACT_WORDS)
_HEAD = struct.Struct(">BBQQQQQQIQQIB")
_ATTACHMENT = struct.Struct(">QIB")
_BITS_BYTES = IDENTIFIER_BITS // 8
CALENDAR_TYPES = ("text/calendar", "application/ics", "text/x-vcalendar")


def word_keys(tokens: Sequence[str] | Sequence[bytes]) -> tuple[int, ...]:
    """The keys of a short text's words in order (:data:`WORDS_MAX` at most; () for a
    longer text, which the shingles judge).  A word's key: 12 bits of its xxh3 hash
    (enough to align two texts of 40 words; few enough that a stored key stands for one
    word in 4,096 of a dictionary, so a store does not spell out its short texts),
    :data:`DIGIT_WORD` set when the word holds a digit (tested per word only when the
    text holds one at all) and :data:`FACT_WORD` when it is one of :data:`FACT_WORDS` (a
    changed number, negation, day or decision is a changed fact, never wording)."""
    if len(tokens) > WORDS_MAX:
        return ()
    words: Sequence[bytes] = tokens if not tokens or isinstance(tokens[0], bytes) \
        else encoded(tokens)                                # type: ignore[arg-type]
    keys = [key & 0x0FFF for key in map(xxhash.xxh3_64_intdigest, words)]
    if not _FACT_KEYS.isdisjoint(words):        # (most texts hold none: one C loop)
        keys = [key | FACT_WORD if word in _FACT_KEYS else key
                for key, word in zip(keys, words, strict=True)]
    joined = b"".join(words)
    if len(joined.translate(None, _DIGITS)) != len(joined):
        keys = [key | DIGIT_WORD if len(word.translate(None, _DIGITS)) != len(word) else key
                for key, word in zip(keys, words, strict=True)]
    return tuple(keys)


def is_calendar(content_type: str, filename: str | None) -> bool:
    """True for a part that holds iCalendar data."""
    return content_type in CALENDAR_TYPES or bool(
        filename and filename.lower().endswith((".ics", ".vcs")))


def key64(text: str | bytes | None) -> int:
    """64-bit key of a string (0 for nothing)."""
    if not text:
        return 0
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    return xxhash.xxh3_64_intdigest(data) or 1


class AttachmentSummary(Value):
    """One attachment worth naming: its digest (xxh3-64 of its decoded bytes), size
    (decoded bytes) and file name as sent ("" when it has none)."""

    __slots__ = ("digest", "size", "name")

    def __init__(self, digest: int, size: int, name: str) -> None:
        init(self, digest=digest, size=size, name=name)


class CalendarSummary(Value):
    """The iCalendar content of a message (see mailfilter/invitations.py): a key of every
    event's identity, sequence, times and responses; key64 of the first event's UID; the
    first event's SEQUENCE; the METHOD (REQUEST, CANCEL, REPLY, …)."""

    __slots__ = ("key", "uid", "sequence", "method")

    def __init__(self, key: int, uid: int, sequence: int, method: str) -> None:
        init(self, key=key, uid=uid, sequence=sequence, method=method)


class Features(Value):
    """Everything the pair rules compare besides text measures.

    sender, sender_name, sender_domain: key64 of the From address (lower case), of its
    display name ("X via list": X), of its registrable domain.  subject: key64 of the
    subject without Re:/Fwd:/[tags].  thread: key64 of the In-Reply-To and References
    ids.  quoted: key64 of the quoted text, folded (0: none).  identifiers: identifier
    hashes when few (identifiers.py), else identifier_bits, their 1024-bit map.
    calendar, attachments.  attachment_bytes: decoded bytes of all non-calendar
    attachments; text_bytes: characters of the whole decoded text (quotes included).
    automated: sent by a program (message.Message.automated).  is_reply: answers a
    message (In-Reply-To, or a Re: subject).  forwarded_from: key64 of the names and
    addresses of the writers it forwards.  resend_note: its own text is a note that it
    sends its writer's message again.  notifier: sent by a tracker or program that says
    so in its header (campaign.Sending: X-GitHub-*, X-JIRA-*, Auto-Submitted …).
    subject_stem: key64 of the subject without the numbers and codes a campaign writes at
    its end (identifiers.subject_stem); 0 when that is the whole subject.  tracker: an
    issue tracker's or code host's (campaign.Sending); event: key64 of the comment ids
    its links carry (message.tracker_event), 0 for none.  words: the 16-bit keys of a
    short text's words in order (:func:`word_keys`; () above :data:`WORDS_MAX` words).
    (Flag 128 says that a stem key and a second flag byte follow the rest; bit 2 of that
    byte, an event key after it; bit 4, a count and the word keys after that.)
    """

    __slots__ = ("sender", "sender_name", "sender_domain", "subject", "thread", "quoted",
                 "identifiers", "identifier_bits", "calendar", "attachments",
                 "attachment_bytes", "text_bytes", "automated", "is_reply", "forwarded_from",
                 "resend_note", "notifier", "subject_stem", "tracker", "event", "words")

    def __init__(self, sender: int = 0, sender_name: int = 0, sender_domain: int = 0,
                 subject: int = 0, thread: tuple[int, ...] = (), quoted: int = 0,
                 identifiers: tuple[int, ...] = (), identifier_bits: bytes = b"",
                 calendar: CalendarSummary | None = None,
                 attachments: tuple[AttachmentSummary, ...] = (), attachment_bytes: int = 0,
                 text_bytes: int = 0, automated: bool = False, is_reply: bool = False,
                 forwarded_from: tuple[int, ...] = (), resend_note: bool = False,
                 notifier: bool = False, subject_stem: int = 0,
                 tracker: bool = False, event: int = 0,
                 words: tuple[int, ...] = ()) -> None:
        fill(self, sender, sender_name, sender_domain, subject, thread, quoted, identifiers,
             identifier_bits, calendar, attachments, attachment_bytes, text_bytes,
             automated, is_reply, forwarded_from, resend_note, notifier, subject_stem,
             tracker, event, words)

    @property
    def attachment_share(self) -> float:
        """Share of the message's decoded bytes that its attachments make up."""
        total = self.attachment_bytes + self.text_bytes
        return self.attachment_bytes / total if total else 0.0

    def encode(self) -> bytes:
        calendar = self.calendar
        flags = (1 if self.identifier_bits else 0) | (2 if calendar else 0) | \
            (4 if self.automated else 0) | (8 if self.is_reply else 0) | \
            (16 if self.forwarded_from else 0) | (32 if self.resend_note else 0) | \
            (64 if self.notifier else 0) | \
            (128 if self.subject_stem or self.tracker or self.event or self.words else 0)
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
        if not flags & 128:
            return b"".join(parts)
        words = self.words[:WORDS_MAX]
        used = sum(map(len, parts)) + 9 + (8 if self.event else 0)
        if words and used + 1 + 2 * len(words) > FEATURES_MAX:
            words = ()      # no room in the store's record: the rest decides more
        parts.append(struct.pack(">QB", self.subject_stem, (1 if self.tracker else 0)
                                 | (2 if self.event else 0) | (4 if words else 0)))
        if self.event:
            parts.append(struct.pack(">Q", self.event))
        if words:
            parts.append(struct.pack(f">B{len(words)}H", len(words), *words))
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
            offset += 1 + 8 * count
        subject_stem, more = struct.unpack_from(">QB", data, offset) if flags & 128 else (0, 0)
        offset += 9
        event = 0
        if more & 2:
            event = struct.unpack_from(">Q", data, offset)[0]
            offset += 8
        words: tuple[int, ...] = ()
        if more & 4:
            words = struct.unpack_from(f">{data[offset]}H", data, offset + 1)
        calendar = CalendarSummary(calendar_key, uid, sequence, method) if flags & 2 else None
        return cls(sender, sender_name, sender_domain, subject, thread, quoted, identifiers,
                   identifier_bits, calendar, tuple(attachments), attachment_bytes,
                   text_bytes, bool(flags & 4), bool(flags & 8), forwarded_from,
                   bool(flags & 32), bool(flags & 64), subject_stem, bool(more & 1), event,
                   words)


EMPTY = Features()

# Mail providers whose users are unrelated people: their domain names no organisation.
_PROVIDERS = frozenset((
    "gmail", "googlemail", "yahoo", "ymail", "hotmail", "outlook", "live", "msn", "aol",
    "icloud", "me", "mac", "gmx", "web", "mail", "yandex", "qq", "163", "126", "proton",
    "protonmail", "zoho", "comcast", "earthlink", "att", "verizon", "btinternet", "orange",
    "free", "libero", "t-online", "wanadoo", "rediffmail", "naver", "hanmail", "seznam",
    "o2", "wp", "interia", "onet", "bigpond", "optusnet", "shaw", "rogers", "sympatico",
    "juno", "netzero", "cox", "charter", "sbcglobal", "bellsouth", "rocketmail", "lycos",
    "excite", "fastmail", "tutanota", "posteo", "mailbox", "hushmail", "inbox", "rambler"))


def registrable_domain(address: str | None) -> str:
    """The organisation a sender writes for: the domain it registered
    (``mail.example.co.uk`` → ``example.co.uk``: the last two labels, or three under a
    common second-level label of a country code; no list of public suffixes), or, at a
    public mail provider (gmail.com, yahoo.co.uk …), the address itself."""
    if not address or "@" not in address:
        return ""
    domain = site_of(address.rpartition("@")[2])
    return address if domain.partition(".")[0] in _PROVIDERS else domain


def message_id_key64(message_id: str) -> int:
    """64-bit key of a Message-ID (brackets and the case of its domain ignored), for
    comparing a record with the thread ids of a reply."""
    return key64(bare_message_id(message_id))


def name_key(name: str) -> int:
    """key64 of a display name as people write it: case, quotes and spacing do not count."""
    return key64(" ".join(name.lower().replace('"', "").split()))


def message_features(message: Message, names: list[str] | None = None,
                     tokens: Sequence[str] | Sequence[bytes] | None = None) -> Features:
    """The :class:`Features` of a parsed message (pure); ``names``: its identifiers, and
    ``tokens``: its text's words (fingerprint's), when the caller has them already."""
    quoted_words = b""
    if message.quoted:
        words = words_of(message.quoted)
        quoted_words = b" ".join(words) if not words or isinstance(words[0], bytes) \
            else " ".join(words).encode("utf-8", "replace")      # type: ignore[arg-type]
    files = [a for a in message.attachments if not is_calendar(a.content_type, a.filename)
             and not a.inline and len(a.data) >= MIN_ATTACHMENT_BYTES]
    files.sort(key=lambda a: len(a.data), reverse=True)
    normal = normal_subject(message.subject)
    subject = key64(normal)
    stem = key64(subject_stem(normal)) if DIGIT.search(normal) else subject
    hashes, bits = identifier_summary(
        identifiers(message.text, message.subject) if names is None else names)
    return Features(
        sender=key64(message.sender),
        sender_name=name_key(message.sender_name),
        sender_domain=key64(registrable_domain(message.sender)),
        subject=subject,
        subject_stem=0 if stem == subject else stem,
        thread=tuple(message_id_key64(i) for i in message.thread),
        quoted=key64(quoted_words),
        identifiers=hashes,
        identifier_bits=bits,
        calendar=message.calendar,
        attachments=tuple(AttachmentSummary(xxhash.xxh3_64_intdigest(a.data), len(a.data),
                                            a.filename or "") for a in files[:MAX_ATTACHMENTS]),
        attachment_bytes=sum(len(a.data) for a in files),
        text_bytes=message.text_length,
        automated=message.automated,
        is_reply=message.is_reply,
        forwarded_from=tuple(dict.fromkeys(
            name_key(name) for name in message.forwarded_from))[:MAX_FORWARDED],
        resend_note=message.resend_note,
        notifier=message.notifier,
        tracker=message.tracker,
        event=message.event,
        words=word_keys(message.prepared.words() if tokens is None else tokens),
    )

