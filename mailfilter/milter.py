"""``dupfilter-milter``: the Postfix/Sendmail milter, on pymilter (libmilter).

libmilter serves each MTA connection on a thread of its own (or of its worker pool); all
share one :class:`Engine`.  Each
message is collected (envelope, headers, a capped body), checked once at end of message and
acted on: tag, reject, tempfail, discard, quarantine or drop-recipients.  It is recorded in
the store only when it is accepted.  Any internal error answers per ``milter.on_error``
(accept or tempfail), never reject or discard.  See docs/postfix.md and docs/sendmail.md.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import socket
import stat
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import Milter

from mailfilter import __version__, metrics
from mailfilter.config import ConfigError, Settings, check_milter_settings
from mailfilter.daemon import (
    STORE_RETRY_SECONDS,
    DaemonError,
    LazyEngine,
    ThrottledWarning,
    add_daemon_arguments,
    check_privileges,
    exit_on_config_error,
    install_shutdown_handler,
    load_daemon_settings,
    log_failure,
    log_verdict,
    reload_settings,
    sd_notify,
    set_socket_permissions,
    setup_logging,
    verdict_fields,
)
from mailfilter.headers import HEADER_NAME, clean_value
from mailfilter.message import WholeBodyDigest

if TYPE_CHECKING:  # imported lazily: see main()
    from mailfilter.detector import Verdict
    from mailfilter.engine import Engine

PROGRAM = "dupfilter-milter"
# Actions we may ask of the MTA (negotiated; nothing else is requested).
ACTION_FLAGS = Milter.ADDHDRS | Milter.CHGHDRS | Milter.DELRCPT | Milter.QUARANTINE
# Header bytes kept per message (the MTA limits headers too; this bounds memory).
MAX_HEADER_BYTES = 1024 * 1024
# Seconds SIGTERM waits for messages in flight before exiting anyway.
SHUTDOWN_GRACE_SECONDS = 30.0
SWITCH_INTERVAL = 0.0005
SHUTDOWN_SIGNALS = {signal.SIGHUP, signal.SIGINT, signal.SIGTERM}
# [milter] keys that SIGHUP cannot change: the socket is open and libmilter has its timeout.
_RESTART_KEYS = ("socket", "socket_mode", "socket_group", "timeout")
_INET = re.compile(r"^inet6?:(\d+)(?:@(.*))?$")


class Runtime:
    """What all connections share: settings, logger, the engine, messages in flight."""

    def __init__(self, settings: Settings, logger: logging.Logger, *,
                 retry_seconds: float = STORE_RETRY_SECONDS) -> None:
        self.settings = settings
        self.logger = logger
        self.engines = LazyEngine(settings, logger, "milter", retry_seconds=retry_seconds)
        self._inflight = 0
        self._inflight_cond = threading.Condition()
        self.stopping = False       # set on SIGTERM: finish what is in flight, take no more
        self.recorder: Recorder | None = None   # None: record in end of message itself
        # Store failures repeat for every message while they last: said once a minute.
        self.store_warnings = ThrottledWarning(logger)

    # -- the store ------------------------------------------------------------------

    def engine(self) -> Engine | None:
        """The shared engine (None while the store cannot be opened; see LazyEngine)."""
        return self.engines.get()

    def store_records(self) -> float:
        """Records in the store, for the metrics gauge (NaN while the store is down)."""
        return self.engines.records()

    def open_engine(self) -> bool:
        """Try to open the store; log clearly when it cannot be opened."""
        return self.engines.open()

    def close(self) -> None:
        self.engines.close()

    # -- messages in flight -----------------------------------------------------------

    def begin(self) -> None:
        with self._inflight_cond:
            self._inflight += 1

    def end(self) -> None:
        with self._inflight_cond:
            self._inflight = max(0, self._inflight - 1)
            self._inflight_cond.notify_all()

    @property
    def inflight(self) -> int:
        return self._inflight

    def drain(self, timeout: float) -> bool:
        """Wait until no message is in flight (True) or ``timeout`` passed (False)."""
        with self._inflight_cond:
            return self._inflight_cond.wait_for(lambda: self._inflight == 0, timeout)


class Recorder:
    """Records accepted messages on one writer thread, many per transaction.

    LMDB syncs the disk at every commit (~1-10 ms), and writers take turns: one commit per
    message would cap the whole milter at one message per fsync.  End of message therefore
    only queues the verdict; the writer commits whatever has queued up since its last commit
    in one transaction (group commit), so throughput grows with concurrency and end of
    message never waits for the disk.  A message is remembered a few milliseconds after it
    was accepted; a later message on the same MTA connection waits for that (see
    :meth:`wait`).  The queue is bounded: when it is full, the record is skipped and logged.

    The hand-off is on the message path of every accepted message, so it uses one plain
    lock and a deque (no :class:`queue.Queue`, whose conditions are Python code), and the
    writer is woken only when it sleeps, by releasing a lock it waits on.
    """

    def __init__(self, runtime: Runtime, *, max_queue: int = 10000,
                 max_batch: int = 512) -> None:
        self.runtime = runtime
        self.max_queue = max_queue
        self.max_batch = max_batch
        self._items: deque[tuple[Verdict, int]] = deque()
        self._mutex = threading.Lock()     # guards _items, _issued, _sleeping, _closing
        self._wake = threading.Lock()      # held while the writer sleeps; released to wake
        self._wake.acquire()
        self._sleeping = False
        self._closing = False
        self._done = 0                     # tickets committed (or given up on)
        self._issued = 0
        self._committed = threading.Condition()   # read-your-writes waiters (rare)
        self._waiters = 0
        self._thread = threading.Thread(target=self._run, name="recorder", daemon=True)
        self._thread.start()

    def submit(self, verdict: Verdict) -> int | None:
        """Queue one verdict; returns its ticket, or None when the queue is full."""
        item = (verdict, int(time.time()))
        with self._mutex:
            if len(self._items) >= self.max_queue:
                return None
            self._items.append(item)
            self._issued += 1
            ticket = self._issued
            wake, self._sleeping = self._sleeping, False
        if wake:
            self._wake.release()
        return ticket

    def wait(self, ticket: int, timeout: float = 5.0) -> bool:
        """Block until ``ticket`` was committed (True) or ``timeout`` passed."""
        with self._committed:
            self._waiters += 1
            try:
                return self._committed.wait_for(lambda: self._done >= ticket, timeout)
            finally:
                self._waiters -= 1

    @property
    def pending(self) -> int:
        return self._issued - self._done

    def close(self, timeout: float = 10.0) -> None:
        """Commit what is queued, then stop the writer."""
        with self._mutex:
            self._closing = True
            wake, self._sleeping = self._sleeping, False
        if wake:
            self._wake.release()
        self._thread.join(timeout)

    def _take(self) -> tuple[list[tuple[Verdict, int]], bool]:
        """Up to ``max_batch`` queued items, sleeping until there is one (or closing)."""
        while True:
            with self._mutex:
                items = self._items
                if items:
                    count = min(len(items), self.max_batch)
                    return [items.popleft() for _ in range(count)], False
                if self._closing:
                    return [], True
                self._sleeping = True
            self._wake.acquire()

    def _run(self) -> None:
        while True:
            batch, stop = self._take()
            if stop:
                return
            self._commit(batch)
            with self._committed:
                self._done += len(batch)
                if self._waiters:
                    self._committed.notify_all()

    def _commit(self, batch: list[tuple[Verdict, int]]) -> None:
        engine = self.runtime.engine()
        if engine is None:
            self.runtime.store_warnings.warn(
                "unavailable", "store unavailable: %d accepted message(s) not recorded",
                len(batch))
            return
        try:
            engine.record_many([verdict for verdict, _ in batch],
                               max(now for _, now in batch))
            self.runtime.logger.debug("recorded %d message(s)", len(batch))
        except BaseException as error:  # delivered anyway; say so, and the writer goes on
            self.runtime.store_warnings.warn(
                "record", "cannot record %d accepted message(s): %s", len(batch), error)


@dataclass
class Plan:
    """What end-of-message will do, decided before touching the MTA."""

    action: str
    add_header: str | None = None
    drop: list[str] = field(default_factory=list)
    record: bool = False
    quarantine: str | None = None
    reply: tuple[str, str, str] | None = None
    result: int = Milter.ACCEPT
    note: str | None = None


class DupfilterMilter(Milter.Base):
    """One MTA connection.  Callbacks we do not override are skipped by negotiation."""

    runtime: Runtime  # set by serve() before the first connection

    def __init__(self) -> None:
        self._ctx = None
        self._active = False
        self._last_ticket = 0        # this connection's latest queued record
        self._reset()

    def _reset(self) -> None:
        self.sender = ""
        self.recipients: list[str] = []
        self.headers: list[bytes] = []
        self.header_bytes_kept = 0
        self.headers_capped = False
        self.ours = 0                       # incoming X-Dupfilter headers seen
        self.chunks: list[bytes] = []
        self.body_size = 0                  # bytes received (kept or not)
        self.body_kept = 0
        # Digest of the whole body, begun only once it outgrows max_body_bytes: then only
        # a prefix is fingerprinted, and the exact digest must still see all of it.
        self.whole_body: WholeBodyDigest | None = None
        self.problem: str | None = None     # an error in a no-reply callback
        self.started = time.monotonic()

    def _start_message(self) -> None:
        if not self._active:
            self._active = True
            self.runtime.begin()

    def _end_message(self) -> None:
        if self._active:
            self._active = False
            self.runtime.end()

    def negotiate(self, opts: list[int]) -> int:
        """pymilter's negotiation (skip/no-reply per callback), asking only our actions."""
        result = super().negotiate(opts)
        if result == Milter.CONTINUE:
            opts[0] = self._actions = opts[0] & ACTION_FLAGS
        return result

    # -- collecting -----------------------------------------------------------------

    @Milter.noreply
    def envfrom(self, mailfrom: str, *params: str) -> int:
        self._end_message()
        self._reset()
        self._start_message()
        self.sender = mailfrom
        return Milter.CONTINUE

    @Milter.noreply
    def envrcpt(self, to: str, *params: str) -> int:
        if len(self.recipients) < 10000:
            self.recipients.append(to)
        return Milter.CONTINUE

    def data(self) -> int:
        """Answered on purpose (not skipped, no @noreply): see docs/postfix.md.

        Postfix sends the DATA-stage macros even for a skipped DATA event, then its cleanup
        server sends the headers on the same TCP connection.  With nothing to answer, the
        milter's kernel delays its ACK (~40 ms) and Nagle on Postfix's side holds the headers
        until it comes.  A reply here carries the ACK at once.  While stopping, messages
        that have not reached DATA are refused with a 451 (the client retries later).
        On unix sockets there is no Nagle: :class:`NoDataMilter` skips DATA there.
        """
        if self.runtime.stopping:
            self.setreply("451", "4.3.2", "dupfilter is restarting, try again later")
            return Milter.TEMPFAIL
        return Milter.CONTINUE

    @Milter.noreply
    @Milter.decode("bytes")
    def header(self, name: str, value: bytes) -> int:
        try:
            if name.lower() == HEADER_NAME.lower():
                self.ours += 1
            line = name.encode("ascii", "replace") + b": " + value + b"\r\n"
            if self.header_bytes_kept + len(line) <= MAX_HEADER_BYTES:
                self.headers.append(line)
                self.header_bytes_kept += len(line)
            else:
                self.headers_capped = True
        except Exception as error:  # decided at end of message
            self.problem = self.problem or f"header: {error!r}"
        return Milter.CONTINUE

    @Milter.noreply
    def eoh(self) -> int:
        """Not skipped: libmilter refuses body chunks straight after DATA when a message
        has no header at all and the end-of-headers event was negotiated away."""
        return Milter.CONTINUE

    @Milter.noreply
    def body(self, chunk: bytes) -> int:
        try:
            self.body_size += len(chunk)
            room = self.runtime.settings.milter.max_body_bytes - self.body_kept
            if room >= len(chunk) and self.whole_body is None:
                self.chunks.append(chunk)
                self.body_kept += len(chunk)
                return Milter.CONTINUE
            if self.whole_body is None:       # the body outgrows the cap: digest it all
                self.whole_body = WholeBodyDigest()
                for kept in self.chunks:
                    self.whole_body.update(kept)
            self.whole_body.update(chunk)
            if room > 0:
                self.chunks.append(chunk[:room])
                self.body_kept += min(room, len(chunk))
        except Exception as error:  # decided at end of message
            self.problem = self.problem or f"body: {error!r}"
        return Milter.CONTINUE

    # -- deciding -------------------------------------------------------------------

    def eom(self) -> int:
        rt = self.runtime
        self.started = time.monotonic()
        queue_id = self._queue_id()
        fields: dict[str, object] = {"queue": queue_id}
        try:
            if self.problem:
                raise RuntimeError(self.problem)
            engine = rt.engine()
            if engine is None:
                return self._on_error(fields, "store unavailable")
            raw = b"".join(self.headers) + b"\r\n" + b"".join(self.chunks)
            envelope = [_bare(r) for r in self.recipients]
            if self._last_ticket and rt.recorder is not None:
                # Read your writes: the previous message of this connection is in the store.
                rt.recorder.wait(self._last_ticket, 2.0)
                self._last_ticket = 0
            verdict = engine.check(
                raw, envelope, record=False, sender=_bare(self.sender) or None,
                whole_body=None if self.whole_body is None else self.whole_body.digest())
            plan = self._plan(verdict)
            line: dict[str, object] = {**fields, "action": plan.action,
                                       **verdict_fields(verdict), **self._size_fields(),
                                       "rcpts": len(self.recipients),
                                       "dropped": len(plan.drop)}
            if plan.note:
                line["note"] = plan.note
            self._apply(plan)
            recorded = self._record(verdict, queue_id) if plan.record else "no"
        except BaseException as error:  # never a traceback to the MTA: pymilter's answer
            # to one is TEMPFAIL whatever on_error says, and PyErr_Print ends the whole
            # process on SystemExit.  (No KeyboardInterrupt here: signals are blocked in
            # libmilter's threads.)
            return self._on_error(fields, f"{type(error).__name__}: {error}")
        else:
            # Acted on and maybe recorded: from here on nothing may change the answer (a
            # 451 now would make the client's retry a duplicate of a message never sent).
            line["recorded"] = recorded
            line["ms"] = round((time.monotonic() - self.started) * 1000, 1)
            try:
                log_verdict(rt.logger, **line)
            except Exception as error:  # noqa: BLE001
                log_failure(PROGRAM, error)
            return plan.result
        finally:
            self._end_message()
            self._reset()

    def _record(self, verdict: Verdict, queue_id: str | None) -> str:
        """Remember an accepted message: queued, yes, no (allow rule), or failed."""
        if not getattr(verdict, "record_allowed", True):
            return "no"
        rt = self.runtime
        if rt.recorder is not None:
            ticket = rt.recorder.submit(verdict)
            if ticket is None:
                rt.logger.warning("queue=%s record queue full: message not recorded",
                                  queue_id)
                return "skipped"
            self._last_ticket = ticket
            return "queued"
        engine = rt.engine()
        try:
            if engine is None:
                raise RuntimeError("store unavailable")
            engine.record(verdict)
            return "yes"
        except Exception as error:  # the message is accepted anyway (its line says failed)
            rt.store_warnings.warn("record", "cannot record an accepted message (queue %s): "
                                   "%s", queue_id, error)
            return "failed"

    def _plan(self, verdict: Verdict) -> Plan:
        m = self.runtime.settings.milter
        action = m.actions.for_verdict(verdict.verdict)
        value = clean_value(verdict.header_value())
        if action in ("reject", "tempfail", "discard", "drop-recipients") \
                and verdict.is_duplicate:
            seen = {r.lower() for r in verdict.recipients_seen}
            drop = [r for r in self.recipients if _bare(r).lower() in seen]
            if verdict.all_recipients_seen or len(drop) == len(self.recipients):
                if action == "drop-recipients":
                    return Plan("discard", result=Milter.DISCARD)
            elif action in ("reject", "tempfail"):
                # Some recipients never had it (recipient scope): one reply at the end of
                # the message cannot refuse only the others (and a deferred one would be
                # deferred again at every retry), so it is tagged for everyone.
                return Plan("tag", add_header=value, record=True,
                            note="partial-duplicate-tagged")
            else:
                # Only those who had it lose their copy.  For every recipient left it is
                # new: it goes on under the `unique` action (tagged `unique`, or untagged
                # for `accept`), as dupfilter-smtpd does; a recipe that files duplicates
                # apart must not hide it from them.
                unique_action = m.actions.for_verdict("unique")
                header = (None if unique_action == "accept" else
                          clean_value("unique") if unique_action == "tag" else value)
                return Plan("drop-recipients" if drop else "tag", add_header=header,
                            drop=drop, record=True,
                            note="discard-seen-recipients" if action == "discard" else None)
        if action == "reject":
            return Plan("reject", reply=("550", "5.7.1", _reply_text(m.reject_message)),
                        result=Milter.REJECT)
        if action == "tempfail":
            return Plan("tempfail", reply=("451", "4.7.1", _reply_text(m.reject_message)),
                        result=Milter.TEMPFAIL)
        if action == "discard":
            return Plan("discard", result=Milter.DISCARD)
        if action == "accept":
            return Plan("accept", record=True)
        if action == "quarantine":
            return Plan("quarantine", add_header=value, record=True,
                        quarantine=clean_value(f"{m.quarantine_reason} ({value})"))
        return Plan("tag", add_header=value, record=True)

    def _apply(self, plan: Plan) -> None:
        if plan.result == Milter.ACCEPT:
            # Never let an X-Dupfilter from outside through: delete the last one first.
            for index in range(self.ours, 0, -1):
                self.chgheader(HEADER_NAME, index, "")
            for rcpt in plan.drop:
                self.delrcpt(rcpt)
            if plan.add_header is not None:
                self.addheader(HEADER_NAME, plan.add_header)
            if plan.quarantine is not None:
                self.quarantine(plan.quarantine)
        if plan.reply is not None:
            self.setreply(*plan.reply)

    def _on_error(self, fields: dict[str, object], why: str) -> int:
        rt = self.runtime
        mode = rt.settings.milter.on_error
        fields.update({"action": mode, "error": why})
        fields.update(self._size_fields())
        try:
            log_verdict(rt.logger, logging.WARNING, **fields)
        except Exception as error:  # noqa: BLE001 - logging must not turn into a reject
            log_failure(PROGRAM, error)
        if mode == "accept":
            # Unchecked, but still no X-Dupfilter from outside (best effort).
            try:
                for index in range(self.ours, 0, -1):
                    self.chgheader(HEADER_NAME, index, "")
            except Exception:
                pass
        if mode == "tempfail":
            try:
                self.setreply("451", "4.3.0", "dupfilter temporarily unavailable, "
                              "try again later")
            except Exception:  # plain TEMPFAIL then
                pass
            return Milter.TEMPFAIL
        return Milter.ACCEPT

    def _size_fields(self) -> dict[str, object]:
        capped = self.body_kept < self.body_size
        return {"bytes": self.header_bytes_kept + self.body_size,
                "capped": capped or self.headers_capped}

    def _queue_id(self) -> str | None:
        try:
            return self.getsymval("i") or None
        except Exception:  # no context (tests) or no macro
            return None

    # -- clean-up -------------------------------------------------------------------

    def abort(self) -> int:
        self._end_message()
        self._reset()
        return Milter.CONTINUE

    def close(self) -> int:
        self._end_message()
        self._reset()
        return Milter.CONTINUE


