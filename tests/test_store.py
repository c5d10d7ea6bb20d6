"""The LMDB store: indexes, windows, pruning, growth, parameters, modes, no message text."""

from __future__ import annotations

import dataclasses
import os
import stat
from pathlib import Path

import pytest
from helpers import make_message, paragraph_text

from mailfilter.config import Settings
from mailfilter.engine import Engine
from mailfilter.store import StoreError, StoreMismatch
from mailfilter.store.lmdb import LmdbStore


def test_records_round_trip_and_verify_clean(engine: Engine) -> None:
    for seed in range(20):
        engine.check(make_message(paragraph_text(seed), message_id=f"<m{seed}@x>"), now=1000)
    stats = engine.store.stats()
    assert stats["records"] == 20
    assert engine.store.verify() == []
    record = next(iter(engine.store.records()))
    assert record.message_id == "<m0@x>" and record.seen == 1 and len(record.sketch) == 64


def test_duplicate_bumps_seen_instead_of_adding(engine: Engine) -> None:
    raw = make_message(paragraph_text(1), message_id="<one@x>")
    engine.check(raw, now=100)
    verdict = engine.check(make_message(paragraph_text(1), message_id="<two@x>"), now=200)
    assert verdict.verdict == "duplicate" and verdict.seen == 2
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
    assert engine.check(make_message(paragraph_text(3)), record=False).verdict == "unique"
    assert engine.check(make_message(paragraph_text(20)), record=False).verdict == "duplicate"


def test_touch_moves_record_forward_so_prune_keeps_it(engine: Engine) -> None:
    engine.check(make_message(paragraph_text(1), message_id="<a@x>"), now=100)
    engine.check(make_message(paragraph_text(1), message_id="<b@x>"), now=5000)
    assert engine.store.prune(before=1000) == 0
    assert engine.store.stats()["records"] == 1


def test_store_refuses_other_parameters(tmp_path: Path, settings: Settings) -> None:
    Engine(settings, str(tmp_path)).close()
    settings.fingerprint.ngram = 4
    with pytest.raises(StoreMismatch, match="ngram=5 \\(configured 4\\)"):
        Engine(settings, str(tmp_path))


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


def test_histogram_window_is_one_vectorised_lookup(engine: Engine) -> None:
    from mailfilter.detector import Detector
    text = paragraph_text(4, count=900)
    engine.check(make_message(text, message_id="<h@x>"))
    detector: Detector = engine.detector
    # Punctuation and hyphenation change the digest but no alphanumeric count.
    variant = text.replace(".", "!").replace(" ", " -- ", 3)
    analysis = engine.analyse(make_message(variant, message_id="<h2@x>"))
    probe = detector.probe(analysis.fingerprint, analysis.message_id)
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


def test_large_histogram_window_returns_the_closest_first(engine: Engine) -> None:
    """A window of hundreds of histograms (a million records put thousands in one) is
    compared without missing any: the close ones come back closest first, at most
    max_candidates of them, or histogram_candidates when that is fewer."""
    import random

    from mailfilter.store import Probe, Record

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
    probe = Probe(message_id_key=None, digest=bytes(16), histogram=bytes(base),
                  histogram_sum=sum(base), histogram_window=2, histogram_max_positions=2,
                  sketch_index=(), min_shared=1, chunk_index=(), posting_cap=48,
                  max_candidates=6)
    found = engine.store.lookup(probe)
    assert found.histogram_window_size == len(records)
    assert list(found.by_histogram.values()) == [0, 1, 1, 1, 2, 2]
    assert [kind_of[i] for i in found.by_histogram] == ["same", "one", "one", "one", "two",
                                                       "two"]
    assert set(found.records) == set(found.by_histogram)
    # A million records put hundreds of near-identical histograms in one window: the
    # histogram rule weighs only the closest few (then the oldest: the first stored).
    fewer = engine.store.lookup(dataclasses.replace(probe, histogram_candidates=3))
    assert list(fewer.by_histogram.values()) == [0, 1, 1]
    assert set(fewer.records) == set(fewer.by_histogram)
    ones = sorted(i for i in ids if kind_of[i] == "one")
    assert [i for i in fewer.by_histogram if kind_of[i] == "one"] == ones[:2]
