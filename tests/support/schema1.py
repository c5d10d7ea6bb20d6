"""Stores as dupfilter 0.x (record schema 1) wrote them, to test that they still open.

A frozen copy of that version's record encoder and of the entries its LMDB and Redis stores
kept for a record; nothing here may follow later changes of ``mailfilter.store``.
"""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path

import lmdb
import xxhash

from mailfilter.store import Record

_HEADER = struct.Struct(">BBIII36sHIII16s16sHHHH")
_U64 = struct.Struct(">Q")


def encode(record: Record) -> bytes:
    """``Record.encode`` of schema 1 (no features)."""
    message_id = (record.message_id or "").encode("utf-8", "replace")[:250]
    recipients = record.recipients[:64]
    head = _HEADER.pack(
        1, 0, record.first_seen, record.last_seen, record.seen, record.histogram,
        record.histogram_sum, record.histogram_chars, record.shingle_count, record.word_count,
        record.digest, record.message_id_key or bytes(16), len(record.sketch),
        len(record.chunks), len(recipients), len(message_id))
    parts = [head, struct.pack(f">{len(record.sketch)}I", *record.sketch)]
    for digest, length in record.chunks:
        parts.append(struct.pack(">QI", digest, length))
    parts.append(struct.pack(f">{len(recipients)}Q", *recipients))
    parts.append(message_id)
    return b"".join(parts)


def write_lmdb(path: Path, parameters: dict[str, object], records: list[Record],
               counts: dict[tuple[int, int], int] | None = None) -> None:
    """An LMDB store of schema 1 holding ``records`` (ids 1, 2, ...), as 0.x left it."""
    index_size = int(parameters.get("index_size", 1 << 30))  # type: ignore[arg-type]
    path.mkdir(parents=True, exist_ok=True)
    env = lmdb.open(str(path), max_dbs=12, map_size=64 << 20)
    dbs = {name: env.open_db(name.encode()) for name in ("meta", "docs", "by_time", "counts")}
    for name in ("by_sum", "by_shingle", "by_digest", "by_msgid", "by_chunk"):
        dbs[name] = env.open_db(name.encode(), dupsort=True, dupfixed=True)
    with env.begin(write=True) as txn:
        txn.put(b"schema", b"1", db=dbs["meta"])
        txn.put(b"parameters", json.dumps(parameters, sort_keys=True).encode(), db=dbs["meta"])
        txn.put(b"created", _U64.pack(int(time.time())), db=dbs["meta"])
        for doc_id, record in enumerate(records, 1):
            key = _U64.pack(doc_id)
            record.doc_id = doc_id
            txn.put(key, encode(record), db=dbs["docs"])
            txn.put(struct.pack(">H", min(record.histogram_sum, 0xFFFF)), record.histogram + key,
                    db=dbs["by_sum"])
            txn.put(record.digest, key, db=dbs["by_digest"])
            if record.message_id_key:
                txn.put(record.message_id_key, key, db=dbs["by_msgid"])
            for value in record.sketch[:index_size]:
                txn.put(struct.pack(">I", value), key, db=dbs["by_shingle"])
            for digest, _length in record.chunks:
                txn.put(_U64.pack(digest), key, db=dbs["by_chunk"])
            txn.put(struct.pack(">IQ", record.last_seen, doc_id), b"", db=dbs["by_time"])
        txn.put(b"next_id", _U64.pack(len(records) + 1), db=dbs["meta"])
        for (day, code), count in (counts or {}).items():
            txn.put(struct.pack(">IB", day, code), _U64.pack(count), db=dbs["counts"])
    env.close()


def write_redis(client, parameters: dict[str, object], records: list[Record], *,  # noqa: ANN001
                prefix: bytes = b"dupfilter:", retention: int = 30 * 86400,
                counts: dict[str, int] | None = None) -> None:
    """A single-server Redis store of schema 1 (one partition, tag ``0``) holding
    ``records`` (ids 1, 2, ...), with the keys 0.x's write script made."""
    index_size = int(parameters.get("index_size", 1 << 30))  # type: ignore[arg-type]
    text = json.dumps(parameters, sort_keys=True)
    meta = {"schema": 1, "parameters": json.loads(text), "partitions": 1, "tags": ["0"],
            "created": int(time.time())}
    client.set(prefix + b"meta", json.dumps(meta, sort_keys=True))
    base = prefix + b"{0}"
    client.set(base + b"p", xxhash.xxh3_64_hexdigest(f"1:{text}".encode()))
    client.set(base + b"n", len(records))
    pipe = client.pipeline(transaction=False)
    for doc_id, record in enumerate(records, 1):
        record.doc_id = doc_id
        member = str(doc_id).encode()
        when = record.last_seen
        pipe.set(base + b"d" + member, encode(record), ex=retention)
        keys = [base + b"g" + record.digest]
        if record.message_id_key:
            keys.append(base + b"m" + record.message_id_key)
        keys += [base + b"s" + struct.pack(">I", value) for value in record.sketch[:index_size]]
        keys += [base + b"k" + _U64.pack(digest) for digest, _ in record.chunks]
        for key in keys:
            pipe.zadd(key, {member: when})
            pipe.expire(key, retention)
        pipe.zadd(base + b"h" + str(record.histogram_sum).encode(),
                  {record.histogram + member: when})
        pipe.expire(base + b"h" + str(record.histogram_sum).encode(), retention)
        pipe.zadd(base + b"t", {member: when})
        pipe.expire(base + b"t", retention)
    for field, count in (counts or {}).items():
        pipe.hset(base + b"c", field, count)
    pipe.execute()
