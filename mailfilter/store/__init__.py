"""The memory of seen mail: the :class:`Store` protocol, records, and ``open_store``.

A store keeps hashes and counts, never message text: a record is a fingerprint, the hashes
of its recipients, times and a seen-counter, the Message-ID (needed for ``match=``) and the
detector's own small ``features``, opaque to the store.  It answers one :class:`Query` with
one :class:`Found` (one read transaction, or one round trip for a networked store): the ids
under the keys asked for and their records; it ranks nothing and never decides verdicts
(the detector does, once, for every backend).  Two backends implement :class:`Store`: LMDB
(``lmdb.py``, the default) and Redis or Redis Cluster (``redis/``); tests run the same
behaviours on both.

The record codec (:meth:`Record.encode`, :meth:`Record.decode`) writes version 3; versions 1
(no features) and 2 (no cluster) are still read, so stores written before open as they are.  Its
layout is exported as :data:`LAYOUT`, from which the Redis scripts take every offset.  The
histogram index (:func:`histogram_keys`) is defined here too, for both backends.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol, TypeVar

import xxhash

from mailfilter.config import check_store
from mailfilter.values import Fields, Value, init

T = TypeVar("T")
# The store's layout (its sub-databases or keys); a store of an older layout is upgraded
# by the first process that opens it for writing.  3: the text index and the recipients
# under their text cluster.  4: LMDB's indexes of text clusters (one record per cluster under
# each index hash and each distinct histogram, and a cluster's members); Redis's layout is
# that of 3.
SCHEMA_VERSION = 4
READABLE_SCHEMAS = frozenset({1, 2, 3, 4})
# The record format: the first byte of every encoded record.  Versions 1 (no ``features``)
# and 2 (no cluster, every index hash filed) are still read; records are written as 3.
RECORD_VERSION = 3
READABLE_VERSIONS = frozenset({1, 2, 3})
# Ids read per Message-ID and per digest (the newest), and per part digest: the detector's
# Query.exact_limit and part_limit, and what Redis's idempotent add looks through.
NEWEST_EXACT = 16
NEWEST_PART = 4
MESSAGE_ID_MAX = 250
RECIPIENTS_MAX = 64
FEATURES_MAX = 1024
_UNSAFE_ID = re.compile(r"[\x00-\x1f\x7f;]")

# No cluster stored (records before version 3): the record is its own cluster.
NO_CLUSTER = 0
# ``novel`` count meaning "the first index_size sketch hashes" (every record before 3).
ALL_NOVEL = 0xFFFF
# The fixed header of an encoded record, in order: (field, struct code), big-endian.
_HEADER_FIELDS = (
    ("version", "B"), ("flags", "B"), ("first_seen", "I"), ("last_seen", "I"), ("seen", "I"),
    ("histogram", "36s"), ("histogram_sum", "H"), ("histogram_chars", "I"),
    ("shingle_count", "I"), ("word_count", "I"), ("digest", "16s"), ("message_id_key", "16s"),
    ("n_sketch", "H"), ("n_chunks", "H"), ("n_recipients", "H"), ("n_message_id", "H"))
_HEADER = struct.Struct(">" + "".join(code for _, code in _HEADER_FIELDS))
_CHUNK = struct.Struct(">QI")
_U16 = struct.Struct(">H")


class RecordLayout(Value):
    """Where everything is in an encoded :class:`Record` (what a Redis script reads).

    An encoded record is the fixed header (``fields``: name → (offset, width) in bytes,
    every number big-endian unsigned), then the variable sections in ``sections`` order:
    ``n_sketch`` sketch hashes of ``sketch_width`` bytes, ``n_chunks`` attachment chunks
    (a ``chunk_width``-byte entry: an 8-byte digest then a 4-byte length), ``n_recipients``
    recipient hashes of ``recipient_width`` bytes, ``n_message_id`` bytes of Message-ID,
    from version 2 on a ``features_length_width``-byte length and that many bytes of
    ``features``, and from version 3 on the record's ``cluster`` (``cluster_width`` bytes,
    0: itself) and the index hashes new to its cluster (a ``novel_length_width`` count,
    ``ALL_NOVEL`` for the first index_size of the sketch, else that many hashes of
    ``sketch_width`` bytes).  All versions share the header and the first four sections, so
    a script that edits the header or the recipients and copies the rest keeps any.
    """

    __slots__ = ("header", "fields", "sections", "sketch_width", "chunk_width",
                 "chunk_digest_width", "recipient_width", "recipients_max", "message_id_max",
                 "features_length_width", "features_max", "cluster_width",
                 "novel_length_width", "all_novel")

    def __init__(self, header: int, fields: dict[str, tuple[int, int]],
                 sections: tuple[str, ...], sketch_width: int, chunk_width: int,
                 chunk_digest_width: int, recipient_width: int, recipients_max: int,
                 message_id_max: int, features_length_width: int, features_max: int,
                 cluster_width: int, novel_length_width: int, all_novel: int) -> None:
        init(self, header=header, fields=fields, sections=sections,
             sketch_width=sketch_width, chunk_width=chunk_width,
             chunk_digest_width=chunk_digest_width, recipient_width=recipient_width,
             recipients_max=recipients_max, message_id_max=message_id_max,
             features_length_width=features_length_width, features_max=features_max,
             cluster_width=cluster_width, novel_length_width=novel_length_width,
             all_novel=all_novel)

    def offset(self, name: str) -> int:
        return self.fields[name][0]


def _layout() -> RecordLayout:
    fields, position = {}, 0
    for name, code in _HEADER_FIELDS:
        width = struct.calcsize(">" + code)
        fields[name] = (position, width)
        position += width
    return RecordLayout(header=position, fields=fields,
                        sections=("sketch", "chunks", "recipients", "message_id", "features",
                                  "cluster", "novel"),
                        sketch_width=4, chunk_width=_CHUNK.size, chunk_digest_width=8,
                        recipient_width=8, recipients_max=RECIPIENTS_MAX,
                        message_id_max=MESSAGE_ID_MAX, features_length_width=2,
                        features_max=FEATURES_MAX, cluster_width=8, novel_length_width=2,
                        all_novel=ALL_NOVEL)


LAYOUT = _layout()

# -- the histogram index -------------------------------------------------------------------
#
# Seed 000's rule matches a stored histogram whose sum is within ±window of the message's
# and which differs in at most ``histogram_max_positions`` of the 36 bins.  The bins are
# split into HISTOGRAM_GROUPS groups (bin i in group i mod 3); two histograms that differ in
# at most 2 bins are equal in at least one group, so indexing a record under (group, sum,
# the group's 12 bins) for every group, and looking up the message's keys for every sum in
# the window, finds every record the rule can match, and few others: the entries compared
# are the records equal to the message in a third of its bins, not every record whose sum
# is near (a number that grows with the store).  Above 2 positions the index cannot promise
# that; stores then read the whole sum window.
HISTOGRAM_GROUPS = 3
# (A Redis store files a group by a number modulo this prime, which its Lua computes too.)
HISTOGRAM_PRIME = 2_147_483_647


def histogram_key(group: int, histogram_sum: int, histogram: bytes) -> bytes:
    """The index key of ``histogram`` in ``group``: the group (1 byte), the sum (2 bytes,
    at most 65535) and the group's bins."""
    return bytes((group,)) + min(histogram_sum, 0xFFFF).to_bytes(2, "big") \
        + histogram[group::HISTOGRAM_GROUPS]


