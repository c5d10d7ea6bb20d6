"""Peer for bench/throughput.py and bench/realworld.py: Rspamd's fuzzy_check on loopback.

Usage: python rspamd_peer.py check|learn|ordered LISTFILE [--clients N] [--cache DIR]

``RspamdFuzzy`` starts, in a private folder, a ``redis-server`` and ``rspamd -f`` with a
configuration of its own (never /etc/rspamd; only the packaged Lua libraries and data under
/usr/share/rspamd are read): two normal workers (``/checkv2``), a controller
(``/fuzzyadd``) and a fuzzy storage worker with the backend the package configures
(Redis), every socket on 127.0.0.1 ports picked at start.  Only the fuzzy_check module runs
(no other module, rule or DNS look-up): what is measured is Rspamd's near-duplicate check,
the part of Rspamd that does dupfilter's job.  Its rule is the packaged one
(``modules.d/fuzzy_check.conf``: mumhash, shingles of text parts of 64 words or more, a
direct hash of shorter texts whose text plus subject reach 256 bytes (``min_bytes`` 1k
over the text multiplier 4), attachments of every type from 1 KB) pointed at the local
storage and writable, with the local storage's flag of Rspamd's documentation (11,
``LOCAL_FUZZY_DENIED``), and without the sender extensions (``no_share``: rspamd 3.4 sends
a malformed one for a From without a domain, which the storage drops; fixed in 3.12).

A check is one ``/checkv2`` request.  It matched when the rule's symbol is in the reply:
the storage found an identical digest, or more than 16 of the 32 shingles of a text part
(probability above 0.5); no weight threshold is set, as in the packaged rule.  Learning is
done by a postfilter of this configuration that calls ``rspamd_plugins.fuzzy_check.learn``
after the check of the same request (one parse a message, as Rspamd's spamtrap module
learns).  The storage batches its writes (every 60 s as packaged, every millisecond here);
``check(raw, learn=True)`` returns once the write is in Redis (Redis publishes the INCR of
the storage's version key: the client blocks on it, polling nothing), so each check sees
every message before it.

Rspamd 3.4's HTTP server closes the connection after each reply (no keep-alive), so
concurrency is what a client can add: ``check_many`` keeps ``clients`` requests in flight.

As a script, for bench/throughput.py: ``check`` learns every listed message through
``/fuzzyadd`` (not timed), then checks them all with ``--clients`` requests in flight;
``learn`` checks and learns them all that way (in no particular order, until the storage
has written them); ``ordered`` checks and learns one message after the other.  It prints
``messages``, ``matched``, ``seconds`` (the timed pass alone, not Rspamd's start-up),
``cpu_seconds`` (Rspamd's processes and Redis over that pass), ``client_cpu_seconds``
(this script's HTTP client) and ``peak_rss_kb`` (the largest of those server processes).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import redis

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from tests.support.ports import free_port, wait_for_port  # noqa: E402

HOST = "127.0.0.1"
RSPAMD = shutil.which("rspamd") or "/usr/bin/rspamd"
REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
SYMBOL = "LOCAL_FUZZY_DENIED"            # the local storage's flag in Rspamd's documentation
FLAG, LEARN_WEIGHT = 11, 10
LEARNED = "BENCH_FUZZY_LEARNED"          # set by the learning postfilter when it sent hashes
LEARN_HEADER = "X-Bench-Learn"
VERSION_KEY = "fuzzylocal"               # the Redis backend's update counter (prefix + source)
KEY_PREFIX = b"fuzzy"                    # a digest's key: this prefix, then its 64 bytes
NORMAL_WORKERS = 2                       # one per CPU of these machines, as scan --jobs 2
SYNC_SECONDS = 0.001                     # the storage's write batching (stock: 60 s)
START_SECONDS = 120.0
CLK_TCK = os.sysconf("SC_CLK_TCK")
MODES = ("check", "learn", "ordered")

CONFIG = """\
# bench/peers/rspamd_peer.py: only fuzzy_check, every socket on {host}.
options {{
  pidfile = "{folder}/run/rspamd.pid";
  filters = "fuzzy_check";
  hs_cache_dir = "{cache}/";
  cache_file = "{folder}/db/symbols.cache";
  dynamic_conf = "{folder}/db/rspamd_dynamic";
  history_file = "{folder}/db/rspamd.history";
  stats_file = "{folder}/db/stats.ucl";
  control_socket = "{folder}/run/rspamd.sock mode=0600";
  url_tld = "${{SHAREDIR}}/effective_tld_names.dat";
  tempdir = "{folder}/tmp";
  dns {{ nameserver = ["{host}:53"]; timeout = 0.5s; retransmits = 1; }}
  task_timeout = 8s;
}}
logging {{ type = "file"; filename = "{folder}/log/rspamd.log"; level = "error"; }}
lua = "{folder}/learn.lua";

