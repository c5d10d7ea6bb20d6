"""Stores: the record codec, the behaviours every backend shares (run on LMDB, Redis and a
Redis Cluster), and LMDB's own: pruning, growth, modes, no message text, old schemas."""

from __future__ import annotations

import os
import random
import stat
import struct
from pathlib import Path

import pytest
from helpers import make_message, paragraph_text
from support import schema1

from mailfilter.config import Settings
from mailfilter.engine import Engine
from mailfilter.names import Kind
from mailfilter.store import (
    FEATURES_MAX,
    LAYOUT,
    NEWEST_EXACT,
    NEWEST_PART,
    RECORD_VERSION,
    Query,
    Record,
    Store,
    StoreError,
    StoreMismatch,
    message_id_key,
)
from mailfilter.store.lmdb import LmdbStore
from mailfilter.values import replace

every_backend = pytest.mark.every_backend


def raw_query(**fields: object) -> Query:
    """A query of nothing but ``fields`` (no key of a real message)."""
    plain: dict[str, object] = dict(
        message_id_key=None, digests=(bytes(16),), shingles=(), chunks=(),
        histogram=bytes(36), histogram_sum=0, histogram_window=0, histogram_max_positions=2,
        histogram_limit=8, exact_limit=NEWEST_EXACT, part_limit=NEWEST_PART,
        shingle_limit=48)
    return Query(**{**plain, **fields})  # type: ignore[arg-type]


def sample_record(number: int = 1, **changes: object) -> Record:
    rng = random.Random(number)
    record = Record(
        histogram=bytes(rng.randrange(40, 200) for _ in range(36)), histogram_sum=0,
        histogram_chars=4000, sketch=tuple(sorted(rng.sample(range(1, 1 << 32), 64))),
        shingle_count=300, word_count=250, digest=rng.randbytes(16),
        message_id_key=message_id_key(f"<r{number}@x>"), message_id=f"<r{number}@x>",
        chunks=((rng.randrange(1 << 64), 4096),), recipients=(rng.randrange(1 << 64),),
        first_seen=1_790_000_000, last_seen=1_790_000_000, seen=1,
        features=b"\x01ids\x00" + rng.randbytes(40))
    record.histogram_sum = sum(record.histogram)
    return replace(record, **changes)


# -- the record codec -----------------------------------------------------------------------

def test_record_round_trips_with_its_features() -> None:
    record = sample_record(features=bytes(range(256)) * 4)
    data = record.encode()
    assert data[0] == RECORD_VERSION == 3
    assert Record.decode(7, data) == replace(record, doc_id=7)
    bare = sample_record(features=b"", message_id=None, message_id_key=None, chunks=(),
                         recipients=())
    assert Record.decode(3, bare.encode()) == replace(bare, doc_id=3)
    # A copy in a text cluster keeps its cluster and the index hashes new to it.
    copy = replace(record, cluster=41, novel=record.sketch[3:5])
    assert Record.decode(9, copy.encode()) == replace(copy, doc_id=9)
    assert replace(copy, novel=()).encode() != copy.encode()
    assert Record.decode(9, replace(copy, novel=()).encode()).novel == ()


def test_version_2_records_decode_as_their_own_cluster() -> None:
    """A record written before text clusters (version 2: no tail) heads its own cluster
    and brings all its index hashes to it."""
    record = sample_record(recipients=(5,))
    data = bytearray(record.encode())
    data[0] = 2
    old = Record.decode(4, bytes(data[:-(8 + 2)]))     # without the version 3 tail
    assert (old.cluster, old.novel, old.cluster_id) == (0, None, 4)
    assert old.novel_hashes(24) == record.sketch[:24]


def test_features_longer_than_the_limit_are_refused() -> None:
    sample_record(features=bytes(FEATURES_MAX)).encode()
    with pytest.raises(ValueError, match="at most 1024"):
        sample_record(features=bytes(FEATURES_MAX + 1)).encode()


def test_schema_1_records_decode_without_features() -> None:
    record = sample_record()
    old = Record.decode(5, schema1.encode(record))
    assert old == replace(record, doc_id=5, features=b"")
    with pytest.raises(StoreError, match="schema 9"):
        Record.decode(5, b"\x09" + schema1.encode(record)[1:])