def histogram_keys(histogram: bytes, histogram_sum: int) -> list[bytes]:
    """A record's keys in the histogram index, one per group."""
    return [histogram_key(group, histogram_sum, histogram) for group in range(HISTOGRAM_GROUPS)]


def histogram_probe_sums(histogram_sum: int, window: int) -> range:
    """The sums a lookup reads: ±``window`` around ``histogram_sum`` within 0..65535."""
    return range(max(0, histogram_sum - window), min(0xFFFF, histogram_sum + window) + 1)


def histogram_probe_keys(histogram: bytes, histogram_sum: int, window: int) -> list[bytes]:
    """The keys a lookup reads, sum by sum, then group by group (usable when the rule
    allows at most ``HISTOGRAM_GROUPS - 1`` differing positions)."""
    groups = [histogram[group::HISTOGRAM_GROUPS] for group in range(HISTOGRAM_GROUPS)]
    return [bytes((group,)) + value.to_bytes(2, "big") + groups[group]
            for value in histogram_probe_sums(histogram_sum, window)
            for group in range(HISTOGRAM_GROUPS)]


def histogram_group_number(group: int, histogram: bytes) -> int:
    """The number a Redis store files a histogram under for ``group`` (``group_number`` in
    its Lua): the group and its bins read as one big-endian number, modulo a prime.  The sum
    is left out there: a lookup reads one key per group and checks the sums it finds."""
    return int.from_bytes(bytes((group,)) + histogram[group::HISTOGRAM_GROUPS], "big") \
        % HISTOGRAM_PRIME


