"""Which messages of the sources are copies of which, and which copy each group keeps.

Every message is analysed as the engine analyses mail (:func:`mailfilter.engine.analyse`:
the digest of its decoded, cleaned text), in the order the sources are read, and joins a
group:

* exact (the default): the group of the messages with the same Message-ID and the same
  body digest (no Message-ID: the same digest, From, Subject and Date, and a text that is
  not empty), so that two "Thanks!" replies are never one message.  That needs no store
  and no detector: the run keeps one dictionary;
* ``--near``: the judge is the project's own engine: every message is checked and recorded
  in a store of this run (a throw-away LMDB unless ``--db``) and joins the group of the
  earlier message the detector called it a ``duplicate`` or ``near-duplicate`` of, when it
  is a copy of that one's text by the detector's ``copy_threshold`` (a forward, a resend
  with a line changed); what it calls unique (a templated notice with new data) stays, and
  so does a near-duplicate that is only like the other (a reply quoting most of it).

A record the store knew before the run (``--db`` a store that saw the mail delivered) has
no message of this run behind it: matching it makes nothing a copy, since its twin may not
be in the mailbox at all.
"""

from __future__ import annotations

import email.utils
import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from mailfilter.config import Settings
from mailfilter.dedupe.sources import Folder, Handle, StoredMessage, sha256
from mailfilter.detector import Evidence, Verdict
from mailfilter.engine import Analysis, Decision, Engine, analyse, remember
from mailfilter.names import DUPLICATE, NEAR_DUPLICATE
from mailfilter.normalise import first_values, read_headers
from mailfilter.store import message_id_key
from mailfilter.values import replace

KEEP_STRATEGIES = ("oldest", "newest", "largest")
# The header fields a delivery or a second fetch puts on top of a message (a re-fetched copy
# differs from its original only there).  Unambiguous: a field line starts with a letter, a
# continuation line with a blank, so the match is linear in the header's length.
# (Possessive: the regex engine kept a place to backtrack to for each continuation line,
# 175 MB for 4 MiB of them.)
_TRACE = re.compile(rb"\A(?:(?:received|return-path|delivered-to|x-original-to)[ \t]*:"
                    rb"[^\n]*+\n(?:[ \t][^\n]*+\n)*+)*+", re.IGNORECASE)


@dataclass(slots=True)
class Seen:
    """One message of the run, as the plan weighs it (its bytes are not kept)."""

    order: int
    folder: Folder
    key: str
    size: int
    date: float | None          # the Date header, else when it was delivered
    message_id: str | None
    digest: bytes
    attachments: bool
    subject: str
    sender: str
    raw_date: str
    handle: Handle

    @property
    def where(self) -> str:
        return f"{self.folder.label} {self.key}"


@dataclass(slots=True)
class Copy:
    """A message of a group that is not kept, and why it is a copy."""

    seen: Seen
    reason: str


@dataclass(slots=True)
class Group:
    """Messages judged one: the one kept and the copies."""

    keep: Seen
    copies: list[Copy] = field(default_factory=list)


def _header(analysis: Analysis, name: str) -> str:
    for field_name, value in analysis.headers:
        if field_name.lower() == name:
            return value
    return ""


def _date(value: str) -> float | None:
    try:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
    except (TypeError, ValueError, IndexError):
        return None
    if parsed is None:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=email.utils.localtime().tzinfo)
    return parsed.timestamp()


def seen_of(order: int, message: StoredMessage, analysis: Analysis) -> Seen:
    raw_date = _header(analysis, "date")
    fingerprint = analysis.fingerprint
    return Seen(order, message.folder, message.key, message.size,
                _date(raw_date) or message.received, analysis.message_id,
                fingerprint.digest, bool(fingerprint.chunks or fingerprint.attachment_bytes),
                _header(analysis, "subject"), _header(analysis, "from"), raw_date,
                Handle(message.key, sha256(message.raw), analysis.message_id))


def below_trace(raw: bytes) -> bytes:
    """``raw`` without the trace fields on top of it (see ``_TRACE``)."""
    return raw[_TRACE.match(raw).end():]     # type: ignore[union-attr]  # matches always


# An exact run keeps the bytes of a message whose Message-ID no other content has shown
# yet (it may never need analysing); past this many bytes the oldest are analysed at once.
PENDING_BYTES = 64 * 1024 * 1024


def exact_key(seen: Seen, analysis: Analysis, scope: str) -> tuple[object, ...] | None:
    """What exact copies without a Message-ID share: the digest, From, Subject and Date;
    None for an empty text (two empty notes are not one message: the detector's
    ``same_text``)."""
    fingerprint = analysis.fingerprint
    if not (fingerprint.word_count > 0 or fingerprint.has_attachments):
        return None
    return scope, None, seen.digest, seen.sender, seen.subject, seen.raw_date


def _header_fields(raw: bytes) -> dict[str, str]:
    """The first value of each header field of ``raw`` (CRLF or LF line ends)."""
    data = raw.replace(b"\r\n", b"\n") if b"\r" in raw else raw
    end = data.find(b"\n\n")
    return first_values(read_headers(data[:end + 1] if end >= 0 else data))


