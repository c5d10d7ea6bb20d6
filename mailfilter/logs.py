"""The daemons' logging: one ``key=value`` line per message, from a typed :class:`Outcome`.

Each front end fills one :class:`Outcome` per message; its process's :class:`OutcomeLog`
writes the line (keys in the front end's documented order, docs/postfix.md) and hands the
outcome to the observers the daemon registered (its status, decision counters, metrics).
A new field is one attribute of Outcome plus its place in the line layouts below.
Also here: where the lines go (stderr for journald, or syslog), a repeated failure said
once a minute, and a log line that cannot be written.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mailfilter.config import LogSettings
from mailfilter.names import Action
from mailfilter.store import StoreError, StoreUnavailable

if TYPE_CHECKING:
    from mailfilter.detector import Verdict

SYSLOG_SOCKET = "/dev/log"
_NEEDS_QUOTES = re.compile(r"[\s\"\\=\x00-\x1f\x7f]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


# ------------------------------------------------------------------------- the outcome

# Line layouts: the keys of each kind of line, in order.  "verdict" stands for the verdict's
# fields (verdict, score, reason, match, match_doc, seen, msgid, rcpts_seen, defects, rule),
# or ``verdict=error`` when the message could not be checked.
MILTER_LINE = ("queue", "action", "verdict", "bytes", "capped", "rcpts", "dropped", "note",
               "recorded", "ms")
MILTER_ERROR_LINE = ("queue", "action", "error", "bytes", "capped")
SMTPD_LINE = ("queue", "client", "from", "rcpts", "bytes", "verdict", "action", "dropped",
              "note", "error", "maybe_delivered", "reply", "next_hop", "queued_as",
              "recorded", "ms")
SMTPD_REFUSED_LINE = ("client", "action", "reason", "limit", "reply")
MILTER_REFUSED_LINE = ("queue", "action", "reason", "limit", "bytes", "rcpts", "reply")
# Keys left out of a line while they have no value.
_WHEN_SET = frozenset(("dropped", "note", "error", "maybe_delivered"))
# Keys whose attribute has another name.
_ATTRIBUTES = {"from": "sender", "bytes": "size", "reason": "refused_for"}


@dataclass(slots=True)
class Outcome:
    """What happened to one message: the source of its log line and of the metrics."""

    layout: tuple[str, ...]             # MILTER_LINE, SMTPD_LINE, ...
    action: Action | str | None = None
    verdict: Verdict | None = None      # None: not checked (error, refused)
    error: str | None = None            # why it could not be checked (on_error applied)
    error_kind: str | None = None       # its kind, for the metrics (see error_kind())
    store_fault: bool = False           # the error was the store's (status: store line)
    queue: str | None = None            # the MTA's queue id
    client: str | None = None
    sender: str | None = None
    rcpts: int | None = None
    size: int | None = None             # bytes received
    capped: bool | None = None          # more than the kept part of it was received
    dropped: int | None = None          # recipients dropped
    note: str | None = None             # why the action was narrowed
    maybe_delivered: bool | None = None
    reply: int | None = None            # the SMTP code the upstream got
    next_hop: str | None = None
    queued_as: str | None = None
    refused_for: str | None = None      # refused before a verdict: why ("size")
    limit: int | None = None
    recorded: str | bool | None = None
    ms: float | None = None             # time spent deciding and acting
    # Already counted in the store's decision counters, in the message's own write
    # transaction (the milter's group commit): the counting observer leaves it alone.
    counted: bool = False

    @property
    def decision(self) -> str:
        """What was done, for the counters (store.DECISIONS): see :func:`decision_of`."""
        return decision_of(self.action, self.verdict, self.refused_for)

    @property
    def level(self) -> int:
        """WARNING for errors and refusals (4xx/5xx to the upstream), else INFO."""
        failed = self.error or (self.reply is not None and self.reply >= 400)
        return logging.WARNING if failed else logging.INFO

    def fields(self) -> dict[str, Any]:
        """The log line's fields, in the layout's order."""
        out: dict[str, Any] = {}
        for key in self.layout:
            if key == "verdict":
                if self.verdict is None:
                    out["verdict"] = "error"
                else:
                    out.update(verdict_fields(self.verdict))
                continue
            value = getattr(self, _ATTRIBUTES.get(key, key))
            if value is not None or key not in _WHEN_SET:
                out[key] = value
        return out


def decision_of(action: Action | str | None, verdict: Verdict | None,
                refused_for: str | None = None) -> str:
    """What was done, for the counters (store.DECISIONS): the action, "skipped" when an
    allow rule skipped the check, "unchecked" after an error (on_error applied), "refused"
    before a verdict."""
    if action == Action.REFUSED or refused_for:
        return "refused"
    if verdict is None:
        return "unchecked"
    if verdict.skipped_by:
        return "skipped"
    return str(action or "-")


def verdict_fields(verdict: Verdict) -> dict[str, Any]:
    """The log fields of a :class:`~mailfilter.detector.Verdict` (stable keys and order)."""
    match = verdict.match
    score = verdict.score if verdict.is_duplicate else None
    if verdict.is_duplicate and score is None:
        score = 1.0
    return {
        "verdict": verdict.kind,
        "score": None if score is None else round(float(score), 4),
        "reason": verdict.measure or None,
        "match": _message_id(match.message_id) if match is not None else None,
        "match_doc": match.doc_id if match is not None else None,
        "seen": verdict.seen,
        "msgid": _message_id(verdict.message_id),
        "rcpts_seen": len(verdict.recipients_seen),
        "defects": len(verdict.defects),
        # The allow rule that skipped the check or exempted the message from recording.
        "rule": verdict.skipped_by or verdict.exempted_by,
    }


def _message_id(value: str | None) -> str | None:
    if not value:
        return None
    value = _CONTROL.sub("", value).strip()[:250]
    return f"<{value.strip('<>')}>" if value else None


# Error kinds whose counters exist from start (an alert on them needs a series at 0).
ERROR_KINDS = ("store-unavailable", "StoreError", "other")


def error_kind(error: BaseException) -> str:
    """The metrics label of an error: ``store-unavailable`` (the store is not open), else the
    exception's class name."""
    return "store-unavailable" if isinstance(error, StoreUnavailable) else type(error).__name__


