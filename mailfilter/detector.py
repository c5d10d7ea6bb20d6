"""Candidates from the store → :class:`Verdict`, and recording what was seen.

Like Mailman's rules, the detector keeps its evidence: every candidate it weighed, with every
measure and the decision, travels in the verdict, so ``explain`` only prints what the
detector already knows.  It speaks no protocol and parses nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mailfilter.aliases import bare as bare_address
from mailfilter.config import DetectorSettings
from mailfilter.features import AttachmentSummary, Features
from mailfilter.fingerprint import Fingerprint
from mailfilter.names import DUPLICATE, NEAR_DUPLICATE, UNIQUE, Kind
from mailfilter.rules import Pair, RuleName, judge
from mailfilter.similarity import (
    chunk_similarity,
    histogram_distance,
    sketch_comparison,
)
from mailfilter.store import (
    NEWEST_EXACT,
    NEWEST_PART,
    NO_CLUSTER,
    RECIPIENTS_MAX,
    Found,
    Query,
    Record,
    Store,
    message_id_key,
    recipient_key,
    safe_message_id,
)
from mailfilter.values import Value, init, replace

_RANK = {UNIQUE: 0, NEAR_DUPLICATE: 1, DUPLICATE: 2}
# Fewest sketch hashes left after discounting boilerplate for a resemblance to mean much.
_MIN_RESIDUAL = 8


class Evidence(Value):
    """One stored record the detector weighed, every measure it took, and what the pair
    rules made of it."""

    __slots__ = ("record", "found_by", "kind", "rule", "measure", "score", "note",
                 "attachment", "resemblance", "containment", "histogram_positions",
                 "histogram_largest", "attachment_similarity", "recipients_seen", "judged")

    def __init__(
        self,
        record: Record,
        found_by: tuple[str, ...],
        kind: Kind = UNIQUE,
        rule: RuleName | None = None,        # the pair rule that decided, either way
        measure: str = "",                   # the measure that matched (the header's reason=)
        score: float | None = None,
        note: str = "",                      # why, in words (explain)
        attachment: AttachmentSummary | None = None,
        resemblance: float | None = None,
        containment: float | None = None,
        histogram_positions: int | None = None,
        histogram_largest: int | None = None,
        attachment_similarity: float | None = None,
        recipients_seen: tuple[str, ...] = (),
        # What the rules judged, before recipient scope (a copy of the record's text, new
        # only to these recipients, is judged a duplicate here and unique in ``kind``).
        judged: Kind = UNIQUE,
    ) -> None:
        init(self, record=record, found_by=found_by, kind=kind, rule=rule, measure=measure,
             score=score, note=note, attachment=attachment, resemblance=resemblance,
             containment=containment, histogram_positions=histogram_positions,
             histogram_largest=histogram_largest,
             attachment_similarity=attachment_similarity, recipients_seen=recipients_seen,
             judged=judged)

    @property
    def is_duplicate(self) -> bool:
        return self.kind is not UNIQUE


class Recording(Value):
    """What remembering one message did, so that it can be taken back: the record added
    (``previous`` None) or seen again (``previous``: that record as it was)."""

    __slots__ = ("doc_id", "kind", "when", "previous")

    def __init__(self, doc_id: int,
                 kind: Kind,                    # the verdict counted
                 when: int, previous: Record | None = None) -> None:
        init(self, doc_id=doc_id, kind=kind, when=when, previous=previous)


# Records of one text cluster weighed in one check, besides exact matches.
CLUSTER_CANDIDATES = 2
# The newest members of a text cluster a check reads besides the one filing a sketch hash
# for it (Query.members): the copies most like what arrives next.
CLUSTER_MEMBERS = 8


class Candidates(Value):
    """The records a check weighs, by which index each was found, and the message's
    sketch hashes held by many different stored texts (boilerplate: hash → how many)."""

    __slots__ = ("records", "by_message_id", "by_digest", "by_histogram", "by_shingle",
                 "by_chunk", "sharing", "boilerplate", "delivered")

    def __init__(
        self,
        records: dict[int, Record],
        by_message_id: list[int],
        by_digest: list[int],
        by_histogram: dict[int, int],
        by_shingle: dict[int, int],
        by_chunk: dict[int, int],
        sharing: frozenset[int],          # ids of records whose sketch shares a hash with it
        boilerplate: dict[int, int],
        delivered: dict[int, frozenset[int]],
    ) -> None:
        init(self, records=records, by_message_id=by_message_id, by_digest=by_digest,
             by_histogram=by_histogram, by_shingle=by_shingle, by_chunk=by_chunk,
             sharing=sharing, boilerplate=boilerplate, delivered=delivered)


# Measures that say "this very message again": recording bumps the matched record.
_EXACT_MEASURES = frozenset(("digest", "message-id"))
# Measures that make a match a copy of the stored text whatever the resemblance.
_COPY_MEASURES = _EXACT_MEASURES | {"histogram", "calendar"}


class Verdict(Value):
    """The decision on one message, with everything needed to act, record and explain."""

    __slots__ = ("kind", "fingerprint", "message_id", "score", "measure", "match",
                 "decided_by", "recipients", "recipients_seen", "evidence", "containment",
                 "attachment", "defects", "skipped_by", "exempted_by", "recorded_id",
                 "boilerplate")

    def __init__(
        self,
        kind: Kind,
        fingerprint: Fingerprint,
        message_id: str | None,
        score: float | None = None,
        measure: str = "",                   # the header's reason=: what matched
        match: Record | None = None,
        decided_by: RuleName | None = None,  # the pair rule of the best evidence
        recipients: tuple[str, ...] = (),
        recipients_seen: tuple[str, ...] = (),
        evidence: tuple[Evidence, ...] = (),
        containment: float | None = None,
        # The attachment a near-duplicate by attachments matched on (named in the header).
        attachment: AttachmentSummary | None = None,
        defects: tuple[str, ...] = (),
        # Allow rules (mailfilter/policy.py): the one that skipped the check, or the one
        # that exempted the message from recording (action no-record).
        skipped_by: str | None = None,
        exempted_by: str | None = None,
        # The id of the record the store added while checking (Store.lookup_or_add).
        recorded_id: int | None = None,
        # The message's sketch hashes left out as boilerplate: (hash, different stored
        # texts holding it, counted up to common_postings).
        boilerplate: tuple[tuple[int, int], ...] = (),
    ) -> None:
        init(self, kind=kind, fingerprint=fingerprint, message_id=message_id, score=score,
             measure=measure, match=match, decided_by=decided_by, recipients=recipients,
             recipients_seen=recipients_seen, evidence=evidence, containment=containment,
             attachment=attachment, defects=defects, skipped_by=skipped_by,
             exempted_by=exempted_by, recorded_id=recorded_id, boilerplate=boilerplate)

    @property
    def is_duplicate(self) -> bool:
        return self.kind is not UNIQUE

    def copy_of(self, copy_threshold: float, mailing: bool = False) -> Record | None:
        """The record whose text this message is again, the closest: judged a duplicate
        or near-duplicate by the rules (whether or not recipient scope made it new for
        these recipients) by an exact measure, the histogram, or a resemblance of at least
        ``copy_threshold``; with ``mailing``, also one mailing's personalised copy (the
        same sender and subject: "Hi Anna," over a short text leaves two copies 0.7
        alike, and twelve such copies, each a text of its own, made the text look common,
        boilerplate) — for the store's text clusters, not for deleting copies from a
        mailbox.  None: another text (a looser near-duplicate is its own)."""
        features = self.fingerprint.features
        copies = [e for e in self.evidence if e.judged is not UNIQUE and (
            e.measure in _COPY_MEASURES or (e.resemblance or 0.0) >= copy_threshold
            or mailing and _one_mailing(features, e.record.features))]
        best = max(copies, key=lambda e: (_RANK[e.judged], e.score or 0.0), default=None)
        return best.record if best is not None else None

    @property
    def record_allowed(self) -> bool:
        """False when an allow rule says this message must not be remembered."""
        return self.skipped_by is None and self.exempted_by is None

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

    @property
    def exact_match(self) -> Record | None:
        """The stored record this message is again, exactly: its text, judged a duplicate
        by Message-ID or digest (also when recipient scope made it new for these
        recipients, who are then added to that record)."""
        return next((e.record for e in self.evidence if e.measure in _EXACT_MEASURES
                     and e.record.digest == self.fingerprint.digest), None)

    def as_dict(self) -> dict[str, object]:
        match = None
        if self.match is not None:
            match = {"message_id": self.match.message_id, "id": self.match.doc_id,
                     "seen": self.match.seen, "first_seen": self.match.first_seen,
                     "last_seen": self.match.last_seen}
        return {"verdict": self.kind.value,
                "score": None if self.score is None else round(self.score, 4),
                "reason": self.measure or None, "match": match, "seen": self.seen,
                "message_id": self.message_id,
                "recipients_seen": list(self.recipients_seen),
                "containment": None if self.containment is None else round(self.containment, 4),
                "skipped_by": self.skipped_by, "rule": self.exempted_by,
                "decided_by": self.decided_by.value if self.decided_by else None,
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

    def query(self, fp: Fingerprint, message_id: str | None,
              recipients: Sequence[str] = (), *, every_copy: bool = False) -> Query:
        """What to read for one message (every limit is a detector setting): one record
        per text cluster under a sketch hash or a histogram where the store can (a check
        weighs at most CLUSTER_CANDIDATES of a cluster), every copy with ``every_copy``."""
        s = self.settings
        # Short texts are looked up by their shingles too: a short message sent again with
        # a line added shares all of them (the resend rule decides what that means).
        index = fp.sketch[:self.index_size]
        scoped = s.scope == "recipient" and bool(recipients)
        return Query(
            message_id_key=message_id_key(message_id) if s.match_message_id else None,
            digests=(fp.digest, *fp.part_digests, *fp.attached_digests),
            shingles=index,
            chunks=tuple(d for d, _ in fp.chunks[:self.index_size]),
            histogram=fp.histogram,
            histogram_sum=fp.histogram_sum,
            histogram_window=s.histogram_window if self._histogram_applies(fp) else 0,
            histogram_max_positions=s.histogram_max_positions,
            histogram_limit=min(s.max_candidates, s.histogram_candidates),
            exact_limit=NEWEST_EXACT,
            part_limit=NEWEST_PART,
            shingle_limit=s.posting_cap,
            # Boilerplate can sit anywhere (disclaimers, banners, sponsor blocks): every
            # sketch hash that many different stored texts share is discounted.
            counted=fp.sketch[self.index_size:] if index else (),
            count_limit=s.common_postings,
            recipients=tuple(dict.fromkeys(self.recipient_key(r) for r in recipients))
            if scoped else (),
            per_text=not every_copy,
            members=CLUSTER_MEMBERS,
            # (a check weighs no more of one cluster: those _few_per_cluster keeps)
            per_cluster=CLUSTER_CANDIDATES,
        )

    def candidates(self, fp: Fingerprint, query: Query, found: Found, *,
                   every_copy: bool = False) -> Candidates:
        """The records worth weighing, and the message's boilerplate hashes.

        A sketch hash that ``common_postings`` different stored texts file is boilerplate
        (a copy files only what its text cluster lacks, so a campaign's or a newsletter's
        copies never make its own text look common): left out of the lookup (unless it is
        all there is) and of resemblance.  Of the records sharing hashes, those sharing at
        least an eighth of the index, most shared first, up to ``max_candidates``; with
        every record under an exact key, in the histogram window or sharing a chunk; of one
        text cluster only a few (``CLUSTER_CANDIDATES``), unless ``every_copy``.
        """
        s = self.settings
        boilerplate = {value: count for value, count in found.counts.items()
                       if count >= query.count_limit}
        hits = _shingle_hits(found, query, self.index_size)
        least = max(1, len(query.shingles) // 8)
        by_shingle = dict(sorted(((doc_id, count) for doc_id, count in hits.items()
                                  if count >= least),
                                 key=lambda item: -item[1])[:s.max_candidates])
        chunk_hits: dict[int, int] = {}
        for ids in found.by_chunk.values():
            for doc_id in ids:
                chunk_hits[doc_id] = chunk_hits.get(doc_id, 0) + 1
        by_chunk = dict(sorted(chunk_hits.items(), key=lambda item: -item[1])[:s.max_candidates])
        wanted = set(found.by_message_id).union(found.by_digest, found.by_histogram,
                                                by_shingle, by_chunk)
        records = {doc_id: record for doc_id, record in sorted(found.records.items())
                   if doc_id in wanted}
        if not every_copy:
            records = _few_per_cluster(records, set(found.by_message_id).union(
                found.by_digest), hits)
        sketch = frozenset(fp.sketch)
        sharing = frozenset(doc_id for doc_id, record in records.items()
                            if not sketch.isdisjoint(record.sketch))
        return Candidates(records, found.by_message_id, found.by_digest, found.by_histogram,
                          by_shingle, by_chunk, sharing, boilerplate, found.delivered)

    def check(self, fp: Fingerprint, message_id: str | None,
              recipients: Sequence[str] = (), *, record_at: int | None = None,
              every_copy: bool = False, defects: tuple[str, ...] = (),
              exempted_by: str | None = None) -> Verdict:
        """The verdict for one fingerprinted message (``defects`` and ``exempted_by``, the
        parse's and the allow rule's, are carried in it for the front ends).

        With ``record_at``, a store that adds while checking (Redis:
        ``Store.adds_while_checking``) records the message in the same round trip when
        nothing it finds could make it other than unique; LMDB records it afterwards, in
        the same write transaction, once the verdict is known (:meth:`record`).  With
        ``every_copy``, every copy of a text found is weighed (``forget`` lists them all).
        """
        query = self.query(fp, message_id, recipients, every_copy=every_copy)
        new = None
        if record_at is not None and self.store.adds_while_checking:
            new = self._new_record(fp, message_id, recipients, record_at, 1)
            found = self.store.lookup_or_add(query, new)
        else:
            found = self.store.lookup(query)
        candidates = self.candidates(fp, query, found, every_copy=every_copy)
        scoped = bool(query.recipients)
        recipient_keys = {self.recipient_key(r): r for r in recipients} if scoped else {}
        evidence: list[Evidence] = []
        # Once per check, not per candidate (a large histogram window yields max_candidates).
        message_key = message_id_key(message_id)
        sketch_set = frozenset(fp.sketch)
        boilerplate = frozenset(candidates.boilerplate)
        for doc_id, record in candidates.records.items():
            found_by = tuple(name for name, ids in (
                ("message-id", candidates.by_message_id), ("digest", candidates.by_digest),
                ("histogram", candidates.by_histogram), ("shingles", candidates.by_shingle),
                ("attachments", candidates.by_chunk)) if doc_id in ids)
            had = None
            if scoped:
                delivered = candidates.delivered.get(record.cluster_id, frozenset())
                had = tuple(sorted(address for key, address in recipient_keys.items()
                                   if key in record.recipients or key in delivered))
            evidence.append(self._weigh(
                fp, message_key, record, found_by, boilerplate,
                sketch_set if doc_id in candidates.sharing else None, recipients, had))
        evidence.sort(key=lambda e: (_RANK[e.kind], e.score or 0.0, e.resemblance or 0.0),
                      reverse=True)
        containments = [e.containment for e in evidence if e.containment is not None]
        common = dict(fingerprint=fp, message_id=message_id, recipients=tuple(recipients),
                      evidence=tuple(evidence), defects=defects, exempted_by=exempted_by,
                      containment=max(containments) if containments else None,
                      boilerplate=tuple(sorted(candidates.boilerplate.items())),
                      recorded_id=new.doc_id if new is not None and new.doc_id else None)
        if not evidence or not evidence[0].is_duplicate:
            return Verdict(UNIQUE, **common)
        best = evidence[0]
        seen = sorted({r for e in evidence if e.is_duplicate for r in e.recipients_seen})
        return Verdict(best.kind, score=best.score, measure=best.measure, match=best.record,
                       decided_by=best.rule, recipients_seen=tuple(seen),
                       attachment=best.attachment, **common)

    def _weigh(self, fp: Fingerprint, key: bytes | None, record: Record,
               found_by: tuple[str, ...], boilerplate: frozenset[int],
               sketch_set: frozenset[int] | None, recipients: Sequence[str],
               had: tuple[str, ...] | None) -> Evidence:
        """What ``record`` says about the message: every measure, then the pair rules.

        ``sketch_set`` is the message's sketch as a set, or None when the two sketches share
        no hash.  ``had`` (recipient scope): the message's recipients who already had the
        record's text (it, or a copy of it in its cluster); a match counts only for them.
        """
        s = self.settings
        resemblance = containment = attachment_similarity = None
        if self._long_enough(fp) and self._long_enough(record):
            # Containment: how much of the stored message the new one holds (reported only).
            resemblance, containment = (0.0, 0.0) if sketch_set is None else \
                self._compare_sketches(record.sketch, fp.sketch, boilerplate, sketch_set)
        positions, largest = histogram_distance(fp.histogram, record.histogram)
        if fp.chunks and record.chunks:
            attachment_similarity = chunk_similarity(fp.chunks, record.chunks)
        judgement = judge(Pair(
            new=fp, stored_words=record.word_count, stored_digest=record.digest,
            stored_message_id=record.message_id,
            same_message_id=s.match_message_id and key is not None
            and key == record.message_id_key,
            new_features=fp.features, stored_features=Features.decode(record.features),
            resemblance=resemblance, containment_of_stored=containment,
            histogram_positions=positions,
            histogram_sum_distance=abs(fp.histogram_sum - record.histogram_sum),
            histogram_chars=record.histogram_chars,
            attachment_similarity=attachment_similarity, stored_sketch=record.sketch,
            settings=s))
        kind, note, seen = judgement.kind, judgement.note, ()
        if kind is not UNIQUE:
            if had is not None and (record.recipients or had):
                seen = had
                if not seen:
                    kind, note = UNIQUE, f"{judgement.kind} for other recipients only"
            else:
                seen = tuple(recipients)
        return Evidence(record, found_by, kind, judgement.rule, judgement.measure,
                        judgement.score, note, judgement.attachment, resemblance,
                        containment, positions, largest, attachment_similarity, seen,
                        judgement.kind)

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
            stored_rest = set(stored).difference(boilerplate)     # (sketches hold no
            new_rest = new_set.difference(boilerplate)              # hash twice)
            if len(stored_rest | new_rest) >= _MIN_RESIDUAL:
                return sketch_comparison(stored_rest, new_rest, self.sketch_size)
        return sketch_comparison(stored, new, self.sketch_size)

    # -- recording ---------------------------------------------------------------------

    def record(self, verdict: Verdict, when: int) -> Recording:
        """Remember a message.  Exact repeats bump the matched record; others are added.

        A near-duplicate is stored as a record of its own (so that a drifting campaign
        still matches its latest variant).  A copy (``copy_threshold``, or one mailing's
        personalised copy: :meth:`Verdict.copy_of`) joins the text cluster of the record
        it matched: only the index hashes that record lacks count it
        as another text holding them, so a text never looks common (boilerplate) however
        many copies of it arrive; and its recipients are filed under the cluster, so "who
        had this text" is one look-up.
        """
        copy_of = verdict.copy_of(self.settings.copy_threshold, mailing=True)
        if verdict.recorded_id is not None:   # added by the check, counted as unique
            if copy_of is not None or verdict.is_duplicate:
                # Nothing exact was found, but the message is a near-duplicate or a copy:
                # its record is set right (seen, cluster, novel hashes), and its count.
                self.store.replace(self._record_of(verdict, copy_of, verdict.recorded_id,
                                                   when))
                if verdict.is_duplicate:
                    self.store.count_verdict(UNIQUE, when, -1)
                    self.store.count_verdict(verdict.kind, when)
            return Recording(verdict.recorded_id, verdict.kind, when)
        keys = tuple(self.recipient_key(r) for r in verdict.recipients) \
            if self.settings.scope == "recipient" else ()
        # The same message again (also when recipient scope made it new for these
        # recipients): judged so by the rules, not merely the same digest ("Thanks!" from
        # another sender is a record of its own).
        exact = verdict.exact_match
        self.store.count_verdict(verdict.kind, when)
        if exact is not None:
            new_keys = tuple(dict.fromkeys(k for k in keys if k not in exact.recipients))
            if len(exact.recipients) + len(new_keys) <= RECIPIENTS_MAX:
                self.store.touch(exact.doc_id, when, keys)
                return Recording(exact.doc_id, verdict.kind, when, previous=exact)
            # More mailboxes than a record holds (a list, a newsletter): the new ones go
            # into a record of their own in the same text cluster, bringing no index hash,
            # so every mailbox that had the text stays filed under it.
            overflow = replace(self._record_of(verdict, None, 0, when),
                               cluster=exact.cluster_id, novel=(), recipients=new_keys,
                               seen=exact.seen + 1)
            return Recording(self.store.add(overflow), verdict.kind, when)
        return Recording(self.store.add(self._record_of(verdict, copy_of, 0, when)),
                         verdict.kind, when)

    def forget_added(self, verdict: Verdict, when: int) -> None:
        """Take back the record the check added (``Store.lookup_or_add``) for a message
        that is not to be remembered after all (refused, discarded, exempted)."""
        if verdict.recorded_id is not None:
            self.store.forget([verdict.recorded_id])
            self.store.count_verdict(UNIQUE, when, -1)

    def undo(self, recording: Recording) -> None:
        """Take back what :meth:`record` did: the record it added is forgotten, the one it
        saw again gets back what it was; the verdict is counted out."""
        self.store.count_verdict(recording.kind, recording.when, -1)
        if recording.previous is None:
            self.store.forget([recording.doc_id])
        else:
            self.store.replace(recording.previous)

    def _record_of(self, verdict: Verdict, copy_of: Record | None, doc_id: int,
                   when: int) -> Record:
        """The record a message that is not an exact repeat is remembered as: seen once
        more than its match, and, as a copy, in its match's text cluster with the index
        hashes its match lacks."""
        fp = verdict.fingerprint
        seen = verdict.match.seen + 1 if verdict.match is not None else 1
        cluster, novel = NO_CLUSTER, None
        if copy_of is not None:
            theirs = frozenset(copy_of.sketch)
            cluster = copy_of.cluster_id
            novel = tuple(h for h in fp.sketch[:self.index_size] if h not in theirs)
        return self._new_record(fp, verdict.message_id, verdict.recipients, when, seen,
                                doc_id, cluster=cluster, novel=novel)

    def _new_record(self, fp: Fingerprint, message_id: str | None,
                    recipients: Sequence[str], when: int, seen: int, doc_id: int = 0, *,
                    cluster: int = NO_CLUSTER, novel: tuple[int, ...] | None = None
                    ) -> Record:
        keys = tuple(self.recipient_key(r) for r in recipients) \
            if self.settings.scope == "recipient" else ()
        return Record(
            histogram=fp.histogram, histogram_sum=fp.histogram_sum,
            histogram_chars=fp.histogram_chars, sketch=fp.sketch,
            shingle_count=fp.shingle_count, word_count=fp.word_count, digest=fp.digest,
            message_id_key=message_id_key(message_id),
            message_id=safe_message_id(message_id), chunks=fp.chunks,
            recipients=keys, first_seen=when, last_seen=when, seen=seen, doc_id=doc_id,
            features=fp.features.encode(), cluster=cluster, novel=novel)


def _one_mailing(features: Features, stored: bytes) -> bool:
    """The same sender and subject (both known) as the stored record's features."""
    if not (features.sender and features.subject):
        return False
    other = Features.decode(stored)
    return other.sender == features.sender and other.subject == features.subject