def test_schema_1_records_flagged_with_features_keep_them() -> None:
    """A record of the interim encoding (schema 1, flags bit 1, then the features as
    schema 2 has them) is read with its features."""
    record = sample_record(features=b"feat" * 20)
    data = bytearray(schema1.encode(record))
    data[1] = 1
    data += len(record.features).to_bytes(2, "big") + record.features
    assert Record.decode(4, bytes(data)) == replace(record, doc_id=4)


def test_the_layout_says_where_every_field_is() -> None:
    """What the Redis scripts read: every header field at its offset, then the sections."""
    record = sample_record(chunks=((0x0102030405060708, 9),), recipients=(11, 12),
                           cluster=77, novel=(5, 6))
    data = record.encode()
    for name, (offset, width) in LAYOUT.fields.items():
        value = data[offset:offset + width]
        expected = {"version": RECORD_VERSION, "flags": 0, "n_sketch": 64, "n_chunks": 1,
                    "n_recipients": 2, "n_message_id": len(record.message_id)}.get(name)
        if expected is None:
            expected = getattr(record, name)
            expected = expected if isinstance(expected, bytes) else int(expected)
        assert (value if isinstance(expected, bytes) else int.from_bytes(value, "big")) \
            == expected, name
    at = LAYOUT.header
    assert data[at:at + LAYOUT.sketch_width] == record.sketch[0].to_bytes(4, "big")
    at += 64 * LAYOUT.sketch_width
    assert data[at:at + LAYOUT.chunk_digest_width] == bytes.fromhex("0102030405060708")
    at += LAYOUT.chunk_width
    assert data[at:at + 2 * LAYOUT.recipient_width] == struct.pack(">QQ", 11, 12)
    at += 2 * LAYOUT.recipient_width + len(record.message_id)
    length = int.from_bytes(data[at:at + LAYOUT.features_length_width], "big")
    at += LAYOUT.features_length_width
    assert data[at:at + length] == record.features and length == len(record.features)
    at += length
    assert int.from_bytes(data[at:at + LAYOUT.cluster_width], "big") == 77
    at += LAYOUT.cluster_width
    assert int.from_bytes(data[at:at + LAYOUT.novel_length_width], "big") == 2
    at += LAYOUT.novel_length_width
    assert data[at:] == struct.pack(">II", 5, 6)
    assert LAYOUT.sections == ("sketch", "chunks", "recipients", "message_id", "features",
                               "cluster", "novel")


# -- every backend --------------------------------------------------------------------------

@every_backend
def test_records_round_trip_and_verify_clean(engine: Engine) -> None:
    for seed in range(20):
        engine.check(make_message(paragraph_text(seed), message_id=f"<m{seed}@x>"), now=1000)
    stats = engine.store.stats()
    assert stats["records"] == 20
    assert engine.store.verify() == []
    records = {record.message_id: record for record in engine.store.records()}
    assert len(records) == 20
    record = records["<m0@x>"]
    assert record.seen == 1 and len(record.sketch) == 64 and record.last_seen == 1000
    assert engine.store.get(record.doc_id) == record


def test_a_repeat_touch_edits_the_record_in_place_as_a_full_rewrite_would(
        tmp_path: Path) -> None:
    """A touch that brings no new recipient changes the record's seen counter and time in
    its bytes (no decode and encode): byte for byte what the rewrite makes, its time
    index entry moved only forward, and verify() clean; an earlier time keeps the later
    one.  (A slip in the header offsets would corrupt every repeat's record.)"""
    store = LmdbStore(tmp_path / "s", {"index_size": 24})
    record = sample_record(recipients=(5, 9))
    doc_id = store.add(replace(record))
    store.touch(doc_id, record.last_seen + 60, [9, 5, 9])
    expected = replace(record, doc_id=doc_id, seen=2,
                                   last_seen=record.last_seen + 60)
    with store.env.begin() as txn:
        assert bytes(txn.get(struct.pack(">Q", doc_id), db=store.docs)) == expected.encode()
    store.touch(doc_id, record.last_seen, [])               # older: the time stays
    assert store.get(doc_id) == replace(expected, seen=3)
    assert [r.doc_id for r in store.stale(record.last_seen + 61)] == [doc_id]
    assert list(store.stale(record.last_seen + 60)) == []
    store.touch(doc_id, record.last_seen + 120, [11])        # a new recipient: rewritten
    assert store.get(doc_id).recipients == (5, 9, 11) and store.get(doc_id).seen == 4
    assert store.verify() == []
    store.close()


