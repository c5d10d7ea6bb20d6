"""Throughput and memory of ``dupfilter-db`` against its peers on the SpamAssassin corpus.

Each round runs every tool once, as its own child process, over the same messages:
``dupfilter-db import`` and ``dupfilter-db scan --json`` (fresh stores), the seed's Perl
Text::DeDuper, datasketch MinHash + MinHashLSH, rensa's RMinHash + RMinHashLSH (Rust),
procmail's ``formail -D`` (Message-ID cache), Rspamd's fuzzy_check (a private rspamd and
Redis on loopback: checks with requests in flight, check + learn likewise, and check +
learn in order; their times and CPU are of the measured pass alone, without Rspamd's
start-up) and mailfilter's parse + compute alone, timed per message.  The order rotates
from round to round; the table gives medians over rounds.  Peak RSS is the child's maximum
resident set as GNU time reports it (for Rspamd, the largest of its server processes).

    python bench/throughput.py [--rounds 3] [--limit N] [--corpus TGZ] [--deduper SEED]
                               [--only NAME,...] [--rspamd-clients 8]
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))     # the repository's root: tests.support
from tests.support.corpus import CORPUS_TARBALL, SHARED, message_files, unpack  # noqa: E402

PEERS = BENCH / "peers"
MBOX_FROM = b"From bench@localhost Thu Jan  1 00:00:00 1970\n"
FORMAIL_CACHE_BYTES = "100000000"
SLOW_MS = 50.0
TIME = "/usr/bin/time"
SCAN = "dupfilter-db scan"
RSPAMD_CLIENTS = 8        # requests in flight: as many as keep both normal workers busy
# Runs in its own interpreter: one warm-up call, then parse + compute each listed file and
# print its milliseconds (with numpy, as dupfilter-db and the daemons fingerprint).
PER_MESSAGE = r"""
import sys, time
from mailfilter.fingerprint import compute
from mailfilter.message import parse
try:
    from mailfilter.fingerprint import use_numpy    # as batch work and the daemons do
except ImportError:                                # a checkout from before it (numpy always)
    pass
else:
    use_numpy()
compute(parse(b"Subject: warm-up\n\nfirst call: lazy imports and compiled patterns\n"))
with open(sys.argv[1], encoding="utf-8") as names:
    for name in names:
        with open(name.rstrip("\n"), "rb") as f:
            raw = f.read()
        start = time.perf_counter()
        compute(parse(raw))
        print((time.perf_counter() - start) * 1000.0)
"""


@dataclass(frozen=True)
class Child:
    """One finished child process: wall seconds, peak RSS and what it printed."""

    seconds: float
    peak_rss_kb: int
    stdout: Path
    cpu_seconds: float = 0.0     # user + system of the child and the children it waited for


@dataclass
class Tool:
    """A contender: how to run it in a round and how to read what it found."""

    name: str
    run: Callable[[Path], Child]
    found: Callable[[Child], str]
    seconds: list[float] = field(default_factory=list)
    cpu_seconds: list[float] = field(default_factory=list)
    rss_kb: list[int] = field(default_factory=list)
    found_text: str = ""


@dataclass(frozen=True)
class Corpus:
    """The messages of one run, laid out for every tool."""

    root: Path                 # where the tarball was unpacked
    paths: list[Path]          # the corpus files, sorted, after --limit
    folder: Path               # one hard link per message, named in corpus order
    list_file: Path            # the folder's files, one path a line
    mbox: Path                 # all messages as one Berkeley mbox
    deduper_lib: Path          # holds Text/DeDuper.pm
    total_bytes: int


def run_child(argv: Sequence[str | Path], workdir: Path, *, stdin: Path | None = None,
              env: dict[str, str] | None = None) -> Child:
    """Run ``argv`` in ``workdir``, its own folder; stdout goes to a file there.

    Peak RSS comes from GNU time, not ``os.wait4``: Linux carries the parent's high-water RSS
    into a child across ``exec``, so ``wait4`` would report at least this Python process's.
    """
    out, err, rss = workdir / "stdout", workdir / "stderr", workdir / "maxrss"
    with (open(out, "wb") as stdout, open(err, "wb") as stderr,
          open(stdin or os.devnull, "rb") as source):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        code = subprocess.call([TIME, "-f", "%M", "-o", str(rss), *map(str, argv)],
                               stdin=source, stdout=stdout, stderr=stderr, cwd=workdir, env=env)
        seconds = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if code != 0:
        tail = err.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"{argv[0]} exited {code}:\n{tail}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Child(seconds, int(rss.read_text().split()[-1]), out, cpu)


def megabytes(kilobytes: float) -> float:
    """GNU time's KiB in decimal MB, the unit of every size this bench prints."""
    return kilobytes * 1024 / 1e6


