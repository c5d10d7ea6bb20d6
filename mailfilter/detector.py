"""Candidates from the store → :class:`Verdict`, and recording what was seen.

Like Mailman's rules, the detector keeps its evidence: every candidate it weighed, with every
measure and the decision, travels in the verdict, so ``explain`` only prints what the
detector already knows.  It speaks no protocol and parses nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from mailfilter.aliases import bare as bare_address
from mailfilter.config import DetectorSettings
from mailfilter.features import AttachmentSummary, Features
from mailfilter.fingerprint import Fingerprint
from mailfilter.names import DUPLICATE, NEAR_DUPLICATE, UNIQUE
from mailfilter.rules import Pair, judge
from mailfilter.similarity import (
    chunk_similarity,
    histogram_distance,
    sketch_comparison,
)
from mailfilter.store import (
    Probe,
    Record,
    Store,
    message_id_key,
    recipient_key,
    safe_message_id,
)

_UNSAFE_NAME = re.compile(r'[\x00-\x1f\x7f";\\]')


def _safe_name(name: str) -> str:
    """A file name fit for a header value: no quotes, controls or ';', bounded."""
    return _UNSAFE_NAME.sub("_", name)[:80] or "(no name)"


_RANK = {UNIQUE: 0, NEAR_DUPLICATE: 1, DUPLICATE: 2}
# Fewest sketch hashes left after discounting boilerplate for a resemblance to mean much.
_MIN_RESIDUAL = 8


@dataclass(slots=True)
class Evidence:
    """One stored record the detector weighed, and what it made of it."""

    record: Record
    found_by: list[str]
    verdict: str = UNIQUE
    reason: str = ""
    score: float | None = None
    resemblance: float | None = None
    containment: float | None = None
    histogram_positions: int | None = None
    histogram_largest: int | None = None
    attachment_similarity: float | None = None
    recipients_seen: tuple[str, ...] = ()
    note: str = ""
    # The rule that decided (mailfilter/rules.py), and the attachment it matched on.
    rule: str = ""
    attachment: AttachmentSummary | None = None


@dataclass(slots=True)
class Verdict:
    """The decision on one message, with everything needed to act, record and explain."""

    verdict: str
    score: float | None
    reason: str
    match: Record | None
    fingerprint: Fingerprint
    message_id: str | None
    recipients: tuple[str, ...] = ()
    recipients_seen: tuple[str, ...] = ()
    evidence: list[Evidence] = field(default_factory=list)
    containment: float | None = None
    skipped_by: str | None = None
    defects: tuple[str, ...] = ()
    # The id of the record the store added while checking (Store.lookup_or_add).
    recorded_id: int | None = None
    # False when an allow rule says this message must not be remembered.
    record_allowed: bool = True
    # The allow rule that exempted this message from recording (action no-record).
    rule: str | None = None
    # The attachment a near-duplicate by attachments matched on (named in the header).
    attachment: AttachmentSummary | None = None

    @property
    def is_duplicate(self) -> bool:
        return self.verdict != UNIQUE

    @property
    def seen(self) -> int:
        """Times this content has been seen, this message included."""
        return (self.match.seen + 1) if self.match is not None else 1

    @property
    def all_recipients_seen(self) -> bool:
        """True when every recipient already had it (or there is no recipient scope)."""
        if not self.is_duplicate:
            return False
        # By recipient key: the same address twice, or in another case, is one recipient.
        seen = {recipient_key(address) for address in self.recipients_seen}
        return all(recipient_key(address) in seen for address in self.recipients)

    def header_value(self) -> str:
        """The ``X-Dupfilter:`` value: verdict; score; reason; match; seen (no CR/LF)."""
        parts = [self.verdict]
        if self.skipped_by:
            parts.append(f"skipped={self.skipped_by}")
        if self.is_duplicate:
            parts.append(f"score={self.score:.2f}" if self.score is not None else "score=1.00")
            parts.append(f"reason={self.reason}")
            match_id = safe_message_id(self.match.message_id if self.match else None)
            if match_id:
                parts.append(f"match=<{match_id.strip('<>')}>")
            parts.append(f"seen={self.seen}")
            if self.attachment is not None:
                parts.append(f"attachment=\"{_safe_name(self.attachment.name)}\" "
                             f"({self.attachment.size} bytes)")
        if self.rule:
            parts.append(f"rule={self.rule}")
        return "; ".join(parts)

    def as_dict(self) -> dict[str, object]:
        match = None
        if self.match is not None:
            match = {"message_id": self.match.message_id, "id": self.match.doc_id,
                     "seen": self.match.seen, "first_seen": self.match.first_seen,
                     "last_seen": self.match.last_seen}
        return {"verdict": self.verdict,
                "score": None if self.score is None else round(self.score, 4),
                "reason": self.reason or None, "match": match, "seen": self.seen,
                "message_id": self.message_id,
                "recipients_seen": list(self.recipients_seen),
                "containment": None if self.containment is None else round(self.containment, 4),
                "skipped_by": self.skipped_by, "rule": self.rule,
                "attachment": None if self.attachment is None else {
                    "name": self.attachment.name, "size": self.attachment.size},
                "why": None if self.is_duplicate or not self.evidence
                else (self.evidence[0].note or None)}


class Detector:
    """Decides verdicts against a store, and records messages in it."""

    def __init__(self, store: Store, settings: DetectorSettings, *, sketch_size: int,
                 index_size: int, aliases: Mapping[str, str] | None = None) -> None:
        self.store = store
        self.settings = settings
        self.sketch_size = sketch_size
        self.index_size = index_size
        # Address → mailbox: several addresses of one person are one recipient.
        self.aliases = {bare_address(a): bare_address(m) for a, m in (aliases or {}).items()}

    def recipient_key(self, address: str) -> int:
        """The store's key of a recipient, after the alias map."""
        bare = bare_address(address)
        return recipient_key(self.aliases.get(bare, bare))

    # -- checking ----------------------------------------------------------------------

    def _long_enough(self, fp: Fingerprint | Record) -> bool:
        return fp.word_count >= self.settings.min_words and bool(fp.sketch)

    def _histogram_applies(self, fp: Fingerprint | Record) -> bool:
        return self.settings.histogram_rule and fp.histogram_chars >= \
            self.settings.histogram_min_chars

    def probe(self, fp: Fingerprint, message_id: str | None) -> Probe:
        s = self.settings
        # Short texts are looked up by their shingles too: a short message sent again with
        # a line added shares all of them (rules.py decides what that means).
        index = fp.sketch[:self.index_size]
        return Probe(
            message_id_key=message_id_key(message_id) if s.match_message_id else None,
            digest=fp.digest,
            histogram=fp.histogram,
            histogram_sum=fp.histogram_sum,
            histogram_window=s.histogram_window if self._histogram_applies(fp) else 0,
            histogram_max_positions=s.histogram_max_positions,
            sketch_index=index,
            min_shared=max(1, len(index) // 8),
            # Boilerplate can sit anywhere (disclaimers, banners, sponsor blocks): every
            # sketch hash that many stored messages share is discounted, not only those
            # of the last lines.
            tail_hashes=fp.sketch if index else (),
            common_postings=s.common_postings,
            sketch=fp.sketch if index else (),
            chunk_index=tuple(d for d, _ in fp.chunks[:self.index_size]),
            posting_cap=s.posting_cap,
            max_candidates=s.max_candidates,
            histogram_candidates=s.histogram_candidates,
            part_digests=fp.part_digests,
        )

    def check(self, fp: Fingerprint, message_id: str | None,
              recipients: Sequence[str] = (), *, record_at: int | None = None) -> Verdict:
        """The verdict for one fingerprinted message.

        With ``record_at``, a store that can (``lookup_or_add``) records the message in the
        same round trip when it finds nothing at all (the verdict can only be unique).
        """
        probe = self.probe(fp, message_id)
        new = None
        if record_at is not None:
            new = self._new_record(fp, message_id, recipients, record_at, 1)
            candidates = self.store.lookup_or_add(probe, new)
        else:
            candidates = self.store.lookup(probe)
        scoped = self.settings.scope == "recipient" and bool(recipients)
        recipient_keys = {self.recipient_key(r): r for r in recipients} if scoped else {}
        evidence: list[Evidence] = []
        # Once per check, not per candidate (a large histogram window yields max_candidates).
        message_key = message_id_key(message_id)
        sketch_set = frozenset(fp.sketch)
        sharing = candidates.sharing
        for doc_id, record in candidates.records.items():
            found_by = [name for name, ids in (
                ("message-id", candidates.by_message_id), ("digest", candidates.by_digest),
                ("histogram", candidates.by_histogram), ("shingles", candidates.by_shingle),
                ("attachments", candidates.by_chunk)) if doc_id in ids]
            item = self._weigh(fp, message_key, record, found_by,
                               candidates.by_histogram.get(doc_id), candidates.common,
                               sketch_set if sharing is None or doc_id in sharing else None)
            if item.verdict != UNIQUE and scoped and record.recipients:
                had = tuple(sorted(address for key, address in recipient_keys.items()
                                   if key in record.recipients))
                item.recipients_seen = had
                if not had:
                    item.note = f"{item.verdict} for other recipients only"
                    item.verdict = UNIQUE
            elif item.verdict != UNIQUE:
                item.recipients_seen = tuple(recipients)
            evidence.append(item)
        evidence.sort(key=lambda e: (_RANK[e.verdict], e.score or 0.0, e.resemblance or 0.0),
                      reverse=True)
        verdict = Verdict(UNIQUE, None, "", None, fp, message_id, tuple(recipients),
                          evidence=evidence)
        if evidence and evidence[0].verdict != UNIQUE:
            best = evidence[0]
            seen = sorted({r for e in evidence if e.verdict != UNIQUE for r in e.recipients_seen})
            verdict.verdict, verdict.score, verdict.reason = best.verdict, best.score, best.reason
            verdict.match, verdict.recipients_seen = best.record, tuple(seen)
            verdict.attachment = best.attachment
        containments = [e.containment for e in evidence if e.containment is not None]
        verdict.containment = max(containments) if containments else None
        if new is not None and new.doc_id:
            verdict.recorded_id = new.doc_id
        return verdict

    def _weigh(self, fp: Fingerprint, key: bytes | None, record: Record,
               found_by: list[str], histogram_positions: int | None,
               boilerplate: frozenset[int], sketch_set: frozenset[int] | None) -> Evidence:
        """What ``record`` says about the message; ``sketch_set`` is the message's sketch
        as a set, or None when the store found that the two sketches share no hash."""
        s = self.settings
        item = Evidence(record, found_by)
        if self._long_enough(fp) and self._long_enough(record):
            # Containment: how much of the stored message the new one holds (reported only).
            item.resemblance, item.containment = (0.0, 0.0) if sketch_set is None else \
                self._compare_sketches(record.sketch, fp.sketch, boilerplate, sketch_set)
        item.histogram_positions, item.histogram_largest = histogram_distance(
            fp.histogram, record.histogram)
        if fp.chunks and record.chunks:
            item.attachment_similarity = chunk_similarity(fp.chunks, record.chunks)
        histogram_match = (histogram_positions is not None and self._histogram_applies(fp)
                           and self._histogram_applies(record)
                           and item.histogram_positions <= s.histogram_max_positions)
        judgement = judge(Pair(
            new=fp, stored_words=record.word_count, stored_digest=record.digest,
            stored_message_id=record.message_id,
            same_message_id=s.match_message_id and key is not None
            and key == record.message_id_key,
            new_features=fp.features, stored_features=Features.decode(record.features),
            resemblance=item.resemblance, containment_of_stored=item.containment,
            histogram_match=histogram_match, histogram_positions=item.histogram_positions,
            attachment_similarity=item.attachment_similarity, stored_sketch=record.sketch),
            s)
        item.verdict, item.reason, item.score = judgement.verdict, judgement.reason, \
            judgement.score
        item.rule, item.note, item.attachment = judgement.rule, judgement.note, \
            judgement.attachment
        return item

    def _compare_sketches(self, stored: tuple[int, ...], new: tuple[int, ...],
                          boilerplate: frozenset[int], new_set: frozenset[int]
                          ) -> tuple[float, float]:
        """Sketch resemblance and containment, boilerplate discounted.

        Shingles that many stored messages share (a footer, a disclaimer, a banner) say
        nothing about this pair: both sketches lose them (the rest is still a bottom-k
        sample of what is left).  If too little would remain, the full sketches are
        compared.  Sketches that share no hash at all (``new_set`` is ``new`` as a set)
        resemble and contain nothing: most candidates of a large histogram window are
        such, and this answer costs one pass over ``stored``, not a sort.
        """
        if new_set.isdisjoint(stored):
            return 0.0, 0.0
        if boilerplate:
            stored_rest = [h for h in stored if h not in boilerplate]
            new_rest = [h for h in new if h not in boilerplate]
            if len(set(stored_rest) | set(new_rest)) >= _MIN_RESIDUAL:
                return sketch_comparison(stored_rest, new_rest, self.sketch_size)
        return sketch_comparison(stored, new, self.sketch_size)

    # -- recording ---------------------------------------------------------------------

    def record(self, verdict: Verdict, when: int) -> int:
        """Remember a message.  Exact repeats bump the matched record; others are added.

        A near-duplicate is stored as a record of its own, so that a drifting campaign
        still matches its latest variant.
        """
        if verdict.recorded_id is not None:  # recorded by the check (and counted)
            return verdict.recorded_id
        fp = verdict.fingerprint
        keys = tuple(self.recipient_key(r) for r in verdict.recipients) \
            if self.settings.scope == "recipient" else ()
        # The same message again (also when recipient scope made it new for these
        # recipients): judged so by the rules, not merely the same digest ("Thanks!" from
        # another sender is a record of its own).
        exact = next((e.record for e in verdict.evidence
                      if e.reason in ("digest", "message-id") and e.record.digest == fp.digest),
                     None)
        self.store.count_verdict(verdict.verdict, when)
        if exact is not None:
            self.store.touch(exact.doc_id, when, keys)
            return exact.doc_id
        seen = verdict.match.seen + 1 if verdict.match is not None else 1
        return self.store.add(self._new_record(fp, verdict.message_id, verdict.recipients,
                                               when, seen))

    def _new_record(self, fp: Fingerprint, message_id: str | None,
                    recipients: Sequence[str], when: int, seen: int) -> Record:
        keys = tuple(self.recipient_key(r) for r in recipients) \
            if self.settings.scope == "recipient" else ()
        return Record(
            histogram=fp.histogram, histogram_sum=fp.histogram_sum,
            histogram_chars=fp.histogram_chars, sketch=fp.sketch,
            shingle_count=fp.shingle_count, word_count=fp.word_count, digest=fp.digest,
            message_id_key=message_id_key(message_id),
            message_id=safe_message_id(message_id), chunks=fp.chunks,
            recipients=keys, first_seen=when, last_seen=when, seen=seen,
            features=fp.features.encode())
