"""CPU of ``engine.analyse`` a message, for this checkout and others, in one run; and
whether every message still gets the same analysis.

``engine.analyse`` (parse + fingerprint) is the store-free work every front end does for
every message.  This bench runs it over the corpus (and, with ``--extra``, over folders of
``.eml`` files such as ``bench/realworld.py --write`` makes) in a new worker process per
checkout and round, the order of the checkouts rotating from round to round.  Each worker
imports the ``mailfilter`` of its checkout, loads numpy as the daemons and batch work do
(``--cold``: not, as the pipe filter), reads every message into memory, analyses each one
once to warm up (imports, caches), then ``--passes`` times with its CPU time measured per
message (``time.process_time``).  Per checkout: the median over rounds of the mean CPU a
message, of parse alone (``message.parse``) and of the whole analysis, their ratio to the
first checkout's, and the worker's peak RSS.

Identity: every field of every message's ``Analysis`` (Message-ID, defects, header fields,
every field of the fingerprint and of its features) is hashed (sha256 of a canonical form);
the checkouts must agree on every field they both have.  The table says how many messages
differ and in which fields, and the first few differing messages.

    python bench/analyse_cost.py --compare /tmp/main          # this checkout against main
    python bench/analyse_cost.py --compare /tmp/main --extra /tmp/rw --rounds 5
    python bench/analyse_cost.py --slowest 10                 # also the slowest messages
    python bench/analyse_cost.py --compare /tmp/main --by-size  # also by message size

``--by-size``: the same means for the messages of each size class (bytes of the raw
message, headers included), each checkout's ratio to the first's, and each class's share
of the first checkout's total: where a ratio comes from (small messages pay every step's
fixed cost, long ones the per-byte cost).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
CORPUS_TARBALL = REPO.parent / "shared" / "corpus" / "spamassassin.tar.gz"


# ---------------------------------------------------------------------------- the worker

def _plain(value: object) -> object:
    """``value`` as JSON-able data, the same for a dataclass and a plain ``__slots__``
    class with the same fields (so that two versions of a class compare by content)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"bytes": bytes(value).hex()}
    if isinstance(value, (tuple, list)):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in sorted(value.items())}
    return {name: _plain(getattr(value, name)) for name in _field_names(value)}


def _field_names(value: object) -> list[str]:
    names: list[str] = []
    for klass in type(value).__mro__:
        slots = klass.__dict__.get("__slots__", ())
        names.extend([slots] if isinstance(slots, str) else slots)
    names.extend(getattr(value, "__dict__", {}))
    return sorted(name for name in set(names) if not name.startswith("_"))


def field_hashes(analysis: object) -> dict[str, str]:
    """Dotted field path → short sha256 of its canonical form, for one analysis (the
    fingerprint's and its features' fields one by one)."""
    out: dict[str, str] = {}

    def walk(prefix: str, value: object) -> None:
        plain = _plain(value)
        if isinstance(plain, dict) and prefix in ("", "fingerprint.", "fingerprint.features."):
            for name, _item in plain.items():
                walk(prefix + name + ".", getattr(value, name))
            return
        data = json.dumps(plain, sort_keys=True, ensure_ascii=True).encode()
        out[prefix.rstrip(".")] = hashlib.sha256(data).hexdigest()[:16]

    walk("", analysis)
    return out


def worker(root: Path, files: Path, passes: int, cold: bool, out: Path) -> None:
    """Analyse the messages listed in ``files`` with ``root``'s mailfilter; results as
    JSON in ``out``."""
    import resource
    import time

    sys.path.insert(0, str(root))
    import mailfilter
    from mailfilter.config import FingerprintSettings
    from mailfilter.engine import analyse
    from mailfilter.fingerprint import use_numpy
    from mailfilter.message import parse

    if not Path(mailfilter.__file__).resolve().is_relative_to(root.resolve()):
        raise SystemExit(f"imported {mailfilter.__file__}, not {root}'s mailfilter")
    if not cold:
        use_numpy()
    settings = FingerprintSettings()
    raws = [Path(name).read_bytes() for name in files.read_text().splitlines()]
    hashes = [field_hashes(analyse(raw, settings)) for raw in raws]      # warm-up too
    clock = time.process_time
    analysed = [0.0] * len(raws)
    parsed = [0.0] * len(raws)
    limit = settings.max_body_bytes
    for _ in range(passes):
        # Separate loops: a parse right before the same message's analysis would find the
        # caches of its text warm.
        for number, raw in enumerate(raws):
            started = clock()
            analyse(raw, settings)
            analysed[number] += clock() - started
        for number, raw in enumerate(raws):
            started = clock()
            parse(raw, max_body_bytes=limit)
            parsed[number] += clock() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out.write_text(json.dumps({
        "module": mailfilter.__file__, "hashes": hashes, "peak_kb": peak,
        "analyse": [value / passes for value in analysed],
        "parse": [value / passes for value in parsed]}))


