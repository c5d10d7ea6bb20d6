"""``dupfilter-db dedupe`` beside mdedup (Maildir) and IMAPdedup (Dovecot IMAP) on corpus mail
plus known copies (re-fetched, quoted-printable and base64 re-encodings, forwards, two
templated notices that are not copies).

    python bench/dedupe.py [--messages N]

Each tool really acts, on a scratch copy of its own: on the Maildir, dupfilter deletes
(``--action delete --yes``) and mdedup deletes its selection (``-s select-all-but-one -a
delete-selected``); on IMAP both tag the copies with the keyword ``Dup`` (dupfilter ``--action
flag --keyword Dup``, IMAPdedup ``-t Dup``).  Printed per tool: messages a second, the known
copies it found and missed, and the distinct messages it would have removed (a message with
no copy, or every member of a group of copies).  Needs ``pip install mail-deduplicate
imapdedup`` and Debian's dovecot-imapd.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
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


def score(filled: mb.Filled, removed: set[str]) -> tuple[int, int, int, int]:
    """(exact copies found, exact copies missed, near copies found, distinct removed)."""
    groups: dict[str, set[str]] = {name: {name} for name in filled.messages
                                   if name not in filled.copies
                                   and name not in filled.near_copies}
    for copy, original in (filled.copies | filled.near_copies).items():
        groups[original].add(copy)
    found = missed = near = distinct = 0
    for original, members in groups.items():
        gone = members & removed
        if gone == members:         # nothing of it is left
            distinct += 1
            gone = set()
        exact = {m for m in members if m in filled.copies or m == original}
        exact_gone = len(gone & exact) if len(exact) > 1 else 0
        found += min(exact_gone, len(exact) - 1)
        missed += len(exact) - 1 - min(exact_gone, len(exact) - 1)
        near += len(gone & set(filled.near_copies))
    return found, missed, near, distinct


def maildir_names(root: Path) -> set[str]:
    return {path.name.split(".")[0] for path in (root / "cur").iterdir()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000,
                        help="corpus messages (default %(default)s); copies are added")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="dupfilter-bench-dedupe-"))
    os.chmod(scratch, 0o755)
    rows: list[tuple[str, str, float, set[str]]] = []
    try:
        files = corpus.message_files(corpus.unpack(scratch / "corpus"))
        filled = mb.crafted_mailbox(files, args.messages)
        total = len(filled.messages)
        print(f"{total} messages: {len(filled.copies)} exact copies, "
              f"{len(filled.near_copies)} forwards, {len(filled.must_stay)} templated notices")

        def on_maildir(tool: str, command: Callable[[Path], list[str]]) -> None:
            root = scratch / f"Maildir-{len(rows)}"
            mb.fill_maildir(root, filled.messages)
            elapsed = timed(command(root))
            rows.append((tool, "Maildir", elapsed, set(filled.messages) - maildir_names(root)))

        on_maildir("dupfilter-db dedupe", lambda root: [
            "dupfilter-db", "dedupe", "--action", "delete", "--yes", "--undo-log",
            str(root.parent / f"{root.name}.undo"), str(root)])
        on_maildir("dupfilter-db --near", lambda root: [
            "dupfilter-db", "dedupe", "--near", "--action", "delete", "--yes", "--undo-log",
            str(root.parent / f"{root.name}.undo"), str(root)])
        on_maildir("mdedup", lambda root: ["mdedup", "-s", "select-all-but-one", "-a",
                                           "delete-selected", str(root)])

        server = dovecot.start(scratch / "dovecot")
        names = {hashlib.sha256(raw.replace(b"\n", b"\r\n")).hexdigest(): name
                 for name, raw in filled.messages.items()}
        env = dict(os.environ, DUPFILTER_IMAP_PASSWORD=dovecot.PASSWORD,
                   SSL_CERT_FILE=str(server.ca_file))
        try:
            def on_imap(tool: str, command: Callable[[str], list[str]]) -> None:
                folder = f"Bench{len(rows)}"
                dovecot.fill(server, folder, filled.messages)
                elapsed = timed(command(folder), env)
                tagged = {names[hashlib.sha256(raw).hexdigest()] for _uid, raw, flags
                          in dovecot.folder_messages(server, folder)
                          if KEYWORD.encode() in flags}
                rows.append((tool, "IMAP", elapsed, tagged))

            on_imap("dupfilter-db dedupe", lambda folder: [
                "dupfilter-db", "dedupe", "--action", "flag", "--keyword", KEYWORD,
                "--rate", "0", "--undo-log", str(scratch / f"{folder}.undo"),
                server.url(folder)])
            on_imap("imapdedup", lambda folder: [
                "imapdedup", "-s", "127.0.0.1", "-p", str(server.imaps_port), "-x", "-u",
                dovecot.USER, "-w", dovecot.PASSWORD, "-t", KEYWORD, folder])
        finally:
            server.stop()
        print(f"\n{'tool':<22} {'source':<8} {'seconds':>8} {'msg/s':>7} {'found':>6} "
              f"{'missed':>6} {'fwds':>5} {'distinct removed':>16}")
        for tool, source, elapsed, removed in rows:
            found, missed, near, distinct = score(filled, removed)
            print(f"{tool:<22} {source:<8} {elapsed:8.2f} {total / elapsed:7.0f} {found:6d} "
                  f"{missed:6d} {near:5d} {distinct:16d}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
