"""The ``dupfilter-db dedupe`` command's options, in the order the run uses them: what to
read, what counts as a copy, which copy stays, what happens to the others, and safety."""

from __future__ import annotations

import argparse
import sys

from mailfilter.config import Settings
from mailfilter.dedupe.act import ACTIONS, DEFAULT_TARGET, run
from mailfilter.dedupe.sources import PASSWORD_ENV


def cmd_dedupe(args: argparse.Namespace, settings: Settings) -> int:
    return run(args, settings, sys.argv)


def add_parser(commands: argparse._SubParsersAction) -> None:   # noqa: SLF001 - argparse's type
    """Register ``dedupe`` on the ``dupfilter-db`` sub-command parser."""
    sub = commands.add_parser(
        "dedupe", help="find the duplicates mailboxes already hold (Maildir, mbox, IMAP) "
        "and report, move, flag or delete them, with an undo log")
    sub.add_argument("sources", nargs="*", metavar="SOURCE",
                     help="a Maildir (with its Maildir++ sub-folders), an mbox file, or an "
                          "IMAP URL: imaps://user@host/Folder (TLS), imap://… (STARTTLS), "
                          "no folder for the whole account")
    sub.add_argument("--near", action="store_true",
                     help="also near-duplicates by the detector's rules (a templated notice "
                          "with new data stays); default: exact copies, the same Message-ID "
                          "and body")
    sub.add_argument("--across-folders", action="store_true",
                     help="a copy in another folder counts too (default: within a folder)")
    sub.add_argument("--keep", default="oldest", metavar="oldest|newest|largest|folder:NAME",
                     help="which copy stays: the oldest by Date (default), the newest, the "
                          "largest (one with attachments first), or the one in folder NAME")
    sub.add_argument("--action", choices=ACTIONS, default="report",
                     help="report (default: a table, changes nothing), move to --to, flag "
                          "(Maildir F, mbox X-Status F, IMAP \\Flagged or --keyword), delete "
                          "(IMAP: \\Deleted; Maildir and mbox: needs --yes)")
    sub.add_argument("--to", default=DEFAULT_TARGET, metavar="FOLDER",
                     help="where --action move puts copies (default %(default)s: a Maildir++ "
                          "folder, an mbox beside the source, an IMAP folder; a path with / "
                          "for a Maildir or mbox elsewhere)")
    sub.add_argument("--keyword", metavar="FLAG",
                     help="IMAP flag or keyword --action flag sets (default \\Flagged)")
    sub.add_argument("--expunge", action="store_true",
                     help="IMAP: EXPUNGE the copies marked \\Deleted (for good; needs --yes)")
    sub.add_argument("--dry-run", action="store_true",
                     help="print exactly what would be done, change nothing")
    sub.add_argument("--yes", action="store_true",
                     help="allow what cannot be undone: delete on Maildir or mbox, --expunge")
    sub.add_argument("--json", action="store_true",
                     help="one JSON object per group of copies, then a summary")
    sub.add_argument("--undo-log", metavar="FILE",
                     help="where the undo log goes (default: TIME-PID.undo.jsonl in "
                          "~/.local/state/dupfilter/dedupe/)")
    sub.add_argument("--undo", metavar="LOG",
                     help="replay an undo log backwards (put moved and flagged messages back)")
    sub.add_argument("--password-file", metavar="FILE",
                     help=f"IMAP password: the file's first line (default: ${PASSWORD_ENV})")
    sub.add_argument("--tls-ca", metavar="FILE",
                     help="CA certificates to check the IMAP server's with (default: the "
                          "system's)")
    sub.add_argument("--rate", type=float, default=100.0, metavar="N",
                     help="IMAP: at most N messages a second fetched or changed (default "
                          "%(default)s; 0: no bound)")
    sub.set_defaults(run=cmd_dedupe)
