"""``dupfilter``: the pipe filter (procmail, maildrop, Sieve's extprograms).

One message on stdin.  ``--tag`` (the default mode) writes it to stdout with one
``X-Dupfilter:`` header (the disposition's, :func:`~mailfilter.decision.plan` with the pipe's
one action: tag); ``--check`` answers by exit status and writes nothing (but ``--json``).
It never loses the message: whatever the command line, in the tag mode the message comes
out whole — checked and tagged, or on any failure (a bad flag, no store, a bug) passed
through unchecked (exit 0) — and it exits 75 only when even that is impossible.
Its imports are kept to what one message needs: it starts once per delivery.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from collections.abc import Sequence

from mailfilter import __version__
from mailfilter.cli import settings_from
from mailfilter.config import ConfigError, Refused, check_store_location
from mailfilter.decision import PIPE, PIPE_CHECK, Disposition, FrontEnd, plan, plan_error
from mailfilter.detector import Verdict
from mailfilter.engine import Analysis, Decision, Engine
from mailfilter.headers import pass_through, tag_message
from mailfilter.store import StoreError
from mailfilter.values import replace

EX_TEMPFAIL = 75


def _filter_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dupfilter",
        description="Check one message (stdin) against the store of seen mail. "
                    "With --tag (the default), write it to stdout with an X-Dupfilter: "
                    "header (any incoming one removed); with --check, answer by exit "
                    "status and write nothing.",
        epilog="procmail:  :0 fw  | dupfilter --tag     then  :0  * ^X-Dupfilter: (near-)?"
               "duplicate  duplicates/   (docs/procmail.md also has the --check recipe). "
               "A filter that fails, or is given a bad flag, passes the message through "
               "unchecked, without any X-Dupfilter: header (exit 0); exit 75 only if even "
               "that is impossible.")
    parser.add_argument("--version", action="version", version=f"dupfilter {__version__}")
    parser.add_argument("--db", metavar="DIR|URL",
                        help="store: an LMDB folder or a redis:// URL "
                             "(default: [store] path, else $XDG_STATE_HOME/dupfilter)")
    parser.add_argument("--config", metavar="FILE", help="TOML settings file")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--tag", action="store_true",
                      help="write the message to stdout with one X-Dupfilter: header "
                           "(the default)")
    mode.add_argument("--check", action="store_true",
                      help="exit 0 for duplicate or near-duplicate, 1 for unique or error; "
                           "writes nothing (for a condition, never for a filter)")
    parser.add_argument("--no-record", action="store_true",
                        help="check without remembering the message")
    parser.add_argument("--json", action="store_true",
                        help="print the verdict as one JSON object (stdout with --check; "
                             "stderr when tagging)")
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


def _named(words: Sequence[str], flag: str) -> bool:
    """``flag`` among ``words`` as argparse reads it: whole, with ``=VALUE``, or shortened
    (argparse's abbreviations), before any ``--``."""
    for word in words:
        if word == "--":
            return False
        name = word.split("=", 1)[0]
        if len(name) > 2 and name.startswith("--") and flag.startswith(name):
            return True
    return False


def _is_terminal(stream: object) -> bool:
    try:
        return bool(stream.isatty())   # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return False


def _goes_nowhere(stream: object) -> bool:
    """True when ``stream`` is /dev/null: nobody reads what is written there (procmail
    gives a ``* ?`` condition's program /dev/null as its stdout)."""
    try:
        mode = os.fstat(stream.fileno())  # type: ignore[attr-defined]
        null = os.stat(os.devnull)
    except (AttributeError, OSError, ValueError):
        return False
    return stat.S_ISCHR(mode.st_mode) and mode.st_rdev == null.st_rdev


def _check_values(args: argparse.Namespace) -> None:
    """Values that cannot be what the user meant: a :class:`ConfigError` naming the flag,
    the value, the expected form and an example (the message is then passed through)."""
    if args.db is not None:
        if not args.db:
            raise ConfigError("--db '' names no store; expected an LMDB folder or a "
                              "redis:// URL, e.g. --db /home/ann/.local/state/dupfilter")
        try:
            check_store_location(args.db)
        except Refused as refused:
            raise ConfigError(f"--db {refused}") from None
    for address in args.recipient:
        if not address.strip("<> \t") or not address.isprintable():
            raise ConfigError(f"--recipient {address!r} is no address; expected one "
                              "envelope recipient, e.g. --recipient ann@example.org")


def main(argv: Sequence[str] | None = None) -> int:
    """``dupfilter``: never loses the message — on any failure it passes it through.

    The mode is ``--tag`` unless ``--check`` is given.  A bad command line is said on
    stderr (procmail's log) and then treated as a failure of that mode: ``--check`` exits
    1 (not a duplicate), the tag mode passes the message through unchecked (exit 0).
    """
    parser = _filter_parser()
    words = sys.argv[1:] if argv is None else list(argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as usage:
        if usage.code in (0, None) or _is_terminal(sys.stdin):
            raise           # --help, --version; or a person at a terminal: no message
        # A bad flag (a typo in .procmailrc, an option an upgrade removed): argparse has
        # said why; the message still goes through, or the check says "not a duplicate".
        check = _named(words, "--check") and not _named(words, "--tag")
        args = argparse.Namespace(tag=not check, check=check, json=False,
                                  usage_error=True, recipient=[], no_record=True,
                                  implicit=not _named(words, "--tag"))
    else:
        args.implicit = not (args.tag or args.check)
        args.tag = not args.check
    if args.tag and (args.implicit or getattr(args, "usage_error", False)) \
            and _goes_nowhere(sys.stdout):
        # Not told to tag, and stdout is /dev/null: a procmail condition (`* ? dupfilter`)
        # that forgot --check.  Tagging would answer "duplicate" (exit 0) for every message.
        _drain_stdin()
        _say("dupfilter: stdout is /dev/null and --check is not given (in a condition, "
             "write `* ? dupfilter --check`); message not checked (exit 1: not a duplicate)")
        return 1
    try:
        raw = sys.stdin.buffer.read()
    except OSError as error:
        _say(f"dupfilter: cannot read the message: {error}")
        return EX_TEMPFAIL if args.tag else 1
    front_end = PIPE if args.tag else PIPE_CHECK
    decision: Decision[Disposition] | None = None
    engine: Engine | None = None
    try:
        if getattr(args, "usage_error", False):
            _say("dupfilter: bad command line; " + (
                "message not checked (exit 1: not a duplicate)" if args.check
                else "message passed through unchecked"))
        else:
            _check_values(args)
            settings = settings_from(args)
            recipients = list(args.recipient)

            def planned(verdict: Verdict) -> Disposition:
                disposition = plan(verdict, None, recipients, front_end)
                return replace(disposition, record=False) if args.no_record else disposition
            engine = Engine(settings)
            deadline = settings.analysis.deadline
            analysis = _analysed_within(engine, raw, deadline)
            if analysis is not None:
                decision = engine.process(analysis, recipients, planned)
            else:
                # Past the deadline: judged by its Message-ID when that was seen, else not
                # checked (as the daemons do, mailfilter/workers.py).
                decision = engine.process_known(raw, recipients, planned)
                _say(f"dupfilter: analysis took longer than {deadline:g} s ([analysis] "
                     "deadline); " + ("judged by its Message-ID alone" if decision is not None
                                      else _unchecked(args)))
            if decision is not None:
                verdict = decision.verdict
                if decision.record_error:
                    # Still checked (a read needs no space), so still tagged; not remembered.
                    reason = decision.record_error.removeprefix(f"{StoreError.__name__}: ")
                    _say(f"dupfilter: {reason}; message checked but not remembered")
                if verdict.defects:
                    named = verdict.message_id or "message without Message-ID"
                    _say(f"dupfilter: note: {named}: {'; '.join(verdict.defects[:4])}")
    except (ConfigError, StoreError) as error:
        _say(f"dupfilter: {error}; {_unchecked(args)}")
    except MemoryError:
        _say(f"dupfilter: out of memory; {_unchecked(args)}")
    except Exception as error:  # noqa: BLE001 - never lose mail over a bug
        _say(f"dupfilter: internal error ({type(error).__name__}: {error}); "
             f"{_unchecked(args)}")
    except BaseException as error:  # KeyboardInterrupt, SystemExit: the message first
        if not args.tag:
            raise
        _say(f"dupfilter: interrupted ({type(error).__name__}); "
             "message passed through unchecked")
    status = _act(args, raw, decision, front_end)
    if engine is not None:
        try:
            if status == EX_TEMPFAIL and decision is not None and decision.recording:
                # Not passed on: procmail keeps the message and retries; its retry is no copy.
                engine.undo(decision.recording)
            engine.close()
        except Exception as error:  # noqa: BLE001 - the message went where status says
            _say(f"dupfilter: closing the store: {type(error).__name__}: {error}")
    return status


class _PastDeadline(BaseException):
    """Raised by the pipe's timer in its analysis: a BaseException, so that no step's
    ``except Exception`` (a broken HTML part read as text) takes it for its own error."""


def _expired(signal_number: int, frame: object) -> None:
    raise _PastDeadline


def _analysed_within(engine: Engine, raw: bytes, seconds: float) -> Analysis | None:
    """The analysis of ``raw``, or None when it takes longer than ``seconds`` (wall
    clock: the timer interrupts it between two steps of the interpreter, so one call
    into C, linear in the message, ends first).  The pipe runs one message in one thread:
    a timer signal is its work budget, where the daemons use worker processes."""
    # (_signal, not signal: importing signal.py costs the filter's start 1.6 ms of enums)
    import _signal
    try:
        previous = _signal.signal(_signal.SIGALRM, _expired)
    except ValueError:          # main() called on another thread than the main one
        return engine.analyse(raw)
    try:
        _signal.setitimer(_signal.ITIMER_REAL, seconds)
        try:
            return engine.analyse(raw)
        finally:
            _signal.setitimer(_signal.ITIMER_REAL, 0)
    except _PastDeadline:
        return None
    finally:
        _signal.signal(_signal.SIGALRM, previous)


def _act(args: argparse.Namespace, raw: bytes, decision: Decision[Disposition] | None,
         front_end: FrontEnd) -> int:
    """Carry out the disposition (or, unchecked, the pipe's error one): the JSON line, the
    message on stdout, the exit status."""
    verdict = decision.verdict if decision is not None else None
    if args.json and verdict is not None:
        import json
        try:
            line = json.dumps(verdict.as_dict())
        except Exception as error:  # noqa: BLE001
            line = json.dumps({"error": f"{type(error).__name__}: {error}"})
        _say(line, sys.stderr if args.tag else sys.stdout)
    disposition = decision.plan if decision is not None else plan_error("accept", front_end)
    if args.tag:
        output = None
        if decision is not None:
            try:
                output = tag_message(raw, disposition.header or "")
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
    assert disposition.exit_status is not None
    return disposition.exit_status


def _unchecked(args: argparse.Namespace) -> str:
    """What happens to a message that could not be checked, for the stderr line."""
    return "message passed through unchecked" if args.tag else \
        "message not checked (exit 1: not a duplicate)"


def _drain_stdin() -> None:
    """Read the message and drop it (the writer, procmail, must not fail on a closed
    pipe); never raises."""
    try:
        while sys.stdin.buffer.read(1 << 16):
            pass
    except (OSError, ValueError, AttributeError):
        pass
