"""``dupfilter-db dedupe`` beside mdedup (Maildir) and IMAPdedup (Dovecot IMAP) on the corpus
plus known copies: messages a second and how many copies each reports.

    python bench/dedupe.py [--messages N]

Needs the peers in the environment (``pip install mail-deduplicate imapdedup``) and Debian's
dovecot-imapd.  Every tool only reports (dry run); nothing is changed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support import corpus, dovecot  # noqa: E402
from support import mailboxes as mb  # noqa: E402


def timed(command: list[str], env: dict[str, str] | None = None) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=3600)
    elapsed = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise RuntimeError(f"{command[0]} failed: {done.stderr[-2000:]}")
    return elapsed, done.stdout + done.stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000,
                        help="corpus messages (default %(default)s); copies are added")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="dupfilter-bench-dedupe-"))
    os.chmod(scratch, 0o755)
    try:
        files = corpus.message_files(corpus.unpack(scratch / "corpus"))
        filled = mb.crafted_mailbox(files, args.messages)
        total, copies = len(filled.messages), len(filled.copies)
        print(f"{total} messages, {copies} known exact copies, "
              f"{len(filled.near_copies)} forwards, {len(filled.must_stay)} notices")
        maildir = scratch / "Maildir"
        mb.fill_maildir(maildir, filled.messages)
        rows = []
        elapsed, out = timed(["dupfilter-db", "dedupe", "--json", str(maildir)])
        found = json.loads(out.strip().splitlines()[-1])["summary"]["copies"]
        rows.append(("dupfilter-db dedupe", "Maildir", elapsed, found))
        elapsed, out = timed(["mdedup", "--dry-run", "-s", "select-all-but-one", "-a",
                              "delete-selected", str(maildir)])
        match = re.search(r"Selected\s*│\s*(\d+)", out)
        rows.append(("mdedup", "Maildir", elapsed, int(match[1]) if match else -1))

        server = dovecot.start(scratch / "dovecot")
        try:
            dovecot.fill(server, "INBOX", filled.messages)
            env = dict(os.environ, DUPFILTER_IMAP_PASSWORD=dovecot.PASSWORD,
                       SSL_CERT_FILE=str(server.ca_file))
            elapsed, out = timed(["dupfilter-db", "dedupe", "--json", "--rate", "0",
                                  server.url("INBOX")], env)
            found = json.loads(out.strip().splitlines()[-1])["summary"]["copies"]
            rows.append(("dupfilter-db dedupe", "IMAP", elapsed, found))
            elapsed, out = timed(["imapdedup", "-s", "127.0.0.1", "-p",
                                  str(server.imaps_port), "-x", "-u", dovecot.USER, "-w",
                                  dovecot.PASSWORD, "-n", "INBOX"], env)
            match = re.search(r"(\d+) (?:duplicate|message)s? (?:\w+ )*(?:deleted|marked)",
                              out) or re.search(r"(\d+) duplicate", out)
            if not match:
                print(f"imapdedup said: {out.strip()[-500:]}")
            rows.append(("imapdedup", "IMAP", elapsed, int(match[1]) if match else -1))
        finally:
            server.stop()
        print(f"\n{'tool':<22} {'source':<8} {'seconds':>8} {'msg/s':>7} {'copies':>7}")
        for tool, source, elapsed, found in rows:
            print(f"{tool:<22} {source:<8} {elapsed:8.2f} {total / elapsed:7.0f} {found:7d}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