class StoreError(RuntimeError):
    """The store cannot be used; the message is meant for the postmaster as it is."""


class StoreUnavailable(StoreError):
    """The store is not open (yet): messages get ``on_error`` until it opens."""

    def __init__(self, message: str = "store unavailable") -> None:
        super().__init__(message)


class StoreMismatch(StoreError):
    """The store was built with other fingerprint parameters."""


class StoreDamaged(StoreError):
    """The store's files disagree with themselves (a damaged page): it is refused, not
    read as empty; restore it from a backup or move it aside."""


def message_id_key(message_id: str | None) -> bytes | None:
    """16-byte key of a Message-ID (angle brackets and case of the domain ignored)."""
    if not message_id:
        return None
    value = message_id.strip().strip("<>").strip()
    if not value:
        return None
    local, at, domain = value.rpartition("@")
    normal = f"{local}@{domain.lower()}" if at else value
    return xxhash.xxh3_128_digest(normal.encode("utf-8", "replace"))


def recipient_key(address: str) -> int:
    """64-bit hash of an envelope recipient (lowercased, brackets stripped)."""
    return xxhash.xxh3_64_intdigest(address.strip().strip("<>").lower().encode("utf-8",
                                                                                "replace"))


def safe_message_id(message_id: str | None) -> str | None:
    """A Message-ID fit for a header value: no CR/LF/controls/';', bounded length."""
    if not message_id:
        return None
    cleaned = _UNSAFE_ID.sub("", message_id).strip()
    return cleaned[:MESSAGE_ID_MAX] or None


