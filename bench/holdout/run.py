# ruff: noqa: E501  (literal mail text: headers, links and notes read best unbroken)
"""Run the hold-out cases through the installed `dupfilter` commands and print, per category,
the flagged share (must flag) or the false-positive share (must stay unique) with an empty
store and with a busy store, side by side.

    python3 bench/holdout/run.py --seed 1 --cases 30 --mode both

The filter is driven only through its commands: `dupfilter --db DIR --check --json
--recipient ADDR` per delivery (the verdict read from its JSON), `dupfilter-db import` to
fill the busy store's base once per run.
"""

from __future__ import annotations

import argparse
import json
import mailbox
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mailgen  # noqa: E402

HERE = Path(__file__).resolve().parent
DEFAULT_CORPUS = HERE.parent.parent.parent / "shared" / "corpus" / "spamassassin.tar.gz"
FLAGGED = {"duplicate", "near-duplicate"}
OTHER_COPIES = 12


def deliver(db: Path, config: Path, d: mailgen.Delivery) -> str:
    """One delivery through `dupfilter --check --json`; the verdict, or 'error: ...'."""
    cmd = ["dupfilter", "--db", str(db), "--config", str(config), "--check", "--json"]
    for r in d.recipients:
        cmd += ["--recipient", r]
    p = subprocess.run(cmd, input=d.raw, capture_output=True, timeout=120)
    try:
        verdict = json.loads(p.stdout.decode().strip().splitlines()[-1])["verdict"]
    except (ValueError, IndexError, KeyError):
        return f"error: rc={p.returncode} {p.stderr.decode(errors='replace').strip()[-200:]}"
    if (p.returncode == 0) != (verdict in FLAGGED):
        return f"error: rc={p.returncode} verdict={verdict}"
    return verdict


def run_case(case: mailgen.Case, db: Path, config: Path, busy: bool, seed: int) -> dict:
    if busy:
        # the case's first message, personalised, already went to other mailboxes
        rng = random.Random(f"{seed}:{case.category}:{case.index}:others")
        own = {r for d in case.deliveries for r in d.recipients}
        others = []
        while len(others) < OTHER_COPIES:
            p = mailgen.person(rng)
            if p.email not in own:
                others.append(p)
        for p in others:
            deliver(db, config, mailgen.Delivery([p.email], case.personalise(rng, p)))
    verdicts = []
    for d in case.deliveries:
        v = deliver(db, config, d)
        if d.expect:
            verdicts.append(v)
    errors = [v for v in verdicts if v.startswith("error")]
    flagged = [v in FLAGGED for v in verdicts]
    hit = all(flagged) if case.must_flag else any(flagged)
    return {"category": case.category, "index": case.index, "verdicts": verdicts, "hit": hit, "errors": errors}


def build_base(corpus: mailgen.Corpus, seed: int, n_messages: int, n_mailboxes: int, config: Path, work: Path) -> Path:
    msgs, _ = mailgen.busy_traffic(corpus, seed, n_messages, n_mailboxes)
    md = mailbox.Maildir(work / "busy-maildir", create=True)
    for raw in msgs:
        md.add(raw)
    base = work / "busy-base"
    base.mkdir()
    t = time.monotonic()
    out = subprocess.run(["dupfilter-db", "--db", str(base), "--config", str(config), "import", "--jobs", "2",
                          str(work / "busy-maildir")], capture_output=True, text=True, check=True)
    print(f"busy store: {out.stdout.strip().splitlines()[-1]} ({time.monotonic() - t:.0f} s)", file=sys.stderr)
    return base


def run_mode(cases, mode, config, work, base, jobs, seed) -> list[dict]:
    def one(ix):
        i, case = ix
        db = work / f"{mode}-{i}"
        if mode == "busy":
            shutil.copytree(base, db)
        else:
            db.mkdir()
        try:
            return run_case(case, db, config, mode == "busy", seed)
        finally:
            shutil.rmtree(db, ignore_errors=True)

    t = time.monotonic()
    with ThreadPoolExecutor(jobs) as ex:
        res = list(ex.map(one, enumerate(cases)))
    print(f"{mode}: {len(cases)} cases in {time.monotonic() - t:.0f} s", file=sys.stderr)
    return res


