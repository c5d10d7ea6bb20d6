#!/usr/bin/env python3
"""Check+record throughput: dupfilter on Redis against LMDB, and against datasketch's
MinHashLSH with its Redis storage, on the shared SpamAssassin corpus, in the same run.

Rows, each in one process and in four (the corpus split in four quarters, every process its
own Engine or MinHashLSH on the same store, all started together):

* ``dupfilter LMDB``: ``Engine.check(raw)`` (parse, fingerprint, check, record) on a fresh
  LMDB folder;
* ``dupfilter Redis``: the same on a Redis server this script starts on a free port;
* ``datasketch Redis``: the body (after the first blank line) lowercased, split into
  ``[^\\W_]+`` tokens and shingled into word 5-grams, a ``MinHash(num_perm=128)`` of them, then
  ``MinHashLSH(threshold=0.5, storage_config={'type': 'redis', ...})``: query, and insert
  when nothing similar is known (bench/peers/datasketch_peer.py's loop);
* ``datasketch memory``: the same LSH in process memory, one process, for reference;
* ``dupfilter-db import``: the batch command as shipped (``--jobs 1``: one process, like the
  peers) on a fresh LMDB folder and on the Redis server; messages per second from the
  command's own elapsed time (it prints it), so interpreter start-up is left out.

Columns: messages per second over the whole run (wall clock from the first worker's first
message to the last worker's last), and per message the milliseconds of fingerprinting
(parse + fingerprint, or tokens + MinHash) and of the store alone (check + record, or LSH
query + insert), summed over workers.  ``x ds`` is the row's messages per second over
datasketch Redis's with as many processes; ``store x ds`` the same for the store part alone.
Medians over ``--rounds``; the order of rows rotates from round to round.  After the table:
Redis memory per record (``INFO memory`` before and after, and ``MEMORY USAGE`` of sampled keys).

    python3 bench/redis_throughput.py [--rounds 3] [--limit N] [--processes 4] [--corpus TGZ]
                                      [--compare CHECKOUT]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
DEFAULT_CORPUS = REPO.parent / "shared" / "corpus" / "spamassassin.tar.gz"
# dupfilter-db of the checkout on PYTHONPATH (mailfilter.cli.admin; mailfilter.cli before).
_DB_MAIN = ("import sys\ntry:\n    from mailfilter.cli.admin import main\n"
            "except ImportError:\n    from mailfilter.cli import db_main as main\n"
            "sys.exit(main(sys.argv[1:]))")
NGRAM, NUM_PERM, THRESHOLD = 5, 128, 0.5
_TOKEN = re.compile(r"[^\W_]+")
_BLANK_LINE = re.compile(rb"\n\r?\n")


# -- workers (run as: redis_throughput.py --worker JSON; start on a line on stdin) ---------

def _shingles(raw: bytes) -> set[bytes]:
    split = _BLANK_LINE.search(raw)
    body = raw[split.end():] if split else b""
    tokens = _TOKEN.findall(body.decode("utf-8", "replace").lower())
    return {" ".join(tokens[i:i + NGRAM]).encode() for i in range(len(tokens) - NGRAM + 1)}


def _worker(spec: dict) -> dict:
    """Process ``spec["files"]``; wait for a line on stdin before starting the clock."""
    raws = [Path(name).read_bytes() for name in spec["files"]]
    fingerprint = store = 0.0
    found = 0
    if spec["tool"] == "dupfilter":
        from mailfilter.config import load_settings
        from mailfilter.engine import Engine
        engine = Engine(load_settings(search=False), spec["db"])
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        sys.stdin.readline()
        started = time.time()
        for raw in raws:
            t0 = time.perf_counter()
            analysis = engine.analyse(raw)
            t1 = time.perf_counter()
            verdict = engine.decide(analysis)
            t2 = time.perf_counter()
            fingerprint += t1 - t0
            store += t2 - t1
            found += verdict.is_duplicate
        ended = time.time()
        engine.close()
    else:
        from datasketch import MinHash, MinHashLSH
        config: dict = {"type": "dict"}
        if spec["tool"] == "datasketch-redis":
            config = {"type": "redis", "basename": spec["basename"].encode(),
                      "redis": {"host": "127.0.0.1", "port": spec["port"]}}
        lsh = MinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM, storage_config=config)
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        sys.stdin.readline()
        started = time.time()
        for number, raw in enumerate(raws):
            t0 = time.perf_counter()
            grams = _shingles(raw)
            minhash = None
            if grams:
                minhash = MinHash(num_perm=NUM_PERM)
                minhash.update_batch(grams)
            t1 = time.perf_counter()
            if minhash is not None:
                if lsh.query(minhash):
                    found += 1
                else:
                    lsh.insert(f"{spec['offset'] + number}", minhash)
            t2 = time.perf_counter()
            fingerprint += t1 - t0
            store += t2 - t1
        ended = time.time()
    return {"messages": len(raws), "started": started, "ended": ended,
            "fingerprint": fingerprint, "store": store, "found": found}


# -- the run -----------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Redis:
    """A redis-server of the bench's own, on loopback, no persistence."""

    def __init__(self, folder: Path) -> None:
        import redis
        self.port = free_port()
        self.process = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "",
             "--appendonly", "no", "--daemonize", "no", "--dir", str(folder)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.client = redis.Redis(port=self.port)
        for _ in range(200):
            try:
                self.client.ping()
                break
            except redis.ConnectionError:
                time.sleep(0.05)
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def memory(self) -> int:
        return int(self.client.info("memory")["used_memory"])

    def stop(self) -> None:
        self.client.close()
        self.process.terminate()
        self.process.wait(timeout=30)


