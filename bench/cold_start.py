"""Cold start of the pipe filter: ``dupfilter --tag`` / ``--check`` against the interpreter.

procmail starts ``dupfilter`` once per delivery, so its cost per message is a whole process:
the interpreter, the imports, opening the store, one check and one record.  This bench runs,
in every round and in rotating order, each as a new process:

  python -I -c pass          the interpreter's own start (the issue's yardstick)
  floor                      ``python -I -c "import <what one message needs>"``: lmdb,
                             xxhash, selectolax, pyfastcdc and the standard modules the pipe
                             path cannot do without (see FLOOR)
  dupfilter --tag            the console script, one corpus message on stdin, recording
  dupfilter --check          the same with --check (recording too, as procmail would)

against one LMDB store of ``--records`` records (default 100,000; synthetic records shaped
like the corpus's, as bench/scale.py makes them), built once and reused with ``--store``.
Each message is a different corpus message (cycled).  The table gives, per command, the
median wall time and the median CPU time (user + system of the child, from
``getrusage(RUSAGE_CHILDREN)``: what a loaded machine does not inflate as much), and the
ratio of each median to ``python -I -c pass``'s in the same run.

    python bench/cold_start.py                       # 100k records, 100 rounds
    python bench/cold_start.py --runs 30 --store /tmp/cold-store   # reuse a built store
    python bench/cold_start.py --importtime 20       # also: where the import time goes
    python bench/cold_start.py --compare ../old      # and another checkout's dupfilter, same run
    python bench/cold_start.py --no-site             # also all three without site/.pth files
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import resource
import shutil
import site
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))     # the repository's root: tests.support, mailfilter
from tests.support.corpus import CORPUS_TARBALL, message_files, unpack  # noqa: E402

# What one plain-text message cannot be checked without, whoever writes the filter: the
# store's and the hash's bindings and the standard modules for flags, the store's
# parameters (JSON), patterns and records.  (HTML parts add selectolax, attachments
# pyfastcdc, a settings file tomllib: each imported only when a message or a user needs it.)
FLOOR = "import argparse, json, re, struct, dataclasses, lmdb, xxhash"


def build_store(path: Path, records: int, corpus_root: Path) -> None:
    """A store at ``path`` with ``records`` synthetic records (bench/scale.py's)."""
    import numpy as np

    from bench.scale import analyse_all, bulk_load, synthetic_records
    from mailfilter.config import Settings
    from mailfilter.engine import Engine

    settings = Settings()
    raws = [p.read_bytes() for p in message_files(corpus_root)]
    bases = analyse_all(raws, settings)
    generator = np.random.default_rng(11)
    with Engine(settings, str(path)) as engine:
        filled = engine.store.stats()["records"]
        while filled < records:
            step = min(records - filled, 50_000)
            bulk_load(engine, synthetic_records(bases, step, filled,
                                                settings.fingerprint.sketch_size, generator))
            filled += step
        print(f"store {path}: {engine.store.stats()['records']} records", flush=True)


def build_store_with(checkout: Path, path: Path, records: int, corpus_root: Path) -> None:
    """The same store as ``checkout``'s own code writes it: its schema may differ from
    this checkout's, and a dupfilter refuses a schema it does not read."""
    code = ("import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]); "
            "from bench.cold_start import build_store; "
            "build_store(Path(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]))")
    subprocess.run([sys.executable, "-c", code, str(checkout.resolve()), str(path),
                    str(records), str(corpus_root)], check=True,
                   env=dict(os.environ, PYTHONPATH=str(checkout.resolve())))


def console_script(name: str) -> list[str]:
    """The installed console script beside this interpreter, else the same via ``-c``."""
    script = Path(sys.executable).parent / name
    if script.exists():
        return [str(script)]
    found = shutil.which(name)
    if found:
        return [found]
    return [sys.executable, "-c",
            "import sys; from mailfilter.cli.pipe import main; sys.exit(main())"]


def timed(argv: Sequence[str], stdin: bytes, env: dict[str, str]) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of the child, exit status) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, env=env)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.stderr.strip():
        raise RuntimeError(f"{argv}: {done.stderr.decode(errors='replace')[-1000:]}")
    return wall, cpu, done.returncode