def table(cats, results: dict[str, list[dict]]) -> str:
    modes = list(results)
    head = f"{'category':32} {'expect':7} {'cases':>5} " + " ".join(f"{m + ' ' + ('share'):>12}" for m in modes)
    lines = [head, "-" * len(head)]
    pooled = {m: {"flag": [0, 0], "unique": [0, 0]} for m in modes}
    for cat in cats:
        must_flag = cat in mailgen.MUST_FLAG
        row = f"{cat:32} {'flag' if must_flag else 'unique':7} "
        cols = []
        for m in modes:
            rs = [r for r in results[m] if r["category"] == cat]
            hits = sum(r["hit"] for r in rs)
            errs = sum(bool(r["errors"]) for r in rs)
            pooled[m]["flag" if must_flag else "unique"][0] += hits
            pooled[m]["flag" if must_flag else "unique"][1] += len(rs)
            cols.append(f"{hits / max(1, len(rs)):>6.2f} {hits:>2}/{len(rs):<2}" + (f" ({errs} err)" if errs else ""))
        n = len([r for r in results[modes[0]] if r["category"] == cat])
        lines.append(row + f"{n:>5} " + " ".join(f"{c:>12}" for c in cols))
    lines.append("-" * len(head))
    for kind, label in (("flag", "POOLED must-flag: flagged share"), ("unique", "POOLED must-stay-unique: false-positive share")):
        cols = []
        for m in modes:
            h, n = pooled[m][kind]
            cols.append(f"{h / max(1, n):>6.2f} {h:>3}/{n:<3}")
        lines.append(f"{label:46} " + " ".join(f"{c:>12}" for c in cols))
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cases", type=int, default=30, help="cases per category")
    ap.add_argument("--mode", choices=["empty", "busy", "both"], default="both")
    ap.add_argument("--categories", nargs="*", help="only these categories")
    ap.add_argument("--jobs", type=int, default=2, help="cases run at once")
    ap.add_argument("--busy-messages", type=int, default=3000, help="corpus messages in the busy store")
    ap.add_argument("--busy-mailboxes", type=int, default=300)
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("--corpus-dir", type=Path, default=Path(tempfile.gettempdir()) / "holdout_corpus")
    ap.add_argument("--json", type=Path, help="write every case's verdicts here")
    args = ap.parse_args(argv)

    corpus = mailgen.Corpus(args.corpus, args.corpus_dir)
    cats = args.categories or list(mailgen.GENERATORS)
    cases = mailgen.make_cases(corpus, args.seed, args.cases, cats)
    modes = ["empty", "busy"] if args.mode == "both" else [args.mode]
    with tempfile.TemporaryDirectory(prefix="holdout-") as tmp:
        work = Path(tmp)
        aliases = work / "aliases"
        aliases.write_text("".join(f"{a} {m}\n" for c in cases for a, m in c.aliases))
        config = work / "dupfilter.toml"
        config.write_text(f'[detector]\naliases = "{aliases}"\n')
        base = build_base(corpus, args.seed, args.busy_messages, args.busy_mailboxes, config, work) if "busy" in modes else None
        results = {m: run_mode(cases, m, config, work, base, args.jobs, args.seed) for m in modes}
    busy_note = (f" (busy: {args.busy_messages} corpus messages, {OTHER_COPIES} personalised copies"
                 " of each case's first message to other mailboxes)") if "busy" in modes else ""
    print(f"hold-out seed={args.seed} cases/category={args.cases}{busy_note}")
    print(table(cats, results))
    if args.json:
        args.json.write_text(json.dumps({"seed": args.seed, "cases": args.cases, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