def describe_error(error: BaseException) -> str:
    """The log line's ``error=``: "store unavailable", or the class and the message."""
    if isinstance(error, StoreUnavailable):
        return str(error)
    return f"{type(error).__name__}: {error}"


def failed(outcome: Outcome, error: BaseException) -> Outcome:
    """``outcome`` as a message that could not be checked because of ``error``."""
    outcome.error = describe_error(error)
    outcome.error_kind = error_kind(error)
    outcome.store_fault = isinstance(error, StoreError)
    return outcome


class OutcomeLog:
    """Where one process's message lines go: its logger, then every observer (the daemon's
    status and decision counters, the metrics).  Owned by the daemon, not the module, so
    two daemons in one process (tests) never count each other's messages."""

    def __init__(self, logger: logging.Logger,
                 observers: tuple[Callable[[Outcome], None], ...] = ()) -> None:
        self.logger = logger
        self.observers: list[Callable[[Outcome], None]] = list(observers)

    def log(self, outcome: Outcome) -> None:
        """Write the message's line and count it.  A failing observer never fails the
        message."""
        self.logger.log(outcome.level, format_fields(outcome.fields()))
        for observer in self.observers:
            try:
                observer(outcome)
            except Exception:  # noqa: BLE001, S110 - counting must not turn into an error
                pass


# ---------------------------------------------------------------------------- the format