class Record(Fields):
    """One remembered message."""

    __slots__ = ("histogram", "histogram_sum", "histogram_chars", "sketch", "shingle_count",
                 "word_count", "digest", "message_id_key", "message_id", "chunks",
                 "recipients", "first_seen", "last_seen", "seen", "doc_id", "features",
                 "cluster", "novel")

    def __init__(self, histogram: bytes, histogram_sum: int, histogram_chars: int,
                 sketch: tuple[int, ...], shingle_count: int, word_count: int, digest: bytes,
                 message_id_key: bytes | None, message_id: str | None,
                 chunks: tuple[tuple[int, int], ...] = (), recipients: tuple[int, ...] = (),
                 first_seen: int = 0, last_seen: int = 0, seen: int = 1, doc_id: int = 0,
                 # The detector's own small encoded data (up to FEATURES_MAX bytes): kept
                 # and returned verbatim, never read by a store.
                 features: bytes = b"",
                 # The text cluster the record belongs to: the id of the first record of
                 # that text (the detector judged this one a copy of it); NO_CLUSTER: its
                 # own.  Recipients are filed under their cluster (``Found.delivered``).
                 cluster: int = NO_CLUSTER,
                 # Its index hashes that its cluster did not have yet, filed in the text
                 # index whose counts say how many *different* texts hold a hash (so that
                 # copies never make a text look common); None: all of the first
                 # index_size (a record heading its cluster).
                 novel: tuple[int, ...] | None = None) -> None:
        self.histogram = histogram
        self.histogram_sum = histogram_sum
        self.histogram_chars = histogram_chars
        self.sketch = sketch
        self.shingle_count = shingle_count
        self.word_count = word_count
        self.digest = digest
        self.message_id_key = message_id_key
        self.message_id = message_id
        self.chunks = chunks
        self.recipients = recipients
        self.first_seen = first_seen
        self.last_seen = last_seen
        self.seen = seen
        self.doc_id = doc_id
        self.features = features
        self.cluster = cluster
        self.novel = novel

    @property
    def cluster_id(self) -> int:
        """The id of the record's text cluster (its own id when it heads one)."""
        return self.cluster or self.doc_id

    def novel_hashes(self, index_size: int) -> tuple[int, ...]:
        """The index hashes this record brings to its text cluster."""
        return self.sketch[:index_size] if self.novel is None else self.novel

    def encode(self) -> bytes:
        """The record as bytes (record version 3; see :class:`RecordLayout`)."""
        if len(self.features) > FEATURES_MAX:
            raise ValueError(f"record features are {len(self.features)} bytes; at most "
                             f"{FEATURES_MAX} are stored")
        message_id = (self.message_id or "").encode("utf-8", "replace")[:MESSAGE_ID_MAX]
        recipients = self.recipients[:RECIPIENTS_MAX]
        head = _HEADER.pack(
            RECORD_VERSION, 0, self.first_seen, self.last_seen, self.seen, self.histogram,
            self.histogram_sum, self.histogram_chars, self.shingle_count, self.word_count,
            self.digest, self.message_id_key or bytes(16), len(self.sketch), len(self.chunks),
            len(recipients), len(message_id))
        parts = [head, struct.pack(f">{len(self.sketch)}I", *self.sketch)]
        for digest, length in self.chunks:
            parts.append(struct.pack(">QI", digest, length))
        parts.append(struct.pack(f">{len(recipients)}Q", *recipients))
        parts.append(message_id)
        parts.append(_U16.pack(len(self.features)))
        parts.append(self.features)
        parts.append(_U64.pack(self.cluster))
        if self.novel is None:
            parts.append(_U16.pack(ALL_NOVEL))
        else:
            novel = self.novel[:ALL_NOVEL - 1]
            parts.append(struct.pack(f">H{len(novel)}I", len(novel), *novel))
        return b"".join(parts)

    @classmethod
    def decode(cls, doc_id: int, data: bytes) -> Record:
        """The record encoded in ``data``, record version 1, 2 or 3 (positional
        construction and cached formats: a check decodes every record it reads, so this is
        on its hot path)."""
        (version, flags, first_seen, last_seen, seen, histogram, histogram_sum,
         histogram_chars, shingle_count, word_count, digest, msgid_key, n_sketch, n_chunks,
         n_recipients, n_message_id) = _HEADER.unpack_from(data, 0)
        if version not in READABLE_VERSIONS:
            raise StoreError(f"record {doc_id} has schema {version}; this dupfilter reads "
                             f"schemas {sorted(READABLE_VERSIONS)}")
        offset = _HEADER.size
        sketch = (_SKETCHES.get(n_sketch) or _format(_SKETCHES, ">%dI", n_sketch)
                  ).unpack_from(data, offset)
        offset += 4 * n_sketch
        chunks: tuple[tuple[int, int], ...] = ()
        if n_chunks:
            chunks = tuple(_CHUNK.iter_unpack(data[offset:offset + 12 * n_chunks]))
            offset += 12 * n_chunks
        recipients: tuple[int, ...] = ()
        if n_recipients:
            recipients = (_RECIPIENTS.get(n_recipients)
                          or _format(_RECIPIENTS, ">%dQ", n_recipients)).unpack_from(data, offset)
            offset += 8 * n_recipients
        message_id = str(data[offset:offset + n_message_id], "utf-8", "replace") \
            if n_message_id else None
        features = b""
        cluster, novel = NO_CLUSTER, None
        # Version 2 records end with their features; so do version 1 records flagged so
        # (an interim encoding that never bumped the version); version 3 then has its
        # cluster and novel hashes.
        if version > 1 or flags & _SCHEMA_1_FEATURES:
            offset += n_message_id
            (n_features,) = _U16.unpack_from(data, offset)
            features = bytes(data[offset + 2:offset + 2 + n_features])
            if len(features) != n_features:
                raise StoreError(f"record {doc_id} is cut short")
            if version > 2:
                offset += 2 + n_features
                cluster, n_novel = _CLUSTER_NOVEL.unpack_from(data, offset)
                if n_novel != ALL_NOVEL:
                    novel = (_SKETCHES.get(n_novel) or _format(_SKETCHES, ">%dI", n_novel)
                             ).unpack_from(data, offset + _CLUSTER_NOVEL.size)
        return cls(histogram, histogram_sum, histogram_chars, sketch, shingle_count,
                   word_count, digest, None if msgid_key == _NO_KEY else msgid_key,
                   message_id, chunks, recipients, first_seen, last_seen, seen, doc_id,
                   features, cluster, novel)