@dataclass
class Row:
    """One contender: tool, store and number of processes; results of every round."""

    name: str
    tool: str
    processes: int
    repo: Path = REPO          # the checkout whose mailfilter the workers import
    rate: list[float] = field(default_factory=list)
    fingerprint_ms: list[float] = field(default_factory=list)
    store_ms: list[float] = field(default_factory=list)
    found: list[int] = field(default_factory=list)


def run_import(row: Row, folder: Path, db: str, scratch: Path) -> None:
    """One round of a ``dupfilter-db import --jobs 1`` row (default settings)."""
    config = scratch / "empty.toml"
    config.write_text("")
    env = dict(os.environ, DUPFILTER_CONFIG=str(config), PYTHONPATH=os.pathsep.join(
        p for p in (str(row.repo), os.environ.get("PYTHONPATH")) if p))
    done = subprocess.run(
        [sys.executable, "-c", _DB_MAIN, "--db", db, "import", "--jobs", "1",
         str(folder)], capture_output=True, text=True, env=env, timeout=3600)
    line = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    found = re.search(r"imported (\d+) messages \((\d+) unique.* in ([0-9.]+) s", line)
    if done.returncode or not found:
        raise RuntimeError(f"{row.name}: {done.stderr.strip() or line}")
    messages, unique, seconds = int(found[1]), int(found[2]), float(found[3])
    row.rate.append(messages / seconds)
    row.fingerprint_ms.append(float("nan"))
    row.store_ms.append(float("nan"))
    row.found.append(messages - unique)


