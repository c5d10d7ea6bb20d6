"""The memory of seen mail: the :class:`Store` protocol, records, and ``open_store``.

A store keeps hashes and counts, never message text: a record is a fingerprint, the hashes
of its recipients, times and a seen-counter, plus the Message-ID (needed for ``match=``).
It answers one :class:`Probe` with one :class:`Candidates` (one read transaction, or one
round trip for a networked store); it never decides verdicts.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

import xxhash

from mailfilter.config import check_store

T = TypeVar("T")
SCHEMA_VERSION = 1
_MESSAGE_ID_MAX = 250
_RECIPIENTS_MAX = 64
_HEADER = struct.Struct(">BBIII36sHIII16s16sHHHH")
_UNSAFE_ID = re.compile(r"[\x00-\x1f\x7f;]")


class StoreError(RuntimeError):
    """The store cannot be used; the message is meant for the postmaster as it is."""


class StoreMismatch(StoreError):
    """The store was built with other fingerprint parameters."""


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
    return cleaned[:_MESSAGE_ID_MAX] or None


@dataclass(slots=True)
class Record:
    """One remembered message."""

    histogram: bytes
    histogram_sum: int
    histogram_chars: int
    sketch: tuple[int, ...]
    shingle_count: int
    word_count: int
    digest: bytes
    message_id_key: bytes | None
    message_id: str | None
    chunks: tuple[tuple[int, int], ...] = ()
    recipients: tuple[int, ...] = ()
    first_seen: int = 0
    last_seen: int = 0
    seen: int = 1
    doc_id: int = 0
    # The detector's own data (mailfilter/features.py), opaque to the store: kept as it
    # is, after the Message-ID, when the header's flags say so (records without it decode
    # as before).
    features: bytes = b""

    def encode(self) -> bytes:
        message_id = (self.message_id or "").encode("utf-8", "replace")[:_MESSAGE_ID_MAX]
        recipients = self.recipients[:_RECIPIENTS_MAX]
        features = self.features[:_FEATURES_MAX]
        head = _HEADER.pack(
            SCHEMA_VERSION, _HAS_FEATURES if features else 0, self.first_seen, self.last_seen,
            self.seen, self.histogram,
            self.histogram_sum, self.histogram_chars, self.shingle_count, self.word_count,
            self.digest, self.message_id_key or bytes(16), len(self.sketch), len(self.chunks),
            len(recipients), len(message_id))
        parts = [head, struct.pack(f">{len(self.sketch)}I", *self.sketch)]
        for digest, length in self.chunks:
            parts.append(struct.pack(">QI", digest, length))
        parts.append(struct.pack(f">{len(recipients)}Q", *recipients))
        parts.append(message_id)
        if features:
            parts.append(len(features).to_bytes(2, "big") + features)
        return b"".join(parts)

    @classmethod
    def decode(cls, doc_id: int, data: bytes) -> Record:
        """The record encoded in ``data`` (positional construction and cached formats: a
        check decodes up to ``max_candidates`` records, so this is on its hot path)."""
        (version, flags, first_seen, last_seen, seen, histogram, histogram_sum,
         histogram_chars, shingle_count, word_count, digest, msgid_key, n_sketch, n_chunks,
         n_recipients, n_message_id) = _HEADER.unpack_from(data, 0)
        if version != SCHEMA_VERSION:
            raise StoreError(f"record {doc_id} has schema {version}, expected {SCHEMA_VERSION}")
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
        offset += n_message_id
        features = b""
        if flags & _HAS_FEATURES:
            size = int.from_bytes(data[offset:offset + 2], "big")
            features = bytes(data[offset + 2:offset + 2 + size])
        return cls(histogram, histogram_sum, histogram_chars, sketch, shingle_count,
                   word_count, digest, None if msgid_key == _NO_KEY else msgid_key,
                   message_id, chunks, recipients, first_seen, last_seen, seen, doc_id,
                   features)


_NO_KEY = bytes(16)
_HAS_FEATURES = 1
_FEATURES_MAX = 2048
_CHUNK = struct.Struct(">QI")
_SKETCHES: dict[int, struct.Struct] = {}
_RECIPIENTS: dict[int, struct.Struct] = {}


def _format(cache: dict[int, struct.Struct], pattern: str, count: int) -> struct.Struct:
    """``struct.Struct(pattern % count)``, remembered in ``cache``."""
    cache[count] = struct.Struct(pattern % count)
    return cache[count]


@dataclass(frozen=True, slots=True)
class Probe:
    """What to look up for one message: every index, in one transaction."""

    message_id_key: bytes | None
    digest: bytes
    histogram: bytes
    histogram_sum: int
    histogram_window: int          # 0 disables the histogram lookup
    histogram_max_positions: int
    sketch_index: tuple[int, ...]  # the sketch hashes to look up in the shingle index
    min_shared: int                # candidates must share at least this many of them
    chunk_index: tuple[int, ...]
    posting_cap: int
    max_candidates: int
    # Sketch hashes from the message's last lines: those with at least ``common_postings``
    # index entries are boilerplate (list footers), reported in ``Candidates.common``.
    tail_hashes: tuple[int, ...] = ()
    common_postings: int = 1 << 62
    # The message's whole sketch: boilerplate only matters for records sharing one of its
    # hashes, so a store need not count the tail hashes when no record does.
    sketch: tuple[int, ...] = ()
    # At most this many histogram-window matches (closest, then oldest); None: as many as
    # ``max_candidates``.
    histogram_candidates: int | None = None
    # More exact digests to look up (a short message's parts: see
    # ``Fingerprint.part_digests``); what they find is reported in ``by_digest``.
    part_digests: tuple[bytes, ...] = ()

    @property
    def histogram_limit(self) -> int:
        """How many histogram-window matches to return."""
        if self.histogram_candidates is None:
            return self.max_candidates
        return min(self.max_candidates, self.histogram_candidates)


@dataclass(slots=True)
class Candidates:
    """Records found for a probe, and by which index each was found."""

    records: dict[int, Record] = field(default_factory=dict)
    by_message_id: list[int] = field(default_factory=list)
    by_digest: list[int] = field(default_factory=list)
    # doc id → number of histogram positions that differ (only those within the limit)
    by_histogram: dict[int, int] = field(default_factory=dict)
    # doc id → number of probe sketch hashes it shares
    by_shingle: dict[int, int] = field(default_factory=dict)
    by_chunk: dict[int, int] = field(default_factory=dict)
    histogram_window_size: int = 0
    # Ids of returned records whose sketch shares a hash with ``Probe.sketch``, when the
    # store worked it out (None: not known).  The others resemble the message in nothing,
    # so the detector need not compare them (a large histogram window returns many such).
    sharing: frozenset[int] | None = None
    # Probe tail hashes that many stored messages share: boilerplate, not evidence.  Only
    # needed to compare sketches that share a hash, so a store may leave it empty when no
    # record it returns shares one with ``Probe.sketch`` (or when it returns none).
    common: frozenset[int] = frozenset()


class Store(Protocol):
    """What the detector and the admin commands need of a store."""

    location: str

    def lookup(self, probe: Probe) -> Candidates: ...

    def add(self, record: Record) -> int: ...

    def touch(self, doc_id: int, when: int, recipients: Sequence[int]) -> None: ...

    def count_verdict(self, verdict: str, when: int) -> None: ...

    def atomically(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` (lookups and writes) as one unit: a transaction where the backend
        has them, one batch of writes otherwise."""
        ...

    def prune(self, before: int, *, removed: Callable[[Record], None] | None = None) -> int:
        """Remove the records last seen before ``before`` (epoch seconds); how many.
        ``removed``, when given, is called with each record removed, once it is gone."""
        ...

    def stale(self, before: int) -> Iterator[Record]:
        """The records ``prune(before)`` would remove (last seen before ``before``), oldest
        first: what ``dupfilter-db prune`` lists (``--dry-run``) and reports."""
        ...

    def forget(self, doc_ids: Sequence[int]) -> int: ...

    def get(self, doc_id: int) -> Record | None: ...

    def find_message_id(self, message_id: str) -> list[int]: ...

    def records(self) -> Iterator[Record]: ...

    def stats(self) -> dict[str, object]: ...

    def verify(self) -> list[str]: ...

    def close(self) -> None: ...


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