@every_backend
def test_features_are_kept_verbatim_and_touch_keeps_them(store: Store) -> None:
    record = sample_record(features=bytes(range(256)) * 4)
    doc_id = store.add(record)
    assert store.get(doc_id).features == record.features
    store.touch(doc_id, record.last_seen + 60, [77])
    after = store.get(doc_id)
    assert after.features == record.features and after.seen == 2
    assert after.recipients == record.recipients + (77,)
    assert after.last_seen == record.last_seen + 60
    assert replace(after, seen=1, last_seen=record.last_seen,
                               recipients=record.recipients) == record
    other = store.add(sample_record(2, features=b""))
    assert store.get(other).features == b""
    assert {r.doc_id: r.features for r in store.records()} == {doc_id: record.features,
                                                               other: b""}
    assert store.verify() == []


@every_backend
def test_lookup_or_add_records_a_new_message_in_the_same_transaction(
        engine: Engine) -> None:
    store, detector = engine.store, engine.detector

    def probe_and_record(seed: int, message_id: str) -> tuple[Query, Record]:
        analysis = engine.analyse(make_message(paragraph_text(seed, count=200),
                                               message_id=message_id))
        record = detector._new_record(analysis.fingerprint, message_id, (), 86400 * 3, 1)
        return detector.query(analysis.fingerprint, message_id), record

    probe, record = probe_and_record(1, "<new@x>")
    found = store.lookup_or_add(probe, record)
    if len(getattr(store, "partitions", ())) > 1:
        # A store of several partitions only looks up: the detector records as usual.
        assert record.doc_id == 0 and not found.records
        return
    assert not found.records and record.doc_id > 0
    assert store.get(record.doc_id).message_id == "<new@x>"
    # Found something: nothing is added, the detector records as usual.
    probe, again = probe_and_record(1, "<copy@x>")
    found = store.lookup_or_add(probe, again)
    assert again.doc_id == 0 and list(found.records) == [record.doc_id]
    assert store.stats()["records"] == 1
    assert store.stats()["verdicts_per_day"] == {86400 * 3: {"unique": 1}}
    assert store.verify() == []


@every_backend
def test_forget_by_message_id(engine: Engine) -> None:
    for seed in range(6):
        engine.check(make_message(paragraph_text(seed), message_id=f"<f{seed}@x>"))
    ids = engine.store.find_message_id("<f3@X>")
    assert len(ids) == 1
    assert engine.store.forget(ids) == 1 and engine.store.forget(ids) == 0
    assert engine.store.find_message_id("<f3@x>") == []
    assert engine.check(make_message(paragraph_text(3)), record=False).kind == "unique"
    assert engine.check(make_message(paragraph_text(4)), record=False).kind == "duplicate"
    assert engine.store.stats()["records"] == 5
    assert engine.store.verify() == []


@every_backend
def test_stats_count_records_times_and_verdicts(engine: Engine) -> None:
    for seed in range(4):
        engine.check(make_message(paragraph_text(500 + seed), message_id=f"<a{seed}@x>"),
                     now=1_790_000_000 + seed)
    engine.check(make_message(paragraph_text(500), message_id="<dup@x>"), now=1_790_000_100)
    stats = engine.store.stats()
    assert stats["location"] == engine.store.location
    assert stats["records"] == 4 and stats["oldest"] == 1_790_000_001
    assert stats["newest"] == 1_790_000_100
    day = 1_790_000_000 // 86400 * 86400
    assert stats["verdicts_per_day"] == {day: {"unique": 4, "duplicate": 1}}


