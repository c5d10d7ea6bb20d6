"""The Redis store's own behaviours, on one server and on a three-node cluster: TTLs, round
trips, races between hosts, outages, partitions, the key layout, old schemas.  What every
backend does is tested once for all of them (``every_backend`` tests, tests/support/stores.py)."""

from __future__ import annotations

import inspect
import random
import time
from typing import TYPE_CHECKING

import pytest
import redis
from helpers import make_message, make_mime, paragraph_text
from support import schema1

from mailfilter.config import ConfigError, Settings
from mailfilter.engine import Engine
from mailfilter.store import Record, StoreError
from mailfilter.store.redis import RedisStore, masked, partition_tags

if TYPE_CHECKING:
    from redis_servers import RedisClusterNodes, RedisServer

@pytest.fixture(params=["server", "cluster"])
def url(request: pytest.FixtureRequest) -> str:
    """A freshly emptied store URL: the standalone server, then the cluster."""
    return request.getfixturevalue("redis_url" if request.param == "server" else "cluster_url")


def test_other_detector_settings_share_the_store(url: str, settings: Settings) -> None:
    first = Engine(settings, url)
    settings.detector.resemblance_threshold = 0.8
    settings.detector.posting_cap = 12
    second = Engine(settings, url)
    first.check(make_message(paragraph_text(30), message_id="<one@x>"))
    assert second.check(make_message(paragraph_text(30), message_id="<two@x>")).seen == 2
    first.close()
    second.close()


def test_ttl_is_the_retention_and_writes_refresh_it(redis_url: str, settings: Settings,
                                                    redis_server: RedisServer) -> None:
    settings.store.retention = "2h"
    with Engine(settings, redis_url) as engine:
        engine.check(make_message(paragraph_text(40), message_id="<t@x>"))
        assert engine.store.prune(before=2**31) == 0
    with redis_server.client() as client:
        keys = sorted(client.keys("dupfilter:*"))
        # The meta key and the partition's counters stay; its one segment (records and
        # postings) and its time index expire one retention after their last write.
        assert keys == [b"dupfilter:meta", b"dupfilter:{0}c", b"dupfilter:{0}t",
                        b"dupfilter:{0}x1"]
        assert client.ttl(keys[0]) == client.ttl(keys[1]) == -1
        assert all(7190 <= client.ttl(k) <= 7200 for k in keys[2:])
        for key in keys[2:]:
            client.expire(key, 60)
        with Engine(settings, redis_url) as engine:
            engine.check(make_message(paragraph_text(40), message_id="<t2@x>"))  # a touch
        assert all(7190 <= client.ttl(k) <= 7200 for k in keys[2:])


def test_expired_records_are_gone(redis_url: str, settings: Settings,
                                  redis_server: RedisServer) -> None:
    with Engine(settings, redis_url) as engine:
        engine.check(make_message(paragraph_text(41), message_id="<gone@x>"))
        with redis_server.client() as client:
            for key in client.keys(b"dupfilter:{0}x*"):
                client.delete(key)  # as the TTL would
        again = engine.check(make_message(paragraph_text(41), message_id="<gone@x>"))
        assert again.kind == "unique" and not again.evidence
        assert engine.store.verify() == []
        assert engine.store.stats()["segments"] == 1


def test_add_is_idempotent_by_digest(url: str, settings: Settings) -> None:
    """Two hosts both find a message new: the second add touches the first's record."""
    raw = make_message(paragraph_text(50), message_id="<race@x>")
    with Engine(settings, url) as one, Engine(settings, url) as two:
        first = one.check(raw, ["a@x"], record=False)
        second = two.check(raw, ["b@x"], record=False)
        assert first.kind == second.kind == "unique"
        id_one = one.detector.record(first, int(time.time())).doc_id
        id_two = two.detector.record(second, int(time.time())).doc_id
        assert id_one == id_two
        record = one.store.get(id_one)
        assert record.seen == 2 and len(record.recipients) == 2
        assert one.store.stats()["records"] == 1