_NO_KEY = bytes(16)
_U64 = struct.Struct(">Q")
_CLUSTER_NOVEL = struct.Struct(">QH")
_SCHEMA_1_FEATURES = 1   # flags bit of a schema 1 record that ends with features
_SKETCHES: dict[int, struct.Struct] = {}
_RECIPIENTS: dict[int, struct.Struct] = {}


def _format(cache: dict[int, struct.Struct], pattern: str, count: int) -> struct.Struct:
    """``struct.Struct(pattern % count)``, remembered in ``cache``."""
    cache[count] = struct.Struct(pattern % count)
    return cache[count]


class Query(Value):
    """What one check reads: the postings under a message's keys, in one read transaction
    (LMDB) or one round trip (Redis).  Every limit is the detector's; a store reads what it
    is asked and decides nothing."""

    __slots__ = ("message_id_key", "digests", "shingles", "chunks", "histogram",
                 "histogram_sum", "histogram_window", "histogram_max_positions",
                 "histogram_limit", "exact_limit", "part_limit", "shingle_limit", "counted",
                 "count_limit", "recipients", "per_text", "members", "per_cluster")

    def __init__(
        self,
        message_id_key: bytes | None,
        digests: tuple[bytes, ...],      # the body digest, then more texts' digests (parts)
        shingles: tuple[int, ...],       # sketch hashes: their newest ids, and how many
        #                                  different texts hold each (Found.counts)
        chunks: tuple[int, ...],         # attachment chunk digests: their newest ids
        histogram: bytes,
        histogram_sum: int,
        histogram_window: int,           # 0: no histogram lookup
        histogram_max_positions: int,    # bins a histogram match may differ in
        histogram_limit: int,            # that many matches: the closest, then the oldest
        exact_limit: int,                # newest ids per Message-ID key and body digest
        part_limit: int,                 # newest ids per further digest
        shingle_limit: int,              # newest ids per sketch hash and chunk
        counted: tuple[int, ...] = (),   # more sketch hashes: only how many records hold each
        count_limit: int = 0,            # counts stop here (how many is "many" is the
        #                                  caller's); 0: no counts
        recipients: tuple[int, ...] = (),   # recipient keys: which of them each cluster
        #                                     found has been delivered to (Found.delivered)
        per_text: bool = False,          # sketch hashes and histogram window: one record per
        #                                  text cluster (a store that indexes clusters:
        #                                  LMDB), not every copy; a newsletter's 10,000
        #                                  copies are then one entry
        members: int = 0,                # with per_text: the newest members of each text
        #                                  cluster found under a sketch hash (Found.members)
        per_cluster: int = 0,            # with per_text: histogram matches kept per text
        #                                  cluster, the newest of the closest
        #                                  histogram_limit (0: all)
    ) -> None:
        init(self, message_id_key=message_id_key, digests=digests, shingles=shingles,
             chunks=chunks, histogram=histogram, histogram_sum=histogram_sum,
             histogram_window=histogram_window,
             histogram_max_positions=histogram_max_positions,
             histogram_limit=histogram_limit, exact_limit=exact_limit, part_limit=part_limit,
             shingle_limit=shingle_limit, counted=counted, count_limit=count_limit,
             recipients=recipients, per_text=per_text, members=members,
             per_cluster=per_cluster)


