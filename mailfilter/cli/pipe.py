"""``dupfilter``: the pipe filter (procmail, maildrop, Sieve's extprograms).

One message on stdin.  ``--tag`` writes it to stdout with one ``X-Dupfilter:`` header (the
disposition's, :func:`~mailfilter.decision.plan` with the pipe's one action: tag);
``--check`` answers by exit status.  It never loses the message: on any failure it passes
the message through unchecked (exit 0), and exits 75 only when even that is impossible.
Its imports are kept to what one message needs: it starts once per delivery.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from mailfilter import __version__
from mailfilter.cli import settings_from
from mailfilter.config import ConfigError
from mailfilter.decision import PIPE, plan
from mailfilter.detector import Verdict
from mailfilter.engine import Engine
from mailfilter.headers import pass_through, tag_message
from mailfilter.store import StoreError

EX_TEMPFAIL = 75


def _filter_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dupfilter",
        description="Check one message (stdin) against the store of seen mail. "
                    "With --tag, write it to stdout with an X-Dupfilter: header "
                    "(any incoming one removed); with --check, answer by exit status.",
        epilog="procmail:  :0 fw  | dupfilter --tag     then  :0  * ^X-Dupfilter: (near-)?"
               "duplicate  duplicates/      or  :0 HB  * ? dupfilter --check  duplicates/. "
               "A filter that fails passes the message through unchecked, without any "
               "X-Dupfilter: header (exit 0); "
               "exit 75 only if even that is impossible.")
    parser.add_argument("--version", action="version", version=f"dupfilter {__version__}")
    parser.add_argument("--db", metavar="DIR|URL",
                        help="store: an LMDB folder or a redis:// URL "
                             "(default: [store] path, else $XDG_STATE_HOME/dupfilter)")
    parser.add_argument("--config", metavar="FILE", help="TOML settings file")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--tag", action="store_true",
                      help="write the message to stdout with one X-Dupfilter: header")
    mode.add_argument("--check", action="store_true",
                      help="exit 0 for duplicate or near-duplicate, 1 for unique or error")
    parser.add_argument("--no-record", action="store_true",
                        help="check without remembering the message")
    parser.add_argument("--json", action="store_true",
                        help="print the verdict as one JSON object (stdout; stderr with --tag)")
    parser.add_argument("--recipient", action="append", default=[], metavar="ADDR",
                        help="envelope recipient for per-recipient scope (repeatable)")
    return parser


def _say(text: str, stream: object = None) -> None:
    """One line on stderr (procmail's log), or on ``stream``; never raises.

    A log that cannot be written (a full disk, a closed descriptor) must not keep the
    message from coming out: a failing stream is swapped for /dev/null.
    """
    target = sys.stderr if stream is None else stream
    if target is None:      # no stderr at all: print() would write to stdout instead
        return
    try:
        print(text, file=target, flush=True)
    except (OSError, ValueError):
        if target is sys.stderr:
            try:
                sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - for the process's life
            except OSError:
                pass


def main(argv: Sequence[str] | None = None) -> int:
    """``dupfilter``: never loses the message — on any failure it passes it through."""
    parser = _filter_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as usage:
        words = sys.argv[1:] if argv is None else list(argv)
        if usage.code in (0, None) or "--tag" not in words:
            raise
        # A bad flag (a typo in .procmailrc, an option an upgrade removed): argparse has
        # said why; the message still goes through.
        args = argparse.Namespace(tag=True, check=False, json=False, usage_error=True)
    try:
        raw = sys.stdin.buffer.read()
    except OSError as error:
        _say(f"dupfilter: cannot read the message: {error}")
        return EX_TEMPFAIL if args.tag else 1
    verdict: Verdict | None = None
    try:
        if getattr(args, "usage_error", False):
            _say("dupfilter: bad command line; message passed through unchecked")
        else:
            settings = settings_from(args)
            with Engine(settings) as engine:
                verdict = engine.check(raw, args.recipient, record=not args.no_record)
            if verdict.defects:
                _say(f"dupfilter: note: {verdict.message_id or 'message without Message-ID'}: "
                     f"{'; '.join(verdict.defects[:4])}")
    except (ConfigError, StoreError) as error:
        _say(f"dupfilter: {error}; message passed through unchecked")
    except MemoryError:
        _say("dupfilter: out of memory; message passed through unchecked")
    except Exception as error:  # noqa: BLE001 - never lose mail over a bug
        _say(f"dupfilter: internal error ({type(error).__name__}: {error}); "
             "message passed through unchecked")
    except BaseException as error:  # KeyboardInterrupt, SystemExit: the message first
        if not args.tag:
            raise
        _say(f"dupfilter: interrupted ({type(error).__name__}); "
             "message passed through unchecked")
    if args.json and verdict is not None:
        try:
            line = json.dumps(verdict.as_dict())
        except Exception as error:  # noqa: BLE001
            line = json.dumps({"error": f"{type(error).__name__}: {error}"})
        _say(line, sys.stderr if args.tag else sys.stdout)
    if args.tag:
        output = None
        if verdict is not None:
            try:
                header = plan(verdict, None, args.recipient, PIPE).header
                output = tag_message(raw, header or "")
            except Exception as error:  # noqa: BLE001
                _say(f"dupfilter: cannot add the header ({error}); passing through")
        if output is None:
            # Unchecked: passed on without our header, and without any that came in (a
            # forged "duplicate" would be filed away) — or unchanged if even that fails.
            output, failure = pass_through(raw)
            if failure is not None:
                _say(f"dupfilter: cannot remove the incoming X-Dupfilter header "
                     f"({type(failure).__name__}: {failure}); passed through unchanged")
        try:
            sys.stdout.buffer.write(output)
            sys.stdout.buffer.flush()
        except OSError as error:
            _say(f"dupfilter: cannot write the message: {error}")
            return EX_TEMPFAIL
        return 0
    if args.check:
        return 0 if verdict is not None and verdict.is_duplicate else 1
    return 0 if verdict is not None else 1