@every_backend
def test_part_digests_find_the_records_of_a_message_s_parts(store: Store) -> None:
    """Query.digests after the first: the newest few records under each (part_limit),
    reported by digest."""
    part = sample_record(1, word_count=0, chunks=())   # shared digests need no content
    ids = [store.add(replace(part, message_id=f"<p{n}@x>")) for n in range(6)]
    other = store.add(sample_record(2))
    probe = raw_query(digests=(bytes(16), part.digest, sample_record(2).digest,
                               bytes(range(16))))
    found = store.lookup(probe)
    assert sorted(found.by_digest) == sorted(ids[-4:] + [other])
    assert set(found.records) == set(found.by_digest)


@every_backend
def test_parameter_mismatch_is_refused(store_location: str, settings: Settings) -> None:
    Engine(settings, store_location).close()
    settings.fingerprint.ngram = 4
    with pytest.raises(StoreMismatch, match="ngram=5 \\(configured 4\\)"):
        Engine(settings, store_location)


@every_backend
def test_duplicate_bumps_seen_instead_of_adding(engine: Engine) -> None:
    raw = make_message(paragraph_text(1), message_id="<one@x>")
    engine.check(raw, now=100)
    verdict = engine.check(make_message(paragraph_text(1), message_id="<two@x>"), now=200)
    assert verdict.kind == "duplicate" and verdict.seen == 2
    assert engine.store.stats()["records"] == 1
    third = engine.check(make_message(paragraph_text(1), message_id="<three@x>"), now=300)
    assert third.seen == 3
    assert engine.store.verify() == []


def test_prune_removes_oldest_and_keeps_indexes_consistent(engine: Engine) -> None:
    for seed in range(30):
        engine.check(make_message(paragraph_text(seed), message_id=f"<p{seed}@x>"),
                     now=1000 + seed)
    removed = engine.store.prune(before=1015)
    assert removed == 15
    assert engine.store.stats()["records"] == 15
    assert engine.store.verify() == []
    # A pruned message is new again; a kept one is still a duplicate.
    assert engine.check(make_message(paragraph_text(3)), record=False).kind == "unique"
    assert engine.check(make_message(paragraph_text(20)), record=False).kind == "duplicate"


def test_touch_moves_record_forward_so_prune_keeps_it(engine: Engine) -> None:
    engine.check(make_message(paragraph_text(1), message_id="<a@x>"), now=100)
    engine.check(make_message(paragraph_text(1), message_id="<b@x>"), now=5000)
    assert engine.store.prune(before=1000) == 0
    assert engine.store.stats()["records"] == 1


def test_map_grows_when_full(tmp_path: Path, settings: Settings) -> None:
    settings.store.map_size_mb = 1
    with Engine(settings, str(tmp_path)) as engine:
        for seed in range(700):
            engine.check(make_message(paragraph_text(seed, count=60), message_id=f"<g{seed}@x>"))
        assert engine.store.stats()["records"] == 700
        assert engine.store.env.info()["map_size"] > 1 << 20
        assert engine.store.verify() == []


def test_store_files_are_private_by_default(engine: Engine) -> None:
    engine.check(make_message("hello there"))
    for name in ("data.mdb", "lock.mdb"):
        mode = stat.S_IMODE(os.stat(Path(engine.store.location) / name).st_mode)
        assert mode & 0o077 == 0, f"{name} is {oct(mode)}"


def test_store_holds_no_message_text(tmp_path: Path, settings: Settings) -> None:
    secret_words = ["zanzibarquux", "plumbicorn", "wobbleflux", "snorkelvane"]
    with Engine(settings, str(tmp_path)) as engine:
        for seed in range(10):
            body = paragraph_text(seed) + " ".join(secret_words) + "\n" + paragraph_text(seed + 99)
            engine.check(make_message(body, message_id=f"<s{seed}@example.org>",
                                      subject="plumbicorn report"))
    content = b"".join(path.read_bytes() for path in tmp_path.iterdir())
    for word in secret_words:
        assert word.encode() not in content