def run_row(row: Row, files: list[str], redis: Redis, scratch: Path, round_no: int) -> None:
    """One round of ``row``: fresh store, workers started together, their timings read."""
    redis.client.flushall()
    db = redis.url
    if "LMDB" in row.name:
        db = str(scratch / f"lmdb-{round_no}-{row.processes}")
        shutil.rmtree(db, ignore_errors=True)
    if row.tool == "import":
        run_import(row, scratch / "messages", db, scratch)
        return
    quarter = -(-len(files) // row.processes)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(row.repo), os.environ.get("PYTHONPATH")) if p))
    workers = []
    for index in range(row.processes):
        part = files[index * quarter:(index + 1) * quarter]
        spec = {"tool": row.tool, "files": part, "db": db, "port": redis.port,
                "basename": f"bench{round_no}", "offset": index * quarter}
        spec_file = scratch / f"spec-{index}.json"
        spec_file.write_text(json.dumps(spec))
        workers.append(subprocess.Popen([sys.executable, __file__, "--worker", str(spec_file)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        env=env, text=True))
    for worker in workers:
        assert worker.stdout.readline().strip() == "ready"
    for worker in workers:
        worker.stdin.write("go\n")
        worker.stdin.flush()
    results = []
    for worker in workers:
        out, _ = worker.communicate(timeout=3600)
        if worker.returncode:
            raise RuntimeError(f"{row.name}: a worker exited {worker.returncode}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    messages = sum(r["messages"] for r in results)
    wall = max(r["ended"] for r in results) - min(r["started"] for r in results)
    row.rate.append(messages / wall)
    row.fingerprint_ms.append(1000 * sum(r["fingerprint"] for r in results) / messages)
    row.store_ms.append(1000 * sum(r["store"] for r in results) / messages)
    row.found.append(sum(r["found"] for r in results))


def redis_memory(files: list[str], redis: Redis) -> str:
    """Bytes per record of dupfilter in Redis (``used_memory`` delta, and ``MEMORY USAGE`` of
    every key by kind), and the commands the server ran per message (``INFO commandstats``,
    scripts' own commands included)."""
    sys.path.insert(0, str(REPO))
    from mailfilter.config import load_settings
    from mailfilter.engine import Engine

    redis.client.flushall()
    redis.client.config_resetstat()
    before = redis.memory()
    with Engine(load_settings(search=False), redis.url) as engine:
        for name in files:
            engine.check(Path(name).read_bytes())
        records = int(engine.store.stats()["records"])
    after = redis.memory()
    calls = {name.removeprefix("cmdstat_"): int(stat["calls"])
             for name, stat in redis.client.info("commandstats").items()}
    scripts = sum(n for name, n in calls.items() if name in ("evalsha", "eval"))
    commands = sum(n for name, n in calls.items()
                   if name not in ("evalsha", "eval", "info", "config|resetstat", "script|load",
                                   "script", "config"))
    per = max(1, records)
    lines = [f"Redis memory: {records} records of {len(files)} messages, used_memory "
             f"{before / 1e6:.1f} -> {after / 1e6:.1f} MB: {(after - before) / per:.0f} bytes "
             f"per record ({(after - before) / per * 1e6 / 1e9:.2f} GB per million); "
             f"{scripts / len(files):.2f} scripts and {commands / len(files):.1f} commands "
             "per message"]
    kinds: dict[str, list[bytes]] = {}
    for key in redis.client.scan_iter(count=1000):
        kind = chr(key[key.index(b"}") + 1]) if b"}" in key else "meta"
        kinds.setdefault(kind, []).append(key)
    names = {"x": "segment hash", "t": "time index", "c": "partition hash", "meta": "meta"}
    for kind, keys in sorted(kinds.items(), key=lambda item: -len(item[1])):
        sizes = [redis.client.memory_usage(k, samples=0) or 0 for k in keys]
        lines.append(f"  {names.get(kind, kind):<16} {len(keys):>6} keys, MEMORY USAGE "
                     f"{sum(sizes) / per:6.0f} B per record "
                     f"({redis.client.object('encoding', keys[0]).decode()})")
    # What a segment holds, by kind of field: fields, entries and value bytes per record.
    fields: dict[str, list[int]] = {}
    for key in kinds.get("x", []):
        for name, value in redis.client.hscan_iter(key, count=1000):
            kind = "record" if name[:1] == b"d" else f"postings {name[:1].decode()}"
            slot = fields.setdefault(kind, [0, 0])
            slot[0] += 1
            slot[1] += len(value)
    for kind, (count, size) in sorted(fields.items()):
        lines.append(f"    {kind:<12} {count / per:6.2f} fields and {size / per:6.0f} bytes "
                     "of values per record")
    return "\n".join(lines)


def redis_fill(count: int, corpus_files: list[str], redis: Redis) -> str:
    """Redis memory per record at ``count`` records shaped like the corpus's (scale.py's
    synthetic records, added in batches through the write script)."""
    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(BENCH))
    import numpy as np
    from scale import synthetic_records

    from mailfilter.config import load_settings
    from mailfilter.engine import Engine

    settings = load_settings(search=False)
    redis.client.flushall()
    before = redis.memory()
    with Engine(settings, redis.url) as engine:
        bases = [engine.analyse(Path(name).read_bytes()) for name in corpus_files]
        generator = np.random.default_rng(11)
        started = time.perf_counter()
        for offset in range(0, count, 10_000):
            records = synthetic_records(bases, min(10_000, count - offset), offset,
                                        settings.fingerprint.sketch_size, generator)
            for start in range(0, len(records), 100):
                engine.store.atomically(lambda chunk=records[start:start + 100]: [
                    engine.store.add(r) for r in chunk])
        seconds = time.perf_counter() - started
        stats = engine.store.stats()
    after = redis.memory()
    per = (after - before) / max(1, int(stats["records"]))
    return (f"Redis filled with {stats['records']:,} synthetic records in {seconds:.0f} s "
            f"({stats['segments']} segments): used_memory {before / 1e6:.1f} -> "
            f"{after / 1e6:.1f} MB, {per:.0f} bytes per record")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--limit", type=int, default=None, help="first N messages only")
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--compare", type=Path, metavar="CHECKOUT",
                        help="also run the dupfilter Redis rows with another checkout's "
                             "mailfilter (e.g. one with a detector change)")
    parser.add_argument("--no-import", action="store_true",
                        help="leave out the dupfilter-db import rows")
    parser.add_argument("--fill", type=int, default=0, metavar="N",
                        help="also fill Redis with N records shaped like the corpus's and "
                             "report its memory per record")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(_worker(json.loads(Path(args.worker).read_text()))))
        return 0
    many = args.processes
    compare = args.compare.resolve() if args.compare else None
    rows = [Row("dupfilter LMDB", "dupfilter", 1), Row("dupfilter Redis", "dupfilter", 1),
            *([Row("dupfilter Redis [compare]", "dupfilter", 1, compare)] if compare else []),
            Row("datasketch Redis", "datasketch-redis", 1),
            *([] if args.no_import else [Row("dupfilter-db import LMDB", "import", 1),
                                         Row("dupfilter-db import Redis", "import", 1)]),
            Row(f"dupfilter LMDB x{many}", "dupfilter", many),
            Row(f"dupfilter Redis x{many}", "dupfilter", many),
            *([Row(f"dupfilter Redis x{many} [compare]", "dupfilter", many, compare)]
              if compare else []),
            Row(f"datasketch Redis x{many}", "datasketch-redis", many),
            Row("datasketch memory", "datasketch-memory", 1)]
    with tempfile.TemporaryDirectory(prefix="dupfilter-redis-bench-") as tmp:
        scratch = Path(tmp)
        with tarfile.open(args.corpus) as tar:
            tar.extractall(scratch / "corpus", filter="data")
        files = [str(p) for p in sorted((scratch / "corpus").rglob("*.txt"))][:args.limit]
        # The import rows read a folder: the same messages, in the same order.
        (scratch / "messages").mkdir()
        for number, name in enumerate(files):
            (scratch / "messages" / f"{number:06d}.txt").symlink_to(name)
        redis = Redis(scratch)
        try:
            print(f"{len(files)} messages, {args.rounds} rounds, {os.cpu_count()} CPUs, "
                  f"load average {os.getloadavg()[0]:.1f}", flush=True)
            for round_no in range(args.rounds):
                shift = round_no % len(rows)
                for row in rows[shift:] + rows[:shift]:
                    run_row(row, files, redis, scratch, round_no)
                print(f"round {round_no + 1} done (load average {os.getloadavg()[0]:.1f})",
                      flush=True)
            memory = redis_memory(files, redis)
            if args.fill:
                memory += "\n" + redis_fill(args.fill, files, redis)
        finally:
            redis.stop()
    med = statistics.median
    reference = {row.processes: row for row in rows if row.tool == "datasketch-redis"}
    print(f"\n{'row':<30} {'msg/s':>8} {'fp ms':>7} {'store ms':>9} {'x ds':>6} "
          f"{'store x ds':>10} {'found':>6}")
    for row in rows:
        peer = reference.get(row.processes, reference[1])
        if row.tool == "import":   # no split into fingerprint and store time
            times = f"{'-':>7} {'-':>9}"
            store_ratio = "-"
        else:
            times = f"{med(row.fingerprint_ms):7.3f} {med(row.store_ms):9.3f}"
            store_ratio = f"{med(peer.store_ms) / med(row.store_ms):.1f}"
        print(f"{row.name:<30} {med(row.rate):8.0f} {times} "
              f"{med(row.rate) / med(peer.rate):6.1f} {store_ratio:>10} "
              f"{med(row.found):6.0f}")
    many_peer = reference.get(many)
    if many_peer is not None and not args.no_import:
        for row in rows:
            if row.tool == "import":
                print(f"{row.name}: {med(row.rate) / med(many_peer.rate):.1f} x datasketch "
                      f"Redis x{many}")
    print("\n" + memory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
