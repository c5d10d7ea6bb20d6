"""The embedded default store: one LMDB environment with named sub-databases.

Keys are fixed-width big-endian so that ranges scan in order:

===================  ==========================================  =========================
``by_hist`` holds each record three times, under (group, sum, the group's 12 bins) for each
group of bins (see :func:`mailfilter.store.histogram_keys`): the histogram rule's lookup is
one ``getmulti`` over the message's keys for every sum in its window, which finds every
record the rule can match (at most two differing bins leave one group equal) and few
others, however many records have a sum in the window.  Entries carry the whole histogram
(the key's bins and the value's), so they are compared without reading records, by XOR of
integers or, for many, in numpy.  A rule allowing more differing bins reads the group-0 keys
of the whole sum window, a range.  ``by_text`` holds each record's index hashes that were
new to its text cluster (``Record.novel``): how many entries a hash has there is how many
*different* texts hold it, whatever number of copies of each; ``by_rcpt`` every recipient
of a record under the record's cluster, so that "did this recipient have this text?" is one
look-up however many copies the cluster has (stores made before it have none: records'
own recipient lists answer for them).  ``by_text_shingle`` and ``by_text_hist`` (schema 4)
hold each text cluster once under each index hash and each distinct histogram its members
have (the first member that had it, or after it is removed another): a check reads them
(``Query.per_text``), so a newsletter's 10,000 copies cost it what one does;
``by_shingle`` and ``by_hist`` still hold every record (``forget`` reads every copy).
Schema 1 stores (a ``by_sum`` index: sum → histogram + id) and later ones are upgraded by
the first process that opens them for writing.  Many processes may share
the store; the map grows when it is full.

``meta``'s ``records`` holds how many records ``docs`` has, kept in the write transaction of
every add and delete, with the ``next_id`` it was counted at (an older dupfilter adds
records without counting them: a different ``next_id`` says the count is stale, and it is
counted again).  An open compares it with ``docs``' own count, in O(1): a damaged page can
make LMDB show an empty store, and an empty store would take every message for new.
"""

from __future__ import annotations

import json
import operator
import os
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from itertools import islice
from pathlib import Path
from typing import TypeVar

import lmdb

from mailfilter.names import Kind
from mailfilter.store import (
    DECISIONS,
    HISTOGRAM_GROUPS,
    LAYOUT,
    READABLE_SCHEMAS,
    RECIPIENTS_MAX,
    RECORD_VERSION,
    SCHEMA_VERSION,
    Found,
    Query,
    Record,
    StoreDamaged,
    StoreError,
    StoreMismatch,
    histogram_keys,
    histogram_probe_keys,
    histogram_probe_sums,
    message_id_key,
)
from mailfilter.values import Value, init

T = TypeVar("T")
_U64 = struct.Struct(">Q")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_TIME_ID = struct.Struct(">IQ")
_DAY_VERDICT = struct.Struct(">IB")
_NUMPY_WINDOW = 32    # from here on numpy is faster than the loop (measured: 31 µs vs 34 µs at 32)
# ... when the process has numpy already (batch work, daemons); one that has not (the pipe
# filter, started for one message) would spend more on importing it than the loop takes.
_NUMPY_WINDOW_COLD = 20_000
# Below this many ids a set or a sort in Python beats numpy's unique and lexsort (whose fixed
# cost is some 20 µs a call).
_NUMPY_UNIQUE = 512
_VERDICT_CODES = {Kind.UNIQUE: 0, Kind.DUPLICATE: 1, Kind.NEAR_DUPLICATE: 2}
# Daemons' decisions share the `counts` sub-database, from code 16 on (count_decision).
_DECISION_BASE = 16
_DECISION_CODES = {name: _DECISION_BASE + number for number, name in enumerate(DECISIONS)}
_MAX_MAP = 1 << 40
# The text clusters' indexes (schema 4): what a check reads in place of by_shingle and
# by_hist, one record per cluster; and each cluster's members.
_TEXT_INDEXES = ("by_text_shingle", "by_text_hist", "by_cluster")
_INDEXES = ("by_hist", "by_shingle", "by_digest", "by_msgid", "by_chunk", "by_text", "by_rcpt",
            *_TEXT_INDEXES)
_RCPT = struct.Struct(">QQ")
# A record's last time and seen counter (adjacent in its header), and its section counts.
_SEEN = struct.Struct(">II")
_SEEN_AT = LAYOUT.offset("last_seen")
_COUNTS = struct.Struct(">HHH")
_COUNTS_AT = LAYOUT.offset("n_sketch")
_MAX_DBS = 16
_RECORDS = b"records"             # meta: (records, next_id when they were counted)
_TALLY = struct.Struct(">QQ")
# What LMDB raises for a page that is not what the tree says it is: the store is damaged.
_DAMAGE = (lmdb.CorruptedError, lmdb.PageNotFoundError, lmdb.InvalidError,
           lmdb.IncompatibleError, lmdb.BadValsizeError)
# Sub-databases every initialised store has (the other indexes, by_hist, by_text, by_rcpt
# and the text clusters' came later: a store opened read-only may lack them, and a writer
# adds them).
_ESSENTIAL = ("docs", "by_time", "counts", "by_shingle", "by_digest", "by_msgid", "by_chunk")


class _Entries(Value):
    """Where the parts of a histogram index entry are, as ``getmulti(keyfixed=True)``
    returns it (the key, then the value): its width, the group byte (None: one group), the
    36 bins (permuted as the images of :func:`_images`) and the id."""

    __slots__ = ("width", "group", "bins", "id")

    def __init__(self, width: int, group: int | None, bins: int, id: int) -> None:
        init(self, width=width, group=group, bins=bins, id=id)


# by_hist: group (1), sum (2), the group's bins (12) | the other bins (24), id (8).
_GROUPED = _Entries(width=15 + 24 + 8, group=0, bins=3, id=39)
# by_sum of schema 1, read only where a store cannot be upgraded: sum (2) | histogram, id.
_BY_SUM = _Entries(width=2 + 36 + 8, group=None, bins=2, id=38)
# by_text_hist: as by_hist, the cluster's id (8) before the record's.
_TEXT_GROUPED = _Entries(width=15 + 24 + 8 + 8, group=0, bins=3, id=47)


_OUTSIDE = [operator.itemgetter(*[position for position in range(36)
                                   if position % HISTOGRAM_GROUPS != group])
            for group in range(HISTOGRAM_GROUPS)]


def _others(histogram: bytes, group: int) -> bytes:
    """The bins of ``histogram`` outside ``group``, in order (a by_hist value's bins)."""
    return bytes(_OUTSIDE[group](histogram))


def _images(histogram: bytes, layout: _Entries) -> list[bytes]:
    """The probe's histogram as each group's entries hold it (the group's bins first)."""
    if layout.group is None:
        return [histogram]
    return [histogram[group::HISTOGRAM_GROUPS] + _others(histogram, group)
            for group in range(HISTOGRAM_GROUPS)]


def _u64(value: int) -> bytes:
    return _U64.pack(value)


def _close_histograms(packed: bytes, layout: _Entries, probe: Query
                      ) -> tuple[list[tuple[int, int]], int]:
    """(differing positions, doc id) of the entries within the limit, closest first, then
    oldest; and how many records the entries hold (a record can be under two groups' keys).
    For a few entries.

    XOR of the two histograms as integers leaves a zero byte where a bin is equal, so the
    number of differing bins is 36 minus the zero bytes — no loop over the bins.
    """
    wanted = [int.from_bytes(image, "big") for image in _images(probe.histogram, layout)]
    seen: dict[int, int] = {}
    for offset in range(0, len(packed), layout.width):
        doc_id = _U64.unpack_from(packed, offset + layout.id)[0]
        if doc_id in seen:
            continue
        group = 0 if layout.group is None else packed[offset + layout.group]
        stored = int.from_bytes(packed[offset + layout.bins:offset + layout.bins + 36], "big")
        seen[doc_id] = 36 - (stored ^ wanted[group]).to_bytes(36, "big").count(0)
    limit = probe.histogram_max_positions
    close = sorted((positions, doc_id) for doc_id, positions in seen.items()
                   if positions <= limit)
    return close[:probe.histogram_limit], len(seen)


