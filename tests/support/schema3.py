"""Stores as dupfilter wrote them before LMDB's text-cluster indexes (store schema 3), made
by taking a store of today back: LMDB without ``by_text_shingle``, ``by_text_hist`` and
``by_cluster``; a Redis store's layout is that of schema 3 already (only its meta key
says 4)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import lmdb

# The sub-databases schema 4 added to an LMDB store.
SCHEMA_4_INDEXES = (b"by_text_shingle", b"by_text_hist", b"by_cluster")


def drop_schema_4(env: lmdb.Environment, txn: lmdb.Transaction) -> None:
    """Remove the sub-databases schema 4 added (those present)."""
    for name in SCHEMA_4_INDEXES:
        try:
            db = env.open_db(name, txn=txn, create=False, dupsort=True, dupfixed=True)
        except lmdb.NotFoundError:
            continue
        txn.drop(db, delete=True)


def downgrade_lmdb(path: Path) -> None:
    env = lmdb.open(str(path), max_dbs=16)
    try:
        meta = env.open_db(b"meta")
        with env.begin(write=True) as txn:
            drop_schema_4(env, txn)
            txn.put(b"schema", b"3", db=meta)
    finally:
        env.close()


def downgrade_redis(client: Any, prefix: bytes = b"dupfilter:") -> None:
    meta = json.loads(client.get(prefix + b"meta"))
    client.set(prefix + b"meta", json.dumps(dict(meta, schema=3), sort_keys=True))
