"""``dupfilter-db dedupe`` beside mdedup (Maildir) and IMAPdedup (Dovecot IMAP) on corpus mail
plus known copies (re-fetched, quoted-printable and base64 re-encodings, forwards, two
templated notices that are not copies).

    python bench/dedupe.py [--messages N] [--runs N] [--verbose]

Each tool really acts, on a scratch copy of its own: on the Maildir, dupfilter deletes
(``--action delete --yes``) and mdedup deletes its selection (``-s select-all-but-one -a
delete-selected``); on IMAP both tag the copies with the keyword ``Dup`` (dupfilter ``--action
flag --keyword Dup``, IMAPdedup ``-t Dup``) on one folder, the keyword taken off between runs.
Each round runs every tool once, dupfilter and its peer in turns (first one, then the other);
the table gives the median seconds of the rounds and their ratio to the peer's median.  A
first round is not timed: every tool runs with its bytecode cached (in the scratch folder),
as an installed package does, also where PYTHONDONTWRITEBYTECODE is set (where it is, a
dupfilter run from a checkout compiles every module it imports: 0.1 s of CPU a run here).
Printed per tool: messages a second, the known copies it found and missed, the near copies
it took (forwards, and copies the corpus holds itself: ``mailboxes.corpus_resends``), and the
distinct messages it removed (a message with no copy, or every member of a group of copies);
``--verbose`` names the distinct messages removed and the copies missed.  Needs ``pip install
mail-deduplicate imapdedup`` and Debian's dovecot-imapd.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support import corpus, dovecot  # noqa: E402
from support import mailboxes as mb  # noqa: E402

KEYWORD = "Dup"


def timed(command: list[str], env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=3600)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{command[0]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return elapsed


@dataclass
class Score:
    """What one run removed, against the mailbox's ground truth."""

    found: int = 0              # exact copies removed (or their original, the copy left)
    missed: list[str] = field(default_factory=list)     # exact copies left with it
    near: int = 0               # other members of groups removed (forwards, resends)
    distinct: list[str] = field(default_factory=list)   # messages now gone for good

    def row(self) -> tuple[int, int, int, int]:
        return self.found, len(self.missed), self.near, len(self.distinct)


def _groups(filled: mb.Filled) -> dict[str, set[str]]:
    """The ground truth's groups of copies (each message with its copies, near ones too,
    and chains such as a re-fetched copy of a corpus resend), by their first name."""
    parent = {name: name for name in filled.messages}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    for copy, original in (filled.copies | filled.near_copies).items():
        parent[root(copy)] = root(original)
    groups: dict[str, set[str]] = {}
    for name in sorted(filled.messages):
        groups.setdefault(root(name), set()).add(name)
    return groups


def score(filled: mb.Filled, removed: set[str]) -> Score:
    """The exact copies a run found and missed, the near copies it took and the distinct
    messages it removed (a group with nothing of it left: one message counted)."""
    result = Score()
    for members in _groups(filled).values():
        gone = members & removed
        if gone == members:         # nothing of it is left
            result.distinct.append(min(members))
            gone = set()
        found = 0
        for copy in sorted(members & set(filled.copies)):
            if copy in gone or filled.copies[copy] in gone:     # one of the two went
                found += 1
            else:
                result.missed.append(copy)
        result.found += found
        result.near += len(gone) - found    # the rest of what went: near copies
    return result