def _close_histograms_numpy(packed: memoryview, layout: _Entries, probe: Query
                            ) -> tuple[list[tuple[int, int]], int]:
    """The same for many entries (a sum window of a million records holds thousands):
    compared, selected and ordered in a few numpy operations, no Python loop per entry.

    The 36 per-bin comparisons of an entry are read as nine 32-bit words of four 0/1 bytes;
    adding the words and multiplying by 0x01010101 sums the bytes into the top byte (at
    most 36, so no carry crosses a byte) — much faster than numpy's sum over a short axis.
    """
    import numpy as np
    entries = np.frombuffer(packed, dtype=np.uint8).reshape(-1, layout.width)
    images = np.frombuffer(b"".join(_images(probe.histogram, layout)),
                           dtype=np.uint8).reshape(-1, 36)
    against = images[0] if layout.group is None else images[entries[:, layout.group]]
    words = (entries[:, layout.bins:layout.bins + 36] != against).view(np.uint32)
    total = words[:, 0] + words[:, 1]
    for column in range(2, 9):
        total += words[:, column]
    differing = (total * np.uint32(0x01010101)) >> np.uint32(24)
    ids = entries[:, layout.id:layout.id + 8].copy().view(">u8").ravel()
    if layout.group is None:
        distinct = len(ids)
    elif len(ids) < _NUMPY_UNIQUE:      # a Python set is quicker than np.unique here
        distinct = len(set(ids.tolist()))
    else:
        distinct = len(np.unique(ids))
    rows = np.flatnonzero(differing <= probe.histogram_max_positions)
    if not len(rows) or probe.histogram_limit <= 0:
        return [], distinct
    ids, positions = ids[rows], differing[rows]
    order = np.lexsort((ids, positions))   # closest, then oldest
    if layout.group is None:
        order = order[:probe.histogram_limit]
        return list(zip(positions[order].tolist(), ids[order].tolist(), strict=True)), distinct
    close: dict[int, int] = {}             # each record once, at its closest
    limit = probe.histogram_limit
    for position, doc_id in zip(positions[order].tolist(), ids[order].tolist(), strict=True):
        if doc_id not in close:
            close[doc_id] = position
            if len(close) >= limit:
                break
    return [(position, doc_id) for doc_id, position in close.items()], distinct


def _newest_per_cluster(packed: bytes, close: list[tuple[int, int]], most: int
                        ) -> list[tuple[int, int]]:
    """Of the closest matches (by_text_hist entries ``packed``), the newest ``most`` of
    each text cluster, in order (Query.per_cluster)."""
    width, at = _TEXT_GROUPED.width, _TEXT_GROUPED.id
    cluster_of = {}
    for _positions, doc_id in close:
        needle = _u64(doc_id)
        found = packed.find(needle, at)
        while found >= 0 and (found - at) % width:
            found = packed.find(needle, found + 1)
        cluster_of[doc_id] = packed[found - 8:found]
    kept: dict[bytes, list[int]] = {}
    for doc_id in sorted(cluster_of, reverse=True):
        kept.setdefault(cluster_of[doc_id], []).append(doc_id)
    newest = {doc_id for ids in kept.values() for doc_id in ids[:most]}
    return [(positions, doc_id) for positions, doc_id in close if doc_id in newest]


def _files(cursor: lmdb.Cursor, key: bytes, prefix: bytes) -> bool:
    """True when ``key`` has an entry whose value starts with ``prefix`` (a dupsort
    database: one positioning)."""
    return cursor.set_range_dup(key, prefix) and bytes(cursor.value()[:len(prefix)]) == prefix


def _text_histogram(record: Record) -> bytes:
    """A record's histogram and sum as by_text_hist tells them apart (its group-0 key and
    the other bins)."""
    return histogram_keys(record.histogram, record.histogram_sum)[0] + _others(record.histogram, 0)