def test_missing_store_is_a_clear_error(tmp_path: Path, settings: Settings) -> None:
    with pytest.raises(StoreError, match="no dupfilter store"):
        LmdbStore(tmp_path / "absent", settings.fingerprint.store_parameters(), create=False)


@every_backend
def test_histogram_window_is_one_vectorised_lookup(engine: Engine) -> None:
    from mailfilter.detector import Detector
    text = paragraph_text(4, count=900)
    engine.check(make_message(text, message_id="<h@x>"))
    detector: Detector = engine.detector
    # Punctuation and hyphenation change the digest but no alphanumeric count.
    variant = text.replace(".", "!").replace(" ", " -- ", 3)
    analysis = engine.analyse(make_message(variant, message_id="<h2@x>"))
    probe = detector.query(analysis.fingerprint, analysis.message_id)
    assert probe.histogram_window == 2
    found = engine.store.lookup(probe)
    assert found.histogram_window_size >= 1 and len(found.by_histogram) == 1


def test_store_left_half_created_is_completed(tmp_path: Path, settings: Settings) -> None:
    """A delivery killed while creating the store leaves an empty LMDB environment; the
    admin commands (read-only) finish creating it instead of calling it foreign."""
    import lmdb
    lmdb.open(str(tmp_path), max_dbs=12).close()
    store = LmdbStore(tmp_path, settings.fingerprint.store_parameters(), readonly=True)
    assert store.stats()["records"] == 0 and store.verify() == []
    store.close()


@every_backend
def test_large_histogram_window_returns_the_closest_first(engine: Engine) -> None:
    """A window of hundreds of histograms (a million records put thousands in one) is
    compared without missing any: the close ones come back closest first, at most
    max_candidates of them, or histogram_candidates when that is fewer."""
    rng = random.Random(7)
    base = [rng.randrange(20, 200) for _ in range(36)]

    def record(bins: list[int], number: int) -> Record:
        return Record(histogram=bytes(bins), histogram_sum=sum(bins), histogram_chars=5000,
                      sketch=(), shingle_count=0, word_count=900,
                      digest=rng.randbytes(16), message_id_key=None,
                      message_id=f"<w{number}@x>", first_seen=1000, last_seen=1000)

    def moved(pairs: int) -> list[int]:   # ``pairs`` units moved between bins: same sum
        bins = list(base)
        positions = rng.sample(range(36), 2 * pairs)
        for a, b in zip(positions[::2], positions[1::2], strict=True):
            bins[a] += 1
            bins[b] -= 1
        return bins

    def one_off() -> list[int]:
        bins = list(base)
        bins[rng.randrange(36)] += 1
        return bins

    kinds = ["far"] * 300 + ["two"] * 5 + ["one"] * 3 + ["same"] + ["far"] * 300
    rng.shuffle(kinds)
    made = {"far": lambda: moved(5), "two": lambda: moved(1), "one": one_off,
            "same": lambda: list(base)}
    records = [record(made[kind](), number) for number, kind in enumerate(kinds)]
    ids = engine.store.atomically(lambda: [engine.store.add(r) for r in records])
    kind_of = dict(zip(ids, kinds, strict=True))
    probe = raw_query(histogram=bytes(base), histogram_sum=sum(base), histogram_window=2,
                      histogram_max_positions=2, histogram_limit=6)
    found = engine.store.lookup(probe)
    # Compared: the records equal to the message in a group of bins (bin i in group i mod 3),
    # not all 609 records of the sum window.
    sharing_a_group = [r for r in records if any(
        r.histogram[g::3] == bytes(base)[g::3] for g in range(3))]
    assert 9 <= found.histogram_window_size == len(sharing_a_group) < 30
    assert list(found.by_histogram.values()) == [0, 1, 1, 1, 2, 2]
    assert [kind_of[i] for i in found.by_histogram] == ["same", "one", "one", "one", "two",
                                                       "two"]
    assert set(found.records) == set(found.by_histogram)
    # A million records put hundreds of near-identical histograms in one window: the
    # histogram rule weighs only the closest few (then the oldest: the first stored).
    fewer = engine.store.lookup(replace(probe, histogram_limit=3))
    assert list(fewer.by_histogram.values()) == [0, 1, 1]
    assert set(fewer.records) == set(fewer.by_histogram)
    ones = sorted(i for i in ids if kind_of[i] == "one")
    assert [i for i in fewer.by_histogram if kind_of[i] == "one"] == ones[:2]
    # A rule allowing 3 positions is more than the groups can promise: the whole window is
    # compared (and 1 position fewer finds only the nearer ones).
    wider = engine.store.lookup(replace(probe, histogram_max_positions=3,
                                                    histogram_limit=20))
    assert wider.histogram_window_size == len(records)
    assert list(wider.by_histogram.values())[:6] == [0, 1, 1, 1, 2, 2]
    assert all(kind_of[i] == "far" for i, p in wider.by_histogram.items() if p == 3)
    nearer = engine.store.lookup(replace(probe, histogram_max_positions=1))
    assert list(nearer.by_histogram.values()) == [0, 1, 1, 1]


