"""The shared store: the :class:`~mailfilter.store.Store` protocol on Redis or Redis Cluster.

Several mail hosts check and record against one Redis.  Records expire with the segment
that holds them, one retention period after it was last written, so
:meth:`RedisStore.prune` has nothing to do.

Keys (``P`` is the key prefix, ``{T}`` a partition's hash tag; binary parts are raw bytes):

==============  ===========  ======================================================  =========
key             type         fields / members                                        TTL
==============  ===========  ======================================================  =========
``P meta``      string       JSON: schema, fingerprint parameters, partitions         none
``P{T}c``       hash         ``p`` parameters id, ``n`` id counter, ``cur`` and        none
                             ``segs`` the segments, ``DAY:VERDICT`` counts
``P{T}x<n>``    hash         a *segment*: ``d<id>`` → encoded                         retention
                             :class:`~mailfilter.store.Record`; posting fields
                             ``<kind><3 bytes>`` → entries (key + 5-byte id)
``P{T}t``       sorted set   decimal id, scored by last seen (stats, verify)          retention
==============  ===========  ======================================================  =========

A record and all its postings live in one segment: the one being written when it was added
(or seen again: a touch moves an older segment's record, postings included, to it).  A
posting is an entry in a field of its segment: the kind (``s`` sketch hash, ``g`` body
digest, ``m`` Message-ID key, ``k`` attachment chunk, ``h`` histogram group, ``H`` histogram
sum) and the low bits of its key's first bytes name the field, so that one field holds the
postings of many keys (about ``ENTRIES_PER_FIELD``) and a record's ~30 postings are written
with one ``HSET``: a new record writes 3 keys (its segment, ``c``, ``t``).  Entries are
newest first; at most ``KEEP_POSTINGS`` per key and segment are kept.  A segment is written
for a quarter of the retention (or until it holds more records than its field count was
made for, then a larger one starts) and expires whole one retention after its last write,
taking its records' postings with it.  The field counts grow with the records a segment
is expected to hold (its ``bits``, kept in ``segs``).  Schema 1 stores (a key per record
and per posting) are upgraded in place by the first process that opens them.

A *partition* is a complete index over part of the records; all its keys share one hash tag,
so one Lua script can read or write all of them on one node.  A single server has one
partition.  On a Redis Cluster the store has one partition per primary (or ``?partitions=N``
in the URL when it is created), with tags chosen so that their slots fall in evenly spaced
slot ranges; a record goes to the partition of its body digest (so exact repeats meet in
one script), and a check runs the lookup script on every partition in one pipelined round.

Round trips: a check is one ``EVALSHA`` of the lookup script (on a cluster: one per
partition, sent to all nodes at once): one ``HMGET`` per live segment of the fields the
message's keys fall in (the client sends those fields, computed for the width of the newest
segment it last saw), the entries matched in the script, the candidates' records with one
more ``HMGET``.  Recording is one ``EVALSHA`` of the write script: inside
:meth:`RedisStore.atomically` the verdict counter and a touch are buffered and travel with
the add (or are sent together at the end).  Check and record are two round trips, not one
transaction: two hosts receiving the same message in the same millisecond can both call it
unique.  The write script makes that harmless for exact duplicates: ``add`` is idempotent
by digest (a record with the same digest and some content is touched instead, and its id
returned), so the store still ends up with one record, counted twice.
:meth:`RedisStore.lookup_or_add` checks and, for a message nothing matches, records in one
script: one round trip for a new message.  On a single server the scripts go over the
store's own connections (redis-py's client costs more per call than the round trip): at
most ``POOL_SIZE`` a process, shared by all its threads, each taken for one round trip.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import re
import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import xxhash

from mailfilter.store import (
    DECISIONS,
    HISTOGRAM_GROUPS,
    HISTOGRAM_PRIME,
    LAYOUT,
    NEWEST_EXACT,
    NEWEST_PART,
    READABLE_SCHEMAS,
    SCHEMA_VERSION,
    Found,
    Query,
    Record,
    StoreError,
    StoreMismatch,
    histogram_group_number,
    histogram_probe_sums,
    message_id_key,
)

try:  # the optional dependency: pip install 'dupfilter-mail[redis]'
    import redis
    try:
        from redis.backoff import ExponentialWithJitterBackoff
    except ImportError:     # redis-py before 6: the same back-off without the jitter
        from redis.backoff import ExponentialBackoff as ExponentialWithJitterBackoff
    from redis.cluster import RedisCluster
    from redis.crc import key_slot
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import NoScriptError, RedisClusterException, RedisError, ResponseError
    from redis.exceptions import TimeoutError as RedisTimeoutError
    from redis.retry import Retry
except ImportError:  # pragma: no cover - reported when a redis:// store is opened
    redis = None  # type: ignore[assignment]
try:  # redis-py's C parser; its packer makes a command in one call
    from hiredis import pack_command as _pack_command
except ImportError:  # pragma: no cover - without hiredis redis-py packs them
    _pack_command = None

T = TypeVar("T")
log = logging.getLogger(__name__)

KEEP_POSTINGS = 1000   # newest ids kept per key in a segment (a footer must not grow forever)
# A segment is written for at most a quarter of the retention, so records live between one
# and 1.25 retention periods, and a lookup reads about five segments.
SEGMENTS_PER_RETENTION = 4
# A segment sized for this many records at first; its field count grows with the records it
# is expected to hold so that a field keeps about ENTRIES_PER_FIELD postings of one kind.
SEGMENT_RECORDS_MIN = 8192
ENTRIES_PER_FIELD = 32
SEGMENT_BITS_MIN, SEGMENT_BITS_MAX = 8, 24
ID_WIDTH = 5           # bytes of a record id in posting entries and record fields
# Connections a process keeps for its scripts at most, shared by all its threads (SMTP
# sessions come and go; a thread waits for one to be given back past this many at once).
POOL_SIZE = 32


@dataclass(frozen=True)
class _Kind:
    """A kind of posting: how many bytes its keys have, and how many bits fewer than a
    segment's width its field numbers have (kinds with fewer postings per record get fewer
    fields, so that each holds about as many entries)."""

    key_width: int
    shift: int


# s: sketch hash, g: body digest, m: Message-ID key, k: attachment chunk digest, h: a
# histogram group's number (see mailfilter.store.histogram_group_number), H: histogram sum,
# n: a sketch hash new to the record's text cluster (the text index: how many different
# texts hold a hash), r: a recipient key then the record's cluster id (8 bytes each).
KINDS = {"s": _Kind(LAYOUT.sketch_width, 0), "g": _Kind(16, 5), "m": _Kind(16, 5),
         "k": _Kind(LAYOUT.chunk_digest_width, 5), "h": _Kind(4, 3), "H": _Kind(2, 5),
         "n": _Kind(LAYOUT.sketch_width, 0), "r": _Kind(16, 3)}
_SLOTS = 16384
_BATCH = 500
_MISMATCH = "DUPFILTER-MISMATCH"
_VERDICTS = ("unique", "duplicate", "near-duplicate")


# -- Lua ------------------------------------------------------------------------------------
#
# The scripts are the .lua files beside this module, put together by _script: the constants
# (from their one definition in Python), common.lua, then the parts of the script.  find.lua
# is the lookup (ARGV: see _lookup_args; reply: see _parse_lookup), store.lua the write
# functions (add, touch, forget), and lookup.lua, write.lua and lookup_add.lua the three
# scripts' own ends.  Every redis.call and every string a script makes costs a microsecond or
# more, so the scripts read only what can change the answer (see docs/scaling.md).

def lua_constants() -> str:
    """``local NAME = value`` lines for every constant the scripts share with Python: the
    record layout (:data:`~mailfilter.store.LAYOUT`: ``HEADER``, ``O_<FIELD>`` offsets,
    ``W_<SECTION>`` widths) and the store's limits."""
    values: dict[str, int] = {"HEADER": LAYOUT.header}
    for name, (offset, _width) in LAYOUT.fields.items():
        values[f"O_{name.upper()}"] = offset
    values.update(W_SKETCH=LAYOUT.sketch_width, W_CHUNK=LAYOUT.chunk_width,
                  W_CHUNK_DIGEST=LAYOUT.chunk_digest_width, W_RECIPIENT=LAYOUT.recipient_width,
                  RECIPIENTS_MAX=LAYOUT.recipients_max, KEEP_POSTINGS=KEEP_POSTINGS,
                  ALL_NOVEL=LAYOUT.all_novel,
                  NEWEST_EXACT=NEWEST_EXACT, NEWEST_PART=NEWEST_PART,
                  SEGMENT_RECORDS_MIN=SEGMENT_RECORDS_MIN, ENTRIES_PER_FIELD=ENTRIES_PER_FIELD,
                  SEGMENT_BITS_MIN=SEGMENT_BITS_MIN, SEGMENT_BITS_MAX=SEGMENT_BITS_MAX,
                  HISTOGRAM_GROUPS=HISTOGRAM_GROUPS, HISTOGRAM_PRIME=HISTOGRAM_PRIME)
    lines = [f"local {name} = {value}\n" for name, value in values.items()]
    # Tables and strings written out (a script builds its constants on every call).
    lines.append("local POW = {[0] = 1, " + ", ".join(str(1 << j) for j in range(1, 33)) + "}\n")
    lines.append("local ZERO16 = '" + "\\0" * 16 + "'\n")
    for table, attribute in (("KEY_WIDTH", "key_width"), ("SHIFT", "shift")):
        pairs = ", ".join(f"{kind} = {getattr(kind_, attribute)}" for kind, kind_ in KINDS.items())
        lines.append(f"local {table} = {{{pairs}}}\n")
    if ID_WIDTH != 5:   # pragma: no cover - common.lua's u40/p40
        raise AssertionError("the scripts read 5-byte ids")
    return "".join(lines)