def _walk_in_a_process(location: str, parameters: dict[str, object], skipped: list[str]
                       ) -> tuple[list[str] | None, tuple[str, str | None] | None, str]:
    """:meth:`LmdbStore.verify`'s walk in a process of its own (``python -c``: an LMDB
    environment must not cross a fork): (its problems, None when it died; the last (name,
    key) it reported; the end of what it wrote on stderr)."""
    import subprocess
    package_root = str(Path(__file__).resolve().parents[2])
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [package_root, *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run(
        [sys.executable, "-c", "from mailfilter.store.lmdb import _walk_here; _walk_here()"],
        input=json.dumps([location, parameters, skipped]).encode(), capture_output=True,
        env=environment, check=False)
    lines = done.stdout.decode("utf-8", "replace").splitlines()
    problems = next((json.loads(line[5:]) for line in lines if line.startswith("done ")),
                    None)
    where = [line[3:].split(" ", 1) for line in lines if line.startswith("at ")]
    progress = (where[-1][0], None if where[-1][1] == "-" else where[-1][1]) if where else None
    return problems, progress, done.stderr.decode("utf-8", "replace")[-2000:]


class _Reader:
    """The read transaction of a walk, begun anew after an error (LMDB lets a
    transaction that met a damaged page do nothing more)."""

    def __init__(self, env: lmdb.Environment) -> None:
        self.env = env
        self.txn = env.begin()

    def renew(self) -> lmdb.Transaction:
        self.txn.abort()
        self.txn = self.env.begin()
        return self.txn


def _walk_here() -> None:
    """The walk process: [location, parameters, sub-databases to skip] on stdin; where it
    is ("at NAME KEY") and at the end its problems ("done [...]") on stdout."""
    location, parameters, skipped = json.load(sys.stdin)

    def report(where: str) -> None:
        print(f"at {where}", flush=True)
    try:
        store = LmdbStore(location, parameters, readonly=True, as_it_is=True)
        problems: list[str] = []
        reader = _Reader(store.env)
        try:
            store._verify(reader, problems, report, set(skipped))
        except lmdb.Error as error:
            problems.append(f"the store cannot be read: {type(error).__name__}: "
                            f"{_reason(error)}")
        reader.txn.abort()
        store.close()
    except Exception as error:  # noqa: BLE001 - said as a problem, not a traceback
        problems = [f"verify failed: {type(error).__name__}: {error}"]
    print("done " + json.dumps(problems), flush=True)


def _initialised(path: Path) -> bool:
    """True when the environment at ``path`` has its fingerprint parameters."""
    try:
        env = lmdb.open(str(path), max_dbs=_MAX_DBS, readonly=True, lock=True, create=False)
    except lmdb.Error:
        return False
    try:
        with env.begin() as txn:
            if txn.get(b"meta") is None:
                return False
        meta = env.open_db(b"meta", create=False)
        with env.begin() as txn:
            return txn.get(b"parameters", db=meta) is not None
    except lmdb.Error:
        return False
    finally:
        env.close()


def _older_schema(path: Path) -> bool:
    """True when the environment at ``path`` was written with an older schema."""
    try:
        env = lmdb.open(str(path), max_dbs=_MAX_DBS, readonly=True, lock=True, create=False)
    except lmdb.Error:
        return False
    try:
        meta = env.open_db(b"meta", create=False)
        with env.begin() as txn:
            schema = txn.get(b"schema", db=meta)
        return schema is not None and int(schema) < SCHEMA_VERSION
    except (lmdb.Error, ValueError):
        return False
    finally:
        env.close()


def _reason(error: lmdb.Error) -> str:
    """LMDB's message without the C function name ("mdb_txn_commit: No space...")."""
    text = str(error)
    return text.split(": ", 1)[1] if text.startswith("mdb_") and ": " in text else text


def _damaged(location: str, what: str) -> StoreDamaged:
    """The error of a store that looks damaged, saying ``what`` disagrees and what to do."""
    return StoreDamaged(f"the store at {location} looks damaged ({what}); restore it from a "
                        "backup made with `mdb_copy -c` or move it aside (docs/operations.md, "
                        "\"A damaged store\")")


# Free bytes below which a failed write is put down to a full disk (LMDB may report a
# write that a full disk cut short as EIO, "Input/output error").
_NEARLY_FULL = 1 << 20


def _store_error(location: str, error: lmdb.Error) -> StoreError:
    """An LMDB error as the store's: a damaged page says so, and so does a full disk."""
    if isinstance(error, _DAMAGE):
        return _damaged(location, f"LMDB: {_reason(error)}")
    reason = _reason(error)
    if "No space left" not in reason:
        try:
            vfs = os.statvfs(location)
        except OSError:
            vfs = None
        if vfs is not None and vfs.f_bavail * vfs.f_frsize < _NEARLY_FULL:
            reason += (f" (No space left on device: {vfs.f_bavail * vfs.f_frsize:,} bytes "
                       "free on the store's file system)")
    return StoreError(f"store {location}: {reason}")


class LmdbStore:
    """LMDB implementation of :class:`mailfilter.store.Store`."""

    def __init__(self, location: str | os.PathLike[str], parameters: dict[str, object], *,
                 map_size_mb: int = 64, file_mode: int = 0o600, create: bool = True,
                 readonly: bool = False, as_it_is: bool = False) -> None:
        """``as_it_is``: read-only, never finish creating or upgrade the store first (the
        walk of :meth:`verify`, which reads what its caller opened)."""
        self.location = str(location)
        self._parameters = parameters
        path = Path(location)
        data_file = path / "data.mdb"
        if not data_file.exists():
            if readonly or not create:
                raise StoreError(f"no dupfilter store at {path} (run `dupfilter-db import` or "
                                 "deliver a message to create one)")
            try:
                path.mkdir(parents=True, exist_ok=True, mode=0o700)
            except OSError as error:
                raise StoreError(f"cannot create store folder {path}: {error.strerror}") from None
        elif not os.access(data_file, os.R_OK | (0 if readonly else os.W_OK)):
            raise StoreError(f"store {path} is not {'readable' if readonly else 'writable'} "
                             f"by this user (uid {os.getuid()})")
        elif readonly and not as_it_is and os.access(data_file, os.W_OK) and (
                not _initialised(path) or _older_schema(path)):
            # A delivery killed while creating the store left it without its sub-databases:
            # finish creating it (empty), as the next delivery would.  A store of an older
            # schema is upgraded, as the next delivery would.
            LmdbStore(path, parameters, map_size_mb=map_size_mb, file_mode=file_mode).close()
        try:
            self.env = lmdb.open(str(path), max_dbs=_MAX_DBS, map_size=map_size_mb << 20,
                                 mode=file_mode, readonly=readonly, create=create and not readonly,
                                 lock=True, max_readers=256, readahead=False)
        except _DAMAGE as error:
            raise _damaged(str(path), f"LMDB: {_reason(error)}") from None
        except lmdb.Error as error:
            raise StoreError(f"cannot open store {path}: {error}") from None
        self.readonly = readonly
        self._local = threading.local()
        self._grow_lock = threading.Lock()
        try:
            self.env.reader_check()
            self._open_databases()
            stale = self._check_records()
            self._bind_parameters(parameters)
            if stale and not readonly:
                self._write(self._recount)
        except _DAMAGE as error:
            self.env.close()
            raise _damaged(str(path), f"LMDB: {_reason(error)}") from None
        except lmdb.Error as error:
            self.env.close()
            raise StoreError(f"cannot open store {path}: {error}") from None
        except StoreError:
            self.env.close()
            raise

    # -- environment -------------------------------------------------------------------

    def _open_databases(self) -> None:
        """Open (and, for a new store, create) the sub-databases; a store that has its
        parameters but lacks a sub-database every store has is damaged, not new: nothing
        is created in it (an empty ``docs`` made anew would take every message for new)."""
        writable = not self.readonly

        def sub(name: str, create: bool, **flags: bool) -> lmdb._Database:
            return self.env.open_db(name.encode(), create=create, **flags)
        try:
            self._check_main()
            self.meta = sub("meta", writable)
        except lmdb.NotFoundError:
            raise StoreError(f"{self.location} is not a dupfilter store") from None
        with self.env.begin() as txn:
            initialised = txn.get(b"parameters", db=self.meta) is not None
        self.index = {}
        for name in (*_ESSENTIAL[:3], *_INDEXES):
            essential = name in _ESSENTIAL
            flags = {} if name in _ESSENTIAL[:3] else {"dupsort": True, "dupfixed": True}
            try:
                db = sub(name, writable and not (essential and initialised), **flags)
            except lmdb.NotFoundError:
                if essential and initialised:
                    raise _damaged(self.location, f"meta holds its parameters but the {name} "
                                  "sub-database is missing") from None
                # Read-only, a store may lack an index a later version added: a schema 1
                # store's by_hist (read by_sum instead), or by_rcpt (no entries yet).
                if essential or not self.readonly:
                    raise StoreError(f"{self.location} is not a dupfilter store") from None
                continue
            if name in _ESSENTIAL[:3]:
                setattr(self, name, db)
            else:
                self.index[name] = db
        # A schema 1 store that cannot be upgraded (read-only to this user) is read as
        # it is: its histogram index is by_sum.
        self._by_sum = None
        if "by_hist" not in self.index:
            try:
                self._by_sum = self.index["by_sum"] = sub("by_sum", False, dupsort=True,
                                                          dupfixed=True)
            except lmdb.NotFoundError:
                raise StoreError(f"{self.location} is not a dupfilter store") from None

    def _check_main(self) -> None:
        """Refuse a main database that lost its ``meta`` while it lists sub-databases (or
        pages were ever written): LMDB would show it as a new, empty store, and a writer
        would create an empty one in it.  An environment with nothing in it is new."""
        try:
            self.env.open_db(b"meta", create=False)
            return
        except lmdb.NotFoundError:
            pass
        with self.env.begin() as txn:
            names = {bytes(key) for key in islice(txn.cursor().iternext(values=False), 64)}
        listed = self.env.stat()["entries"]
        if not names and not listed and self.env.info()["last_pgno"] <= 1:
            return
        ours = {name.encode() for name in (*_ESSENTIAL, *_INDEXES)}
        if names and len(names) == listed and not names & ours:
            raise StoreError(f"{self.location} is not a dupfilter store (an LMDB environment "
                             "of another program)")
        raise _damaged(self.location, f"its main database says {listed:,} sub-databases, "
                      f"found {len(names):,}, no meta")

    def _check_records(self) -> bool:
        """Compare meta's count of records with ``docs``' own, and read its first and last
        record's keys (O(1): at every open).  True when the count is missing or stale (an
        older dupfilter wrote), to be counted again by a writer; a read-only open skips the
        comparison then."""
        try:
            with self.env.begin() as txn:
                raw = txn.get(_RECORDS, db=self.meta)
                next_id = self._next_id(txn)
                entries = txn.stat(self.docs)["entries"]
                cursor = txn.cursor(db=self.docs)
                first = bytes(cursor.key()) if cursor.first() else None
                last = bytes(cursor.key()) if cursor.last() else None
        except _DAMAGE as error:
            raise _damaged(self.location, f"its records cannot be read: LMDB: "
                          f"{_reason(error)}") from None
        stale = raw is None or len(raw) != _TALLY.size or _TALLY.unpack(raw)[1] != next_id
        if not stale:
            count = _TALLY.unpack(raw)[0]
            if count != entries:
                raise _damaged(self.location, f"meta says {count:,} records, found {entries:,}")
        if entries and first is None:
            raise _damaged(self.location, f"the records sub-database says {entries:,} "
                          "records, found none")
        for key in (first, last):
            if key is not None and (len(key) != 8 or _U64.unpack(key)[0] >= next_id):
                raise _damaged(self.location, f"the records sub-database holds a key "
                              f"{key[:16].hex()} that is no record id below {next_id:,}")
        return stale

    def _next_id(self, txn: lmdb.Transaction) -> int:
        """The id the next record gets."""
        raw = txn.get(b"next_id", db=self.meta)
        return _U64.unpack(raw)[0] if raw else 1

    def _recount(self, txn: lmdb.Transaction) -> None:
        """meta's count of records from ``docs``' own count (a new store, one an older
        dupfilter made or wrote to last), unless another writer counted meanwhile."""
        next_id = self._next_id(txn)
        raw = txn.get(_RECORDS, db=self.meta)
        if raw is None or len(raw) != _TALLY.size or _TALLY.unpack(raw)[1] != next_id:
            txn.put(_RECORDS, _TALLY.pack(txn.stat(self.docs)["entries"], next_id),
                    db=self.meta)

    def _tally(self, txn: lmdb.Transaction, change: int, before: int, after: int) -> None:
        """``change`` more records in meta's count (in the transaction that made the
        change); ``before`` and ``after`` are ``next_id`` around it.  A count another
        writer left stale is taken from ``docs``' own."""
        raw = txn.get(_RECORDS, db=self.meta)
        if raw is not None and len(raw) == _TALLY.size and _TALLY.unpack(raw)[1] == before:
            count = max(0, _TALLY.unpack(raw)[0] + change)
        else:
            count = txn.stat(self.docs)["entries"]
        txn.put(_RECORDS, _TALLY.pack(count, after), db=self.meta)

    def _bind_parameters(self, parameters: dict[str, object]) -> None:
        # How many of a record's smallest sketch hashes go into the shingle index.
        self.index_size = int(parameters.get("index_size", 1 << 30))  # type: ignore[arg-type]
        wanted = json.dumps(parameters, sort_keys=True)
        with self.env.begin() as txn:
            schema = txn.get(b"schema", db=self.meta)
            stored = txn.get(b"parameters", db=self.meta)
        if stored is None:
            if self.readonly:
                raise StoreError(f"{self.location} is not an initialised dupfilter store")
            with self.env.begin(write=True) as txn:
                if txn.get(b"parameters", db=self.meta) is None:
                    txn.put(b"schema", str(SCHEMA_VERSION).encode(), db=self.meta)
                    txn.put(b"parameters", wanted.encode(), db=self.meta)
                    txn.put(b"created", _u64(int(time.time())), db=self.meta)
                    self._recount(txn)
            return
        if schema is not None and int(schema) not in READABLE_SCHEMAS:
            raise StoreMismatch(f"store {self.location} has schema {int(schema)}; this "
                                f"dupfilter reads schemas {sorted(READABLE_SCHEMAS)}")
        have = json.loads(stored)
        if have != json.loads(wanted):
            differ = sorted(k for k in set(have) | set(parameters)
                            if have.get(k) != parameters.get(k))
            details = ", ".join(f"{k}={have.get(k)!r} (configured {parameters.get(k)!r})"
                                for k in differ)
            raise StoreMismatch(f"store {self.location} was built with other fingerprint "
                                f"parameters: {details}; use those settings or a new store")
        if schema is not None and int(schema) < SCHEMA_VERSION and not self.readonly:
            self._upgrade()

    def _upgrade(self) -> None:
        """Bring an older store to this schema (once, by the first writer, in one
        transaction), from the records: schema 1's histogram index by_sum is replaced by
        by_hist; up to schema 2, every record heads its own text cluster, so its index
        hashes go into by_text and its recipients into by_rcpt; up to schema 3, the text
        clusters' indexes are made, in id order (a cluster's first holder of a hash or a
        histogram files it, as when recording).  Records stay as they are (read as they
        are, rewritten in the current format when touched)."""
        def upgrade(txn: lmdb.Transaction) -> int:
            schema = txn.get(b"schema", db=self.meta)
            if schema is None or int(schema) >= SCHEMA_VERSION:
                return SCHEMA_VERSION   # another process did it meanwhile
            schema = int(schema)
            wanted = ({"by_hist"} if schema < 2 else set()) | (
                {"by_text", "by_rcpt"} if schema < 3 else set()) | {"by_cluster"}
            for key, value in txn.cursor(db=self.docs):
                record = Record.decode(_U64.unpack(key)[0], value)
                for name, index_key, entry in self._index_entries(record, shingles=False):
                    if name in wanted:
                        txn.put(index_key, entry, db=self.index[name], dupdata=True)
                self._file_text(txn, record, new=False)
            if schema < 2:
                try:
                    by_sum = self.env.open_db(b"by_sum", txn=txn, create=False,
                                              dupsort=True, dupfixed=True)
                except lmdb.NotFoundError:
                    pass
                else:
                    txn.drop(by_sum, delete=True)
            txn.put(b"schema", str(SCHEMA_VERSION).encode(), db=self.meta)
            return schema
        import logging  # once, for an upgrade: not in every pipe filter's start
        old = self.atomically(lambda: upgrade(self._local.txn))
        if old < SCHEMA_VERSION:
            logging.getLogger(__name__).warning(
                "%s: upgraded the store from schema %s to %s", self.location, old,
                SCHEMA_VERSION)

    def _grow(self) -> None:
        with self._grow_lock:
            current = self.env.info()["map_size"]
            if current >= _MAX_MAP:
                raise StoreError(f"store {self.location} reached the largest map size")
            self.env.set_mapsize(min(current * 2, _MAX_MAP))

    def _txn(self) -> lmdb.Transaction | None:
        return getattr(self._local, "txn", None)

    def _read(self, fn: Callable[[lmdb.Transaction], T]) -> T:
        txn = self._txn()
        if txn is not None:
            return fn(txn)
        for _ in range(5):
            try:
                with self.env.begin(buffers=True) as txn:
                    return fn(txn)
            except lmdb.MapResizedError:
                with self._grow_lock:
                    self.env.set_mapsize(0)
            except lmdb.Error as error:
                raise _store_error(self.location, error) from None
        raise StoreError(f"store {self.location}: map kept changing size")

    def _write(self, fn: Callable[[lmdb.Transaction], T]) -> T:
        txn = self._txn()
        if txn is not None:
            return fn(txn)
        return self.atomically(lambda: fn(self._local.txn))

    def atomically(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` in one write transaction (lookups inside see and lock the store).

        A full map is grown and ``fn`` run again; the map size another process set is
        adopted.  Nested calls join the outer transaction.
        """
        if self.readonly:
            raise StoreError(f"store {self.location} is open read-only")
        if self._txn() is not None:
            return fn()
        for _ in range(40):
            txn = None
            try:
                txn = self.env.begin(write=True)
                self._local.txn = txn
                result = fn()
                txn.commit()
                return result
            except lmdb.MapFullError:
                if txn is not None:
                    txn.abort()
                self._grow()
            except lmdb.MapResizedError:
                if txn is not None:
                    txn.abort()
                with self._grow_lock:
                    self.env.set_mapsize(0)
            except lmdb.Error as error:
                # Disk full, I/O error, a corrupted page: the store says so; callers pass
                # mail through (or tempfail) and the next transaction tries again.
                if txn is not None:
                    txn.abort()
                raise _store_error(self.location, error) from None
            except BaseException:
                if txn is not None:
                    txn.abort()
                raise
            finally:
                self._local.txn = None
        raise StoreError(f"store {self.location}: could not grow the map")

    # -- lookup ------------------------------------------------------------------------

    def lookup(self, query: Query) -> Found:
        """Every posting of ``query`` and the records they list, in one read transaction."""
        return self._read(lambda txn: self._lookup(txn, query))

    # (Store.adds_while_checking: check and record share one write transaction.)
    adds_while_checking = False

    def lookup_or_add(self, query: Query, record: Record) -> Found:
        """:meth:`lookup`, and unless something could make the verdict other than unique
        (see :meth:`Store.lookup_or_add`), add ``record`` and count a "unique" verdict in the
        same write transaction (``record.doc_id`` is set; it stays 0 otherwise).
        Read-only: a plain lookup."""
        if self.readonly:
            return self.lookup(query)

        def run(txn: lmdb.Transaction) -> Found:
            found = self._lookup(txn, query)
            if not found.exact:
                self._count(txn, "unique", record.first_seen)
                self._add(txn, record)
            return found
        return self._write(run)

    def _postings(self, cursor: lmdb.Cursor, key: bytes, cap: int, width: int = 8
                  ) -> list[int]:
        """Newest ``cap`` ids under ``key`` (ids grow with time, so read from the end; in
        values of ``width`` bytes the id is the last 8: by_text_shingle's are newest by
        cluster)."""
        if not cursor.set_key(key):
            return []
        cursor.last_dup()
        packed = b"".join(islice(cursor.iterprev_dup(keys=False), cap))   # in C
        ids = struct.unpack(f">{len(packed) // 8}Q", packed)
        return list(ids if width == 8 else ids[1::2])

    def _newest(self, cursor: lmdb.Cursor, keys: Sequence[bytes], counts: Sequence[int],
                cap: int, width: int = 8) -> dict[bytes, list[int]]:
        """The newest ``cap`` ids under each of ``keys`` (same-length keys, each with its
        count of postings), newest first.  Short lists (nearly all) are read in one
        ``getmulti`` call; a longer one from its end, so it never costs more than ``cap``.
        (Values of 16 bytes: a cluster id, then the record's.)"""
        found: dict[bytes, list[int]] = {}
        short = []
        for key, count in zip(keys, counts, strict=True):
            if count > cap:
                found[key] = self._postings(cursor, key, cap, width)
            elif count:
                short.append(key)
        if short:
            packed = cursor.getmulti(short, dupdata=True, dupfixed_bytes=width, keyfixed=True)
            # key, then the id (after the cluster's)
            entry = struct.Struct(f">{len(short[0])}s{width - 8}xQ")
            for key, doc_id in entry.iter_unpack(packed):
                found.setdefault(bytes(key), []).append(doc_id)
            for key in short:
                found[key].reverse()            # oldest first in the index
        return found

    def _counts(self, cursor: lmdb.Cursor, keys: list[bytes]) -> list[int]:
        """Postings under each of ``keys`` (0 when absent): one B-tree descent per key."""
        return [cursor.count() if cursor.set_key(key) else 0 for key in keys]

    def _lookup(self, txn: lmdb.Transaction, query: Query) -> Found:
        found = Found()
        cursor = txn.cursor(db=self.index["by_msgid"])
        if query.message_id_key:
            found.by_message_id = self._postings(cursor, query.message_id_key,
                                                 query.exact_limit)
        cursor = txn.cursor(db=self.index["by_digest"])
        for number, digest in enumerate(query.digests):
            ids = self._postings(cursor, digest, query.exact_limit if number == 0
                                 else query.part_limit)
            found.by_digest += [i for i in ids if i not in found.by_digest]
        if query.histogram_window > 0:
            self._histogram_window(txn, query, found)
        # One record per text cluster under each hash (Query.per_text), or every holder.
        per_text = query.per_text and "by_text_shingle" in self.index
        shingles = txn.cursor(db=self.index["by_text_shingle" if per_text else "by_shingle"])
        texts = txn.cursor(db=self.index["by_text"]) if "by_text" in self.index else None
        pack = _U32.pack
        if query.shingles:
            keys = [pack(value) for value in query.shingles]
            counts = self._counts(shingles, keys)
            newest = self._newest(shingles, keys, counts, query.shingle_limit,
                                  16 if per_text else 8)
            found.by_shingle = {value: newest[key] for value, key in
                                zip(query.shingles, keys, strict=True) if key in newest}
            if texts is not None and query.count_limit:
                # A hash no text cluster files is held by no text (verify() checks it):
                # only the others are counted (a new text's hashes mostly have none).
                held = [(value, key) for value, key, count in zip(
                    query.shingles, keys, counts, strict=True) if count]
                found.counts = {value: count for (value, _), count in zip(
                    held, self._counts(texts, [key for _, key in held]), strict=True)
                    if count}
        if query.chunks:
            cursor = txn.cursor(db=self.index["by_chunk"])
            keys = [_u64(value) for value in query.chunks]
            newest = self._newest(cursor, keys, self._counts(cursor, keys),
                                  query.shingle_limit)
            found.by_chunk = {value: newest[key] for value, key in
                              zip(query.chunks, keys, strict=True) if key in newest}
        wanted = sorted(set(found.by_message_id).union(
            found.by_digest, found.by_histogram, *found.by_shingle.values(),
            *found.by_chunk.values()))
        if not wanted:
            return found
        decode = Record.decode
        if len(wanted) <= 4:
            for doc_id in wanted:
                data = txn.get(_u64(doc_id), db=self.docs)
                if data is not None:
                    found.records[doc_id] = decode(doc_id, data)
        else:   # in id order, one C call: neighbouring records share B-tree pages
            for key, data in txn.cursor(db=self.docs).getmulti([_u64(i) for i in wanted]):
                doc_id = _U64.unpack(key)[0]
                found.records[doc_id] = decode(doc_id, data)
        if per_text and query.members and found.by_shingle:
            self._members(txn, query, found)
        # Counts of the further hashes matter only when there are records to compare.
        rest = [value for value in dict.fromkeys(query.counted) if value not in found.counts]
        if rest and found.records and texts is not None and query.count_limit:
            for value, count in zip(rest, self._counts(texts, [pack(v) for v in rest]),
                                    strict=True):
                if count:
                    found.counts[value] = count
        if query.count_limit:
            found.counts = {value: min(count, query.count_limit)
                            for value, count in found.counts.items()}
        if query.recipients and "by_rcpt" in self.index:
            cursor = txn.cursor(db=self.index["by_rcpt"])
            for cluster in {record.cluster_id for record in found.records.values()}:
                had = frozenset(r for r in query.recipients
                                if cursor.set_key(_RCPT.pack(r, cluster)))
                if had:
                    found.delivered[cluster] = had
        return found

    def _members(self, txn: lmdb.Transaction, query: Query, found: Found) -> None:
        """The newest ``query.members`` members of each text cluster found under a sketch
        hash, and their records."""
        cursor = txn.cursor(db=self.index["by_cluster"])
        records = found.records
        clusters = dict.fromkeys(records[doc_id].cluster_id for ids in found.by_shingle.values()
                                 for doc_id in ids if doc_id in records)
        more = []
        for cluster in clusters:
            ids = self._postings(cursor, _u64(cluster), query.members)
            found.members[cluster] = ids
            more += [doc_id for doc_id in ids if doc_id not in records]
        decode = Record.decode
        for doc_id in sorted(more):
            data = txn.get(_u64(doc_id), db=self.docs)
            if data is not None:
                records[doc_id] = decode(doc_id, data)
        if more:
            found.records = dict(sorted(records.items()))

    def _histogram_window(self, txn: lmdb.Transaction, probe: Query, result: Found) -> None:
        """The histogram rule's candidates: the records under the probe's group keys (every
        sum of the window), or, for a rule allowing more differing bins than the groups can
        promise (or a schema 1 store read as it is), every record of the sum window."""
        if self._by_sum is not None:
            layout, packed = _BY_SUM, self._by_sum_window(txn, probe)
        elif probe.histogram_max_positions < HISTOGRAM_GROUPS:
            # One record per text cluster and histogram (Query.per_text), or every record.
            per_text = probe.per_text and "by_text_hist" in self.index
            layout = _TEXT_GROUPED if per_text else _GROUPED
            keys = histogram_probe_keys(probe.histogram, probe.histogram_sum,
                                        probe.histogram_window)
            cursor = txn.cursor(db=self.index["by_text_hist" if per_text else "by_hist"])
            packed = cursor.getmulti(keys, dupdata=True, dupfixed_bytes=layout.width - 15,
                                     keyfixed=True)
        else:
            layout, packed = _GROUPED, self._group_range(txn, probe)
        if not packed:
            return
        entries = len(packed) // layout.width
        if entries >= _NUMPY_WINDOW and ("numpy" in sys.modules
                                         or entries >= _NUMPY_WINDOW_COLD):
            close, count = _close_histograms_numpy(packed, layout, probe)
        else:
            close, count = _close_histograms(bytes(packed), layout, probe)
        if layout is _TEXT_GROUPED and probe.per_cluster and len(close) > probe.per_cluster:
            close = _newest_per_cluster(bytes(packed), close, probe.per_cluster)
        result.histogram_window_size = count
        result.by_histogram = {doc_id: positions for positions, doc_id in close}

    def _group_range(self, txn: lmdb.Transaction, probe: Query) -> bytes:
        """Every group-0 entry of the sum window: each record once, keys in one range."""
        sums = histogram_probe_sums(probe.histogram_sum, probe.histogram_window)
        start = b"\x00" + _U16.pack(sums.start)
        end = b"\x00" + _U16.pack(sums.stop) if sums.stop <= 0xFFFF else b"\x01"
        cursor = txn.cursor(db=self.index["by_hist"])
        found = []
        if cursor.set_range(start):
            for key, value in cursor.iternext():
                if bytes(key) >= end:
                    break
                found.append(bytes(key) + bytes(value))
        return b"".join(found)

    def _by_sum_window(self, txn: lmdb.Transaction, probe: Query) -> bytes:
        sums = histogram_probe_sums(probe.histogram_sum, probe.histogram_window)
        cursor = txn.cursor(db=self._by_sum)
        return cursor.getmulti([_U16.pack(s) for s in sums], dupdata=True,
                               dupfixed_bytes=_BY_SUM.width - 2, keyfixed=True)

    # -- writing -----------------------------------------------------------------------

    def add(self, record: Record) -> int:
        return self._write(lambda txn: self._add(txn, record))

    def _add(self, txn: lmdb.Transaction, record: Record) -> int:
        doc_id = self._next_id(txn)
        txn.put(b"next_id", _u64(doc_id + 1), db=self.meta)
        record.doc_id = doc_id
        key = _u64(doc_id)
        txn.put(key, record.encode(), db=self.docs, append=True)
        # Each index's entries in one C call when it gets several (the 24 shingle and text
        # hashes, the three histogram groups: a put each cost a tenth of an add).
        for name, entries in self._index_groups(record).items():
            if len(entries) > 1:
                txn.cursor(db=self.index[name]).putmulti(entries, dupdata=True)
            else:
                txn.put(*entries[0], db=self.index[name], dupdata=True)
        self._file_text(txn, record, new=True)
        txn.put(_TIME_ID.pack(record.last_seen, doc_id), b"", db=self.by_time)
        self._tally(txn, 1, doc_id, doc_id + 1)
        return doc_id

    # -- the text clusters' indexes -----------------------------------------------------
    #
    # by_text_shingle (hash → cluster id + record id) and by_text_hist (as by_hist, the
    # cluster's id before the record's) hold, for each text cluster, one record under each
    # index hash and each distinct histogram (sum and bins) of its members: the first member
    # that had it, and when that one goes, another that has it (_hand_over).  A check reads
    # them (Query.per_text): a newsletter's 10,000 copies are one entry, not 10,000.  Values
    # sort by cluster, so "does this cluster file it" is one cursor positioning.
    # by_cluster (cluster id → member ids) says whether a cluster has other members.

    def _file_text(self, txn: lmdb.Transaction, record: Record, *, new: bool) -> None:
        """File ``record`` in the text clusters' indexes where its cluster lacks the entry
        (``new``: a record just given its id, heading its own cluster: it lacks them all)."""
        if "by_text_shingle" not in self.index:
            return
        cluster = _u64(record.cluster_id)
        value = cluster + _u64(record.doc_id)
        fresh = new and not record.cluster
        cursor = txn.cursor(db=self.index["by_text_shingle"])
        hashes = dict.fromkeys(map(_U32.pack, record.sketch[:self.index_size]))
        entries = [(key, value) for key in hashes] if fresh else \
            [(key, value) for key in hashes if not _files(cursor, key, cluster)]
        if entries:
            cursor.putmulti(entries, dupdata=True)
        keys = histogram_keys(record.histogram, record.histogram_sum)
        cursor = txn.cursor(db=self.index["by_text_hist"])
        if fresh or not _files(cursor, keys[0], _others(record.histogram, 0) + cluster):
            cursor.putmulti([(key, _others(record.histogram, group) + value)
                             for group, key in enumerate(keys)], dupdata=True)

    def _unfile_text(self, txn: lmdb.Transaction, record: Record
                     ) -> tuple[list[int], bool]:
        """Take ``record`` out of the text clusters' indexes; the index hashes it filed for
        its cluster, and whether it filed its histogram."""
        if "by_text_shingle" not in self.index:
            return [], False
        value = _u64(record.cluster_id) + _u64(record.doc_id)
        db = self.index["by_text_shingle"]
        hashes = [h for h in dict.fromkeys(record.sketch[:self.index_size])
                  if txn.delete(_U32.pack(h), value, db=db)]
        db = self.index["by_text_hist"]
        histogram = False
        for group, key in enumerate(histogram_keys(record.histogram, record.histogram_sum)):
            histogram = txn.delete(key, _others(record.histogram, group) + value,
                                   db=db) or histogram
        return hashes, histogram

    def _hand_over(self, txn: lmdb.Transaction, gone: Record, hashes: list[int],
                   histogram: bool) -> None:
        """Another member of a removed record's cluster files what it filed for the cluster
        (the newest member holding each hash, the oldest with the same histogram), so that
        the cluster stays findable by everything its members hold."""
        if not hashes and not histogram:
            return
        cluster = gone.cluster_id
        members = txn.cursor(db=self.index["by_cluster"])
        if not members.set_key(_u64(cluster)):
            return                                  # the last of its text
        size = members.count()
        docs = txn.cursor(db=self.docs)
        records: dict[int, Record | None] = {}

        def member(doc_id: int) -> Record | None:
            if doc_id not in records:
                data = docs.get(_u64(doc_id))
                record = Record.decode(doc_id, data) if data is not None else None
                records[doc_id] = record if record is not None \
                    and record.cluster_id == cluster else None
            return records[doc_id]

        def newest_members() -> Iterator[Record]:
            cursor = txn.cursor(db=self.index["by_cluster"])
            cursor.set_key(_u64(cluster))
            cursor.last_dup()
            for raw in cursor.iterprev_dup(keys=False):
                found = member(_U64.unpack(raw)[0])
                if found is not None:
                    yield found

        holders = txn.cursor(db=self.index["by_shingle"])
        texts = txn.cursor(db=self.index["by_text_shingle"])
        for value in hashes:
            key = _U32.pack(value)
            if not holders.set_key(key):
                continue                # no one else holds it
            if holders.count() <= size:
                holders.last_dup()      # the hash's holders, newest first
                heir = next((found for raw in holders.iterprev_dup(keys=False)
                             if (found := member(_U64.unpack(raw)[0])) is not None), None)
            else:                       # fewer members than holders: the members
                heir = next((found for found in newest_members()
                             if value in found.sketch[:self.index_size]), None)
            if heir is not None:
                texts.put(key, _u64(cluster) + _u64(heir.doc_id), dupdata=True)
        if histogram:
            key = histogram_keys(gone.histogram, gone.histogram_sum)[0]
            others = _others(gone.histogram, 0)
            same = txn.cursor(db=self.index["by_hist"])
            heir = None
            if same.set_range_dup(key, others):   # the same histogram, oldest first
                for raw in same.iternext_dup(keys=False):
                    if bytes(raw[:24]) != others:
                        break
                    if (heir := member(_U64.unpack(raw[24:])[0])) is not None:
                        break
            if heir is not None:
                self._file_text(txn, heir, new=False)

    def _index_entries(self, record: Record, *, shingles: bool = True
                       ) -> Iterator[tuple[str, bytes, bytes]]:
        """Every (index, key, value) entry of ``record`` (:meth:`_index_groups`, one by one)."""
        for name, entries in self._index_groups(record, shingles=shingles).items():
            for index_key, value in entries:
                yield name, index_key, value

    def _index_groups(self, record: Record, *, shingles: bool = True
                      ) -> dict[str, list[tuple[bytes, bytes]]]:
        """``record``'s entries in each index (those with none left out), each index's in
        one list: what :meth:`_add` writes with one ``putmulti`` an index.  The sketch's
        index hashes are packed once for by_shingle and by_text."""
        key = _u64(record.doc_id)
        groups: dict[str, list[tuple[bytes, bytes]]] = {}
        if self._by_sum is not None:
            groups["by_sum"] = [(_U16.pack(min(record.histogram_sum, 0xFFFF)),
                                 record.histogram + key)]
        else:
            groups["by_hist"] = [
                (index_key, _others(record.histogram, group) + key)
                for group, index_key in enumerate(histogram_keys(record.histogram,
                                                                 record.histogram_sum))]
        groups["by_digest"] = [(record.digest, key)]
        if record.message_id_key:
            groups["by_msgid"] = [(record.message_id_key, key)]
        packed = list(map(_U32.pack, record.sketch[:self.index_size]))
        if shingles and packed:
            groups["by_shingle"] = [(index_key, key) for index_key in packed]
        if record.chunks:
            groups["by_chunk"] = [(_u64(digest), key) for digest, _length in record.chunks]
        if "by_text" in self.index:
            novel = packed if record.novel is None else list(map(_U32.pack, record.novel))
            if novel:
                groups["by_text"] = [(index_key, key) for index_key in novel]
        if "by_rcpt" in self.index and record.recipients:
            cluster = record.cluster_id
            groups["by_rcpt"] = [(_RCPT.pack(recipient, cluster), key)
                                 for recipient in dict.fromkeys(record.recipients)]
        if "by_cluster" in self.index:
            groups["by_cluster"] = [(_u64(record.cluster_id), key)]
        return groups

    def replace(self, record: Record) -> None:
        """Write ``record`` anew under its id, with its index entries made again."""
        def run(txn: lmdb.Transaction) -> None:
            if self._delete(txn, record.doc_id) is None:
                return
            key = _u64(record.doc_id)
            txn.put(key, record.encode(), db=self.docs)
            for name, index_key, value in self._index_entries(record):
                txn.put(index_key, value, db=self.index[name], dupdata=True)
            self._file_text(txn, record, new=False)
            txn.put(_TIME_ID.pack(record.last_seen, record.doc_id), b"", db=self.by_time)
            next_id = self._next_id(txn)
            self._tally(txn, 1, next_id, next_id)
        self._write(run)

    def touch(self, doc_id: int, when: int, recipients: Sequence[int]) -> None:
        """Count one more sighting of a record, move it to ``when``, add recipients."""
        self._write(lambda txn: self._touch(txn, doc_id, when, recipients))

    def _touch(self, txn: lmdb.Transaction, doc_id: int, when: int,
               recipients: Sequence[int]) -> None:
        key = _u64(doc_id)
        data = txn.get(key, db=self.docs)
        if data is None:
            return
        if data[0] == RECORD_VERSION and self._touch_in_place(txn, key, data, when,
                                                               recipients):
            return
        record = Record.decode(doc_id, data)
        txn.delete(_TIME_ID.pack(record.last_seen, doc_id), db=self.by_time)
        record.seen += 1
        record.last_seen = max(record.last_seen, when)
        new = tuple(dict.fromkeys(r for r in recipients if r not in record.recipients))
        kept = (record.recipients + new)[-RECIPIENTS_MAX:]
        by_rcpt = self.index.get("by_rcpt")
        if by_rcpt is not None:
            cluster = record.cluster_id
            for gone in record.recipients[:len(record.recipients) + len(new) - len(kept)]:
                txn.delete(_RCPT.pack(gone, cluster), key, db=by_rcpt)
            for recipient in new:
                txn.put(_RCPT.pack(recipient, cluster), key, db=by_rcpt, dupdata=True)
        record.recipients = kept
        txn.put(key, record.encode(), db=self.docs)
        txn.put(_TIME_ID.pack(record.last_seen, doc_id), b"", db=self.by_time)

    def _touch_in_place(self, txn: lmdb.Transaction, key: bytes, data: bytes, when: int,
                        recipients: Sequence[int]) -> bool:
        """:meth:`_touch` of a current-format record that no new recipient joins (an exact
        repeat to the same mailboxes, nearly every touch): its seen counter and last time
        changed in its bytes, no decoding and encoding (a third of the CPU of recording a
        repeat); its time index entry moved only when the time changes.  False when
        recipients join: the caller does it all."""
        n_sketch, n_chunks, n_recipients = _COUNTS.unpack_from(data, _COUNTS_AT)
        start = LAYOUT.header + LAYOUT.sketch_width * n_sketch + LAYOUT.chunk_width * n_chunks
        if recipients:
            held = struct.unpack_from(f">{n_recipients}Q", data, start)
            if any(r not in held for r in recipients):
                return False
        last_seen, seen = _SEEN.unpack_from(data, _SEEN_AT)
        changed = bytearray(data)
        _SEEN.pack_into(changed, _SEEN_AT, max(last_seen, when), seen + 1)
        txn.put(key, changed, db=self.docs)
        if when > last_seen:
            doc_id = _U64.unpack(key)[0]
            txn.delete(_TIME_ID.pack(last_seen, doc_id), db=self.by_time)
            txn.put(_TIME_ID.pack(when, doc_id), b"", db=self.by_time)
        return True

    def count_verdict(self, verdict: str, when: int, change: int = 1) -> None:
        """Add ``change`` to the day's counter of ``verdict`` (for `dupfilter-db stats`)."""
        self._write(lambda txn: self._count(txn, verdict, when, change))

    def _count(self, txn: lmdb.Transaction, verdict: str, when: int, change: int = 1) -> None:
        key = _DAY_VERDICT.pack(int(when) // 86400, _VERDICT_CODES.get(verdict, 0))
        current = txn.get(key, db=self.counts)
        value = max(0, (_U64.unpack(current)[0] if current else 0) + change)
        txn.put(key, _u64(value), db=self.counts)

    def count_decision(self, decision: str, when: int) -> None:
        """Add one to the day's counter of a daemon's decision (see Store.count_decision)."""
        code = _DECISION_CODES.get(decision)
        if code is None:
            return

        def bump(txn: lmdb.Transaction) -> None:
            key = _DAY_VERDICT.pack(when // 86400, code)
            current = txn.get(key, db=self.counts)
            txn.put(key, _u64((_U64.unpack(current)[0] if current else 0) + 1), db=self.counts)
        self._write(bump)

    def _delete(self, txn: lmdb.Transaction, doc_id: int, *, hand_over: bool = False
                ) -> Record | None:
        """Remove one record and its index entries; the record removed (None: none).
        ``hand_over``: what it filed for its text cluster is filed by another member."""
        key = _u64(doc_id)
        data = txn.get(key, db=self.docs)
        if data is None:
            return None
        record = Record.decode(doc_id, data)
        for name, index_key, value in self._index_entries(record):
            txn.delete(index_key, value, db=self.index[name])
        hashes, histogram = self._unfile_text(txn, record)
        txn.delete(_TIME_ID.pack(record.last_seen, doc_id), db=self.by_time)
        txn.delete(key, db=self.docs)
        if hand_over:
            self._hand_over(txn, record, hashes, histogram)
        next_id = self._next_id(txn)
        self._tally(txn, -1, next_id, next_id)
        return record

    def prune(self, before: int, batch: int = 2000, *,
              removed: Callable[[Record], None] | None = None) -> int:
        """Remove records last seen before ``before`` (epoch seconds), oldest first;
        ``removed`` is called with each record once its batch is committed.

        Works in batches so that deliveries are never blocked for long.
        """
        total = 0
        while True:
            def one_batch(txn: lmdb.Transaction) -> tuple[int, list[Record]]:
                cursor = txn.cursor(db=self.by_time)
                victims = []
                for raw_key in cursor.iternext(keys=True, values=False):
                    seen, doc_id = _TIME_ID.unpack(bytes(raw_key))
                    if seen >= before or len(victims) >= batch:
                        break
                    victims.append((seen, doc_id))
                gone = []
                for seen, doc_id in victims:
                    record = self._delete(txn, doc_id, hand_over=True)
                    if record is None:
                        txn.delete(_TIME_ID.pack(seen, doc_id), db=self.by_time)
                    else:
                        gone.append(record)
                return len(victims), gone
            count, gone = self._write(one_batch)
            if removed is not None:
                for record in gone:
                    removed(record)
            total += count
            if count < batch:
                return total

    def stale(self, before: int) -> Iterator[Record]:
        """Records last seen before ``before``, oldest first (the time index, one read
        transaction)."""
        with self.env.begin() as txn:
            docs = txn.cursor(db=self.docs)
            for raw_key in txn.cursor(db=self.by_time).iternext(keys=True, values=False):
                seen, doc_id = _TIME_ID.unpack(bytes(raw_key))
                if seen >= before:
                    return
                data = docs.get(_u64(doc_id))
                if data is not None:
                    yield Record.decode(doc_id, data)

    def forget(self, doc_ids: Sequence[int]) -> int:
        return self._write(lambda txn: sum(self._delete(txn, d, hand_over=True) is not None
                                           for d in doc_ids))

    def find_message_id(self, message_id: str) -> list[int]:
        key = message_id_key(message_id)
        if key is None:
            return []
        return self._read(lambda txn: self._postings(
            txn.cursor(db=self.index["by_msgid"]), key, 1 << 20))

    def get(self, doc_id: int) -> Record | None:
        data = self._read(lambda txn: bytes(txn.get(_u64(doc_id), db=self.docs) or b""))
        return Record.decode(doc_id, data) if data else None

    # -- administration ----------------------------------------------------------------

    def records(self) -> Iterator[Record]:
        with self.env.begin() as txn:
            for key, value in txn.cursor(db=self.docs):
                yield Record.decode(_U64.unpack(key)[0], value)

    def stats(self) -> dict[str, object]:
        try:
            with self.env.begin() as txn:
                records = txn.stat(self.docs)["entries"]
                by_time = txn.cursor(db=self.by_time)
                oldest = newest = None
                if by_time.first():
                    oldest = _TIME_ID.unpack(by_time.key())[0]
                if by_time.last():
                    newest = _TIME_ID.unpack(by_time.key())[0]
                per_day: dict[int, dict[str, int]] = {}
                decided: dict[int, dict[str, int]] = {}
                names = {code: name for name, code in _VERDICT_CODES.items()}
                decisions = {code: name for name, code in _DECISION_CODES.items()}
                for key, value in txn.cursor(db=self.counts):
                    day, code = _DAY_VERDICT.unpack(key)
                    if code >= _DECISION_BASE:
                        if code in decisions:
                            decided.setdefault(day, {})[decisions[code]] = _U64.unpack(value)[0]
                        continue
                    per_day.setdefault(day, {})[names.get(code, "unique")] = _U64.unpack(value)[0]
                postings = {name: txn.stat(db)["entries"] for name, db in self.index.items()}
        except lmdb.Error as error:
            raise _store_error(self.location, error) from None
        info = self.env.info()
        data_file = Path(self.location) / "data.mdb"
        size = data_file.stat().st_size if data_file.exists() else 0
        used = self.env.stat()["psize"] * (info["last_pgno"] + 1)
        return {"backend": "lmdb", "location": self.location, "records": records,
                "file_bytes": size, "used_bytes": used, "map_bytes": info["map_size"],
                "oldest": oldest, "newest": newest, "postings": postings,
                "verdicts_per_day": {day * 86400: counts for day, counts in
                                     sorted(per_day.items())},
                "decisions_per_day": {day * 86400: counts for day, counts in
                                      sorted(decided.items())}}

    def verify(self) -> list[str]:
        """Every index entry points at a record that wants it, every record is indexed, and
        meta's count of records is right.  A page LMDB cannot read is a problem (which
        sub-database, after which key, which records), not an exception.

        LMDB does not check a leaf it steps onto from its neighbour: a damaged one makes it
        abort the process (an assertion in ``mdb_cursor_next``).  So the walk runs in a
        process of its own, saying where it is as it goes; when it dies, that sub-database
        is listed as damaged there and the walk runs again without it.  Records are read by
        id (each look-up goes down from the root, which LMDB does check), so a damaged
        page of them loses those records only.
        """
        skipped: dict[str, str] = {}
        while True:
            done, progress, errors = _walk_in_a_process(self.location, self._parameters,
                                                        list(skipped))
            if done is not None:
                return [*skipped.values(), *done]
            name, key = progress or ("the store", None)
            where = f"after key {key}" if key else "at its first entries"
            said = (errors.strip().splitlines() or ["nothing"])[-1]
            problem = (f"{name}: LMDB aborted reading it {where} (a damaged page; it said: "
                       f"{said}); not checked past there")
            if progress is None or name in skipped:
                return [*skipped.values(), problem]
            skipped[name] = problem

    def _verify(self, reader: _Reader, problems: list[str],
                report: Callable[[str], None], skipped: set[str]) -> None:
        expected: set[tuple[str, bytes, bytes]] = set()
        times: set[bytes] = set()
        lost: list[tuple[int, int]] = []        # ranges of record ids that cannot be read
        walked = 0
        broken = set(skipped)
        records: dict[int, Record] = {}
        for doc_id, value in self._walk_records(reader, problems, lost, report):
            walked += 1
            try:
                record = Record.decode(doc_id, value)
                expected.update(self._index_entries(record))
            except (StoreError, struct.error, ValueError) as error:
                problems.append(f"record {doc_id} cannot be decoded: {error}")
                continue
            records[doc_id] = record
            times.add(_TIME_ID.pack(record.last_seen, doc_id))
        if "docs" in skipped:
            return                              # nothing to compare the indexes with
        # The text clusters' indexes are checked as a whole (each cluster files each hash
        # and histogram once), when every record could be read and neither was skipped.
        texts = ("by_text_shingle", "by_text_hist")
        if not lost and not any(name in skipped for name in texts):
            report("by_text_shingle -")
            try:
                problems += self._verify_texts(reader.txn, records)
            except lmdb.Error as error:
                problems.append(f"the text clusters' indexes cannot be read "
                                f"({type(error).__name__}: {_reason(error)})")
                broken.update(texts)
                reader.renew()

        def unreadable(doc_id: int) -> bool:
            return any(low <= doc_id <= high for low, high in lost)
        for name, db in [*self.index.items(), ("by_time", self.by_time)]:
            if name in skipped or name in texts:
                continue
            for key, value in self._walk(reader, name, db, problems, broken, report):
                if name == "by_time":
                    if key in times:
                        times.discard(key)
                    elif len(key) != _TIME_ID.size or not unreadable(_TIME_ID.unpack(key)[1]):
                        problems.append(f"by_time: entry {key.hex()} has no record")
                    continue
                entry = (name, key, value)
                if entry in expected:
                    expected.discard(entry)
                elif len(value) < 8 or not unreadable(_U64.unpack(value[-8:])[0]):
                    problems.append(f"{name}: entry {key.hex()} → {value[-8:].hex()} has no "
                                    "record that wants it")
        missing = [entry for entry in expected if entry[0] not in broken]
        for name, key, value in sorted(missing)[:100]:
            problems.append(f"{name}: record {_U64.unpack(value[-8:])[0]} lacks its entry "
                            f"{key.hex()}")
        if "by_time" not in broken:
            for key in sorted(times)[:100]:
                problems.append(f"by_time: record {_TIME_ID.unpack(key)[1]} not in time index")
        raw = reader.txn.get(_RECORDS, db=self.meta)
        if not lost and raw is not None and len(raw) == _TALLY.size:
            count, counted_at = _TALLY.unpack(raw)
            if counted_at == self._next_id(reader.txn) and count != walked:
                problems.append(f"meta says {count:,} records, found {walked:,}")

    @staticmethod
    def _walk(reader: _Reader, name: str, db: lmdb._Database, problems: list[str],
              broken: set[str], report: Callable[[str], None]
              ) -> Iterator[tuple[bytes, bytes]]:
        """Every (key, value) of a sub-database, to the first page that cannot be read
        (said in ``problems``, ``name`` added to ``broken``); where it is, to ``report``
        (every 256 entries: on an abort, the damage is past the last key said)."""
        last = None
        report(f"{name} -")
        try:
            for number, (key, value) in enumerate(reader.txn.cursor(db=db)):
                last = bytes(key)
                if not number & 255:
                    report(f"{name} {last.hex()}")
                yield last, bytes(value)
        except lmdb.Error as error:
            where = f"after key {last.hex()}" if last is not None else "at its first entries"
            problems.append(f"{name}: cannot be read {where} ({type(error).__name__}: "
                            f"{_reason(error)}); not checked past there")
            broken.add(name)
            reader.renew()

    def _walk_records(self, reader: _Reader, problems: list[str],
                      lost: list[tuple[int, int]], report: Callable[[str], None]
                      ) -> Iterator[tuple[int, bytes]]:
        """Every (id, encoded record) of ``docs``, read by id, 1 to ``next_id`` (in
        batches of one C call; a batch that meets a damaged page again id by id).  The ids
        that cannot be read are said in ``problems`` as runs, and added to ``lost``."""
        next_id = self._next_id(reader.txn)
        cursor = reader.txn.cursor(db=self.docs)
        failed: list[tuple[int, str]] = []
        report("docs -")
        for start in range(1, next_id, 4096):
            ids = range(start, min(start + 4096, next_id))
            try:
                found = [(_U64.unpack(key)[0], bytes(value)) for key, value in
                         cursor.getmulti([_u64(doc_id) for doc_id in ids])]
            except lmdb.Error:
                found = []
                for doc_id in ids:
                    try:
                        value = reader.renew().get(_u64(doc_id), db=self.docs)
                    except lmdb.Error as error:
                        failed.append((doc_id, f"{type(error).__name__}: {_reason(error)}"))
                        continue
                    if value is not None:
                        found.append((doc_id, bytes(value)))
                cursor = reader.renew().cursor(db=self.docs)
            yield from found
        said = []
        for doc_id, error in failed:
            if lost and lost[-1][1] == doc_id - 1:
                lost[-1] = (lost[-1][0], doc_id)
            else:
                lost.append((doc_id, doc_id))
                said.append(error)
        for (low, high), error in zip(lost, said, strict=True):
            ids = f"records {low} to {high}" if high > low else f"record {low}"
            problems.append(f"docs: {ids} cannot be read ({error})")
        if cursor.last() and (len(cursor.key()) != 8 or _U64.unpack(cursor.key())[0]
                              >= next_id):
            problems.append(f"docs: a key {bytes(cursor.key())[:16].hex()} is no record id "
                            f"below next_id {next_id}")

    def _verify_texts(self, txn: lmdb.Transaction, records: dict[int, Record]) -> list[str]:
        """Every text cluster files each index hash and each distinct histogram its members
        hold under exactly one of them, and nothing else."""
        if "by_text_shingle" not in self.index:
            return []
        problems: list[str] = []
        holders: dict[tuple[bytes, bytes], set[int]] = {}     # (cluster, hash) → ids
        histograms: set[tuple[bytes, bytes]] = set()          # (cluster, histogram)
        for doc_id, record in records.items():
            cluster = _u64(record.cluster_id)
            for value in record.sketch[:self.index_size]:
                holders.setdefault((cluster, _U32.pack(value)), set()).add(doc_id)
            histograms.add((cluster, _text_histogram(record)))
        filed: dict[tuple[bytes, bytes], int] = {}
        for key, value in txn.cursor(db=self.index["by_text_shingle"]):
            cluster, doc_id = bytes(value[:8]), _U64.unpack(value[8:])[0]
            if doc_id in holders.get((cluster, bytes(key)), ()):
                filed[cluster, bytes(key)] = filed.get((cluster, bytes(key)), 0) + 1
            else:
                problems.append(f"by_text_shingle: entry {bytes(key).hex()} → {doc_id} has "
                                "no record of its cluster that holds it")
        for cluster, key in holders:
            if filed.get((cluster, key), 0) != 1:
                problems.append(f"by_text_shingle: text cluster {_U64.unpack(cluster)[0]} "
                                f"files {key.hex()} {filed.get((cluster, key), 0)} times")
        groups: dict[tuple[bytes, bytes], list[tuple[int, int]]] = {}
        for key, value in txn.cursor(db=self.index["by_text_hist"]):
            key, value = bytes(key), bytes(value)
            cluster, doc_id = value[24:32], _U64.unpack(value[32:])[0]
            record = records.get(doc_id)
            group = key[0]
            if record is None or _u64(record.cluster_id) != cluster or group >= \
                    HISTOGRAM_GROUPS or histogram_keys(record.histogram, record.histogram_sum)[
                        group] != key or _others(record.histogram, group) != value[:24]:
                problems.append(f"by_text_hist: entry {key.hex()} → {doc_id} has no record "
                                "that wants it")
                continue
            groups.setdefault((cluster, _text_histogram(record)), []).append((group, doc_id))
        for cluster, histogram in histograms:
            entries = sorted(groups.get((cluster, histogram), []))
            if [group for group, _ in entries] != list(range(HISTOGRAM_GROUPS)) or \
                    len({doc_id for _, doc_id in entries}) != 1:
                problems.append(f"by_text_hist: text cluster {_U64.unpack(cluster)[0]} files "
                                f"histogram {histogram.hex()} as {entries}")
        return problems

    def close(self) -> None:
        try:
            self.env.close()
        except lmdb.Error:
            pass