# ---------------------------------------------------------------------------- the runner

def message_paths(corpus: Path, extra: Sequence[Path], tmp: Path, limit: int) -> list[Path]:
    """The corpus messages (sorted), then the ``.eml`` files under each ``extra`` folder."""
    if corpus.is_dir():
        root = corpus
    else:
        import tarfile
        root = tmp / "corpus"
        root.mkdir()
        with tarfile.open(corpus) as archive:
            archive.extractall(root, filter="data")
    paths = sorted(root.rglob("*.txt"))
    for folder in extra:
        paths += sorted(folder.rglob("*.eml"))
    return paths[:limit] if limit else paths


def run_worker(root: Path, files: Path, passes: int, cold: bool, tmp: Path,
               script: Path = Path(__file__)) -> dict:
    """Run ``script``'s worker (this bench's, or another that shares its arguments: see
    :func:`checkout_arguments`) for ``root``'s checkout in a new process; its JSON."""
    out = tmp / "result.json"
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    subprocess.run([sys.executable, str(script.resolve()), "--worker", str(root),
                    "--files", str(files), "--passes", str(passes), "--out", str(out)]
                   + (["--cold"] if cold else []), check=True, env=env, cwd=tmp)
    return json.loads(out.read_text())


def compare_hashes(paths: Sequence[Path], base: list[dict[str, str]],
                   other: list[dict[str, str]]) -> tuple[int, dict[str, int], list[str],
                                                         set[str]]:
    """(messages that differ, differing field → count, the first differing messages,
    fields only one side has)."""
    fields: dict[str, int] = {}
    differing: list[str] = []
    one_sided: set[str] = set()
    count = 0
    for path, ours, theirs in zip(paths, base, other, strict=True):
        one_sided |= set(ours) ^ set(theirs)
        changed = [name for name in ours.keys() & theirs.keys() if ours[name] != theirs[name]]
        if changed:
            count += 1
            for name in changed:
                fields[name] = fields.get(name, 0) + 1
            if len(differing) < 10:
                differing.append(f"{path} ({', '.join(sorted(changed))})")
    return count, fields, differing, one_sided


def total_hash(hashes: list[dict[str, str]], names: set[str]) -> str:
    """One sha256 over the given fields of every message (to quote before and after)."""
    digest = hashlib.sha256()
    for one in hashes:
        for name in sorted(names):
            digest.update(f"{name}={one.get(name, '-')};".encode())
    return digest.hexdigest()[:16]