def _few_per_cluster(records: dict[int, Record], exact: set[int],
                     hits: dict[int, int]) -> dict[int, Record]:
    """At most ``CLUSTER_CANDIDATES`` records of one text cluster (those sharing the most
    index hashes, then the newest), besides every exact match: a newsletter's 10,000
    personalised copies are one text, and weighing 24 of them says nothing one or two do
    not (who had the text is filed under the cluster)."""
    ranked = sorted(records.items(), key=lambda item: (
        item[0] in exact, hits.get(item[0], 0), item[0]), reverse=True)
    kept: dict[int, int] = {}
    chosen = set()
    for doc_id, record in ranked:
        cluster = record.cluster_id
        if doc_id in exact or kept.get(cluster, 0) < CLUSTER_CANDIDATES:
            kept[cluster] = kept.get(cluster, 0) + 1
            chosen.add(doc_id)
    return {doc_id: record for doc_id, record in records.items() if doc_id in chosen}


def _shingle_hits(found: Found, query: Query, index_size: int) -> dict[int, int]:
    """How many of the query's index hashes each record found under them holds, counting
    only the hashes fewer than ``query.count_limit`` different texts hold (the others are
    boilerplate), unless every hash found is such; first found first.  (Counted in the
    records' sketches: with ``Query.per_text`` a hash lists one record per text cluster,
    which holds more of the query's hashes than it is listed under.)"""
    limit = query.count_limit
    present = [value for value in query.shingles if value in found.by_shingle]
    looked_up = [value for value in present
                 if not limit or found.counts.get(value, 0) < limit] or present
    if query.per_text:
        wanted = frozenset(looked_up)
        records = found.records
        ids = dict.fromkeys(doc_id for value in looked_up for doc_id in found.by_shingle[value])
        for doc_id in list(ids):        # and the newest members of their clusters
            if doc_id in records:
                ids.update(dict.fromkeys(found.members.get(records[doc_id].cluster_id, ())))
        held = {doc_id: len(wanted.intersection(records[doc_id].sketch[:index_size]))
                for doc_id in ids if doc_id in records}
        return {doc_id: count for doc_id, count in held.items() if count}
    hits: dict[int, int] = {}
    for value in looked_up:
        for doc_id in found.by_shingle[value]:
            hits[doc_id] = hits.get(doc_id, 0) + 1
    return hits