worker "normal" {{
  bind_socket = "{host}:{normal}";
  count = {workers};
  mime = true;
}}
worker "controller" {{
  bind_socket = "{host}:{controller}";
  count = 1;
  secure_ip = "{host}";
}}
worker "fuzzy" {{
  bind_socket = "{host}:{fuzzy}";
  count = 1;
  backend = "redis";
  servers = "{host}:{redis}";
  expire = 90d;
  sync = {sync};
  allow_update = ["{host}"];
}}

# The stock module settings and rule (modules.d/fuzzy_check.conf), pointed at the storage
# above and writable, with the local storage's flag of Rspamd's documentation.  no_share:
# rspamd 3.4 writes a malformed sender extension for a From without a domain ("" <>), the
# storage drops that request and the check times out (fixed in 3.12, rspamd issue 5446);
# without the extensions (sender domain and IP, for a shared storage's statistics) every
# message is checked.
fuzzy_check {{
  min_bytes = 1k;
  timeout = 2s;
  retransmits = 1;
  rule "local" {{
    algorithm = "mumhash";
    servers = "{host}:{fuzzy}";
    symbol = "LOCAL_FUZZY_UNKNOWN";
    mime_types = ["*"];
    max_score = 20.0;
    read_only = no;
    skip_unknown = yes;
    short_text_direct_hash = true;
    min_length = 64;
    no_share = true;
    fuzzy_map = {{
      {symbol} {{ max_score = 20.0; flag = {flag}; }}
    }}
  }}
}}
"""

LEARN_LUA = """\
-- bench/peers/rspamd_peer.py: learn the message after its own check when asked to.
local learned = rspamd_config:register_symbol({{
  name = '{learned}_CHECK',
  type = 'postfilter',
  callback = function(task)
    if task:get_request_header('{header}') and
        rspamd_plugins.fuzzy_check.learn(task, {flag}, {weight}) then
      task:insert_result('{learned}', 1.0)
    end
  end,
}})
rspamd_config:register_symbol({{ name = '{learned}', type = 'virtual', parent = learned,
  score = 0.0 }})