class NoDataMilter(DupfilterMilter):
    """The DATA event skipped: on unix sockets (no Nagle there, one round trip less per
    message) and, for measurements only, over TCP with ``--no-tcp-fixes``."""

    @Milter.nocallback
    def data(self) -> int:
        return Milter.CONTINUE


def _mode(path: str) -> int:
    try:
        return os.lstat(path).st_mode
    except OSError:
        return 0


def _bare(address: str) -> str:
    """An envelope address without angle brackets."""
    return address.strip().strip("<>").strip()


def _reply_text(text: str) -> str:
    """SMTP reply text for libmilter: one line, '%' doubled."""
    return clean_value(text).replace("%", "%%")


# ------------------------------------------------------------------------------ serving

def set_listener_nodelay(spec: str, logger: logging.Logger,
                         fds: Iterable[int] | None = None) -> int:
    """Set TCP_NODELAY on libmilter's listening socket for ``spec``; returns how many.

    libmilter does not set it; Linux copies it to every accepted connection, so the
    milter's replies (e.g. a header change followed by ACCEPT) are not held back by Nagle
    waiting for the MTA's delayed ACK (docs/postfix.md, "TCP and Nagle").
    """
    found = _INET.match(spec)
    if not found:
        return 0
    port = int(found.group(1))
    changed = 0
    for fd in fds if fds is not None else range(3, 1024):
        try:
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                continue
        except OSError:
            continue
        try:
            sock = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        try:
            if sock.family not in (socket.AF_INET, socket.AF_INET6):
                continue
            if not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
                continue
            if sock.getsockname()[1] != port:
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            changed += 1
        except OSError as error:
            logger.warning("cannot set TCP_NODELAY on the milter socket: %s", error)
        finally:
            sock.close()
    if not changed:
        logger.warning("listening socket for %s not found; TCP_NODELAY not set", spec)
    return changed