class Found(Fields):
    """What a store read for a :class:`Query`: ids under each key, newest first, every
    record among them, and the recipients filed under their clusters.  (Each list and
    dict left out is a new empty one, which the store fills.)"""

    __slots__ = ("by_message_id", "by_digest", "by_shingle", "counts", "by_chunk",
                 "by_histogram", "histogram_window_size", "records", "delivered", "members")

    def __init__(
        self,
        by_message_id: list[int] | None = None,
        by_digest: list[int] | None = None,
        # sketch hash → the newest ids under it (at most Query.shingle_limit)
        by_shingle: dict[int, list[int]] | None = None,
        # sketch hash (of Query.shingles and Query.counted) → different texts holding it
        # (records for which it was new to their cluster), up to count_limit
        counts: dict[int, int] | None = None,
        by_chunk: dict[int, list[int]] | None = None,
        # doc id → number of histogram bins that differ (within the limit), closest first
        by_histogram: dict[int, int] | None = None,
        histogram_window_size: int = 0,
        # every id listed above → its record
        records: dict[int, Record] | None = None,
        # cluster id (Record.cluster_id) → the query's recipient keys filed under it
        delivered: dict[int, frozenset[int]] | None = None,
        # text cluster found under a sketch hash → its newest members (Query.members)
        members: dict[int, list[int]] | None = None,
    ) -> None:
        self.by_message_id = [] if by_message_id is None else by_message_id
        self.by_digest = [] if by_digest is None else by_digest
        self.by_shingle = {} if by_shingle is None else by_shingle
        self.counts = {} if counts is None else counts
        self.by_chunk = {} if by_chunk is None else by_chunk
        self.by_histogram = {} if by_histogram is None else by_histogram
        self.histogram_window_size = histogram_window_size
        self.records = {} if records is None else records
        self.delivered = {} if delivered is None else delivered
        self.members = {} if members is None else members

    @property
    def empty(self) -> bool:
        """Nothing at all was found."""
        return not self.records

    @property
    def exact(self) -> bool:
        """A record is under the query's Message-ID key or one of its digests: the message
        may be one seen before, so ``lookup_or_add`` adds nothing."""
        return bool(self.by_message_id or self.by_digest)


# What `count_decision` counts: a daemon's action on a message, "skipped" (an allow rule
# skipped the check), "unchecked" (an error: on_error applied), "refused" (too large).
DECISIONS: tuple[str, ...] = ("accept", "tag", "reject", "tempfail", "discard", "quarantine",
                              "drop-recipients", "skipped", "unchecked", "refused")