def checkout_arguments(description: str) -> argparse.ArgumentParser:
    """The arguments of a bench that runs checkouts over the corpus in worker processes,
    one a round (this one, bench/detector_cost.py): the corpus, the checkouts, rounds,
    passes a worker, a limit, and the worker's own (hidden)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--corpus", type=Path, default=CORPUS_TARBALL,
                        help="corpus tarball, or a folder it was unpacked into")
    parser.add_argument("--compare", type=Path, action="append", default=[],
                        metavar="CHECKOUT", help="another checkout (e.g. main, unpacked "
                        "with git archive) run in the same rounds; repeatable")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--passes", type=int, default=2,
                        help="timed passes over the messages in each worker")
    parser.add_argument("--limit", type=int, default=0, help="only the first N messages")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--files", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    return parser


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = checkout_arguments(__doc__.split("\n\n")[0])
    parser.add_argument("--extra", type=Path, action="append", default=[], metavar="DIR",
                        help="also every .eml file under DIR (e.g. bench/realworld.py "
                             "--write DIR)")
    parser.add_argument("--cold", action="store_true",
                        help="without numpy, as the pipe filter runs")
    parser.add_argument("--slowest", type=int, default=0, metavar="N",
                        help="also list the N slowest messages of each checkout")
    parser.add_argument("--by-size", action="store_true",
                        help="also the means by message size, and each size's share")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker is not None:
        worker(args.worker, args.files, args.passes, args.cold, args.out)
        return 0
    checkouts = [REPO, *(path.resolve() for path in args.compare)]
    labels = ["this checkout"] + [str(path) for path in args.compare]
    with tempfile.TemporaryDirectory(prefix="dupfilter-analyse-") as name:
        tmp = Path(name)
        paths = message_paths(args.corpus, args.extra, tmp, args.limit)
        sizes = [path.stat().st_size for path in paths]     # (the corpus is unpacked in tmp)
        files = tmp / "files.txt"
        files.write_text("\n".join(str(path) for path in paths))
        results: list[list[dict]] = [[] for _ in checkouts]
        for round_no in range(args.rounds):
            order = list(range(len(checkouts)))
            shift = round_no % len(order)
            for index in order[shift:] + order[:shift]:
                results[index].append(run_worker(checkouts[index], files, args.passes,
                                                 args.cold, tmp))
    load = os.getloadavg()
    print(f"{len(paths):,} messages, {args.rounds} rounds x {args.passes} passes, "
          f"{'without' if args.cold else 'with'} numpy; load average {load[0]:.1f} / "
          f"{load[1]:.1f} / {load[2]:.1f} at the end")
    rows = [("checkout", "analyse µs/msg", "x first", "parse µs/msg", "x first",
             "compute µs/msg", "peak RSS MB")]
    medians = []
    for label, runs in zip(labels, results, strict=True):
        analysed = statistics.median(statistics.fmean(r["analyse"]) for r in runs) * 1e6
        parsed = statistics.median(statistics.fmean(r["parse"]) for r in runs) * 1e6
        peak = statistics.median(r["peak_kb"] for r in runs) / 1024
        medians.append((analysed, parsed))
        first_analysed, first_parsed = medians[0]
        rows.append((label, f"{analysed:.0f}", f"{analysed / first_analysed:.2f}",
                     f"{parsed:.0f}", f"{parsed / first_parsed:.2f}",
                     f"{analysed - parsed:.0f}", f"{peak:.0f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for number, row in enumerate(rows):
        print("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                        for i, (cell, w) in enumerate(zip(row, widths, strict=True))))
        if number == 0:
            print("  ".join("-" * w for w in widths))
    print("µs/msg: median over rounds of the mean CPU a message (process_time); compute = "
          "analyse - parse")
    base = results[0][0]["hashes"]
    shared = set.intersection(*(set(runs[0]["hashes"][0]) for runs in results)) \
        if base else set()
    for label, runs in zip(labels, results, strict=True):
        print(f"{label}: analyses hash {total_hash(runs[0]['hashes'], shared)} "
              f"(the {len(shared)} fields all checkouts have)")
    status = 0
    for label, runs in zip(labels[1:], results[1:], strict=True):
        count, fields, differing, one_sided = compare_hashes(paths, base, runs[0]["hashes"])
        if one_sided:
            print(f"fields only one side has ({label}): {', '.join(sorted(one_sided))}")
        if count:
            status = 1
            print(f"{count} of {len(paths):,} messages analysed differently by {label}: "
                  + ", ".join(f"{name} {n}" for name, n in sorted(fields.items())))
            for line in differing:
                print(f"  {line}")
        else:
            print(f"every message analysed alike by {label} (every shared field)")
    if args.by_size:
        print_by_size(sizes, labels, results)
    if args.slowest:
        for label, runs in zip(labels, results, strict=True):
            per_message = [statistics.median(r["analyse"][i] for r in runs)
                           for i in range(len(paths))]
            ranked = sorted(range(len(paths)), key=lambda i: -per_message[i])[:args.slowest]
            print(f"slowest messages, {label}:")
            for i in ranked:
                print(f"  {per_message[i] * 1000:8.2f} ms  {paths[i]}")
    return status


# Upper bounds (bytes of the raw message) of the size classes of ``--by-size``.
SIZE_CLASSES = (2_000, 4_000, 8_000, 16_000, 32_000, None)


def print_by_size(sizes: Sequence[int], labels: Sequence[str],
                  results: Sequence[list[dict]]) -> None:
    """Mean µs a message per size class and checkout (each message's median over rounds),
    the ratio to the first checkout's, and the class's share of the first's total."""
    per_message = [[statistics.median(r["analyse"][i] for r in runs)
                    for i in range(len(sizes))] for runs in results]
    first_total = sum(per_message[0])
    header = ["size", "messages", *(f"µs ({label})" if n == 0 else f"µs, x first ({label})"
                                    for n, label in enumerate(labels)), "share of first"]
    rows = [header]
    low = 0
    for high in SIZE_CLASSES:
        members = [i for i, size in enumerate(sizes)
                   if size > low and (high is None or size <= high)]
        name = f"> {low:,}" if high is None else f"{low:,}-{high:,}"
        low = high or low
        if not members:
            continue
        means = [sum(times[i] for i in members) / len(members) for times in per_message]
        cells = [f"{means[0] * 1e6:.0f}"] + [f"{mean * 1e6:.0f}, {mean / means[0]:.2f}"
                                            for mean in means[1:]]
        share = sum(per_message[0][i] for i in members) / first_total
        rows.append([name, f"{len(members):,}", *cells, f"{share:.0%}"])
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    print("by message size (bytes, headers included):")
    for number, row in enumerate(rows):
        print("  " + "  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)))
        if number == 0:
            print("  " + "  ".join("-" * w for w in widths))


if __name__ == "__main__":
    sys.exit(main())