def child_env() -> dict[str, str]:
    """The environment for Python children: this checkout's ``mailfilter`` comes first."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env


def ensure_peers() -> None:
    """Install GNU time, formail, Digest::MD4, rspamd, Redis, datasketch, rensa and redis-py
    where missing, saying so."""
    missing = []
    if not os.access(TIME, os.X_OK):
        missing.append("time")
    for command, package in (("formail", "procmail"), ("rspamd", "rspamd"),
                             ("redis-server", "redis-server")):
        if shutil.which(command) is None:
            missing.append(package)
    if subprocess.run(["perl", "-MDigest::MD4", "-e", "1"], capture_output=True).returncode:
        missing.append("libdigest-md4-perl")
    if missing:
        print(f"installing {' '.join(missing)} (apt-get)", flush=True)
        install = ["apt-get", "install", "-y", "--no-install-recommends", *missing]
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        if subprocess.run(install, env=env).returncode:
            subprocess.run(["apt-get", "update"], env=env, check=True)
            subprocess.run(install, env=env, check=True)
    for module, requirement in (("datasketch", "datasketch>=1.5"), ("rensa", "rensa>=0.5"),
                                ("redis", "redis>=5.0")):
        if importlib.util.find_spec(module) is None:
            print(f"installing {module} (pip)", flush=True)
            subprocess.run([sys.executable, "-m", "pip", "install", requirement], check=True)


def dupfilter_db() -> list[str] | None:
    """``dupfilter-db`` of this checkout (what its console script runs), None before it exists."""
    if not (REPO / "mailfilter" / "cli" / "admin.py").exists():
        return None
    return [sys.executable, "-c",
            "import sys; from mailfilter.cli.admin import main; sys.exit(main())"]


def write_mbox(paths: Sequence[Path], mbox: Path) -> None:
    """Concatenate messages into a Berkeley mbox, ``>``-quoting body lines that start "From "."""
    quote = re.compile(rb"^(>*From )", re.MULTILINE)
    with open(mbox, "wb") as out:
        for path in paths:
            raw = path.read_bytes()
            head = MBOX_FROM
            if raw.startswith(b"From "):
                first, _, raw = raw.partition(b"\n")
                head = first + b"\n"
            out.write(head + quote.sub(rb">\1", raw))
            out.write(b"\n" if raw.endswith(b"\n") else b"\n\n")


def prepare(tarball: Path, deduper_seed: Path, limit: int | None, tmp: Path) -> Corpus:
    """Unpack the corpus and lay out its first ``limit`` messages for every tool."""
    root = unpack(tmp / "corpus", tarball)
    paths = message_files(root)[:limit]
    folder = tmp / "messages"
    folder.mkdir()
    linked = []
    for index, path in enumerate(paths):
        link = folder / f"{index:05d}.txt"
        os.link(path, link)
        linked.append(str(link))
    list_file = tmp / "messages.list"
    list_file.write_text("".join(f"{name}\n" for name in linked), encoding="utf-8")
    mbox = tmp / "messages.mbox"
    write_mbox(paths, mbox)
    lib = tmp / "lib"
    (lib / "Text").mkdir(parents=True)
    shutil.copyfile(deduper_seed, lib / "Text" / "DeDuper.pm")
    return Corpus(root, paths, folder, list_file, mbox, lib,
                  sum(path.stat().st_size for path in paths))


def counted(key: str) -> Callable[[Child], str]:
    """Reader of a peer's ``KEY N`` output line."""
    def read(child: Child) -> str:
        for line in child.stdout.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key:
                return value
        return "?"
    return read