@dataclass(slots=True)
class Variant:
    """The messages of an exact run with one content below the trace fields (a message and
    its re-fetched copies).  It is analysed once, and only when another content with its
    Message-ID turns up: until then ``raw`` holds the first one's bytes."""

    members: list[Seen]
    raw: bytes | None
    digest: bytes | None = None


class ExactGrouper:
    """Groups an exact run's messages (see the module's text) in one dictionary."""

    def __init__(self, settings: Settings, *, across_folders: bool) -> None:
        self.settings, self.across = settings, across_folders
        self.checked = 0        # messages read whole
        self.analysed = 0       # of which analysed
        self._variants: dict[tuple[str, bytes], Variant] = {}
        # (scope, Message-ID key), or without one the exact_key → its contents in order
        self._buckets: dict[tuple[object, ...], list[Variant]] = {}
        self._pending: dict[int, Variant] = {}      # id → a variant holding its bytes
        self._pending_bytes = 0

    def _scope(self, folder: Folder) -> str:
        return "" if self.across else folder.label

    def _analyse(self, message: StoredMessage) -> Analysis:
        self.analysed += 1
        return analyse(message.raw, self.settings.fingerprint)

    def _settle(self, variant: Variant) -> None:
        """Analyse a variant that waited: its digest and attachments to every member."""
        if variant.raw is None:
            return
        first = variant.members[0]
        self.analysed += 1
        fingerprint = analyse(variant.raw, self.settings.fingerprint).fingerprint
        attachments = bool(fingerprint.chunks or fingerprint.attachment_bytes)
        for seen in variant.members:
            seen.digest, seen.attachments = fingerprint.digest, attachments
        variant.digest = first.digest
        self._pending_bytes -= len(variant.raw)
        del self._pending[id(variant)]
        variant.raw = None

    def add(self, message: StoredMessage) -> Seen:
        """One message read whole; it is analysed only when its Message-ID's group holds
        another content (or it has no Message-ID)."""
        scope = self._scope(message.folder)
        content = (scope, hashlib.sha256(below_trace(message.raw)).digest())
        handle_of = Handle(message.key, sha256(message.raw), None)
        order, self.checked = self.checked, self.checked + 1
        variant = self._variants.get(content)
        if variant is not None:     # the same bytes: the same Message-ID, text and headers
            first = variant.members[0]
            seen = replace(first, order=order, folder=message.folder, key=message.key,
                           size=message.size, date=_date(first.raw_date) or message.received,
                           handle=replace(handle_of, message_id=first.message_id))
            variant.members.append(seen)
            return seen
        fields = _header_fields(message.raw)
        message_id = fields.get("message-id") or None
        mid_key = message_id_key(message_id)
        if mid_key is None:
            analysis = self._analyse(message)
            seen = seen_of(order, message, analysis)
            bucket: tuple[object, ...] = exact_key(seen, analysis, scope) or (None, order)
            variant = Variant([seen], None, seen.digest)
        else:
            raw_date = fields.get("date", "")
            seen = Seen(order, message.folder, message.key, message.size,
                        _date(raw_date) or message.received, message_id, b"", False,
                        fields.get("subject", ""), fields.get("from", ""), raw_date,
                        replace(handle_of, message_id=message_id))
            bucket = (scope, mid_key)
            variant = Variant([seen], message.raw)
            self._pending[id(variant)] = variant
            self._pending_bytes += len(message.raw)
        if bucket[0] is not None:   # an empty text without a Message-ID has no copies
            self._variants[content] = variant
        contents = self._buckets.setdefault(bucket, [])
        contents.append(variant)
        # A Message-ID's second content settles both; from then on each newcomer alone
        # (the others are settled: going over them all again was quadratic in the copies).
        if len(contents) == 2:
            self._settle(contents[0])
        if len(contents) > 1:
            self._settle(variant)
        while self._pending_bytes > PENDING_BYTES:
            self._settle(next(iter(self._pending.values())))
        return seen

    def groups(self, keep: str) -> list[Group]:
        """The groups of more than one message, each with the copy ``keep`` chooses: the
        contents of one bucket with the same digest (one content: its copies)."""
        member_lists: list[list[Seen]] = []
        reasons: dict[int, str] = {}
        for bucket, contents in self._buckets.items():
            by_digest: dict[bytes | None, list[Variant]] = {}
            for variant in contents:
                by_digest.setdefault(variant.digest, []).append(variant)
            for variants in by_digest.values():
                members = sorted((m for v in variants for m in v.members),
                                 key=lambda m: m.order)
                if len(members) < 2:
                    continue
                member_lists.append(members)
                why = "duplicate (the same bytes below the trace fields)" \
                    if len(variants) == 1 else "duplicate (the same Message-ID and digest)" \
                    if bucket[1] is not None else \
                    "duplicate (the same digest, From, Subject and Date)"
                reasons |= dict.fromkeys((m.order for m in members), why)
        return gathered(member_lists, reasons, keep)