def test_check_is_one_round_trip(url: str, settings: Settings,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A check is one request (one pipelined round on a cluster); check and record two."""
    sent: list[int] = []
    original = redis.connection.AbstractConnection.send_packed_command

    def counting(self, command, check_health=True):  # noqa: ANN001, ANN202
        sent.append(self.port)
        return original(self, command, check_health)

    with Engine(settings, url) as engine:
        engine.check(make_message(paragraph_text(60), message_id="<warm@x>"))
        monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command",
                            counting)
        partitions = len(engine.store.partitions)
        engine.check(make_message(paragraph_text(61), message_id="<x1@x>"), record=False)
        assert len(sent) == partitions and len(set(sent)) == partitions
        sent.clear()
        engine.check(make_message(paragraph_text(61), message_id="<x2@x>"))  # add
        # A detector that passes the record to lookup_or_add needs one on one server.
        one_trip = "record_at" in inspect.signature(engine.detector.check).parameters
        assert len(sent) == (1 if one_trip and partitions == 1 else partitions + 1)
        sent.clear()
        engine.check(make_message(paragraph_text(61), message_id="<x3@x>"))  # touch
        assert len(sent) == partitions + 1


def test_store_holds_no_message_text(redis_url: str, settings: Settings,
                                     redis_server: RedisServer) -> None:
    secret_words = ["zanzibarquux", "plumbicorn", "wobbleflux", "snorkelvane"]
    with Engine(settings, redis_url) as engine:
        for seed in range(10):
            body = paragraph_text(seed) + " ".join(secret_words) + "\n" + paragraph_text(seed + 9)
            engine.check(make_message(body, message_id=f"<s{seed}@example.org>",
                                      subject="plumbicorn report"))
    with redis_server.client() as client:
        dump = b"".join(k + (client.dump(k) or b"") for k in client.keys("*"))
    for word in secret_words:
        assert word.encode() not in dump


def test_unreachable_server_is_a_store_error(settings: Settings, closed_port: int) -> None:
    port = closed_port
    with pytest.raises(StoreError, match=f"cannot reach Redis at redis://127.0.0.1:{port}/0"):
        Engine(settings, f"redis://127.0.0.1:{port}/0")


def test_password_is_masked() -> None:
    assert masked("redis://:s3cret@host:6379/0") == "redis://:***@host:6379/0"
    assert masked("redis://user:s3cret@host/0") == "redis://user:***@host/0"
    assert masked("redis://host:6379/0") == "redis://host:6379/0"


def test_prefix_with_braces_is_refused(redis_url: str, settings: Settings) -> None:
    with pytest.raises(StoreError, match="must not contain braces"):
        RedisStore(redis_url, settings.fingerprint.store_parameters(), key_prefix="a{b}:")


def test_server_down_and_back(spare_redis: RedisServer, settings: Settings) -> None:
    """While Redis is down every call is a StoreError; once it is back, the same Engine
    works again (here the server comes back empty: no persistence)."""
    server = spare_redis
    with Engine(settings, server.url) as engine:
        engine.check(make_message(paragraph_text(70), message_id="<before@x>"))
        server.kill()
        for seed in range(3):
            with pytest.raises(StoreError, match="cannot reach Redis"):
                engine.check(make_message(paragraph_text(71 + seed)))
        server.start()  # same port, empty
        first = engine.check(make_message(paragraph_text(80), message_id="<after@x>"))
        assert first.kind == "unique"
        again = engine.check(make_message(paragraph_text(80), message_id="<after2@x>"))
        assert again.kind == "duplicate"
        assert engine.store.verify() == []
        # The meta key is back too, so a new process opens the store.
        with Engine(settings, server.url) as other:
            assert other.check(make_message(paragraph_text(80)), record=False).is_duplicate


def test_partition_tags_fall_in_even_slot_ranges() -> None:
    from redis.crc import key_slot
    for count in (1, 3, 6, 16):
        tags = partition_tags(count)
        assert len(set(tags)) == count
        for index, tag in enumerate(tags):
            assert index * 16384 // count <= key_slot(tag.encode()) < (index + 1) * 16384 // count


def test_cluster_spreads_records_over_every_node(cluster_url: str, settings: Settings,
                                                 redis_cluster: RedisClusterNodes) -> None:
    with Engine(settings, cluster_url) as engine:
        store = engine.store
        assert store.cluster and len(store.partitions) == 3
        for seed in range(60):
            engine.check(make_message(paragraph_text(200 + seed), message_id=f"<c{seed}@x>"))
        partitions_used = {store._partition_of_id(r.doc_id) for r in store.records()}
        assert partitions_used == {0, 1, 2}
        # Every message is found again, whichever slot its keys are in.
        for seed in range(60):
            verdict = engine.check(make_message(paragraph_text(200 + seed),
                                                message_id=f"<again{seed}@x>"), record=False)
            assert verdict.kind == "duplicate", seed
        text = paragraph_text(230, count=300)
        engine.check(make_message(text, message_id="<long@x>"))
        edited = text.replace(" ", "  ", 5).replace("a", "o", 2) + "\nP.S. one more line\n"
        assert engine.check(make_message(edited, message_id="<ed@x>")).kind \
            == "near-duplicate"
        stats = store.stats()
        assert stats["records"] == 62 and stats["cluster"] is True
        assert store.verify() == []
    for node in redis_cluster.nodes:
        with node.client() as client:
            segments = [k for k in client.keys("dupfilter:{*}x*")]
            assert len(segments) == 1 and client.hlen(segments[0]) > 100, \
                f"node {node.port} holds almost nothing"


def test_cluster_attachments_and_forget(cluster_url: str, settings: Settings) -> None:
    # Seeded, as in test_detector: a random attachment edited this way falls under the
    # 0.8 chunk similarity about 1 time in 1,200; this one is typical (0.95).
    data = random.Random(1).randbytes(120_000)
    with Engine(settings, cluster_url) as engine:
        engine.check(make_mime("", attachment=data, message_id="<att1@x>"))
        near = data[:60_000] + b"small edit" + data[60_000:]
        verdict = engine.check(make_mime("", attachment=near, message_id="<att2@x>"))
        assert (verdict.kind, verdict.measure) == ("near-duplicate", "attachments")
        removed = engine.store.forget(engine.store.find_message_id("<att1@x>"))
        assert removed == 1 and engine.store.stats()["records"] == 1
        assert engine.store.verify() == []


def test_partitions_from_the_url(redis_url: str, settings: Settings) -> None:
    with Engine(settings, redis_url + "?partitions=4") as engine:
        assert len(engine.store.partitions) == 4
        for seed in range(30):
            engine.check(make_message(paragraph_text(300 + seed), message_id=f"<p{seed}@x>"))
        assert len({engine.store._partition_of_id(r.doc_id)
                    for r in engine.store.records()}) == 4
        assert engine.check(make_message(paragraph_text(310)), record=False).is_duplicate
    # The count is the store's: later opens read it from the meta key.
    with Engine(settings, redis_url) as engine:
        assert len(engine.store.partitions) == 4


def test_verify_finds_damage(redis_url: str, settings: Settings,
                             redis_server: RedisServer) -> None:
    with Engine(settings, redis_url) as engine:
        for seed in range(5):
            engine.check(make_message(paragraph_text(400 + seed), message_id=f"<v{seed}@x>"))
        with redis_server.client() as client:
            segment = b"dupfilter:{0}x1"
            sketch_field = next(f for f in client.hkeys(segment) if f[:1] == b"s")
            client.hdel(segment, sketch_field)
            client.hset(segment, b"g\x00\x00\x07", b"\x01" * 16 + (999).to_bytes(5, "big"))
            client.persist(segment)
        problems = engine.store.verify()
        assert any("lacks its posting s:" in p for p in problems)
        assert any("posting g:" + "01" * 16 + " → 999 has no record" in p for p in problems)
        assert any("TTL -1" in p for p in problems)


def test_bad_partition_count_is_a_store_error(redis_url: str, settings: Settings) -> None:
    # Refused where every store location is checked (config.check_store_location), with
    # the Redis store's own check behind it.
    with pytest.raises((StoreError, ConfigError), match="partitions='many'"):
        Engine(settings, redis_url + "?partitions=many")


def test_a_schema_1_store_opens_and_checks_fine(redis_url: str, settings: Settings,
                                                redis_server: RedisServer) -> None:
    """A Redis store 0.x wrote (schema 1 records, its key layout) works after the upgrade."""
    texts = [paragraph_text(900 + seed, count=300) for seed in range(5)]
    with Engine(settings, redis_url) as scratch:
        records = [scratch.detector._new_record(
            scratch.analyse(make_message(text, message_id=f"<old{n}@x>")).fingerprint,
            f"<old{n}@x>", (), 1_700_000_000 + n, 1) for n, text in enumerate(texts)]
    with redis_server.client() as client:
        client.flushall()
        schema1.write_redis(client, settings.fingerprint.store_parameters(), records,
                            counts={f"{1_700_000_000 // 86400}:unique": 5})
    with Engine(settings, redis_url, readonly=True) as engine:
        assert engine.store.verify() == []
        assert engine.store.stats()["records"] == 5
    with Engine(settings, redis_url) as engine:
        assert engine.store.verify() == []
        copy = engine.check(make_message(texts[2], message_id="<again@x>"), now=1_700_000_100)
        assert copy.kind == "duplicate" and copy.match.message_id == "<old2@x>"
        edited = texts[3].replace(" ", "  ", 3) + "\nOne more line at the end.\n"
        near = engine.check(make_message(edited, message_id="<edit@x>"), now=1_700_000_200)
        assert near.kind == "near-duplicate" and near.match.message_id == "<old3@x>"
        found = {record.message_id: record for record in engine.store.records()}
        assert set(found) == {f"<old{n}@x>" for n in range(5)} | {"<edit@x>"}
        # An old record keeps its empty features when touched; a new one has the
        # detector's (mailfilter/features.py).
        assert found["<old2@x>"].seen == 2 and found["<old2@x>"].features == b""
        assert found["<edit@x>"].features != b""
        assert engine.store.verify() == []
        stats = engine.store.stats()
        assert stats["records"] == 6
        assert stats["verdicts_per_day"][1_700_000_000 // 86400 * 86400] == {
            "unique": 5, "duplicate": 1, "near-duplicate": 1}
    assert isinstance(found["<edit@x>"], Record)


def _changed_keys(client: redis.Redis, action) -> set[bytes]:  # noqa: ANN001
    """The keys ``action`` wrote: created, changed or deleted (by their DUMP)."""
    before = {key: client.dump(key) for key in client.keys("*")}
    action()
    after = {key: client.dump(key) for key in client.keys("*")}
    return {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}


def test_a_new_record_writes_at_most_four_keys(redis_url: str, settings: Settings,
                                               redis_server: RedisServer) -> None:
    """Its record and every posting go into one segment hash; the id counter and the day's
    verdict count into the partition's hash; its time into the time index: 3 keys, whether
    it was recorded by the check itself (lookup_or_add) or afterwards (the write script)."""
    with Engine(settings, redis_url) as engine, redis_server.client() as client:
        engine.check(make_message(paragraph_text(600), message_id="<first@x>"))
        written = _changed_keys(client, lambda: engine.check(
            make_message(paragraph_text(601), message_id="<new@x>")))
        assert written == {b"dupfilter:{0}c", b"dupfilter:{0}t", b"dupfilter:{0}x1"}
        verdict = engine.check(make_message(paragraph_text(602), message_id="<later@x>"),
                               record=False)
        assert verdict.kind == "unique"
        written = _changed_keys(
            client, lambda: engine.detector.record(verdict, int(time.time())))
        assert written == {b"dupfilter:{0}c", b"dupfilter:{0}t", b"dupfilter:{0}x1"}
        assert engine.store.verify() == []


def test_segments_roll_by_size_and_time_and_records_move_with_their_postings(
        redis_url: str, settings: Settings, redis_server: RedisServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Segments sized for 16 records (then 64, 256...): a lookup reads them all, a record
    seen again moves to the newest with its postings, and an expired segment takes its
    records (and their postings) with it."""
    import mailfilter.store.redis as redis_store
    monkeypatch.setattr(redis_store, "SEGMENT_RECORDS_MIN", 16)
    settings.store.retention = "8s"   # segments of 2 seconds
    texts = [paragraph_text(700 + n, count=150) for n in range(100)]
    with Engine(settings, redis_url) as engine, redis_server.client() as client:
        for n, text in enumerate(texts):
            engine.check(make_message(text, message_id=f"<s{n}@x>"))
        assert engine.store.stats()["segments"] >= 3
        first = client.hgetall(b"dupfilter:{0}x1")
        assert sum(1 for name in first if name[:1] == b"d") == 17
        for n in (0, 5, 60, 99):   # found again in whichever segment they are
            copy = engine.check(make_message(texts[n], message_id=f"<again{n}@x>"))
            assert copy.kind == "duplicate" and copy.match.message_id == f"<s{n}@x>"
            edited = texts[n].replace(" ", "  ", 4) + "\nAnd one more line.\n"
            near = engine.check(make_message(edited, message_id=f"<near{n}@x>"), record=False)
            assert near.kind == "near-duplicate"
        # The records seen again are in the newest segment now, their postings with them.
        newest = max(client.keys(b"dupfilter:{0}x*"), key=lambda k: int(k.rsplit(b"x", 1)[1]))
        moved = {Record.decode(0, v).message_id for k, v in client.hgetall(newest).items()
                 if k[:1] == b"d"}
        assert {"<s0@x>", "<s5@x>", "<s60@x>"} <= moved
        assert b"d" + (1).to_bytes(5, "big") not in client.hkeys(b"dupfilter:{0}x1")
        assert engine.store.verify() == []
        # Time: a new segment after 2 seconds; the first segments expire whole.
        time.sleep(2.1)
        engine.check(make_message(paragraph_text(850), message_id="<late@x>"))
        assert engine.store.stats()["segments"] >= 4
        client.delete(b"dupfilter:{0}x1")   # as its TTL would
        gone = engine.check(make_message(texts[1], message_id="<gone@x>"), record=False)
        assert gone.kind == "unique"
        kept = engine.check(make_message(texts[0], message_id="<kept@x>"), record=False)
        assert kept.kind == "duplicate"
        assert engine.store.verify() == []
        assert engine.store.get(engine.store.find_message_id("<s0@x>")[0]).seen == 2