def peer_measured(child: Child) -> Child:
    """The pass a peer timed itself (``seconds``, ``cpu_seconds``, ``peak_rss_kb`` lines) in
    place of its whole process: Rspamd's start-up and the learning before a check-only pass
    are not what is compared, and its CPU is spent in server processes, not in the child."""
    report = dict(line.split(" ", 1) for line in child.stdout.read_text().splitlines()
                  if " " in line)
    return Child(float(report["seconds"]), int(report["peak_rss_kb"]), child.stdout,
                 float(report["cpu_seconds"]))


def rspamd_found(child: Child) -> str:
    """Checks that matched, and what the HTTP client spent beside the servers."""
    return (f"{counted('matched')(child)} matched; client "
            f"{float(counted('client_cpu_seconds')(child)):.2f} s CPU")


def scan_found(expected: int) -> Callable[[Child], str]:
    """Reader of ``scan --json`` output: how many verdicts were not ``unique``, by kind."""
    def read(child: Child) -> str:
        lines = child.stdout.read_text().splitlines()
        verdicts = collections.Counter(json.loads(line)["verdict"] for line in lines if line)
        total = sum(verdicts.values())
        kinds = ", ".join(f"{v} {n}" for v, n in sorted(verdicts.items()) if v != "unique")
        text = f"{total - verdicts['unique']}" + (f" ({kinds})" if kinds else "")
        return text if total == expected else f"{text}; {total} lines for {expected} messages"
    return read


def formail_found(expected: int) -> Callable[[Child], str]:
    """Reader of formail's output mbox: how many messages it dropped."""
    def read(child: Child) -> str:
        with open(child.stdout, "rb") as mbox:
            kept = sum(line.startswith(b"From ") for line in mbox)
        return f"{expected - kept} dropped"
    return read


def tools(corpus: Corpus, dupfilter: list[str] | None, per_message: list[list[float]],
          rspamd_clients: int = RSPAMD_CLIENTS, rspamd_cache: Path | None = None) -> list[Tool]:
    """Every contender of this run, dupfilter's first when its CLI exists."""
    env = child_env()
    count = len(corpus.paths)
    listing = corpus.list_file
    cache = ["--cache", rspamd_cache] if rspamd_cache else []

    def rspamd(mode: str) -> Callable[[Path], Child]:
        return lambda w: peer_measured(run_child(
            [sys.executable, PEERS / "rspamd_peer.py", mode, listing, "--clients",
             str(rspamd_clients), *cache], w, env=env))

    def per_message_found(child: Child) -> str:
        per_message.append([float(ms) for ms in child.stdout.read_text().split()])
        return "-"

    peers = [
        Tool("Text::DeDuper (Perl)", lambda w: run_child(
            ["perl", "-I", corpus.deduper_lib, PEERS / "deduper.pl", listing], w),
            lambda c: f"{counted('similar')(c)} similar"),
        Tool("datasketch LSH 0.5", lambda w: run_child(
            [sys.executable, PEERS / "datasketch_peer.py", listing], w, env=env),
            lambda c: f"{counted('similar')(c)} similar"),
        Tool("rensa LSH 0.5", lambda w: run_child(
            [sys.executable, PEERS / "rensa_peer.py", listing], w, env=env),
            lambda c: f"{counted('similar')(c)} similar"),
        Tool("formail -D", lambda w: run_child(
            ["formail", "-D", FORMAIL_CACHE_BYTES, w / "idcache", "-s"], w, stdin=corpus.mbox),
            formail_found(count)),
        Tool(f"Rspamd fuzzy check x{rspamd_clients}", rspamd("check"), rspamd_found),
        Tool(f"Rspamd check+learn x{rspamd_clients}", rspamd("learn"), rspamd_found),
        Tool("Rspamd check+learn in order", rspamd("ordered"), rspamd_found),
        Tool("parse+compute only", lambda w: run_child(
            [sys.executable, "-c", PER_MESSAGE, listing], w, env=env), per_message_found),
    ]
    if dupfilter is None:
        return peers
    return [
        Tool("dupfilter-db import", lambda w: run_child(
            [*dupfilter, "--db", w / "db", "import", corpus.folder], w, env=env),
            lambda c: "-"),
        Tool(SCAN, lambda w: run_child(
            [*dupfilter, "--db", w / "db", "scan", "--json", corpus.folder], w, env=env),
            scan_found(count)),
        Tool(f"{SCAN} --jobs 1", lambda w: run_child(
            [*dupfilter, "--db", w / "db", "scan", "--json", "--jobs", "1", corpus.folder], w,
            env=env), scan_found(count)),
        *peers,
    ]