class Grouper:
    """Groups a ``--near`` run's messages as the engine judges them, one at a time, in
    order (see the module's text)."""

    def __init__(self, engine: Engine, *, across_folders: bool) -> None:
        self.engine, self.across = engine, across_folders
        self.members: list[list[Seen]] = []
        self.reasons: dict[int, str] = {}
        # (scope, record id) → the groups whose messages this run recorded under it (an
        # exact repeat bumps the record it matched, also when it starts a group of its own).
        self._groups: dict[tuple[str, int], list[int]] = {}
        self.checked = 0
        self.copy_threshold = engine.settings.detector.copy_threshold

    def analyse(self, raw: bytes) -> Analysis:
        return self.engine.analyse(raw)

    def _copy(self, verdict: Verdict, evidence: Evidence) -> bool:
        """A near-duplicate that is a copy of the record's text (the detector's
        ``copy_threshold``: an exact, histogram or calendar match, or a resemblance of at
        least 0.8 by default), not merely a message like it (a reply quoting much of it)."""
        return replace(verdict, evidence=(evidence,)).copy_of(self.copy_threshold) is not None

    def _scope(self, seen: Seen) -> str:
        return "" if self.across else seen.folder.label

    def add(self, message: StoredMessage, analysis: Analysis) -> Seen:
        """Check and record one message; it joins a group or starts one."""
        return self.decided(message, analysis,
                            self.engine.process(analysis, (), remember))

    def add_many(self, batch: list[tuple[StoredMessage, Analysis]]) -> None:
        """:meth:`add` for several messages, checked and recorded in order on the engine's
        writer thread (many a transaction: one disk sync for the batch, not each)."""
        futures = [self.engine.process_later(analysis, (), remember)
                   for _message, analysis in batch]
        for (message, analysis), future in zip(batch, futures, strict=True):
            decision = future.result() if future is not None else \
                self.engine.process(analysis, (), remember)
            self.decided(message, analysis, decision)

    def decided(self, message: StoredMessage, analysis: Analysis, decision: Decision) -> Seen:
        seen = seen_of(self.checked, message, analysis)
        self.checked += 1
        verdict = decision.verdict
        scope = self._scope(seen)
        group, reason = None, ""
        for evidence in sorted(verdict.evidence, key=lambda e: e.kind is not verdict.kind):
            if evidence.kind not in (DUPLICATE, NEAR_DUPLICATE) \
                    or not self._copy(verdict, evidence):
                continue
            known = self._groups.get((scope, evidence.record.doc_id), ())
            if known:
                score = f" {evidence.score:.2f}" if evidence.score is not None else ""
                group, reason = known[0], f"{evidence.kind}{score} ({evidence.measure})"
                break
        if group is None:
            group = len(self.members)
            self.members.append([])
        self.members[group].append(seen)
        if reason:
            self.reasons[seen.order] = reason
        if decision.recording is not None:
            groups = self._groups.setdefault((scope, decision.recording.doc_id), [])
            if group not in groups:
                groups.append(group)
        return seen

    def groups(self, keep: str) -> list[Group]:
        """The groups of more than one message, each with the copy ``keep`` chooses."""
        return gathered(self.members, self.reasons, keep)


def gathered(member_lists: list[list[Seen]], reasons: dict[int, str], keep: str
             ) -> list[Group]:
    """Each list of two or more members as a group: the one ``keep`` chooses, and the
    others with why each is a copy (``reasons`` by order)."""
    chosen = choose(keep)
    out = []
    for members in member_lists:
        if len(members) < 2:
            continue
        kept = chosen(members)
        copies = [Copy(m, reasons.get(m.order) or
                       f"copy of the kept one ({reasons.get(kept.order, '')})")
                  for m in members if m is not kept]
        out.append(Group(kept, copies))
    return out


def choose(keep: str) -> Callable[[Iterable[Seen]], Seen]:
    """The rule ``--keep`` names: ``oldest`` (by Date, else delivery; first read on a tie),
    ``newest``, ``largest`` (one with attachments first, then size), ``folder:NAME`` (a copy
    in folder NAME, the oldest there; the oldest when none is)."""
    far_future = float("inf")

    def oldest(members: Iterable[Seen]) -> Seen:
        return min(members, key=lambda m: (m.date if m.date is not None else far_future,
                                           m.order))

    def newest(members: Iterable[Seen]) -> Seen:
        return max(members, key=lambda m: (m.date if m.date is not None else -far_future,
                                           -m.order))

    def largest(members: Iterable[Seen]) -> Seen:
        return max(members, key=lambda m: (m.attachments, m.size, -m.order))

    if keep == "oldest":
        return oldest
    if keep == "newest":
        return newest
    if keep == "largest":
        return largest
    if keep.startswith("folder:") and keep[7:]:
        name = keep[7:]

        def in_folder(members: Iterable[Seen]) -> Seen:
            members = list(members)
            preferred = [m for m in members if m.folder.name == name
                         or m.folder.label == name]
            return oldest(preferred or members)

        return in_folder
    raise ValueError(f"--keep {keep}: expected oldest, newest, largest or folder:NAME")
