"""Stores as dupfilter wrote them before text clusters (store schema 2, record version 2),
made by taking a store of today back: records without their version 3 tail (cluster, novel
hashes), and no text index or recipients under clusters (LMDB's ``by_text`` and
``by_rcpt``, Redis's ``n`` and ``r`` posting fields)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import lmdb

from mailfilter.store import LAYOUT
from support.schema3 import drop_schema_4


def version_2(data: bytes) -> bytes:
    """A version 3 record as version 2 wrote it: the same bytes, version 2, no tail."""
    counts = {name: int.from_bytes(data[offset:offset + width], "big")
              for name, (offset, width) in LAYOUT.fields.items()
              if name in ("n_sketch", "n_chunks", "n_recipients", "n_message_id")}
    end = (LAYOUT.header + counts["n_sketch"] * LAYOUT.sketch_width
           + counts["n_chunks"] * LAYOUT.chunk_width
           + counts["n_recipients"] * LAYOUT.recipient_width + counts["n_message_id"])
    (features,) = struct.unpack_from(">H", data, end)
    return b"\x02" + data[1:end + 2 + features]


def downgrade_lmdb(path: Path) -> None:
    env = lmdb.open(str(path), max_dbs=16)
    try:
        meta, docs = env.open_db(b"meta"), env.open_db(b"docs")
        with env.begin(write=True) as txn:
            drop_schema_4(env, txn)
            for name in (b"by_text", b"by_rcpt"):
                txn.drop(env.open_db(name, txn=txn, dupsort=True, dupfixed=True), delete=True)
            for key, value in list(txn.cursor(db=docs)):
                txn.put(key, version_2(bytes(value)), db=docs)
            txn.put(b"schema", b"2", db=meta)
    finally:
        env.close()


def downgrade_redis(client: Any, prefix: bytes = b"dupfilter:") -> None:
    meta = json.loads(client.get(prefix + b"meta"))
    for key in client.scan_iter(match=prefix + b"{*}x*"):
        drop, rewrite = [], {}
        for name, value in client.hscan_iter(key):
            if name[:1] in (b"n", b"r") and len(name) == 4:
                drop.append(name)
            elif name[:1] == b"d":
                rewrite[name] = version_2(value)
        if drop:
            client.hdel(key, *drop)
        if rewrite:
            client.hset(key, mapping=rewrite)
    client.set(prefix + b"meta", json.dumps(dict(meta, schema=2), sort_keys=True))