def _script(*parts: str, no_writes: bool = False) -> str:
    """One script: the constants, common.lua, then ``parts`` (file names without .lua)."""
    folder = resources.files(__package__)
    text = lua_constants() + "".join(folder.joinpath(f"{name}.lua").read_text(encoding="utf-8")
                                     for name in ("common", *parts))
    return ("#!lua flags=no-writes\n" if no_writes else "") + text


_SCRIPTS = {"lookup": lambda: _script("find", "lookup", no_writes=True),
            "write": lambda: _script("store", "write"),
            "lookup_add": lambda: _script("find", "store", "lookup_add")}


# -- helpers ---------------------------------------------------------------------------------

_FORMATS = {4: "I", 8: "Q"}
_U32 = struct.Struct(">I")


def _pack(values: Sequence[int], width: int) -> bytes:
    """Fixed-width big-endian values as one string (one struct call, not one per value)."""
    if width in _FORMATS:
        return struct.pack(f">{len(values)}{_FORMATS[width]}", *values)
    return b"".join(value.to_bytes(width, "big") for value in values)


def field_of(kind: str, key: bytes, bits: int) -> bytes:
    """The field of a posting of ``kind`` under ``key`` in a segment of ``bits`` (as the
    scripts' ``field``): the kind, then the low ``bits - shift`` bits of the key's first 4
    (sums: 2) bytes read as a number, as 3 bytes."""
    prefix = 2 if KINDS[kind].key_width == 2 else 4
    number = int.from_bytes(key[:prefix], "big") & _mask(kind, bits)
    return kind.encode() + number.to_bytes(3, "big")


def entries_of(value: bytes, key_width: int) -> Iterator[tuple[bytes, int]]:
    """(key, record id) of every entry of a posting field's value, newest first."""
    width = key_width + ID_WIDTH
    for offset in range(0, len(value) - width + 1, width):
        yield value[offset:offset + key_width], \
            int.from_bytes(value[offset + key_width:offset + width], "big")


@dataclass(frozen=True)
class _Segment:
    """One live segment of a partition: its key and its field width."""

    key: bytes
    bits: int


def _segments(base: bytes, text: bytes | None) -> list[_Segment]:
    """The live segments listed in a partition's ``segs`` field, newest first."""
    found = re.findall(rb"(\d+),(\d+)", text or b"")
    return [_Segment(base + b"x" + n, int(bits)) for n, bits in reversed(found)]


def _group_numbers(histogram: bytes) -> list[int]:
    """The numbers of a histogram's group keys in Redis, one per group."""
    return [histogram_group_number(group, histogram) for group in range(HISTOGRAM_GROUPS)]


_KIND_TAG = {kind: ord(kind) << 24 for kind in KINDS}


def _mask(kind: str, bits: int) -> int:
    """The mask of a key number's bits that make its field in a segment of ``bits``."""
    prefix = 2 if KINDS[kind].key_width == 2 else 4
    return (1 << min(max(0, bits - KINDS[kind].shift), 8 * prefix)) - 1


@functools.cache
def _masks(bits: int) -> dict[str, int]:
    """``_mask`` of every kind for segments of ``bits``."""
    return {kind: _mask(kind, bits) for kind in KINDS}


def _query_groups(query: Query) -> bytes:
    """The numbers of the query's histogram group keys; b"" (read the whole sum window)
    when the rule allows more differing positions than the groups can promise."""
    if query.histogram_window <= 0 or query.histogram_max_positions >= HISTOGRAM_GROUPS:
        return b""
    return struct.pack(f">{HISTOGRAM_GROUPS}I", *_group_numbers(query.histogram))