"""

# Checked then learned at start: the whole chain works before anything is measured.
PROBE = (b"From: probe@example.org\nTo: bench@example.org\nSubject: rspamd peer probe\n"
         b"Message-ID: <probe@example.org>\n\n"
         + b" ".join(f"word{i} of the probe message".encode() for i in range(40)) + b"\n")


@dataclass(frozen=True)
class Reply:
    """What one ``/checkv2`` said."""

    matched: bool              # the fuzzy rule's symbol was in the reply
    learned: bool = False      # the postfilter sent the message's hashes to the storage
    options: tuple[str, ...] = ()   # flag:hash:probability:type of each match


class RspamdFuzzy:
    """Redis, and Rspamd with only fuzzy_check, in a private folder on 127.0.0.1."""

    def __init__(self, folder: Path, *, workers: int = NORMAL_WORKERS,
                 cache: Path | None = None) -> None:
        self.folder = folder
        self.workers = workers
        self.cache = cache or folder / "cache"     # hyperscan's compiled patterns
        self.ports = {name: free_port(HOST) for name in ("normal", "controller", "fuzzy",
                                                          "redis")}
        self.redis_process: subprocess.Popen[bytes] | None = None
        self.rspamd_process: subprocess.Popen[bytes] | None = None
        self.redis: redis.Redis | None = None
        self.writes: redis.client.PubSub | None = None   # the storage's transactions
        self._pending: list[str] = []      # digests sent by learn, not yet seen in Redis
        self._pending_lock = threading.Lock()

    # -- start and stop ------------------------------------------------------------------

    def __enter__(self) -> RspamdFuzzy:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start Redis and Rspamd and wait until a probe message is learned and found."""
        for sub in ("db", "run", "log", "tmp"):
            (self.folder / sub).mkdir(parents=True, exist_ok=True)
        self.cache.mkdir(parents=True, exist_ok=True)
        self.redis_process = subprocess.Popen(
            [REDIS_SERVER, "--bind", HOST, "--port", str(self.ports["redis"]), "--save", "",
             "--appendonly", "no", "--daemonize", "no", "--dir", str(self.folder / "db"),
             "--logfile", str(self.folder / "log" / "redis.log"),
             "--notify-keyspace-events", "K$"],        # the version key's INCR, published
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(HOST, self.ports["redis"])
        self.redis = redis.Redis(host=HOST, port=self.ports["redis"], socket_timeout=10)
        self.writes = self.redis.pubsub()
        self.writes.subscribe(f"__keyspace@0__:{VERSION_KEY}")
        config = self.folder / "rspamd.conf"
        config.write_text(CONFIG.format(host=HOST, folder=self.folder, cache=self.cache,
                                        workers=self.workers, sync=SYNC_SECONDS,
                                        symbol=SYMBOL, flag=FLAG, **self.ports),
                          encoding="utf-8")
        (self.folder / "learn.lua").write_text(
            LEARN_LUA.format(learned=LEARNED, header=LEARN_HEADER, flag=FLAG,
                             weight=LEARN_WEIGHT), encoding="utf-8")
        # As root, rspamd wants -u/-g or -i; -i keeps the private folder private.
        insecure = ["-i"] if os.geteuid() == 0 else []
        with open(self.folder / "log" / "rspamd.out", "wb") as out:
            self.rspamd_process = subprocess.Popen(
                [RSPAMD, "-f", *insecure, "-c", str(config)], stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, cwd=self.folder)
        deadline = time.monotonic() + START_SECONDS
        for name in ("normal", "controller"):
            wait_for_port(HOST, self.ports[name], timeout=max(1.0, deadline - time.monotonic()))
        while True:
            if self.rspamd_process.poll() is not None:
                raise RuntimeError(f"rspamd exited {self.rspamd_process.returncode}:\n"
                                   + self.log_tail())
            try:
                if self.check(PROBE, learn=True).learned and self.check(PROBE).matched:
                    break
            except (OSError, http.client.HTTPException, RuntimeError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("rspamd did not learn and find its probe message:\n"
                                   + self.log_tail())
            time.sleep(0.2)
        self.reset()

    def stop(self) -> None:
        """Stop Rspamd (SIGTERM, as its init script does) and Redis."""
        for process in (self.rspamd_process, self.redis_process):
            if process is None or process.poll() is not None:
                continue
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        if self.writes is not None:
            self.writes.close()
        if self.redis is not None:
            self.redis.close()
        self.rspamd_process = self.redis_process = None
        self.redis = self.writes = None

    def log_tail(self, chars: int = 3000) -> str:
        text = ""
        for name in ("rspamd.out", "rspamd.log"):
            path = self.folder / "log" / name
            if path.exists():
                text += path.read_text(errors="replace")[-chars:]
        return text

    def reset(self) -> None:
        """Forget every learned hash (a fresh storage, as for each realworld case)."""
        assert self.redis is not None
        self.settle()          # a write still queued would land after the flush
        self.redis.flushdb()

    # -- requests ------------------------------------------------------------------------

    def _post(self, port: str, path: str, raw: bytes,
              headers: Sequence[tuple[str, str]] = ()) -> dict:
        """One request on a new connection (Rspamd closes each after its reply)."""
        connection = http.client.HTTPConnection(HOST, self.ports[port], timeout=30)
        try:
            connection.putrequest("POST", path, skip_accept_encoding=True)
            for name, value in (*headers, ("Content-Length", str(len(raw)))):
                connection.putheader(name, value)
            connection.endheaders(raw)
            response = connection.getresponse()
            body = response.read()
        finally:
            connection.close()
        if response.status != 200:
            raise RuntimeError(f"{path}: HTTP {response.status} {body[:300]!r}")
        return json.loads(body)

    def _version(self) -> int:
        assert self.redis is not None
        return int(self.redis.get(VERSION_KEY) or 0)

    def check(self, raw: bytes, *, learn: bool = False, sender: str | None = None,
              recipients: Sequence[str] = ()) -> Reply:
        """``/checkv2`` of one message; with ``learn`` its hashes are stored after the
        check, and this returns once they are in Redis (the next check will see them)."""
        headers = [("Rcpt", recipient) for recipient in recipients]
        if sender:
            headers.append(("From", sender))
        if learn:
            headers.append((LEARN_HEADER, "yes"))
            self._forget_writes()
        reply = self._post("normal", "/checkv2", raw, headers)
        symbols = reply.get("symbols") or {}
        learned = LEARNED in symbols
        if learned:
            self._wait_for_write()
        match = symbols.get(SYMBOL) or symbols.get("LOCAL_FUZZY_UNKNOWN")
        return Reply(match is not None, learned, tuple(match.get("options", ())) if match
                     else ())

    def _forget_writes(self) -> None:
        """Drop the notices of writes that came before (the probe's, a reset's)."""
        assert self.writes is not None
        while self.writes.get_message(timeout=0) is not None:
            pass

    def _wait_for_write(self, timeout: float = 10.0) -> None:
        """Block until the storage's next transaction (Redis publishes its version INCR):
        no polling, so the wait costs neither side any CPU."""
        assert self.writes is not None
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            notice = self.writes.get_message(ignore_subscribe_messages=True, timeout=left)
            if notice is not None and notice["type"] == "message":
                return
        raise RuntimeError("the fuzzy storage did not write a learned message to Redis "
                           f"within {timeout} s:\n" + self.log_tail())

    def learn(self, raw: bytes) -> list[str]:
        """``/fuzzyadd`` through the controller, as ``rspamc -f 11 -w 10 fuzzy_add`` does;
        the hashes it sent (none for a message too short to hash).  Not waited for."""
        try:
            reply = self._post("controller", "/fuzzyadd", raw,
                               [("Flag", str(FLAG)), ("Weight", str(LEARN_WEIGHT))])
        except RuntimeError as error:
            if "HTTP 404" in str(error):      # "no fuzzy hashes found"
                return []
            raise
        hashes = list(reply.get("hashes", ()))
        with self._pending_lock:
            self._pending.extend(hashes)
        return hashes

    def settle(self, timeout: float = 60.0) -> None:
        """Wait until the storage has written what it was sent (after learning unordered):
        every digest ``learn`` sent is a key in Redis (``fuzzy`` + the digest's bytes), and
        then no write is still coming (the version stays put).  A loaded machine delays
        the storage's batches, so a quiet moment alone is not proof."""
        assert self.redis is not None
        with self._pending_lock:
            pending, self._pending = self._pending, []
        keys = [KEY_PREFIX + bytes.fromhex(digest) for digest in dict.fromkeys(pending)]
        deadline = time.monotonic() + timeout
        while keys:
            pipe = self.redis.pipeline(transaction=False)
            for key in keys:
                pipe.exists(key)
            keys = [key for key, there in zip(keys, pipe.execute(), strict=True) if not there]
            if keys and time.monotonic() > deadline:
                raise RuntimeError(f"the fuzzy storage did not write {len(keys)} learned "
                                   f"digests to Redis within {timeout} s:\n" + self.log_tail())
            if keys:
                time.sleep(0.02)
        previous = -1
        while (version := self._version()) != previous:
            previous = version
            time.sleep(max(0.05, 5 * SYNC_SECONDS))

    def check_many(self, raws: Iterator[bytes], clients: int, *, learn: bool = False,
                   through_controller: bool = False) -> int:
        """Check (or learn through the controller) every message with ``clients`` requests in
        flight, in no particular order; how many checks matched (or were learned)."""
        lock = threading.Lock()
        counts = [0]
        errors: list[BaseException] = []

        def work() -> None:
            try:
                while True:
                    with lock:
                        raw = next(raws, None)
                    if raw is None:
                        return
                    if through_controller:
                        hit = bool(self.learn(raw))
                    else:
                        hit = self._post("normal", "/checkv2", raw,
                                         [(LEARN_HEADER, "yes")] if learn else []
                                         ).get("symbols", {}).get(SYMBOL) is not None
                    if hit:
                        with lock:
                            counts[0] += 1
            except BaseException as error:  # noqa: BLE001  (re-raised below)
                errors.append(error)

        threads = [threading.Thread(target=work) for _ in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]
        return counts[0]

    # -- what the servers cost -----------------------------------------------------------

    def server_pids(self) -> list[int]:
        """Rspamd's main process, its workers, and Redis."""
        assert self.rspamd_process is not None and self.redis_process is not None
        main = self.rspamd_process.pid
        pids = [main, self.redis_process.pid]
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    stat = Path(f"/proc/{entry}/stat").read_text()
                except OSError:
                    continue
                if int(stat[stat.rindex(")") + 2:].split()[1]) == main:
                    pids.append(int(entry))
        return pids

    def cpu_seconds(self) -> float:
        """User + system CPU seconds so far of every server process."""
        total = 0
        for pid in self.server_pids():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += int(fields[11]) + int(fields[12])
        return total / CLK_TCK

    def peak_rss_kb(self) -> int:
        """The largest peak resident set (VmHWM) of the server processes."""
        peak = 0
        for pid in self.server_pids():
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            for line in status.splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]))
        return peak


