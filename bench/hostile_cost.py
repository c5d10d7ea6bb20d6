"""Crafted messages at the size that is fingerprinted: CPU and peak memory of one analysis.

The hostile-input suite (tests/test_hostile_input.py) asserts that each crafted shape costs
about as much a KB at 5 MB as at 100 KB, and that a few shapes stay under 200 MB.  Linear is
not enough on its own: a daemon's ``[analysis] deadline`` is 2 s, and a message may bring
4 MiB to fingerprint.  This bench builds every shape of the suite (``SHAPES`` and
``MEMORY_SHAPES``, read from the test module, so that the two never drift apart) at
``--size`` MiB and analyses each in a process of its own, for this checkout and every
``--compare`` checkout in the same run, the best of ``--rounds``:

    python bench/hostile_cost.py                          # 4 MiB, 2 rounds
    python bench/hostile_cost.py --compare /tmp/old       # and another checkout, same run
    python bench/hostile_cost.py --only "from,dates" --size 1

Columns per checkout: CPU seconds of ``engine.analyse`` (process_time) and the process's
peak RSS (VmHWM, MB; the interpreter and the test module's imports included).  A shape
slower than the deadline is marked.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"

_ANALYSE = r'''
import gc, json, sys, time, importlib.util
root, tests, shape, size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
sys.path.insert(0, root)
import mailfilter
if not mailfilter.__file__.startswith(root):
    raise SystemExit(f"imported {mailfilter.__file__}, not {root}'s mailfilter")
sys.path.insert(0, tests)
spec = importlib.util.spec_from_file_location("hostile", tests + "/test_hostile_input.py")
hostile = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hostile)
from mailfilter.config import FingerprintSettings
from mailfilter.engine import analyse
shapes = {**hostile.SHAPES, **{"memory: " + k: v for k, v in hostile.MEMORY_SHAPES.items()}}
raw = shapes[shape](size)
gc.collect()
started = time.process_time()
analyse(raw, FingerprintSettings())
seconds = time.process_time() - started
with open("/proc/self/status") as status:
    peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
print(json.dumps([seconds, peak / 1024]))
'''


def shape_names() -> list[str]:
    """The suite's shapes, by the names the table gives them."""
    sys.path.insert(0, str(TESTS))
    import importlib.util
    spec = importlib.util.spec_from_file_location("hostile", TESTS / "test_hostile_input.py")
    hostile = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(hostile)
    return list(hostile.SHAPES) + ["memory: " + name for name in hostile.MEMORY_SHAPES]


def measure(checkout: Path, shape: str, size: int) -> tuple[float, float]:
    """(CPU seconds, peak MB) of one analysis of ``shape`` at ``size`` bytes."""
    done = subprocess.run([sys.executable, "-c", _ANALYSE, str(checkout), str(TESTS), shape,
                           str(size)], capture_output=True, text=True, cwd="/",
                          timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{checkout}, {shape}: {done.stderr.strip()[-500:]}")
    seconds, peak = json.loads(done.stdout)
    return seconds, peak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compare", action="append", default=[], metavar="CHECKOUT",
                        help="another checkout (e.g. unpacked with git archive); repeatable")
    parser.add_argument("--size", type=float, default=4.0, help="MiB a message (default 4)")
    parser.add_argument("--rounds", type=int, default=2, help="best of N (default 2)")
    parser.add_argument("--only", default="", help="shapes whose names hold one of these")
    parser.add_argument("--deadline", type=float, default=2.0,
                        help="seconds past which a shape is marked (default 2)")
    args = parser.parse_args()
    checkouts = [ROOT] + [Path(path).resolve() for path in args.compare]
    size = int(args.size * 1024 * 1024) - 300      # (the shapes' headers under the cap)
    wanted = [word.strip() for word in args.only.split(",") if word.strip()]
    names = [name for name in shape_names() if not wanted or any(w in name for w in wanted)]
    header = f"{'shape':36s}" + "".join(f" {'s':>7s} {'MB':>6s}  " for _ in checkouts)
    print(f"{len(names)} shapes at {args.size:g} MiB, best of {args.rounds}; columns by "
          "checkout: " + ", ".join(str(c) for c in checkouts))
    print(header)
    print("-" * len(header))
    slow = 0
    for name in names:
        cells = []
        for checkout in checkouts:
            seconds, peak = min(measure(checkout, name, size) for _ in range(args.rounds))
            mark = "*" if seconds > args.deadline else " "
            slow += checkout == ROOT and seconds > args.deadline
            cells.append(f" {seconds:7.2f} {peak:6.0f} {mark}")
        print(f"{name:36s}" + "".join(cells), flush=True)
    print(f"* CPU seconds past the {args.deadline:g} s deadline; this checkout: {slow} "
          "shape(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
