"""Which messages of the sources are copies of which, and which copy each group keeps.

The judge is the project's own engine: every message is checked and recorded in a store of
this run (a throw-away LMDB unless ``--db``), in the order the sources are read.  A message
joins the group of the earlier message the detector matched it with:

* exact (the default): the detector says ``duplicate`` *and* the two have the same
  Message-ID and the same body digest (no Message-ID: the same digest, From, Subject and
  Date), so that two "Thanks!" replies are never one message;
* ``--near``: the detector says ``duplicate`` or ``near-duplicate`` and the message is a
  copy of the other's text by the detector's ``copy_threshold`` (a forward, a resend with
  a line changed); what it calls unique (a templated notice with new data) stays, and so
  does a near-duplicate that is only like the other (a reply quoting most of it).

A record the store knew before the run (``--db`` a store that saw the mail delivered) has
no message of this run behind it: matching it makes nothing a copy, since its twin may not
be in the mailbox at all.
"""

from __future__ import annotations

import email.utils
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from mailfilter.dedupe.sources import Folder, Handle, StoredMessage, sha256
from mailfilter.detector import Evidence, Verdict
from mailfilter.engine import Analysis, Decision, Engine, remember
from mailfilter.names import DUPLICATE, NEAR_DUPLICATE, Kind
from mailfilter.store import message_id_key

KEEP_STRATEGIES = ("oldest", "newest", "largest")


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


def same_message(a: Seen, b: Seen) -> bool:
    """Exact copies: the same Message-ID and body digest (no Message-ID on either: the same
    digest, sender, subject and date)."""
    if a.digest != b.digest:
        return False
    key_a, key_b = message_id_key(a.message_id), message_id_key(b.message_id)
    if key_a is not None or key_b is not None:
        return key_a == key_b
    return (a.sender, a.subject, a.raw_date) == (b.sender, b.subject, b.raw_date)


class Grouper:
    """Groups the messages of a run as they are checked, one at a time, in order."""

    def __init__(self, engine: Engine, *, near: bool, across_folders: bool) -> None:
        self.engine, self.near, self.across = engine, near, across_folders
        self.members: list[list[Seen]] = []
        self.reasons: dict[int, str] = {}
        # (scope, record id) → the groups whose messages this run recorded under it (an
        # exact repeat bumps the record it matched, also when it starts a group of its own).
        self._groups: dict[tuple[str, int], list[int]] = {}
        self.checked = 0
        self.copy_threshold = engine.settings.detector.copy_threshold

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
        wanted: tuple[Kind, ...] = (DUPLICATE, NEAR_DUPLICATE) if self.near else (DUPLICATE,)
        for evidence in sorted(verdict.evidence, key=lambda e: e.kind is not verdict.kind):
            if evidence.kind not in wanted or (self.near and not self._copy(verdict, evidence)):
                continue
            for index in self._groups.get((scope, evidence.record.doc_id), ()):
                if self.near or same_message(self.members[index][0], seen):
                    score = f" {evidence.score:.2f}" if evidence.score is not None else ""
                    group, reason = index, f"{evidence.kind}{score} ({evidence.measure})"
                    break
            if group is not None:
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
        chosen = choose(keep)
        out = []
        for members in self.members:
            if len(members) < 2:
                continue
            kept = chosen(members)
            copies = [Copy(m, self.reasons.get(m.order) or
                           f"copy of the kept one ({self.reasons.get(kept.order, '')})")
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