class Store(Protocol):
    """Everything the engine, the detector and the admin commands ask of a store.

    Both backends (:class:`~mailfilter.store.lmdb.LmdbStore`,
    :class:`~mailfilter.store.redis.RedisStore`) implement all of it; tests run the same
    behaviours on both (``tests/support/stores.py``).  Record ids are positive integers
    that grow with the time of the first add (per partition on a Redis Cluster).
    """

    location: str
    # True when a check that will record passes the record to :meth:`lookup_or_add`
    # (Redis: the check's script is the one atomic step).  False when the engine checks
    # and records a message in one write transaction anyway (LMDB: :meth:`atomically`, or
    # the writer's batch): the record is then added once the verdict is known, so that a
    # near-duplicate is not added and then written again (:meth:`replace`).
    adds_while_checking: bool

    def lookup(self, query: Query) -> Found:
        """Read every posting ``query`` names and the records they list: one read
        transaction (LMDB) or one round trip (Redis)."""
        ...

    def lookup_or_add(self, query: Query, record: Record) -> Found:
        """:meth:`lookup`; unless a record is under the query's Message-ID key or one of its
        digests (``Found.exact``), also add ``record`` and count a "unique" verdict on the
        day of ``record.first_seen``, in the same transaction or script: a new message is
        checked and remembered in one step, and two copies of one message checked at once
        leave one record.

        ``record.doc_id`` is set when the record was added, else left 0 (the caller then
        records as usual: :meth:`count_verdict`, then :meth:`touch` or :meth:`add`); a
        record added for a message the caller then judges a near-duplicate is set right
        with :meth:`replace` (and its count with :meth:`count_verdict`).  A read-only
        store, and a Redis store of several partitions, only look up.
        """
        ...

    def add(self, record: Record) -> int:
        """Store ``record`` with its index entries (in the text index only its
        ``novel`` hashes; its recipients under its cluster); returns (and sets) its id."""
        ...

    def replace(self, record: Record) -> None:
        """Write ``record`` anew under its id (``record.doc_id``), its index entries made
        again from it; an id that is gone is ignored."""
        ...

    def touch(self, doc_id: int, when: int, recipients: Sequence[int]) -> None:
        """One more sighting of a record: ``seen`` + 1, last seen ``when`` (never moved
        back), ``recipients`` merged in (the newest ``RECIPIENTS_MAX`` kept, every one filed
        under the record's cluster); everything else, ``features`` included, unchanged.  An
        id that is gone is ignored."""
        ...

    def count_verdict(self, verdict: str, when: int, change: int = 1) -> None:
        """Add ``change`` to the counter of ``verdict`` on the day of ``when`` (``stats``)."""
        ...

    def count_decision(self, decision: str, when: int) -> None:
        """Add one to the day's counter of a daemon's ``decision`` (one of DECISIONS: its
        action, or why it took none), for `dupfilter-db stats`; rejected, discarded and
        unchecked mail is never recorded, so the verdict counters miss it."""
        ...

    def atomically(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` (lookups and writes) as one unit: a transaction where the backend
        has them, one batch of writes otherwise."""
        ...

    def get(self, doc_id: int) -> Record | None:
        """The record with id ``doc_id``, or None."""
        ...

    def prune(self, before: int, *, removed: Callable[[Record], None] | None = None) -> int:
        """Remove the records last seen before ``before`` (epoch seconds); how many.
        ``removed``, when given, is called with each record removed, once it is gone.
        Redis expires records by TTL instead and returns 0."""
        ...

    def stale(self, before: int) -> Iterator[Record]:
        """The records ``prune(before)`` would remove (last seen before ``before``), oldest
        first: what ``dupfilter-db prune`` lists (``--dry-run``) and reports."""
        ...

    def forget(self, doc_ids: Sequence[int]) -> int:
        """Remove these records and their index entries; how many there were."""
        ...

    def find_message_id(self, message_id: str) -> list[int]:
        """Ids of the records stored under this Message-ID."""
        ...

    def records(self) -> Iterator[Record]:
        """Every record (for ``scan --json``, ``verify``, exports)."""
        ...

    def stats(self) -> dict[str, object]:
        """``backend``, ``location``, ``records``, ``oldest`` and ``newest`` last-seen
        times, ``verdicts_per_day`` ({day start: {verdict: count}}), ``used_bytes``, and
        whatever else the backend can tell (``dupfilter-db stats``)."""
        ...

    def verify(self) -> list[str]:
        """Problems found: records that do not decode, index entries without their record
        or records without their entries (``dupfilter-db verify``); empty when sound."""
        ...

    def close(self) -> None:
        """Release the store (idempotent)."""
        ...


def open_store(location: str, parameters: dict[str, object], *, map_size_mb: int = 64,
               file_mode: int = 0o600, create: bool = True, readonly: bool = False,
               key_prefix: str = "dupfilter:", timeout: float = 2.0,
               retention_seconds: float = 30 * 86400) -> Store:
    """A store for ``location``: a ``redis://`` URL means Redis, anything else an LMDB folder."""
    check_store(location)       # a mistyped URL must not become an LMDB folder of that name
    if location.startswith(("redis://", "rediss://", "unix://")):
        from mailfilter.store.redis import RedisStore
        return RedisStore(location, parameters, key_prefix=key_prefix, timeout=timeout,
                          retention_seconds=retention_seconds, create=create,
                          readonly=readonly)
    from mailfilter.store.lmdb import LmdbStore
    return LmdbStore(location, parameters, map_size_mb=map_size_mb, file_mode=file_mode,
                     create=create, readonly=readonly)