def _query_fields(query: Query, groups: bytes, bits: int) -> bytes:
    """The fields of the query's first keys in a segment of ``bits``, in the order find.lua
    makes its wants: Message-ID, digest, sketch hashes, chunks, histogram (group keys or
    sums), part digests.  (Each is the kind's letter, then the key number's low bits as 3
    bytes: one 32-bit number.)"""
    masks, tag = _masks(bits), _KIND_TAG
    numbers: list[int] = []
    if query.message_id_key:
        numbers.append(tag["m"] | (_U32.unpack_from(query.message_id_key)[0] & masks["m"]))
    digest, *parts = query.digests
    numbers.append(tag["g"] | (_U32.unpack_from(digest)[0] & masks["g"]))
    mask, kind = masks["s"], tag["s"]
    numbers += [kind | (h & mask) for h in query.shingles]
    if query.chunks:
        numbers += [tag["k"] | ((digest >> 32) & masks["k"]) for digest in query.chunks]
    if query.histogram_window > 0:
        if groups:
            numbers += [tag["h"] | (number & masks["h"])
                        for (number,) in _U32.iter_unpack(groups)]
        else:
            numbers += [tag["H"] | (value & masks["H"]) for value in histogram_probe_sums(
                query.histogram_sum, query.histogram_window)]
    numbers += [tag["g"] | (_U32.unpack_from(part)[0] & masks["g"]) for part in parts]
    return struct.pack(f">{len(numbers)}I", *numbers)


def _reused(query: Query, groups: bytes, record: Record, index_size: int) -> tuple[int, str]:
    """How many of the lookup's first keys (find.lua's wants, in the order of
    ``_query_fields``) are the record's postings, each once; and the kinds they cover all of
    ("m", "g", "s", "k", "h")."""
    count, covered = 0, ""
    if query.message_id_key:
        if query.message_id_key != record.message_id_key:
            return count, covered
        count, covered = count + 1, covered + "m"
    if query.digests[0] != record.digest:
        return count, covered
    count, covered = count + 1, covered + "g"
    if tuple(query.shingles) != tuple(record.sketch[:index_size]):
        return count, covered
    count, covered = count + len(query.shingles), covered + "s"
    chunks = tuple(digest for digest, _length in record.chunks)
    if tuple(query.chunks) != chunks or len(set(chunks)) != len(chunks):
        return count, covered
    count, covered = count + len(chunks), covered + "k"
    if groups and query.histogram == record.histogram \
            and len(set(_U32.iter_unpack(groups))) == HISTOGRAM_GROUPS:
        count, covered = count + HISTOGRAM_GROUPS, covered + "h"
    return count, covered