@every_backend
def test_histogram_index_finds_every_match_of_the_rule(store: Store) -> None:
    """Against a brute-force reading of the rule (sums within the window, at most
    ``max_positions`` differing bins): every match is found, at every window and limit."""
    rng = random.Random(11)
    base = [rng.randrange(0, 60) for _ in range(36)]
    stored = []
    for number in range(400):
        bins = list(base)
        for position in rng.sample(range(36), rng.choice([0, 1, 2, 2, 3, 3, 4, 6])):
            bins[position] = max(0, bins[position] + rng.choice([-2, -1, 1, 2]))
        stored.append(sample_record(number, histogram=bytes(bins), histogram_sum=sum(bins),
                                    digest=rng.randbytes(16), chunks=(), sketch=()))
    ids = [store.add(r) for r in stored]
    for _ in range(60):
        bins = list(base)
        for position in rng.sample(range(36), rng.choice([0, 1, 2, 3])):
            bins[position] = max(0, bins[position] + rng.choice([-1, 1]))
        window, positions = rng.choice([1, 2, 3]), rng.choice([0, 1, 2, 3, 4])
        probe = raw_query(histogram=bytes(bins), histogram_sum=sum(bins),
                          histogram_window=window, histogram_max_positions=positions,
                          histogram_limit=1000)
        expected = {doc_id: sum(a != b for a, b in zip(r.histogram, bins, strict=True))
                    for doc_id, r in zip(ids, stored, strict=True)
                    if abs(r.histogram_sum - sum(bins)) <= window}
        expected = {i: p for i, p in expected.items() if p <= positions}
        assert store.lookup(probe).by_histogram == expected