def _register(name: str, timeout: int) -> None:
    """pymilter's runmilter() up to milter.opensocket(), split so we can act in between."""
    milter = Milter.milter
    milter.set_flags(ACTION_FLAGS)
    milter.set_connect_callback(Milter.connect_callback)
    milter.set_helo_callback(lambda ctx, host: ctx.getpriv().hello(host))
    milter.set_envfrom_callback(lambda ctx, *b: ctx.getpriv().envfrom_bytes(*b))
    milter.set_envrcpt_callback(lambda ctx, *b: ctx.getpriv().envrcpt_bytes(*b))
    milter.set_header_callback(lambda ctx, f, v: ctx.getpriv().header_bytes(f, v))
    milter.set_eoh_callback(lambda ctx: ctx.getpriv().eoh())
    milter.set_body_callback(lambda ctx, chunk: ctx.getpriv().body(chunk))
    milter.set_eom_callback(lambda ctx: ctx.getpriv().eom())
    milter.set_abort_callback(lambda ctx: ctx.getpriv().abort())
    milter.set_close_callback(Milter.close_callback)
    if timeout > 0:
        milter.settimeout(timeout)
    milter.register(name, data=lambda ctx: ctx.getpriv().data(),
                    unknown=lambda ctx, cmd: ctx.getpriv().unknown(cmd),
                    negotiate=Milter.negotiate_callback)