def compared_scan(checkout: Path, corpus: Corpus, dupfilter: list[str]) -> Tool:
    """``dupfilter-db scan`` of another checkout: its ``mailfilter`` first on the path."""
    env = dict(os.environ, PYTHONPATH=str(checkout.resolve()))
    return Tool(f"{SCAN} [{checkout.name}]", lambda w: run_child(
        [*dupfilter, "--db", w / "db", "scan", "--json", corpus.folder], w, env=env),
        scan_found(len(corpus.paths)))


def warm_rspamd(cache: Path, tmp: Path) -> None:
    """Start the Rspamd peer once on no message: its first start compiles its patterns into
    ``cache`` (about 15 s and a 300 MB peak), which every measured start then reuses."""
    nothing = tmp / "no-messages.list"
    nothing.write_text("", encoding="utf-8")
    workdir = tmp / "rspamd-warm-up"
    workdir.mkdir()
    run_child([sys.executable, PEERS / "rspamd_peer.py", "check", nothing, "--cache", cache],
              workdir, env=child_env())
    shutil.rmtree(workdir)


def run_rounds(contenders: list[Tool], rounds: int, tmp: Path) -> None:
    """Run every tool once a round, rotating the order, each in a fresh working folder."""
    for round_no in range(rounds):
        shift = round_no % len(contenders)
        for tool in contenders[shift:] + contenders[:shift]:
            workdir = tmp / "work"
            workdir.mkdir()
            child = tool.run(workdir)
            tool.seconds.append(child.seconds)
            tool.cpu_seconds.append(child.cpu_seconds)
            tool.rss_kb.append(child.peak_rss_kb)
            found = tool.found(child)
            tool.found_text = tool.found_text or found
            shutil.rmtree(workdir)
            print(f"round {round_no + 1}/{rounds}: {tool.name}: {child.seconds:.2f} s "
                  f"({child.cpu_seconds:.2f} s CPU), "
                  f"{megabytes(child.peak_rss_kb):.0f} MB, found {found}",
                  file=sys.stderr, flush=True)


def table(contenders: list[Tool], count: int, total_bytes: int) -> str:
    """Aligned plain-text table of medians, with dupfilter scan's ratios to each tool: of
    wall time for the default scan and for ``--jobs 1``, and of CPU time for ``--jobs 1``
    (the measure a loaded machine inflates least)."""
    speeds = {t.name: count / statistics.median(t.seconds) for t in contenders}
    cpu_speeds = {t.name: count / statistics.median(t.cpu_seconds) for t in contenders}
    rss_mb = {t.name: megabytes(statistics.median(t.rss_kb)) for t in contenders}
    one = f"{SCAN} --jobs 1"
    header = ("tool", "seconds", "msg/s", "CPU s", "msg/CPU s", "MB/s", "peak RSS MB",
              "scan speed x", "scan RSS x", "jobs 1 speed x", "jobs 1 CPU x",
              "found (informative)")
    rows = [header]
    for tool in contenders:
        seconds = statistics.median(tool.seconds)
        ratios = ["-"] * 4
        if SCAN in speeds and tool.name != SCAN:
            ratios[:2] = (f"{speeds[SCAN] / speeds[tool.name]:.2f}",
                          f"{rss_mb[SCAN] / rss_mb[tool.name]:.2f}")
        if one in speeds and tool.name != one:
            ratios[2:] = (f"{speeds[one] / speeds[tool.name]:.2f}",
                          f"{cpu_speeds[one] / cpu_speeds[tool.name]:.2f}")
        rows.append((tool.name, f"{seconds:.2f}", f"{speeds[tool.name]:.0f}",
                     f"{statistics.median(tool.cpu_seconds):.2f}",
                     f"{cpu_speeds[tool.name]:.0f}",
                     f"{total_bytes / 1e6 / seconds:.2f}", f"{rss_mb[tool.name]:.0f}",
                     *ratios, tool.found_text))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) if i in (0, len(header) - 1) else cell.rjust(w)
                       for i, (cell, w) in enumerate(zip(row, widths, strict=True)))
             for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