def test_a_schema_1_store_opens_and_checks_fine(tmp_path: Path, settings: Settings) -> None:
    """A store 0.x wrote (schema 1 records and meta) works after the upgrade: verify is
    clean, its records are found, a touched record is rewritten in the current record
    format, and a new record is written in it."""
    texts = [paragraph_text(900 + seed, count=300) for seed in range(5)]
    with Engine(settings, str(tmp_path / "probe")) as scratch:
        records = [scratch.detector._new_record(
            scratch.analyse(make_message(text, message_id=f"<old{n}@x>")).fingerprint,
            f"<old{n}@x>", (), 1_700_000_000 + n, 1) for n, text in enumerate(texts)]
    location = tmp_path / "old"
    schema1.write_lmdb(location, settings.fingerprint.store_parameters(), records,
                       counts={(1_700_000_000 // 86400, 0): 5})
    with Engine(settings, str(location), readonly=True) as engine:
        assert engine.store.verify() == []
        assert engine.store.stats()["records"] == 5
    with Engine(settings, str(location)) as engine:
        assert engine.store.verify() == []
        copy = engine.check(make_message(texts[2], message_id="<again@x>"), now=1_700_000_100)
        assert copy.kind == "duplicate" and copy.match.message_id == "<old2@x>"
        edited = texts[3].replace(" ", "  ", 3) + "\nOne more line at the end.\n"
        near = engine.check(make_message(edited, message_id="<edit@x>"), now=1_700_000_200)
        assert near.kind == "near-duplicate" and near.match.message_id == "<old3@x>"
        raw = {record.message_id: record for record in engine.store.records()}
        assert raw["<old2@x>"].seen == 2 and raw["<old2@x>"].features == b""
        with engine.store.env.begin() as txn:
            versions = {Record.decode(1, value).message_id: bytes(value)[0] for _, value
                        in txn.cursor(db=engine.store.docs)}
        assert versions == {"<old0@x>": 1, "<old1@x>": 1, "<old2@x>": RECORD_VERSION,
                                "<old3@x>": 1, "<old4@x>": 1, "<edit@x>": RECORD_VERSION}
        assert engine.store.verify() == []
        stats = engine.store.stats()
        assert stats["records"] == 6
        assert stats["verdicts_per_day"][1_700_000_000 // 86400 * 86400] == {
            "unique": 5, "duplicate": 1, "near-duplicate": 1}


def test_a_schema_1_store_that_cannot_be_written_is_read_as_it_is(
        tmp_path: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """Someone who may only read a 0.x store (no write access, so no upgrade) still gets
    answers from it: its histogram index is by_sum, read as the sum window."""
    import mailfilter.store.lmdb as lmdb_store
    text = paragraph_text(950, count=600)
    with Engine(settings, str(tmp_path / "probe")) as scratch:
        analysis = scratch.analyse(make_message(text, message_id="<h@x>"))
        record = scratch.detector._new_record(analysis.fingerprint, "<h@x>", (), 1000, 1)
    schema1.write_lmdb(tmp_path / "old", settings.fingerprint.store_parameters(), [record])
    real_access = os.access
    monkeypatch.setattr(lmdb_store.os, "access", lambda path, mode: real_access(
        path, mode) and not mode & os.W_OK)
    store = LmdbStore(tmp_path / "old", settings.fingerprint.store_parameters(), readonly=True)
    with Engine(settings, store=store) as engine:   # (closes the store)
        assert store._by_sum is not None and store.verify() == []
        variant = text.replace(".", "!").replace(" ", " -- ", 3)   # same letters, new digest
        verdict = engine.check(make_message(variant, message_id="<v@x>"), record=False)
        assert (verdict.kind, verdict.measure) == ("near-duplicate", "shingles")
        probe = engine.detector.query(engine.analyse(make_message(variant)).fingerprint, None)
        assert store.lookup(probe).by_histogram == {1: 0}


def test_verify_checks_the_histogram_index(engine: Engine) -> None:
    for seed in range(3):
        engine.check(make_message(paragraph_text(960 + seed, count=400), message_id=f"<v{seed}@x>"))
    store: LmdbStore = engine.store
    assert store.verify() == []
    with store.env.begin(write=True) as txn:
        cursor = txn.cursor(db=store.index["by_hist"])
        assert cursor.first()
        key = bytes(cursor.key())
        cursor.delete()
        txn.put(b"\x01" * 15, bytes(24) + (99).to_bytes(8, "big"), db=store.index["by_hist"],
                dupdata=True)
    problems = store.verify()
    assert any(p.startswith("by_hist: record") and key.hex() in p for p in problems)
    assert any(p.startswith("by_hist: entry 01010101") for p in problems)


def test_histogram_window_loop_and_numpy_agree() -> None:
    """A process without numpy (the pipe filter) compares histogram-window entries in a
    Python loop, one with numpy (daemons, batch work) in arrays: the same answer."""
    from mailfilter.store import lmdb as backend
    rng = random.Random(3)
    probe_histogram = bytes(rng.randrange(12) for _ in range(36))
    for layout in (backend._GROUPED, backend._BY_SUM):
        entries = []
        for doc_id in range(1, 150):      # a record's entries all hold its one histogram
            near = bytearray(probe_histogram)
            for _ in range(rng.randrange(5)):
                near[rng.randrange(36)] = rng.randrange(12)
            groups = rng.sample(range(3), rng.randrange(1, 4)) if layout.group is not None \
                else [None]
            for group in groups:
                image = backend._images(bytes(near), layout)[group or 0]
                head = b"\0\0" if group is None else bytes([group]) + b"\0\0"
                entries.append(head + image + struct.pack(">Q", doc_id))
        rng.shuffle(entries)
        packed = b"".join(entries)
        for limit in (0, 1, 2):
            probe = raw_query(histogram=probe_histogram, histogram_sum=sum(probe_histogram),
                              histogram_window=2, histogram_max_positions=limit,
                              histogram_limit=50)
            assert backend._close_histograms(packed, layout, probe) == \
                backend._close_histograms_numpy(memoryview(packed), layout, probe)


@every_backend
def test_a_store_written_before_text_clusters_is_upgraded(
        engine: Engine, settings: Settings, store_location: str, backend: str) -> None:
    """A schema 2 store (records without cluster or novel hashes, no text index, no
    recipients under clusters) opens upgraded: verify is clean, every old record counts as
    a text of its own, and the recipients it had are found under it."""
    from support import schema2
    body = paragraph_text(31, count=300)
    for seed in range(3):
        engine.check(make_message(paragraph_text(40 + seed, count=200) + body,
                                  message_id=f"<u{seed}@x>"), [f"r{seed}@example.org"])
    engine.close()
    if backend == "lmdb":
        schema2.downgrade_lmdb(Path(store_location))
    else:
        import redis
        client = (redis.RedisCluster if backend == "cluster" else redis.Redis).from_url(
            store_location)
        schema2.downgrade_redis(client)
        client.close()
    with Engine(settings, store_location) as upgraded:
        assert upgraded.store.verify() == []
        assert all(record.cluster == 0 and record.novel is None
                   for record in upgraded.store.records())
        query = upgraded.detector.query(
            upgraded.analyse(make_message(body, message_id="<n@x>")).fingerprint, "<n@x>",
            ["r1@example.org"])
        found = upgraded.store.lookup(query)
        assert max(found.counts.values()) == 3          # three different texts hold it
        assert sorted(found.delivered.values()) == [frozenset(query.recipients)]


@every_backend
def test_a_store_written_before_text_cluster_indexes_is_upgraded(
        engine: Engine, settings: Settings, store_location: str, backend: str) -> None:
    """A schema 3 store (LMDB without by_text_shingle, by_text_hist and by_cluster) opens
    upgraded: schema 4, verify clean (each text cluster files each of its index hashes and
    histograms once), and a newsletter's copies are still one text: a mailbox that had a
    copy gets a duplicate, a new one a new message.  Without the upgrade the check read
    the empty cluster indexes and called the mailbox's second copy unique."""
    from support import schema3
    text = paragraph_text(77, count=260)

    def copy(number: int) -> bytes:
        name = ("Ann", "Bob", "Carol", "Dan", "Eve")[number % 5]
        return make_message(f"Hi {name},\n\n{text}\n\nYou subscribed as reader{number}@"
                            f"example.net.\nUnsubscribe: https://news.example.com/u/"
                            f"{number * 7919:08x}\n", sender="letters@news.example.com",
                            message_id=f"<copy{number}@news.example.com>")
    for number in range(8):
        engine.check(copy(number), [f"reader{number}@example.org"])
    engine.close()
    if backend == "lmdb":
        schema3.downgrade_lmdb(Path(store_location))
    else:
        import redis
        client = (redis.RedisCluster if backend == "cluster" else redis.Redis).from_url(
            store_location)
        schema3.downgrade_redis(client)
        client.close()
    with Engine(settings, store_location) as upgraded:
        assert upgraded.store.verify() == []
        assert len({record.cluster_id for record in upgraded.store.records()}) == 1
        again = upgraded.check(copy(100), ["reader3@example.org"], record=False)
        assert again.is_duplicate and again.recipients_seen == ("reader3@example.org",)
        assert upgraded.check(copy(101), ["new@example.org"], record=False).kind \
            is Kind.UNIQUE
    if backend == "lmdb":
        import lmdb
        env = lmdb.open(store_location, max_dbs=16, readonly=True)
        with env.begin() as txn:
            assert txn.get(b"schema", db=env.open_db(b"meta", txn=txn)) == b"4"
        env.close()