def maildir_names(root: Path) -> set[str]:
    return {path.name.split(".")[0] for path in (root / "cur").iterdir()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000,
                        help="corpus messages (default %(default)s); copies are added")
    parser.add_argument("--runs", type=int, default=5,
                        help="rounds of every tool (default %(default)s): medians")
    parser.add_argument("--verbose", action="store_true",
                        help="name the distinct messages removed and the copies missed")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="dupfilter-bench-dedupe-"))
    os.chmod(scratch, 0o755)
    seconds: dict[tuple[str, str], list[float]] = {}
    scores: dict[tuple[str, str], Score] = {}
    runs = 0
    warm = False    # the first round warms caches (bytecode, the server's, the disk's)
    python_env = {name: value for name, value in os.environ.items()
                  if name != "PYTHONDONTWRITEBYTECODE"} | {
        "PYTHONPYCACHEPREFIX": str(scratch / "pycache")}
    try:
        files = corpus.message_files(corpus.unpack(scratch / "corpus"))
        filled = mb.crafted_mailbox(files, args.messages)
        total = len(filled.messages)
        forwards = len(filled.near_copies) - len(filled.resends)
        print(f"{total} messages: {len(filled.copies)} exact copies, {forwards} forwards, "
              f"{len(filled.resends)} copies the corpus holds under other Message-IDs, "
              f"{len(filled.must_stay)} templated notices; {args.runs} rounds")

        def record(tool: str, source: str, elapsed: float, removed: set[str]) -> None:
            if warm:
                seconds.setdefault((tool, source), []).append(elapsed)
            result = score(filled, removed)
            if scores.setdefault((tool, source), result) != result:
                print(f"  {tool} on {source}: another result this round: {result.row()}")

        def on_maildir(tool: str, command: Callable[[Path], list[str]]) -> None:
            nonlocal runs
            runs += 1
            root = scratch / f"Maildir-{runs}"
            mb.fill_maildir(root, filled.messages)
            elapsed = timed(command(root), python_env)
            record(tool, "Maildir", elapsed, set(filled.messages) - maildir_names(root))
            shutil.rmtree(root)

        dupfilter = ("dupfilter-db dedupe", lambda root: [
            "dupfilter-db", "dedupe", "--action", "delete", "--yes", "--undo-log",
            str(root.parent / f"{root.name}.undo"), str(root)])
        near = ("dupfilter-db --near", lambda root: [
            "dupfilter-db", "dedupe", "--near", "--action", "delete", "--yes", "--undo-log",
            str(root.parent / f"{root.name}.undo"), str(root)])
        mdedup = ("mdedup", lambda root: ["mdedup", "-s", "select-all-but-one", "-a",
                                          "delete-selected", str(root)])
        for round_number in range(-1, args.runs):
            warm = round_number >= 0
            order = [dupfilter, near, mdedup] if round_number % 2 == 0 else \
                [mdedup, near, dupfilter]
            for tool, command in order:
                on_maildir(tool, command)

        server = dovecot.start(scratch / "dovecot")
        names = {hashlib.sha256(raw.replace(b"\n", b"\r\n")).hexdigest(): name
                 for name, raw in filled.messages.items()}
        env = dict(python_env, DUPFILTER_IMAP_PASSWORD=dovecot.PASSWORD,
                   SSL_CERT_FILE=str(server.ca_file))
        folder = "Bench"
        dovecot.fill(server, folder, filled.messages)
        try:
            def on_imap(tool: str, command: Callable[[str], list[str]]) -> None:
                nonlocal runs
                runs += 1
                dovecot.clear_keyword(server, folder, KEYWORD)
                elapsed = timed(command(f"{runs}"), env)
                tagged = {names[hashlib.sha256(raw).hexdigest()] for _uid, raw, flags
                          in dovecot.folder_messages(server, folder)
                          if KEYWORD.encode() in flags}
                record(tool, "IMAP", elapsed, tagged)

            ours = ("dupfilter-db dedupe", lambda run: [
                "dupfilter-db", "dedupe", "--action", "flag", "--keyword", KEYWORD,
                "--rate", "0", "--undo-log", str(scratch / f"imap-{run}.undo"),
                server.url(folder)])
            theirs = ("imapdedup", lambda _run: [
                "imapdedup", "-s", "127.0.0.1", "-p", str(server.imaps_port), "-x", "-u",
                dovecot.USER, "-w", dovecot.PASSWORD, "-t", KEYWORD, folder])
            for round_number in range(-1, args.runs):
                warm = round_number >= 0
                for tool, command in [ours, theirs] if round_number % 2 == 0 else \
                        [theirs, ours]:
                    on_imap(tool, command)
        finally:
            server.stop()
        peer = {"Maildir": statistics.median(seconds["mdedup", "Maildir"]),
                "IMAP": statistics.median(seconds["imapdedup", "IMAP"])}
        print(f"\n{'tool':<22} {'source':<8} {'median s':>8} {'vs peer':>7} {'msg/s':>7} "
              f"{'found':>6} {'missed':>6} {'near':>5} {'distinct removed':>16}")
        for (tool, source), times in seconds.items():
            median = statistics.median(times)
            found, missed, near_taken, distinct = scores[tool, source].row()
            print(f"{tool:<22} {source:<8} {median:8.2f} {median / peer[source]:7.2f} "
                  f"{total / median:7.0f} {found:6d} {missed:6d} {near_taken:5d} "
                  f"{distinct:16d}")
        if args.verbose:
            for (tool, source), result in scores.items():
                if result.distinct or result.missed:
                    print(f"\n{tool} on {source}: distinct removed "
                          f"{' '.join(result.distinct) or '-'}; copies missed "
                          f"{' '.join(result.missed) or '-'}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