def slowest(per_message: list[list[float]], corpus: Corpus, top: int = 3) -> str:
    """The ``top`` slowest messages of parse + compute (median over rounds), in ms."""
    medians = [statistics.median(ms) for ms in zip(*per_message, strict=True)]
    order = sorted(range(len(medians)), key=medians.__getitem__, reverse=True)
    over = sum(ms > SLOW_MS for ms in medians)
    lines = [f"slowest parse+compute (median of rounds; target: none above {SLOW_MS:.0f} ms, "
             f"{over} above):"]
    lines += [f"  {medians[i]:7.1f} ms  {corpus.paths[i].relative_to(corpus.root)}"
              for i in order[:top]]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path,
                        default=CORPUS_TARBALL,
                        help="corpus tarball of one-message *.txt files")
    parser.add_argument("--deduper", type=Path,
                        default=SHARED / "seeds" / "001_391e95458725c4b4.txt",
                        help="the seed's Text::DeDuper module text")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; medians are reported")
    parser.add_argument("--limit", type=int, help="use only the first N messages")
    parser.add_argument("--only", metavar="NAME,...",
                        help="run only the tools whose names contain one of these "
                             "(e.g. 'jobs 1,rensa'); the ratios need scan --jobs 1 or scan")
    parser.add_argument("--compare", type=Path, action="append", default=[], metavar="CHECKOUT",
                        help="also another checkout's dupfilter-db scan (e.g. a commit unpacked "
                             "with git archive) in the same rounds; repeatable")
    parser.add_argument("--rspamd-clients", type=int, default=RSPAMD_CLIENTS,
                        help="requests in flight for the unordered Rspamd rows "
                             f"(default {RSPAMD_CLIENTS})")
    args = parser.parse_args(argv)
    if args.rounds < 1 or (args.limit is not None and args.limit < 1) or \
            args.rspamd_clients < 1:
        parser.error("--rounds, --limit and --rspamd-clients must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    """Install missing peers, run the rounds and print the table."""
    args = parse_args(argv)
    ensure_peers()
    dupfilter = dupfilter_db()
    with tempfile.TemporaryDirectory(prefix="dupfilter-bench-") as name:
        tmp = Path(name)
        corpus = prepare(args.corpus, args.deduper, args.limit, tmp)
        count = len(corpus.paths)
        per_message: list[list[float]] = []
        rspamd_cache = tmp / "rspamd-cache"
        contenders = tools(corpus, dupfilter, per_message, args.rspamd_clients, rspamd_cache)
        if dupfilter is not None:
            contenders[2:2] = [compared_scan(Path(c), corpus, dupfilter) for c in args.compare]
        if args.only:
            wanted = [part.strip() for part in args.only.split(",") if part.strip()]
            contenders = [t for t in contenders if any(w in t.name for w in wanted)]
        if any(t.name.startswith("Rspamd") for t in contenders):
            warm_rspamd(rspamd_cache, tmp)
        print(f"{count} messages, {corpus.total_bytes / 1e6:.1f} MB, {args.rounds} round(s)"
              + ("; no mailfilter/cli.py yet: dupfilter-db skipped" if dupfilter is None else ""),
              flush=True)
        run_rounds(contenders, args.rounds, tmp)
        print()
        print(table(contenders, count, corpus.total_bytes))
        print("scan speed x = scan msg/s / tool msg/s; scan RSS x = scan peak RSS / tool's; "
              "jobs 1 speed x, CPU x: the same for scan --jobs 1, of wall and of CPU time")
        if per_message:
            print()
            print(slowest(per_message, corpus))


if __name__ == "__main__":
    main()
