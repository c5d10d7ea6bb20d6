"""LMDB, Redis and a Redis Cluster answer alike: the same random records written to each,
then the same random queries, must give the same postings, records, text counts, recipients
per cluster and statistics.

Records come in families (shared sketch hashes, near histograms, shared digests, Message-IDs
and attachment chunks), some in text clusters, so that every index finds something; each
record's ``features`` name it, so that answers compare across stores whose ids differ (a
cluster numbers records by partition).  Limits are out of reach here (newest ids per key,
and on a cluster, where partitions answer apart, the histogram matches and text counts):
which ids are "newest" depends on how a backend numbers them; docs/scaling.md says how.

Last, the engine over LMDB and over Redis: each adds a checked message's record its own
way (``Store.adds_while_checking``), and the same mail must leave the same store.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest
from helpers import make_message, paragraph_text

from mailfilter.config import Settings
from mailfilter.engine import DROP, KEEP, Engine
from mailfilter.store import (
    Found,
    Query,
    Record,
    Store,
    message_id_key,
    open_store,
)
from mailfilter.values import replace

SKETCH, INDEX = 64, 24


@dataclasses.dataclass
class Family:
    hashes: list[int]
    histogram: list[int]
    digest: bytes
    chunks: list[int]


def make_families(rng: random.Random, count: int) -> list[Family]:
    families = []
    for _ in range(count):
        histogram = [rng.randrange(20, 200) for _ in range(36)]
        families.append(Family(sorted(rng.sample(range(1, 1 << 32), 90)), histogram,
                               rng.randbytes(16), [rng.randrange(1 << 64) for _ in range(4)]))
    return families


def make_record(rng: random.Random, number: int, family: Family, when: int) -> Record:
    shared = rng.sample(family.hashes, rng.choice([0, 8, 30, 60, 64]))
    sketch = tuple(sorted(set(shared) | set(rng.sample(range(1, 1 << 32), SKETCH))))[:SKETCH]
    histogram = list(family.histogram)
    for position in rng.sample(range(36), rng.choice([0, 0, 1, 2, 3, 5])):
        histogram[position] = max(0, min(255, histogram[position] + rng.choice([-2, -1, 1, 2])))
    message_id = f"<r{number}@x>" if rng.random() < 0.9 else f"<r{number - 1}@x>"
    # Records share a digest only without content: Redis adds a record with the digest of
    # one with content as a sighting of it (its add is idempotent by digest), LMDB as new.
    same_body = rng.random() < 0.15
    return Record(
        histogram=bytes(histogram), histogram_sum=sum(histogram),
        histogram_chars=rng.choice([500, 3000, 9000]), sketch=sketch, shingle_count=400,
        word_count=0 if same_body else rng.choice([0, 300]),
        digest=family.digest if same_body else rng.randbytes(16),
        message_id_key=message_id_key(message_id), message_id=message_id,
        chunks=() if same_body else tuple(
            (c, 4096) for c in rng.sample(family.chunks, rng.choice([0, 0, 1, 3]))),
        recipients=tuple(rng.randrange(1 << 64) for _ in range(rng.choice([0, 1, 2]))),
        first_seen=when, last_seen=when, features=f"r{number}".encode())


def make_query(rng: random.Random, families: list[Family], stored: list[Record], *,
               cluster: bool) -> Query:
    base = rng.choice(stored)
    family = rng.choice(families)
    histogram = list(base.histogram)
    for position in rng.sample(range(36), rng.choice([0, 1, 2, 3])):
        histogram[position] = max(0, min(255, histogram[position] + rng.choice([-1, 1])))
    pool = list(base.sketch) + family.hashes + rng.sample(range(1, 1 << 32), 64)
    sketch = tuple(sorted(set(rng.sample(pool, 80))))[:SKETCH]
    index = sketch[:INDEX]
    unlimited = 100_000
    return Query(
        message_id_key=base.message_id_key if rng.random() < 0.3 else None,
        digests=(base.digest if rng.random() < 0.3 else rng.randbytes(16),
                 *(r.digest for r in rng.sample(stored, rng.choice([0, 0, 1, 3])))),
        shingles=index,
        chunks=tuple(rng.sample(family.chunks, rng.choice([0, 1, 2]))),
        histogram=bytes(histogram), histogram_sum=sum(histogram),
        histogram_window=rng.choice([0, 2, 2, 3]),
        histogram_max_positions=rng.choice([2, 2, 2, 1, 3]),
        histogram_limit=unlimited if cluster else rng.choice([unlimited, 1, 3]),
        exact_limit=unlimited, part_limit=unlimited, shingle_limit=unlimited,
        counted=sketch[INDEX:] if rng.random() < 0.7 else (),
        count_limit=unlimited if cluster else rng.choice([0, 2, 3, 8, unlimited]),
        recipients=tuple(r for record in rng.sample(stored, 4) for r in record.recipients)
        + ((rng.randrange(1 << 64),) if rng.random() < 0.5 else ()))


def answer(found: Found, names: dict[int, str]) -> dict[str, Any]:
    """``found`` with record ids replaced by the records' names (``names``: a store's ids
    → names), lists of ids as sets (how a backend numbers records decides their order)."""
    ids = names

    def named(listed: Any) -> list[str]:
        return sorted(ids[i] for i in listed)
    return {
        "records": {ids[i]: replace(r, doc_id=0, cluster=ids.get(r.cluster, ""))
                    for i, r in found.records.items()},
        "by_message_id": named(found.by_message_id), "by_digest": named(found.by_digest),
        "by_histogram": {ids[i]: p for i, p in found.by_histogram.items()},
        "by_shingle": {key: named(v) for key, v in found.by_shingle.items()},
        "by_chunk": {key: named(v) for key, v in found.by_chunk.items()},
        "counts": found.counts, "histogram_window_size": found.histogram_window_size,
        "delivered": {ids[c]: sorted(r) for c, r in found.delivered.items()}}


@pytest.mark.parametrize(("seed", "segment_records"), [(1, None), (2, None), (3, 16), (4, 16)])
def test_lmdb_redis_and_cluster_answer_alike(
        seed: int, segment_records: int | None, tmp_path, redis_url: str,  # noqa: ANN001
        cluster_url: str, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """With Redis segments sized for 16 records, the records are spread over several (a
    lookup reads them all) and records seen again move between them."""
    if segment_records:
        import mailfilter.store.redis as redis_store
        monkeypatch.setattr(redis_store, "SEGMENT_RECORDS_MIN", segment_records)
    rng = random.Random(seed)
    parameters = settings.fingerprint.store_parameters()
    stores: dict[str, Store] = {
        "lmdb": open_store(str(tmp_path / "lmdb"), parameters),
        "redis": open_store(redis_url, parameters),
        "cluster": open_store(cluster_url, parameters)}
    try:
        ids: dict[str, dict[str, int]] = {name: {} for name in stores}
        families = make_families(rng, 12)
        stored: list[Record] = []
        when = 1_790_000_000
        for number in range(240):
            when += rng.randrange(0, 4000)
            record = make_record(rng, number, rng.choice(families), when)
            # Some are copies in the text cluster of an earlier record (the first of its
            # text), bringing only some index hashes to it.
            root = rng.choice(stored) if stored and rng.random() < 0.25 else None
            if root is not None and root.cluster == 0:
                record = replace(record, cluster=-1, novel=tuple(
                    h for h in record.sketch[:INDEX] if h not in root.sketch))
            stored.append(record)
            for name, store in stores.items():
                mine = replace(record)
                if record.cluster:
                    mine.cluster = ids[name][root.features.decode()]
                ids[name][f"r{number}"] = store.add(mine)
                store.count_verdict(rng.choice(["unique", "duplicate"]) if name == "lmdb"
                                    else "unique", when)
            if rng.random() < 0.2:   # an exact copy seen again
                again = rng.choice(stored).features.decode()
                recipients = [rng.randrange(1 << 64)]
                for name, store in stores.items():
                    store.touch(ids[name][again], when, recipients)
        gone = rng.sample(sorted(ids["lmdb"]), 10)
        for name, store in stores.items():
            assert store.forget([ids[name][n] for n in gone]) == 10
        stored = [r for r in stored if r.features.decode() not in gone]
        for store in stores.values():
            assert store.verify() == []
        # Statistics.  (The verdict counts were written alike but for lmdb's random ones.)
        stats = {name: store.stats() for name, store in stores.items()}
        for name in ("redis", "cluster"):
            assert stats[name]["records"] == stats["lmdb"]["records"] == 230
            assert stats[name]["oldest"] == stats["lmdb"]["oldest"]
            assert stats[name]["newest"] == stats["lmdb"]["newest"]
        assert stats["redis"]["verdicts_per_day"] == stats["cluster"]["verdicts_per_day"]
        assert sum(sum(day.values()) for day in stats["lmdb"]["verdicts_per_day"].values()) \
            == sum(sum(day.values()) for day in stats["redis"]["verdicts_per_day"].values())
        # The records themselves.
        named = {name: {i: n for n, i in ids[name].items()} for name in stores}
        every = {name: {r.features.decode(): replace(
            r, doc_id=0, cluster=named[name].get(r.cluster, ""))
            for r in store.records()} for name, store in stores.items()}
        assert every["lmdb"] == every["redis"] == every["cluster"]
        for name, store in stores.items():
            assert store.find_message_id(stored[5].message_id) \
                and sorted(every[name]) == sorted(ids[name].keys() - set(gone))
        # Lookups.
        found: dict[str, int] = {}
        for _ in range(150):
            query = make_query(rng, families, stored, cluster=False)
            lmdb_answer = answer(stores["lmdb"].lookup(query), named["lmdb"])
            assert answer(stores["redis"].lookup(query), named["redis"]) == lmdb_answer, query
            for kind, value in lmdb_answer.items():
                found[kind] = found.get(kind, 0) + bool(value)
            query = make_query(rng, families, stored, cluster=True)
            assert answer(stores["cluster"].lookup(query), named["cluster"]) \
                == answer(stores["lmdb"].lookup(query), named["lmdb"]), query
        # Every index took part.
        assert found["records"] > 100 and min(found.values()) >= 5, found
        # lookup_or_add adds exactly when nothing is under an exact key (Found.exact; the
        # Redis script decides it on the server, LMDB in Python).
        added = {True: 0, False: 0}
        for number in range(60):
            query = make_query(rng, families, stored, cluster=False)
            if number % 2:      # like a stored record, but no exact key of one
                query = replace(query, message_id_key=None,
                                            digests=(rng.randbytes(16),))
            for name in ("lmdb", "redis"):
                record = make_record(rng, 10_000 + number, rng.choice(families), when)
                before = stores[name].lookup(query)
                stores[name].lookup_or_add(query, record)
                assert (record.doc_id != 0) == (not before.exact), (name, query)
                if record.doc_id:
                    assert stores[name].forget([record.doc_id]) == 1
                added[record.doc_id != 0] += 1
        assert min(added.values()) >= 5, added
    finally:
        for store in stores.values():
            store.close()


def test_the_engine_records_alike_on_lmdb_and_redis(tmp_path, redis_url: str,  # noqa: ANN001
                                                    settings: Settings) -> None:
    """LMDB adds a message's record once its verdict is known (check and record share a
    write transaction); Redis adds it in the check's script and sets a near-duplicate's
    right afterwards (``Store.adds_while_checking``).  The same mail through either must
    leave the same verdicts, records, text clusters and verdict counts — also for a
    message whose plan does not keep it."""
    newsletter = paragraph_text(1, 160)
    other = paragraph_text(2, 140)
    mail: list[tuple[str, bytes, bool]] = [("newsletter", make_message(
        newsletter, subject="Spring news", message_id="<n0@x>", sender="news@shop.test"),
        True)]
    for number, name in enumerate(("Anna", "Ben", "Chloe", "Dev"), 1):   # one mailing
        mail.append((f"copy {name}", make_message(
            f"Dear {name},\n\n{newsletter}", subject="Spring news",
            message_id=f"<n{number}@x>", sender="news@shop.test"), True))
    edited = newsletter.replace(newsletter.split("\n")[3], "an edited line of the text")
    mail += [
        ("edited", make_message(edited, subject="Spring news (corrected)",
                                message_id="<e@x>", sender="news@shop.test"), True),
        ("repeat", make_message(newsletter, subject="Spring news", message_id="<r@x>",
                                sender="news@shop.test"), True),
        ("dropped", make_message(other + "\nP.S. one more line\n", message_id="<d@x>"),
         False),
        ("other", make_message(other, message_id="<o@x>"), True),
        ("other again", make_message(other, message_id="<o2@x>"), True)]
    mail += [(f"unrelated {seed}", make_message(paragraph_text(seed, 90),
                                                message_id=f"<u{seed}@x>"), True)
             for seed in range(10, 16)]

    outcome: dict[str, tuple[list[tuple[str, str, str]], list[tuple[str, int, str]],
                             dict[str, int]]] = {}
    for backend, location in (("lmdb", str(tmp_path / "lmdb")), ("redis", redis_url)):
        with Engine(settings, location) as engine:
            assert engine.store.adds_while_checking is (backend == "redis")
            verdicts = []
            for label, raw, keep in mail:
                decision = engine.process(engine.analyse(raw), ["bob@example.net"],
                                          lambda _verdict, keep=keep: KEEP if keep else DROP,
                                          now=1_790_000_000)
                verdicts.append((label, decision.verdict.kind.value, decision.verdict.measure))
            records = list(engine.store.records())
            by_id = {record.doc_id: record.message_id for record in records}
            clusters = sorted((record.message_id or "", record.seen,
                               by_id.get(record.cluster_id, "?")) for record in records)
            counts: dict[str, int] = {}
            for day in engine.store.stats()["verdicts_per_day"].values():  # type: ignore[union-attr]
                for kind, count in day.items():
                    counts[str(kind)] = counts.get(str(kind), 0) + count
            outcome[backend] = (verdicts, clusters, counts)
    assert outcome["lmdb"] == outcome["redis"]
    verdicts, clusters, counts = outcome["lmdb"]
    kinds = {label: kind for label, kind, _ in verdicts}
    # The mail above is what it says it is: copies, a repeat, a dropped near-duplicate.
    assert kinds["newsletter"] == "unique" and kinds["repeat"] == "duplicate"
    assert all(kinds[f"copy {name}"] != "unique" for name in ("Anna", "Ben", "Chloe", "Dev"))
    assert kinds["dropped"] == "unique" and kinds["other again"] == "duplicate"
    assert kinds["other"] == "unique"       # the dropped near-duplicate left nothing
    assert "<d@x>" not in {message_id for message_id, _, _ in clusters}
    # The mailing's copies joined the newsletter's text cluster.
    assert {cluster for message_id, _, cluster in clusters
            if message_id.startswith("<n")} == {"<n0@x>"}
    assert counts["unique"] == sum(kind == "unique" for _, kind, _ in verdicts) - 1