def format_value(value: Any) -> str:
    """One value of a ``key=value`` line: ``-`` for None, short floats, quoted if needed."""
    if value is None:
        return "-"
    kind = type(value)
    if kind is int:
        return str(value)
    if kind is bool:
        return "yes" if value else "no"
    if kind is float:
        return f"{value:.4f}".rstrip("0").rstrip(".") if value == value else "nan"
    if isinstance(value, (list, tuple, set, frozenset)):
        value = ",".join(str(item) for item in value)
    text = str(value)
    if text and not _NEEDS_QUOTES.search(text):
        return text
    text = _CONTROL.sub(" ", text)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def format_fields(fields: Mapping[str, Any]) -> str:
    """``key=value key=value ...`` in the order given (the order is part of the format)."""
    return " ".join([f"{key}={format_value(value)}" for key, value in fields.items()])


# ------------------------------------------------------------------------ where it goes

def setup_logging(settings: LogSettings, name: str = "dupfilter") -> logging.Logger:
    """The daemon's logger, writing to stderr or to syslog (facility mail).

    stderr lines carry no timestamp (journald and supervisors add their own).  When syslog is
    asked for but ``/dev/log`` is missing, the logger falls back to stderr and says so.
    Calling it again replaces the handlers (tests, re-configuration).
    """
    # A LogRecord looks up the thread, the process and the caller's frame, none of which
    # these lines show: skipped (the logging HOWTO's "Optimization"), a third of the cost
    # of a message's line.
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    logging._srcfile = None
    logger = logging.getLogger(name)
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()
    level = logging.getLevelName(settings.level.upper())
    logger.setLevel(level if isinstance(level, int) else logging.INFO)
    logger.propagate = False
    problem = None
    handler: logging.Handler
    if settings.target == "syslog":
        try:
            if not os.path.exists(SYSLOG_SOCKET):
                raise FileNotFoundError(2, "no such socket")
            handler = logging.handlers.SysLogHandler(
                address=SYSLOG_SOCKET, facility=logging.handlers.SysLogHandler.LOG_MAIL)
            handler.setFormatter(logging.Formatter(f"{name}[{os.getpid()}]: %(message)s"))
        except OSError as error:
            problem = (f"syslog unavailable ({SYSLOG_SOCKET}: {error.strerror}); "
                       "logging to stderr")
            handler = _stderr_handler()
    else:
        handler = _stderr_handler()
    logger.addHandler(handler)
    if problem:
        logger.warning(problem)
    return logger


def _stderr_handler() -> logging.Handler:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    return handler


class ThrottledWarning:
    """A repeated failure (the store's disk is full, Redis is down) said once per
    ``interval`` seconds, with how many times it happened meanwhile — not once per message.
    The per-message log line still says what happened to each message."""

    def __init__(self, logger: logging.Logger, interval: float = 60.0,
                 clock: Callable[[], float] | None = None) -> None:
        self.logger = logger
        self.interval = interval
        self.clock = clock or time.monotonic
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._quiet: dict[str, int] = {}

    def warn(self, kind: str, message: str, *args: Any) -> bool:
        """Log ``message`` unless ``kind`` was logged less than ``interval`` ago."""
        now = self.clock()
        with self._lock:
            last = self._last.get(kind)
            if last is not None and now - last < self.interval:
                self._quiet[kind] = self._quiet.get(kind, 0) + 1
                return False
            self._last[kind] = now
            quiet = self._quiet.pop(kind, 0)
        suffix = f" (and {quiet} more time(s) in the last {self.interval:.0f} s)" if quiet else ""
        self.logger.warning(message + suffix, *args)
        return True


def log_failure(program: str, error: BaseException) -> None:
    """A log line could not be written (a full disk, a closed stderr): say so on stderr if
    even that works, and never raise — the message's answer stands."""
    try:
        print(f"{program}: cannot write a log line: {type(error).__name__}: {error}",
              file=sys.stderr, flush=True)
    except Exception:  # noqa: BLE001, S110
        pass