_WARM_UP = (
    b"From: a@localhost\r\nSubject: =?iso-8859-1?q?warm-up_=E9?=\r\nMIME-Version: 1.0\r\n"
    b"Message-ID: <warm-up@localhost>\r\n"
    b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n"
    b"Content-Type: text/plain; charset=iso-8859-1\r\nContent-Transfer-Encoding: "
    b"quoted-printable\r\n\r\none two three four five six seven eight nine ten =E9l=E8ve "
    b"eleven twelve thirteen\r\n> quoted line\r\n-- \r\nsignature\r\n--b\r\n"
    b"Content-Type: text/html; charset=utf-8\r\n\r\n<p>one <b>two</b> three four five six "
    b"seven eight nine ten eleven twelve</p>\r\n--b\r\nContent-Type: application/pdf\r\n"
    b"Content-Transfer-Encoding: base64\r\n\r\n" + b"JVBERi0xLjQK" * 200 + b"\r\n--b--\r\n")


def _preload(settings: Settings) -> None:
    """Load the engine and the store backend (numpy, lmdb and their lazy imports) before
    giving up root: the Python installation may not be readable by the unprivileged user.
    For LMDB, a throwaway store is opened and removed, which runs every import it needs."""
    import copy
    import importlib
    import shutil
    import tempfile

    from mailfilter.engine import Engine
    location = settings.store.location()
    if location.startswith(("redis://", "rediss://", "unix://")):
        try:
            importlib.import_module("mailfilter.store.redis")
        except ImportError:
            pass  # reported clearly when the store is opened
        return
    scratch = tempfile.mkdtemp(prefix="dupfilter-preload-")
    try:
        trial = copy.deepcopy(settings)
        trial.store.path = os.path.join(scratch, "db")
        trial.store.map_size_mb = 1
        with Engine(trial) as engine:
            engine.check(_WARM_UP, ["warm-up@localhost"], record=True)
    except Exception:  # noqa: BLE001 - only a warm-up; the real store reports its own errors
        pass
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def serve(settings: Settings, logger: logging.Logger, *, user: str | None = None,
          allow_root: bool = False, tcp_fixes: bool = True,
          store_retry: float = STORE_RETRY_SECONDS, group_commit: bool = True,
          reload: Callable[[], Settings] | None = None) -> int:
    """Open the socket, drop privileges, run until SIGTERM; returns the exit status.

    SIGHUP calls ``reload`` for fresh settings and applies the ``[milter]`` ones and the log
    level (see :func:`apply_reload`); SIGTERM and SIGINT stop.
    """
    m = settings.milter
    spec = m.socket
    # Session threads mostly wait on sockets and need the GIL for short bursts; with the
    # default 5 ms switch interval each can wait that long behind one checking a big message.
    sys.setswitchinterval(SWITCH_INTERVAL)
    runtime = Runtime(settings, logger, retry_seconds=store_retry)
    DupfilterMilter.runtime = runtime
    tcp = spec.startswith(("inet:", "inet6:"))
    Milter.factory = DupfilterMilter if tcp and tcp_fixes else NoDataMilter
    milter = Milter.milter
    _register(PROGRAM, m.timeout)
    milter.setconn(spec)
    path = spec.split(":", 1)[1] if spec.startswith(("unix:", "local:")) else None
    if path:
        folder = os.path.dirname(path) or "."
        if not os.path.isdir(folder):
            raise DaemonError(f"socket {spec}: folder {folder} does not exist")
        old = os.umask(0o777 & ~int(m.socket_mode, 8))
        try:
            milter.opensocket(True)
        finally:
            os.umask(old)
        set_socket_permissions(path, m.socket_mode, m.socket_group, logger)
    else:
        try:
            milter.opensocket(True)
        except milter.error as error:
            raise DaemonError(f"cannot listen on {spec}: {error}") from None
        if tcp_fixes:
            set_listener_nodelay(spec, logger)
    _preload(settings)
    check_privileges(user, allow_root, logger)
    runtime.open_engine()
    if group_commit:
        runtime.recorder = Recorder(runtime)
    try:
        serving = metrics.start(settings.metrics, "milter", records=runtime.store_records)
    except (OSError, ValueError) as error:
        raise DaemonError(f"cannot serve metrics on {settings.metrics.listen}: {error}") \
            from None
    if serving:
        logger.info("metrics on http://%s/metrics", serving)
    actions = m.actions
    logger.info("%s %s listening on %s (unique=%s duplicate=%s near-duplicate=%s "
                "on_error=%s scope=%s)", PROGRAM, __version__, spec, actions.unique,
                actions.duplicate, actions.near_duplicate, m.on_error,
                settings.detector.scope)
    stop = threading.Event()
    failure: list[str] = []

    def run_libmilter() -> None:
        try:
            milter.main()
        except milter.error as error:
            failure.append(str(error))
        finally:
            stop.set()

    # libmilter runs in a thread of its own, created while the shutdown signals are blocked
    # (it and its session threads inherit that).  The main thread alone takes them, so that
    # SIGTERM reaches our handler and not libmilter's signal thread: libmilter's own stop
    # drops the sessions at once (Debian builds it with a worker pool), messages included.
    runner = threading.Thread(target=run_libmilter, name="libmilter", daemon=True)
    runner.start()

    reload_requested = threading.Event()

    def on_signal(signum: int) -> None:
        if signum == signal.SIGHUP:
            reload_requested.set()
        elif not runtime.stopping:
            runtime.stopping = True
        stop.set()

    install_shutdown_handler(on_signal, SHUTDOWN_SIGNALS)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SHUTDOWN_SIGNALS)
    sd_notify("READY=1", f"STATUS=listening on {spec}")
    while True:
        stop.wait(1.0)
        if reload_requested.is_set():
            reload_requested.clear()
            stop.clear()
            if reload is None:
                logger.warning("SIGHUP: nothing to reload")
            else:
                reload_settings(runtime.settings, reload, "milter", _RESTART_KEYS, logger)
        if runtime.stopping or failure:
            break
    signal.pthread_sigmask(signal.SIG_BLOCK, SHUTDOWN_SIGNALS)
    runtime.stopping = True
    sd_notify("STOPPING=1")
    if failure:
        logger.error("milter stopped: %s", failure[0])
    else:
        busy = runtime.inflight
        logger.info("stopping: %d message(s) in flight; new messages get 451 at DATA", busy)
        if not runtime.drain(SHUTDOWN_GRACE_SECONDS):
            logger.warning("stopping with %d message(s) still in flight after %ds",
                           runtime.inflight, SHUTDOWN_GRACE_SECONDS)
        # No milter.stop(): smfi_stop() waits for the listener's lock, which libmilter holds
        # through 5-second polls.  Nothing is in flight any more: remove the socket, leave.
        if path and stat.S_ISSOCK(_mode(path)):
            try:
                os.unlink(path)
            except OSError:
                pass
    if runtime.recorder is not None:
        runtime.recorder.close()
    runtime.close()
    logger.info("%s stopped", PROGRAM)
    return 1 if failure else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROGRAM, description="Duplicate and near-duplicate mail milter for Postfix and "
        "Sendmail.  Flags override the configuration file.")
    add_daemon_arguments(parser)
    parser.add_argument("--socket", metavar="SPEC",
                        help="inet:PORT@HOST or unix:/path (overrides milter.socket)")
    parser.add_argument("--store-retry", metavar="SECONDS", type=float,
                        default=STORE_RETRY_SECONDS,
                        help="when the store cannot be opened, try again this often "
                             "(default %(default)g; meanwhile messages get on_error)")
    parser.add_argument("--sync-record", dest="group_commit", action="store_false",
                        help="record each accepted message in its own transaction before "
                             "answering the MTA (one disk sync per message: slower)")
    parser.add_argument("--no-tcp-fixes", dest="tcp_fixes", action="store_false",
                        help="for measurements only: leave Nagle on (no TCP_NODELAY) and "
                             "skip the DATA event (about +90 ms a message over TCP)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Console script ``dupfilter-milter``."""
    # Only the main thread may take SIGTERM/SIGHUP/SIGINT (see serve()).  Block them now,
    # before numpy (imported with the engine) starts its BLAS threads: a thread that does
    # not block them would take SIGTERM's default action and kill the process outright.
    signal.pthread_sigmask(signal.SIG_BLOCK, SHUTDOWN_SIGNALS)
    args = build_parser().parse_args(argv)
    try:
        settings = load_daemon_settings(args)
        if args.socket:
            settings.milter.socket = args.socket
        check_milter_settings(settings)
        logger = setup_logging(settings.log, PROGRAM)
        if os.geteuid() == 0 and not args.user and not args.allow_root:
            raise DaemonError("refusing to run as root: pass --user NAME to switch to an "
                              "unprivileged user, or --allow-root")
        def reload() -> Settings:
            fresh = load_daemon_settings(args)
            if args.socket:
                fresh.milter.socket = args.socket
            return fresh

        status = serve(settings, logger, user=args.user, allow_root=args.allow_root,
                       tcp_fixes=args.tcp_fixes, store_retry=args.store_retry,
                       group_commit=args.group_commit, reload=reload)
    except (ConfigError, DaemonError) as error:
        return exit_on_config_error(PROGRAM, error)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    # libmilter's session threads are not Python threads: skip interpreter finalisation.
    os._exit(status)


if __name__ == "__main__":
    sys.exit(main())