def client_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run(mode: str, list_file: Path, clients: int, cache: Path | None) -> dict[str, float]:
    """One measured pass over the listed messages (see the module's docstring)."""
    names = list_file.read_text(encoding="utf-8").splitlines()

    def raws() -> Iterator[bytes]:
        for name in names:
            with open(name, "rb") as f:
                yield f.read()

    with tempfile.TemporaryDirectory(prefix="rspamd-peer-") as tmp, \
            RspamdFuzzy(Path(tmp), cache=cache) as peer:
        if mode == "check":
            peer.check_many(raws(), clients, through_controller=True)
            peer.settle()
        cpu, client, start = peer.cpu_seconds(), client_cpu(), time.perf_counter()
        if mode == "check":
            matched = peer.check_many(raws(), clients)
        elif mode == "learn":
            matched = peer.check_many(raws(), clients, learn=True)
            peer.settle()
        else:
            matched = sum(peer.check(raw, learn=True).matched for raw in raws())
        seconds = time.perf_counter() - start
        return {"messages": len(names), "matched": matched, "seconds": seconds,
                "cpu_seconds": peer.cpu_seconds() - cpu,
                "client_cpu_seconds": client_cpu() - client,
                "peak_rss_kb": peer.peak_rss_kb()}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=MODES)
    parser.add_argument("list_file", type=Path)
    parser.add_argument("--clients", type=int, default=8,
                        help="requests in flight for check and learn (default 8)")
    parser.add_argument("--cache", type=Path, default=None,
                        help="keep Rspamd's compiled patterns here (start-up 1 s, not 15 s)")
    args = parser.parse_args(argv)
    for key, value in run(args.mode, args.list_file, args.clients, args.cache).items():
        print(f"{key} {value:.3f}" if isinstance(value, float) else f"{key} {value}")


if __name__ == "__main__":
    main()