def masked(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for messages and ``stats``)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def _split_options(url: str) -> tuple[str, dict[str, str]]:
    """The URL for redis-py, and dupfilter's own query options (``partitions``)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    ours = {k: v for k, v in query if k in ("partitions",)}
    rest = [(k, v) for k, v in query if k not in ours]
    return urlunsplit(parts._replace(query=urlencode(rest))), ours


def partition_tags(count: int) -> list[str]:
    """Hash tags whose slots fall in ``count`` evenly spaced slot ranges (one per node when
    the cluster's slots were split evenly, as ``redis-cli --cluster create`` does)."""
    tags = []
    for index in range(count):
        low, high = index * _SLOTS // count, (index + 1) * _SLOTS // count
        for attempt in range(1 << 20):
            tag = f"{index}" if attempt == 0 else f"{index}.{attempt}"
            if low <= key_slot(tag.encode()) < high:
                tags.append(tag)
                break
    return tags


@dataclass
class _Partition:
    """One hash tag's worth of keys."""

    index: int
    tag: str
    base: bytes     # prefix + {tag}: every key of the partition starts with it


@dataclass
class _Op:
    """One buffered write: its script arguments and the partition it belongs to."""

    partition: int | None
    args: tuple[bytes | str | int, ...]


class RedisStore:
    """Redis (or Redis Cluster) implementation of :class:`mailfilter.store.Store`."""

    def __init__(self, location: str, parameters: dict[str, object], *,
                 key_prefix: str = "dupfilter:", timeout: float = 2.0,
                 retention_seconds: float = 30 * 86400, create: bool = True,
                 readonly: bool = False) -> None:
        if redis is None:
            raise StoreError("a redis:// store needs the redis package: "
                             "pip install 'dupfilter-mail[redis]' (and hiredis for speed)")
        if "{" in key_prefix or "}" in key_prefix:
            raise StoreError(f"Redis key prefix {key_prefix!r} must not contain braces "
                             "(dupfilter puts its own hash tags in the keys)")
        self.location = masked(location)
        self.readonly = readonly
        self.prefix = key_prefix.encode()
        self.retention = max(1, math.ceil(retention_seconds))
        self.segment_seconds = max(1, self.retention // SEGMENTS_PER_RETENTION)
        self.index_size = int(parameters.get("index_size", 1 << 30))  # type: ignore[arg-type]
        self.parameters = parameters
        self._parameters_json = json.dumps(parameters, sort_keys=True)
        # (The "1:" names the scheme of this id, not the record schema.)
        self.parameters_id = xxhash.xxh3_64_hexdigest(
            f"1:{self._parameters_json}".encode()).encode()
        # The process's connections for the scripts (see _round): at most pool_size, idle
        # ones kept for the next caller, whichever thread it is.
        self._local = threading.local()      # atomically()'s buffered writes
        self.pool_size = POOL_SIZE
        self._idle: list[Any] = []
        self._open = 0                       # connections made and not dropped
        self._slots = threading.BoundedSemaphore(POOL_SIZE)
        self._idle_lock = threading.Lock()
        self._wait_seconds = max(timeout, 0.1)
        self._closed = False
        url, options = _split_options(location)
        self.cluster = False
        self.client = self._connect(url, timeout)
        self._scripts = {name: (source, hashlib.sha1(source.encode()).hexdigest())
                         for name, source in ((name, make()) for name, make in _SCRIPTS.items())}
        try:
            self._bind(options, create)
        except BaseException:
            self.close()
            raise

    # -- connection ------------------------------------------------------------------------

    def _connect(self, url: str, timeout: float) -> Any:
        common = dict(socket_timeout=timeout, socket_connect_timeout=timeout,
                      retry=Retry(ExponentialWithJitterBackoff(base=0.01, cap=0.1), 1))
        with self._errors("connecting"):
            client = redis.Redis.from_url(url, **common)
            try:
                info = client.info("cluster")
            except ResponseError:  # INFO not allowed for this user: take it as one server
                info = {}
            except BaseException:
                client.close()
                raise
            if not info.get("cluster_enabled"):
                return client
            client.close()
            self.cluster = True
            return RedisCluster.from_url(url, **common)

    @contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        """Turn redis-py's exceptions into :class:`StoreError` naming the server."""
        try:
            yield
        except ResponseError as error:
            text = str(error)
            if text.startswith(_MISMATCH):
                stored = text[len(_MISMATCH):].strip()
                raise StoreMismatch(
                    f"store {self.location} holds records built with other fingerprint "
                    f"parameters (id {stored}, configured {self.parameters_id.decode()}); "
                    "use those settings or another key prefix") from None
            raise StoreError(f"Redis at {self.location}: {doing} failed: {text}") from None
        except (RedisError, RedisClusterException, OSError) as error:
            raise StoreError(f"cannot reach Redis at {self.location} ({doing}): "
                             f"{error or type(error).__name__}") from None

    def _bind(self, options: dict[str, str], create: bool) -> None:
        """Read (or write) the meta key; refuse other fingerprint parameters."""
        meta_key = self.prefix + b"meta"
        with self._errors("reading the store's parameters"):
            stored = self.client.get(meta_key)
            if stored is None:
                if not create or self.readonly:
                    raise StoreError(f"no dupfilter store at {self.location} (no key "
                                     f"{meta_key.decode()}; deliver a message to create one)")
                count = self._partition_count(options.get("partitions"))
                meta = {"schema": SCHEMA_VERSION, "parameters": json.loads(
                    self._parameters_json), "partitions": count,
                    "tags": partition_tags(count), "created": int(time.time())}
                self.client.set(meta_key, json.dumps(meta, sort_keys=True), nx=True)
                stored = self.client.get(meta_key)
        try:
            meta = json.loads(stored)
            schema, have = int(meta["schema"]), meta["parameters"]
            tags = [str(tag) for tag in meta["tags"]]
        except (ValueError, KeyError, TypeError):
            raise StoreError(f"{self.location}: key {meta_key.decode()} is not a dupfilter "
                             "store's meta record") from None
        if schema not in READABLE_SCHEMAS:
            raise StoreMismatch(f"store {self.location} has schema {schema}; this "
                                f"dupfilter reads schemas {sorted(READABLE_SCHEMAS)}")
        wanted = json.loads(self._parameters_json)
        if have != wanted:
            differ = sorted(k for k in set(have) | set(wanted) if have.get(k) != wanted.get(k))
            details = ", ".join(f"{k}={have.get(k)!r} (configured {wanted.get(k)!r})"
                                for k in differ)
            raise StoreMismatch(f"store {self.location} was built with other fingerprint "
                                f"parameters: {details}; use those settings or a new store")
        self.partitions = [_Partition(i, tag, self.prefix + b"{" + tag.encode() + b"}")
                           for i, tag in enumerate(tags)]
        # The width of each partition's newest segment, as the last lookup saw it (0: not
        # known yet): the client computes the fields of keys for it (see _with_fields).
        self._bits = [0] * len(self.partitions)
        if schema < SCHEMA_VERSION:
            stored = self._upgrade(meta)
        self._meta = stored

    def _upgrade(self, meta: dict[str, Any]) -> bytes:
        """Bring an older store to this layout.

        One process does it (a lock key; the others wait for it).  From schema 1 (a key per
        record and per posting) every live record is put in a segment under its own id and
        the old keys are removed; up to schema 2 every record heads its own text cluster:
        its index hashes go into the text index and its recipients under its id (schema 4
        changed LMDB's layout only).  Then the meta key says the current schema.  The
        records keep their bytes (older records are read as they are); from schema 1 they
        live one retention period from now.  Readers that open the store meanwhile wait."""
        meta_key, lock = self.prefix + b"meta", self.prefix + b"upgrading"
        token = f"{time.time()}".encode()
        with self._errors("upgrading the store's layout"):
            if self.client.set(lock, token, nx=True, ex=3600):
                log.warning("%s: upgrading the store from schema %s to %s", self.location,
                            meta["schema"], SCHEMA_VERSION)
                for partition in self.partitions:
                    if int(meta["schema"]) < 2:
                        self._upgrade_partition(partition)
                    if int(meta["schema"]) < 3:
                        self._index_texts(partition)
                meta = dict(meta, schema=SCHEMA_VERSION)
                self.client.set(meta_key, json.dumps(meta, sort_keys=True))
                self.client.delete(lock)
            else:
                deadline = time.monotonic() + 3600
                while self.client.exists(lock) and time.monotonic() < deadline:
                    time.sleep(0.2)
            stored = self.client.get(meta_key)
        if stored is None or int(json.loads(stored)["schema"]) != SCHEMA_VERSION:
            raise StoreError(f"store {self.location}: its upgrade to schema {SCHEMA_VERSION} "
                             "did not finish; open it again to finish it")
        return stored

    def _upgrade_partition(self, partition: _Partition) -> None:
        base = partition.base
        counter = int(self.client.get(base + b"n") or 0)
        self.client.hset(base + b"c", mapping={b"p": self.parameters_id, b"n": counter})
        start = 0
        while True:
            members = self.client.zrange(base + b"t", start, start + _BATCH - 1)
            if not members:
                break
            start += len(members)
            values = self.client.mget([base + b"d" + member for member in members])
            ops: list[Any] = []
            for member, data in zip(members, values, strict=True):
                if data is not None:
                    ops += ["i", int(member), data]
            if ops:
                self._run("write", [(partition, self._write_args(partition.index) + ops)])
        pattern = re.sub(rb"([*?\[\]\\])", rb"\\\1", base) + b"[dmghsknp]*"
        old = list(self._scan(pattern))
        for offset in range(0, len(old), _BATCH):
            self.client.unlink(*old[offset:offset + _BATCH])

    def _index_texts(self, partition: _Partition) -> None:
        """The text index and the recipients under their clusters, for every record of a
        partition written before them (newest first, so that each posting list stays in
        that order)."""
        for segment in self._live_segments(partition):
            ids = sorted((doc_id for doc_id, _data in self._segment_records(segment)),
                         reverse=True)
            for start in range(0, len(ids), _BATCH):
                ops: list[Any] = []
                for doc_id in ids[start:start + _BATCH]:
                    ops += ["x", doc_id]
                self._run("write", [(partition, self._write_args(partition.index) + ops)])

    def _partition_count(self, wanted: str | None) -> int:
        """``?partitions=N`` of the URL, else one per cluster primary, else one."""
        if not wanted:
            return len(self.client.get_primaries()) if self.cluster else 1
        if not wanted.isdigit() or not 1 <= int(wanted) <= 1024:
            raise StoreError(f"{self.location}: partitions={wanted!r} must be a number "
                             "from 1 to 1024")
        return int(wanted)

    def _restore_meta(self) -> None:
        """Put the meta key back after the server lost its data (restart without persistence)."""
        self.client.set(self.prefix + b"meta", self._meta, nx=True)

    # -- scripts ---------------------------------------------------------------------------

    def _load(self, name: str) -> None:
        source, sha = self._scripts[name]
        if self.cluster:
            loaded = self.client.script_load(source)
        else:       # over the store's own connections (many threads may find it missing)
            (loaded,) = self._round([("SCRIPT", "LOAD", source)])
            if isinstance(loaded, Exception):
                raise loaded
            loaded = loaded.decode() if isinstance(loaded, bytes) else loaded
        if loaded != sha:  # pragma: no cover - redis computes the same SHA-1
            self._scripts[name] = (source, loaded)

    def _run(self, name: str, calls: Sequence[tuple[_Partition, Sequence[Any]]]) -> list[Any]:
        """Run script ``name`` once per (partition, args), all in one round trip."""
        for attempt in range(2):
            sha = self._scripts[name][1]
            commands = [("EVALSHA", sha, 1, partition.base, *args) for partition, args in calls]
            try:
                replies = self._cluster_round(calls, commands) if self.cluster \
                    else self._round(commands)
            except NoScriptError:
                if attempt:
                    raise
                self._load(name)
                continue
            missing = any(isinstance(r, NoScriptError) for r in replies)
            if missing and not attempt:
                self._load(name)
                continue
            for reply in replies:
                if isinstance(reply, Exception):
                    raise reply
            return replies
        raise StoreError(f"Redis at {self.location} would not keep the {name} script")

    def _cluster_round(self, calls: Sequence[tuple[_Partition, Sequence[Any]]],
                       commands: list[tuple[Any, ...]]) -> list[Any]:
        pipe = self.client.pipeline(transaction=False)
        for (partition, _args), command in zip(calls, commands, strict=True):
            # Routed by the known slot: without it redis-py's cluster pipeline asks a node
            # for the keys of every EVALSHA first (COMMAND GETKEYS).
            pipe.execute_command(*command,
                                 target_nodes=self.client.get_node_from_key(partition.base))
        return pipe.execute(raise_on_error=False)

    def _round(self, commands: list[tuple[Any, ...]]) -> list[Any]:
        """``commands`` in one round trip on a connection of the store's pool.

        On the hot path redis-py's client costs about 40 µs a call (connection pool, retry
        wrapper, instrumentation) against 30 µs for the round trip itself, so the scripts
        go over connections of the store's own: a connection is taken for one round and
        given back, so that a process keeps at most ``pool_size`` of them however many
        threads (SMTP sessions) come and go.  A dead connection is dropped and the round
        repeated once on another, as the client's retry would.  Error replies come back in
        the list, in place.
        """
        for attempt in range(2):
            connection = self._take_connection()
            try:
                if _pack_command is not None:   # redis-py's own packing costs 20 µs more
                    connection.send_packed_command(
                        [b"".join(_pack_command(command) for command in commands)])
                elif len(commands) == 1:
                    connection.send_command(*commands[0])
                else:
                    connection.send_packed_command(connection.pack_commands(commands))
                replies: list[Any] = []
                for _ in commands:
                    try:
                        replies.append(connection.read_response())
                    except ResponseError as error:
                        replies.append(error)
            except (RedisConnectionError, RedisTimeoutError, OSError):
                self._drop_connection(connection)
                if attempt:
                    raise
                continue
            except BaseException:       # the reply stream's state is unknown: not reused
                self._drop_connection(connection)
                raise
            self._give_back(connection)
            return replies
        raise AssertionError("unreachable")

    def _take_connection(self) -> Any:
        """An idle connection of the pool, or a new one while fewer than ``pool_size``
        exist; waits up to the store's timeout for one to be given back.  (Made from the
        client's connection settings, outside redis-py's own pool, whose cap counts every
        connection it ever made, dead ones included.)"""
        if not self._slots.acquire(timeout=self._wait_seconds):
            raise RedisConnectionError(
                f"all {self.pool_size} connections to Redis busy for {self._wait_seconds:g} s")
        with self._idle_lock:
            if self._idle:
                return self._idle.pop()
        try:
            pool = self.client.connection_pool
            connection = pool.connection_class(**pool.connection_kwargs)
        except BaseException:
            self._slots.release()
            raise
        with self._idle_lock:
            self._open += 1
        return connection

    def _give_back(self, connection: Any) -> None:
        with self._idle_lock:
            closed = self._closed
            if not closed:
                self._idle.append(connection)
        if closed:
            self._drop_connection(connection)
        else:
            self._slots.release()

    def _drop_connection(self, connection: Any) -> None:
        with self._idle_lock:
            self._open -= 1
        try:
            connection.disconnect()
        finally:
            self._slots.release()

    @property
    def connections(self) -> int:
        """The pool's connections (idle or in use) made and not dropped."""
        return self._open

    # -- lookup ----------------------------------------------------------------------------

    def _lookup_args(self, query: Query) -> list[Any]:
        """The lookup script's ARGV but for the client's fields (see _with_fields)."""
        width = LAYOUT.sketch_width
        # On a cluster each partition sees about 1/P of the texts sharing a hash.
        parts = len(self.partitions)
        count_limit = max(1, math.ceil(query.count_limit / parts)) if query.count_limit else 0
        # Lists travel as one string each (fewer arguments to pack and to convert).
        return [
            self.parameters_id, query.message_id_key or b"", query.digests[0],
            query.histogram, query.histogram_sum, query.histogram_window,
            query.histogram_max_positions, max(1, query.shingle_limit),
            max(1, query.exact_limit), max(1, query.part_limit),
            max(1, query.histogram_limit), _pack(query.shingles, width),
            _pack(query.counted, width), _pack(query.chunks, LAYOUT.chunk_digest_width),
            count_limit, _query_groups(query)]

    def _with_fields(self, query: Query, args: list[Any], partition: int) -> list[Any]:
        """``args`` and the fields of the query's keys for the partition's newest segment
        (as the client last saw it), which spare the script computing them; then the part
        digests and the recipient keys."""
        bits = self._bits[partition]
        return [*args, bits, _query_fields(query, args[15], bits) if bits else b"",
                b"".join(query.digests[1:]),
                _pack(query.recipients, LAYOUT.recipient_width)]

    def _found(self, query: Query, replies: list[Any]) -> Found:
        found = Found()
        for index, reply in enumerate(replies):
            self._bits[index] = int(reply[0])
            self._parse_lookup(query, reply[1:], found)
        if len(self.partitions) > 1:
            self._merge(query, found)
        # In id order, as LMDB returns them.
        if len(found.records) > 1:
            found.records = dict(sorted(found.records.items()))
        return found

    def lookup(self, query: Query) -> Found:
        """Every posting of ``query`` and its records in one round trip (one script per
        partition)."""
        self._flush()
        args = self._lookup_args(query)
        with self._errors("lookup"):
            replies = self._run("lookup", [(p, self._with_fields(query, args, p.index))
                                           for p in self.partitions])
        return self._found(query, replies)

    # (Store.adds_while_checking: the check's script is the one atomic step.)
    adds_while_checking = True

    def lookup_or_add(self, query: Query, record: Record) -> Found:
        """:meth:`lookup`, and unless it finds a record under the Message-ID key or a digest
        (``Found.exact``), add ``record`` and count a "unique" verdict in the same script:
        one round trip for a new message.

        ``record.doc_id`` is set when it was added (else left 0: record as usual).  On a
        store of several partitions this is a plain lookup (a partition cannot know that
        the others found nothing).
        """
        if len(self.partitions) > 1 or self.readonly:
            return self.lookup(query)
        self._flush()
        partition = self.partitions[0]
        args = self._with_fields(query, self._lookup_args(query), 0)
        reuse, covered = _reused(query, args[15], record, self.index_size) \
            if self._bits[0] else (0, "")
        args += [self.retention, self.index_size, 1, 0, self.segment_seconds,
                 f"{int(record.first_seen) // 86400}:unique", record.encode(), reuse,
                 self._postings_blob(record, self._bits[0], covered)]
        with self._errors("lookup"):
            reply = self._run("lookup_add", [(partition, args)])[0]
            added = int(reply[-1])
            if added < 0:
                self._restore_meta()
        if added:
            record.doc_id = abs(added)
        return self._found(query, [reply[:-1]])

    @staticmethod
    def _parse_lookup(query: Query, reply: list[Any], found: Found) -> None:
        """Add one partition's reply (see find.lua) to ``found``: Message-ID ids, digest
        ids, window size, histogram (id, positions), per sketch hash its ids, per chunk its
        ids, the text counts, the recipients per cluster, then (id, record) pairs; each
        list after its length."""
        at = 0

        def ids() -> list[int]:
            nonlocal at
            count = int(reply[at])
            listed = [int(v) for v in reply[at + 1:at + 1 + count]]
            at += 1 + count
            return listed
        found.by_message_id += ids()
        found.by_digest += [i for i in ids() if i not in found.by_digest]
        found.histogram_window_size += int(reply[at])
        count = int(reply[at + 1])
        for j in range(at + 2, at + 2 + 2 * count, 2):
            found.by_histogram[int(reply[j])] = int(reply[j + 1])
        at += 2 + 2 * count
        for into, keys in ((found.by_shingle, query.shingles), (found.by_chunk, query.chunks)):
            count = int(reply[at])
            at += 1
            for key in keys[:count]:
                listed = ids()
                if listed:
                    into.setdefault(key, []).extend(listed)
        count = int(reply[at])
        counted = list(dict.fromkeys((*query.shingles, *query.counted)))
        for key, value in zip(counted, reply[at + 1:at + 1 + count], strict=False):
            if int(value):
                found.counts[key] = found.counts.get(key, 0) + int(value)
        at += 1 + count
        count = int(reply[at])
        at += 1
        for _ in range(count):
            cluster, many = int(reply[at]), int(reply[at + 1])
            had = {int.from_bytes(r, "big") for r in reply[at + 2:at + 2 + many]}
            found.delivered[cluster] = found.delivered.get(cluster, frozenset()) | had
            at += 2 + many
        count = int(reply[at])
        decode = Record.decode
        for j in range(at + 1, at + 1 + 2 * count, 2):
            doc_id = int(reply[j])
            found.records[doc_id] = decode(doc_id, reply[j + 1])

    @staticmethod
    def _merge(query: Query, found: Found) -> None:
        """Partitions each answered for their records: keep the newest ids per key, the
        closest histogram matches, and counts no higher than asked."""
        for into, limit in ((found.by_shingle, query.shingle_limit),
                            (found.by_chunk, query.shingle_limit)):
            for key, listed in into.items():
                into[key] = sorted(listed, reverse=True)[:limit]
        found.by_message_id = sorted(found.by_message_id, reverse=True)[:query.exact_limit]
        found.by_histogram = dict(sorted(found.by_histogram.items(),
                                         key=lambda item: (item[1], item[0])
                                         )[:query.histogram_limit])
        if query.count_limit:
            found.counts = {key: min(value, query.count_limit)
                            for key, value in found.counts.items()}
        wanted = set(found.by_message_id).union(
            found.by_digest, found.by_histogram, *found.by_shingle.values(),
            *found.by_chunk.values())
        found.records = {k: v for k, v in found.records.items() if k in wanted}

    # -- writing ---------------------------------------------------------------------------

    def _partition_of_digest(self, digest: bytes) -> int:
        return int.from_bytes(digest[:8], "big") % len(self.partitions)

    def _partition_of_id(self, doc_id: int) -> int:
        return doc_id % len(self.partitions)

    def _pending(self) -> list[_Op] | None:
        return getattr(self._local, "pending", None)

    def _write(self, ops: list[_Op]) -> dict[int, list[Any]]:
        """Send ``ops`` (one write script per partition, one round trip); replies by partition."""
        if self.readonly:
            raise StoreError(f"store {self.location} is open read-only")
        groups: dict[int, list[_Op]] = {}
        floating = [op for op in ops if op.partition is None]
        for op in ops:
            if op.partition is not None:
                groups.setdefault(op.partition, []).append(op)
        if floating:
            target = next(iter(groups), 0)
            groups[target] = floating + groups.get(target, [])
        calls = []
        for index, group in groups.items():
            args = self._write_args(index)
            for op in group:
                args.extend(op.args)
            calls.append((self.partitions[index], args))
        with self._errors("recording"):
            replies = self._run("write", calls)
            if any(reply[0] for reply in replies):
                self._restore_meta()
        return {index: reply[1:] for (index, _), reply in zip(groups.items(), replies,
                                                              strict=True)}

    def _write_args(self, partition: int) -> list[Any]:
        """The write script's first arguments, for a partition (the ops follow)."""
        return [self.parameters_id, self.retention, self.index_size, len(self.partitions),
                partition, self.segment_seconds]

    def _flush(self) -> None:
        pending = self._pending()
        if pending:
            ops = list(pending)
            pending.clear()
            self._write(ops)

    def _submit(self, op: _Op) -> None:
        pending = self._pending()
        if pending is not None:
            pending.append(op)
        else:
            self._write([op])

    def atomically(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` with its counter bumps and touches sent together with its add.

        Redis has no read-write transaction across a check: lookups are one script, the
        writes of one recording are one script (atomic), and a lost race on an exact
        duplicate is absorbed by the add being idempotent by digest.  Writes buffered when
        ``fn`` raises are dropped.
        """
        if self._pending() is not None:
            return fn()
        self._local.pending = []
        try:
            result = fn()
            self._flush()
            return result
        finally:
            self._local.pending = None

    def add(self, record: Record) -> int:
        """Store ``record`` (or touch the record with its digest); returns the id.

        A record goes to the partition of its body digest, so that exact repeats meet in
        one script; a copy in a text cluster to its cluster's partition, so that every
        recipient of a cluster is filed where the cluster's first record is."""
        index = self._partition_of_id(record.cluster) if record.cluster \
            else self._partition_of_digest(record.digest)
        ops = self._pending() or []
        mine = [op for op in ops if op.partition in (None, index)]
        others = [op for op in ops if op.partition not in (None, index)]
        ops.clear()
        bits = self._bits[index]
        add = _Op(index, ("a", record.encode(), self._postings_blob(record, bits), bits))
        replies = self._write(others + mine + [add])
        doc_id = int(replies[index][-1])
        record.doc_id = doc_id
        return doc_id

    def replace(self, record: Record) -> None:
        """Write ``record`` anew under its id, its postings made again (one script)."""
        self._submit(_Op(self._partition_of_id(record.doc_id),
                         ("u", record.doc_id, record.encode())))

    def touch(self, doc_id: int, when: int, recipients: Sequence[int]) -> None:
        """Count one more sighting, move it to ``when``, add recipients, refresh the TTLs."""
        packed = b"".join(r.to_bytes(LAYOUT.recipient_width, "big") for r in recipients)
        self._submit(_Op(self._partition_of_id(doc_id), ("t", doc_id, int(when), packed)))

    def count_verdict(self, verdict: str, when: int, change: int = 1) -> None:
        """Add ``change`` to the day's counter of ``verdict`` (for `dupfilter-db stats`)."""
        name = verdict if verdict in _VERDICTS else "unique"
        self._submit(_Op(None, ("c", f"{int(when) // 86400}:{name}", change)))

    def count_decision(self, decision: str, when: int) -> None:
        """Add one to the day's counter of a daemon's decision (see Store.count_decision):
        one HINCRBY on the first partition's ``decisions`` hash, sent at once (no script)."""
        if decision not in DECISIONS:
            return
        with self._errors("counting a decision"):
            self.client.hincrby(self.partitions[0].base + b"decisions",
                                f"{int(when) // 86400}:{decision}", 1)

    def prune(self, before: int, *, removed: Callable[[Record], None] | None = None) -> int:
        """Nothing to do: Redis expires records by TTL (the retention period); returns 0
        (and calls ``removed`` for none)."""
        log.info("%s: records expire by Redis TTL (%d s); prune has nothing to do",
                 self.location, self.retention)
        return 0

    def forget(self, doc_ids: Sequence[int]) -> int:
        ops = [_Op(self._partition_of_id(d), ("f", int(d))) for d in doc_ids]
        if not ops:
            return 0
        replies = self._write(ops)
        return sum(int(value) for values in replies.values() for value in values)

    # -- reading for administration --------------------------------------------------------

    def _live_segments(self, partition: _Partition) -> list[_Segment]:
        """The partition's live segments, newest first (the ones still in Redis)."""
        listed = _segments(partition.base, self.client.hget(partition.base + b"c", b"segs"))
        if not listed:
            return []
        alive = self._each_key([segment.key for segment in listed], "exists")
        return [segment for segment, ok in zip(listed, alive, strict=True) if ok]

    def find_message_id(self, message_id: str) -> list[int]:
        """Ids of the records stored under ``message_id``, newest first."""
        key = message_id_key(message_id)
        if key is None:
            return []
        found: list[int] = []
        with self._errors("finding a Message-ID"):
            for partition in self.partitions:
                for segment in self._live_segments(partition):
                    value = self.client.hget(segment.key, field_of("m", key, segment.bits))
                    found += [doc_id for entry, doc_id in entries_of(value or b"", len(key))
                              if entry == key]
        return found

    def _each(self, command: Callable[[Any, _Partition], Any]) -> list[Any]:
        pipe = self.client.pipeline(transaction=False)
        for partition in self.partitions:
            command(pipe, partition)
        return pipe.execute()

    def _each_key(self, keys: Sequence[bytes], name: str, *args: Any) -> list[Any]:
        out: list[Any] = []
        for start in range(0, len(keys), _BATCH):
            pipe = self.client.pipeline(transaction=False)
            for key in keys[start:start + _BATCH]:
                getattr(pipe, name)(key, *args)
            out.extend(pipe.execute())
        return out

    def get(self, doc_id: int) -> Record | None:
        """The record with id ``doc_id`` (looked for in its partition's segments)."""
        name = b"d" + doc_id.to_bytes(ID_WIDTH, "big")
        with self._errors("reading a record"):
            for segment in self._live_segments(self.partitions[self._partition_of_id(doc_id)]):
                data = self.client.hget(segment.key, name)
                if data is not None:
                    return Record.decode(doc_id, data)
        return None

    def _segment_records(self, segment: _Segment) -> Iterator[tuple[int, bytes]]:
        """(id, encoded record) of every record in a segment."""
        with self._errors("listing records"):
            for name, data in self.client.hscan_iter(segment.key, match=b"d*", count=1000):
                if len(name) == 1 + ID_WIDTH:
                    yield int.from_bytes(name[1:], "big"), data

    def records(self) -> Iterator[Record]:
        """Every record, segment by segment (not in id order)."""
        for partition in self.partitions:
            with self._errors("listing records"):
                segments = self._live_segments(partition)
            for segment in reversed(segments):
                for doc_id, data in self._segment_records(segment):
                    yield Record.decode(doc_id, data)

    def stale(self, before: int) -> Iterator[Record]:
        """Records last seen before ``before``, oldest first (``prune`` removes none of
        them: Redis expires records by TTL)."""
        yield from sorted((r for r in self.records() if r.last_seen < before),
                          key=lambda r: (r.last_seen, r.doc_id))

    def stats(self) -> dict[str, object]:
        with self._errors("reading statistics"):
            counts = self._each(lambda pipe, p: pipe.zcard(p.base + b"t"))
            oldest = self._each(lambda pipe, p: pipe.zrange(p.base + b"t", 0, 0,
                                                             withscores=True))
            newest = self._each(lambda pipe, p: pipe.zrange(p.base + b"t", -1, -1,
                                                             withscores=True))
            tables = self._each(lambda pipe, p: pipe.hgetall(p.base + b"c"))
            decisions = self.client.hgetall(self.partitions[0].base + b"decisions")
            segments = sum(len(self._live_segments(p)) for p in self.partitions)
            memory = self._memory()
        per_day: dict[int, dict[str, int]] = {}
        for table in tables:
            for field_name, value in table.items():
                day, colon, name = field_name.decode("latin-1").partition(":")
                if not colon or not day.isdigit():
                    continue   # the partition's own fields: parameters, counter, segments
                slot = per_day.setdefault(int(day), {})
                slot[name] = slot.get(name, 0) + int(value)
        decided: dict[int, dict[str, int]] = {}
        for field_name, value in decisions.items():
            day, _, name = field_name.decode("latin-1").partition(":")
            if day.isdigit():
                decided.setdefault(int(day), {})[name] = int(value)
        firsts = [int(s) for pairs in oldest for _, s in pairs]
        lasts = [int(s) for pairs in newest for _, s in pairs]
        return {"backend": "redis", "location": self.location, "records": sum(counts),
                "decisions_per_day": {day * 86400: c for day, c in sorted(decided.items())},
                "cluster": self.cluster, "partitions": [p.tag for p in self.partitions],
                "segments": segments, "retention_seconds": self.retention,
                "prune": "by Redis TTL", "used_bytes": memory,
                "oldest": min(firsts) if firsts else None,
                "newest": max(lasts) if lasts else None,
                "verdicts_per_day": {day * 86400: c for day, c in sorted(per_day.items())}}

    def _memory(self) -> int:
        """``used_memory`` of the server, summed over the primaries of a cluster."""
        if self.cluster:
            info = self.client.info("memory", target_nodes=RedisCluster.PRIMARIES)
            return sum(int(node.get("used_memory", 0)) for node in info.values())
        return int(self.client.info("memory").get("used_memory", 0))

    def verify(self) -> list[str]:
        """Per partition: its parameters; every record decodable, in the time index and with
        all its postings in its segment; every posting pointing at a record of its segment
        that wants it; every segment with a TTL no longer than the retention.  A value that
        cannot be read is a problem, not an exception."""
        problems: list[str] = []
        with self._errors("verifying"):
            for partition in self.partitions:
                try:
                    problems.extend(self._verify_partition(partition))
                except (ValueError, LookupError, struct.error) as error:
                    problems.append(f"partition {{{partition.tag}}}: cannot be read, not "
                                    f"checked past there ({type(error).__name__}: {error})")
        return problems

    def _verify_partition(self, partition: _Partition) -> list[str]:
        problems: list[str] = []
        name = f"partition {{{partition.tag}}}"
        base = partition.base
        have = self.client.hget(base + b"c", b"p")
        if have is not None and have != self.parameters_id:
            problems.append(f"{name}: parameters {have.decode()} differ from the meta key's")
        times = set()
        for member in self.client.zrange(base + b"t", 0, -1):
            try:
                times.add(int(member))
            except ValueError:
                problems.append(f"{name}: time index member {member[:32]!r} is no record id")
        for segment in self._live_segments(partition):
            label = f"{name} segment {segment.key[len(base) + 1:].decode()}"
            ttl = self.client.ttl(segment.key)
            if ttl == -1 or ttl > self.retention:
                problems.append(f"{label}: TTL {ttl}, expected 1..{self.retention}")
            wanted: dict[bytes, set[tuple[bytes, int]]] = {}
            fields: dict[bytes, bytes] = {}
            for field_name, value in self.client.hscan_iter(segment.key, count=1000):
                if field_name[:1] == b"d" and len(field_name) == 1 + ID_WIDTH:
                    doc_id = int.from_bytes(field_name[1:], "big")
                    try:
                        record = Record.decode(doc_id, value)
                    except (StoreError, struct.error, ValueError) as error:
                        problems.append(f"{label}: record {doc_id} cannot be decoded: {error}")
                        continue
                    if self._partition_of_id(doc_id) != partition.index:
                        problems.append(f"{label}: record {doc_id} belongs to another partition")
                    if doc_id not in times:
                        problems.append(f"{label}: record {doc_id} is not in the time index")
                    for kind, key in self._postings(record):
                        wanted.setdefault(field_of(kind, key, segment.bits), set()).add(
                            (key, doc_id))
                else:
                    fields[field_name] = value
            for field_name, value in fields.items():
                kind = field_name[:1].decode("latin-1")
                if kind not in KINDS or len(field_name) != 4:
                    problems.append(f"{label}: unknown field {field_name.hex()}")
                    continue
                present = set(entries_of(value, KINDS[kind].key_width))
                if len(value) % (KINDS[kind].key_width + ID_WIDTH):
                    problems.append(f"{label}: field {field_name.hex()} is cut short")
                for key, doc_id in sorted(present - wanted.get(field_name, set()))[:100]:
                    problems.append(f"{label}: posting {kind}:{key.hex()} → {doc_id} has no "
                                    "record that wants it")
            for field_name, want in wanted.items():
                value = fields.get(field_name, b"")
                kind = field_name[:1].decode("latin-1")
                present = set(entries_of(value, KINDS[kind].key_width))
                for key, doc_id in sorted(want - present)[:100]:
                    # (Postings beyond the newest KEEP_POSTINGS of a key are dropped.)
                    kept = sum(1 for entry, _ in entries_of(value, len(key)) if entry == key)
                    if kept < KEEP_POSTINGS:
                        problems.append(f"{label}: record {doc_id} lacks its posting "
                                        f"{kind}:{key.hex()}")
        return problems

    def _scan(self, pattern: bytes) -> Iterator[bytes]:
        if self.cluster:
            yield from self.client.scan_iter(match=pattern, count=1000,
                                             target_nodes=RedisCluster.PRIMARIES)
        else:
            yield from self.client.scan_iter(match=pattern, count=1000)

    def _postings(self, record: Record) -> list[tuple[str, bytes]]:
        """(kind, key) of every posting of ``record``, each once, as the scripts make them
        (``postings`` in store.lua)."""
        found = [("g", record.digest)]
        if record.message_id_key:
            found.append(("m", record.message_id_key))
        found += [("s", value.to_bytes(LAYOUT.sketch_width, "big"))
                  for value in record.sketch[:self.index_size]]
        found += [("k", digest.to_bytes(LAYOUT.chunk_digest_width, "big"))
                  for digest, _length in record.chunks]
        found.append(("H", min(record.histogram_sum, 0xFFFF).to_bytes(2, "big")))
        found += [("h", number.to_bytes(4, "big")) for number in _group_numbers(record.histogram)]
        found += [("n", value.to_bytes(LAYOUT.sketch_width, "big"))
                  for value in record.novel_hashes(self.index_size)]
        cluster = record.cluster_id.to_bytes(8, "big")
        found += [("r", recipient.to_bytes(8, "big") + cluster)
                  for recipient in record.recipients]
        return list(dict.fromkeys(found))

    def _postings_blob(self, record: Record, bits: int, covered: str = "") -> bytes:
        """A record's postings for the write script but those of the kinds in ``covered``
        (the lookup of the same script read them): each its field in a segment of ``bits``
        (0: b"", the script reads them from the record), then its key; each once (as
        ``_postings``, without making them one by one: this is on every add)."""
        if not bits:
            return b""
        masks, tag = _masks(bits), _KIND_TAG
        parts = []
        if "s" not in covered:
            mask, kind = masks["s"], tag["s"]
            sketch = record.sketch[:self.index_size]
            parts.append(struct.pack(f">{2 * len(sketch)}I", *[
                value for h in sketch for value in (kind | (h & mask), h)]))
        if "g" not in covered:
            digest = record.digest
            parts += [_U32.pack(tag["g"] | (_U32.unpack_from(digest)[0] & masks["g"])), digest]
        if record.message_id_key and "m" not in covered:
            key = record.message_id_key
            parts += [_U32.pack(tag["m"] | (_U32.unpack_from(key)[0] & masks["m"])), key]
        if record.chunks and "k" not in covered:
            mask, kind = masks["k"], tag["k"]
            for chunk in dict.fromkeys(digest for digest, _length in record.chunks):
                parts.append(_U32.pack(kind | ((chunk >> 32) & mask))
                             + chunk.to_bytes(LAYOUT.chunk_digest_width, "big"))
        total = min(record.histogram_sum, 0xFFFF)
        parts.append(_U32.pack(tag["H"] | (total & masks["H"])) + total.to_bytes(2, "big"))
        if "h" not in covered:
            mask, kind = masks["h"], tag["h"]
            for number in dict.fromkeys(_group_numbers(record.histogram)):
                parts.append(_U32.pack(kind | (number & mask)) + _U32.pack(number))
        mask, kind = masks["n"], tag["n"]
        novel = tuple(dict.fromkeys(record.novel_hashes(self.index_size)))
        if novel:
            parts.append(struct.pack(f">{2 * len(novel)}I", *[
                value for h in novel for value in (kind | (h & mask), h)]))
        # (The recipients under the cluster ("r") the script files itself: a record heading
        # its cluster has no id yet.)
        return b"".join(parts)

    def close(self) -> None:
        """Close every connection (those in use as they are given back); once."""
        with self._idle_lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for connection in idle:
            with self._idle_lock:
                self._open -= 1
            connection.disconnect()
        try:
            self.client.close()
        except (RedisError, RedisClusterException, OSError):
            pass