def importtime(argv_module: str, env: dict[str, str], runs: int, top: int = 15) -> str:
    """The modules of the pipe filter's import with the largest self time (median of runs)."""
    samples: dict[str, list[int]] = collections.defaultdict(list)
    totals = []
    line = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")
    for _ in range(runs):
        done = subprocess.run([sys.executable, "-X", "importtime", "-c",
                               f"import {argv_module}"], capture_output=True, env=env,
                              check=True)
        total = 0
        for match in line.finditer(done.stderr.decode()):
            samples[match[4]].append(int(match[1]))
            total += int(match[1])
        totals.append(total)
    median = {name: statistics.median(values + [0] * (runs - len(values)))
              for name, values in samples.items()}
    rows = sorted(median.items(), key=lambda item: -item[1])[:top]
    lines = [f"import {argv_module}: {len(samples)} modules, median total self time "
             f"{statistics.median(totals) / 1000:.1f} ms over {runs} runs; largest:"]
    lines += [f"  {us / 1000:6.1f} ms  {name}" for name, us in rows]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS_TARBALL,
                        help="corpus tarball, or a folder it was unpacked into")
    parser.add_argument("--records", type=int, default=100_000, help="store size")
    parser.add_argument("--runs", type=int, default=100, help="rounds (one run of each)")
    parser.add_argument("--store", type=Path,
                        help="store folder to build once and reuse (default: a temporary one)")
    parser.add_argument("--compare", type=Path, metavar="CHECKOUT",
                        help="also run another checkout's mailfilter (e.g. the previous "
                             "release, unpacked with git archive) in the same rounds")
    parser.add_argument("--no-site", action="store_true",
                        help="also run pass, the floor and --tag with python -I -S (no .pth "
                             "files: what a machine's own site setup adds, left out)")
    parser.add_argument("--importtime", type=int, default=0, metavar="N",
                        help="also list the pipe filter's slowest imports (median of N runs)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    env = {k: v for k, v in os.environ.items() if k != "DUPFILTER_CONFIG"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryDirectory(prefix="dupfilter-cold-") as name:
        tmp = Path(name)
        env["XDG_CONFIG_HOME"] = str(tmp / "config")     # no settings file of the user's
        if args.corpus.is_dir():
            corpus_root = args.corpus
        else:
            corpus_root = unpack(tmp / "corpus", args.corpus)
        # As an installed package has them: pip compiles the modules when it installs a
        # wheel, while a checkout run with PYTHONDONTWRITEBYTECODE=1 would compile
        # mailfilter's sources again in every process.
        for checkout in (REPO, args.compare):
            if checkout is not None:
                subprocess.run([sys.executable, "-m", "compileall", "-q",
                                str(checkout / "mailfilter")], check=True)
        store = args.store or tmp / "store"
        build_store(store, args.records, corpus_root)
        paths = message_files(corpus_root)
        messages = [paths[i].read_bytes() for i in range(0, len(paths), 7)]
        dupfilter = console_script("dupfilter")
        commands = {
            "python -I -c pass": [sys.executable, "-I", "-c", "pass"],
            "floor: python -I -c 'import lmdb, xxhash, ...'": [sys.executable, "-I", "-c",
                                                               FLOOR],
            "dupfilter --tag": [*dupfilter, "--db", str(store), "--tag"],
            "dupfilter --check": [*dupfilter, "--db", str(store), "--check"],
        }
        if args.no_site:
            # The same without `site`: no .pth file runs (a machine's own, e.g. one that
            # imports certifi at every start, inflates `python -I -c pass`); the
            # site-packages folders are put on sys.path by hand.
            paths = [str(REPO), *site.getsitepackages()]
            prefix = f"import sys; sys.path[1:1] = {paths!r}; "
            commands["python -I -S -c pass"] = [sys.executable, "-I", "-S", "-c", "pass"]
            commands["floor, -I -S"] = [sys.executable, "-I", "-S", "-c", prefix + FLOOR]
            commands["dupfilter --tag, -I -S"] = [
                sys.executable, "-I", "-S", "-c",
                prefix + "from mailfilter.cli.pipe import main; sys.exit(main())",
                "--db", str(store), "--tag"]
        environments = {name: env for name in commands}
        if args.compare is not None:
            other = dict(env, PYTHONPATH=str(args.compare.resolve()))
            other_store = store.with_name(f"{store.name}-{args.compare.name}")
            build_store_with(args.compare, other_store, args.records, corpus_root)
            for mode in ("--tag", "--check"):
                name = f"dupfilter {mode} ({args.compare.name})"
                commands[name] = [*dupfilter, "--db", str(other_store), mode]
                environments[name] = other
        wall: dict[str, list[float]] = {n: [] for n in commands}
        cpu: dict[str, list[float]] = {n: [] for n in commands}
        names = list(commands)
        for round_no in range(args.runs):
            raw = messages[round_no % len(messages)]
            shift = round_no % len(names)
            for name in names[shift:] + names[:shift]:
                seconds, cpu_seconds, _ = timed(commands[name], raw, environments[name])
                wall[name].append(seconds)
                cpu[name].append(cpu_seconds)
        load = os.getloadavg()
        print(f"{FLOOR}\n{args.runs} rounds, store of {args.records:,} records, "
              f"load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} at the end")
        base_wall = statistics.median(wall[names[0]])
        base_cpu = statistics.median(cpu[names[0]])
        header = ("command", "wall ms (median)", "x pass", "cpu ms (median)", "x pass",
                  "wall p90 ms")
        rows = [header]
        for name in names:
            w, c = statistics.median(wall[name]), statistics.median(cpu[name])
            p90 = sorted(wall[name])[int(0.9 * (len(wall[name]) - 1))]
            rows.append((name, f"{w * 1000:.1f}", f"{w / base_wall:.2f}", f"{c * 1000:.1f}",
                         f"{c / base_cpu:.2f}", f"{p90 * 1000:.1f}"))
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        for number, row in enumerate(rows):
            print("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                            for i, (cell, w) in enumerate(zip(row, widths, strict=True))))
            if number == 0:
                print("  ".join("-" * w for w in widths))
        print("x pass = median / the median of `python -I -c pass` in this run "
              "(target: dupfilter <= 2.5, the text-pipeline issue)")
        if args.no_site:
            bare_wall = statistics.median(wall["python -I -S -c pass"])
            bare_cpu = statistics.median(cpu["python -I -S -c pass"])
            for name in ("floor, -I -S", "dupfilter --tag, -I -S"):
                print(f"{name}: {statistics.median(wall[name]) / bare_wall:.2f} x wall, "
                      f"{statistics.median(cpu[name]) / bare_cpu:.2f} x CPU of "
                      "`python -I -S -c pass`")
        if args.importtime:
            print()
            print(importtime("mailfilter.cli.pipe", env, args.importtime))
    return 0


if __name__ == "__main__":
    sys.exit(main())
