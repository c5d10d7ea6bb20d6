"""One MTA connection of ``dupfilter-milter``: collect the message, ask the core, translate.

libmilter serves each MTA connection on a thread of its own (or of its worker pool); all
share one :class:`Runtime` and its engine.  Each message is collected (envelope, headers, a
capped body) and checked once at end of message; :func:`~mailfilter.decision.plan` decides
and this module only turns the :class:`~mailfilter.decision.Disposition` into pymilter
calls (remove and add headers, delete recipients, quarantine, set the reply).  Check, plan
and record are one unit of work on the engine's group-commit writer (``Engine.process``):
two copies delivered at once leave one record and one duplicate verdict.  Any internal
error answers per ``milter.on_error`` (accept or tempfail), never reject or discard.
"""

from __future__ import annotations

import logging
import threading
import time
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

import Milter

from mailfilter.config import Settings
from mailfilter.decision import MILTER, Disposition, plan, plan_error
from mailfilter.headers import HEADER_NAME, clean_value
from mailfilter.logs import (
    MILTER_ERROR_LINE,
    MILTER_LINE,
    MILTER_REFUSED_LINE,
    Outcome,
    OutcomeLog,
    ThrottledWarning,
    failed,
    log_failure,
)
from mailfilter.message import WholeBodyDigest
from mailfilter.names import Action
from mailfilter.service import STORE_RETRY_SECONDS, LazyEngine, process_message
from mailfilter.store import StoreUnavailable
from mailfilter.workers import AnalysisPool, OverBudget

if TYPE_CHECKING:  # imported lazily: see server.main()
    from collections.abc import Callable

    from mailfilter.detector import Verdict
    from mailfilter.engine import Analysis, Decision, Engine
    from mailfilter.recorder import Coming

PROGRAM = "dupfilter-milter"
# Actions we may ask of the MTA (negotiated; nothing else is requested).
ACTION_FLAGS = Milter.ADDHDRS | Milter.CHGHDRS | Milter.DELRCPT | Milter.QUARANTINE
# Header bytes kept per message (the MTA limits headers too; this bounds memory).
MAX_HEADER_BYTES = 1024 * 1024
# Incoming X-Dupfilter fields a message may carry: each is deleted by an edit of its own,
# and Postfix's cleanup spends longer on each edit the more there are (10,000 took it 3 s;
# 20,000 made it panic, the message tempfailed on every try).  Mail never carries more
# than one of ours: a message with more than this many is refused (554 5.7.1).
MAX_INCOMING_HEADERS = 100
# The reply to a message that arrives while the milter stops (SIGTERM): try again later.
RESTARTING_TEXT = "dupfilter is restarting, try again later"


class Runtime:
    """What all connections share: settings, logger, the engine, messages in flight."""

    def __init__(self, settings: Settings, logger: logging.Logger, *,
                 retry_seconds: float = STORE_RETRY_SECONDS, group_commit: bool = False
                 ) -> None:
        self.settings = settings
        self.logger = logger
        # Every message's line, and its observers (status, counters, metrics: serve()).
        self.outcomes = OutcomeLog(logger)
        self.engines = LazyEngine(settings, logger, "milter", retry_seconds=retry_seconds)
        # Large messages are analysed in worker processes, within a deadline.
        self.analyses = AnalysisPool(settings.fingerprint, settings.analysis)
        # Messages are checked and recorded by the engine's writer thread, many per
        # transaction (serve() asks for it); without, each in its own transaction on its
        # connection's thread.
        self.group_commit = group_commit
        self._inflight = 0
        self._inflight_cond = threading.Condition()
        self.stopping = False       # set on SIGTERM: finish what is in flight, take no more
        # Store failures repeat for every message while they last: said once a minute.
        self.store_warnings = ThrottledWarning(logger)
        # So do a broken MTA's protocol errors (see DupfilterMilter.out_of_order).
        self.protocol_warnings = ThrottledWarning(logger)

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
        """Commit the queued records, close the store, stop the analysis workers."""
        self.engines.close()
        self.analyses.close()

    def coming(self, engine: Engine) -> AbstractContextManager[Coming | None]:
        """With group commit, ``Engine.expect`` for a message about to be analysed."""
        return engine.expect() if self.group_commit else nullcontext()

    def process(self, engine: Engine, analysis: Analysis, recipients: list[str],
                sender: str | None, planned: Callable[[Verdict], Disposition],
                coming: Coming | None = None) -> tuple[Decision[Disposition], bool]:
        """:func:`~mailfilter.service.process_message`, with group commit when this
        milter uses it."""
        return process_message(engine, analysis, recipients, planned, sender=sender,
                               group_commit=self.group_commit, coming=coming)

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


class DupfilterMilter(Milter.Base):
    """One MTA connection.  Callbacks we do not override are skipped by negotiation."""

    runtime: Runtime  # set by serve() before the first connection

    def __init__(self) -> None:
        self._ctx = None
        self._active = False
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
        # Begun after SIGTERM, or refused at DATA while stopping: answered 451, unchecked
        # and unrecorded (the client retries it once the milter is back).
        self.late = False

    def _start_message(self) -> None:
        if not self._active:
            self._active = True
            self.runtime.begin()

    def _end_message(self) -> None:
        if self._active:
            self._active = False
            self.runtime.end()

    @classmethod
    def out_of_order(cls, what: str) -> int:
        """A command the MTA sent out of order (before option negotiation; the end of a
        message that had no MAIL): TEMPFAIL, a clean reply (the MTA keeps the message and
        its client retries), and one warning line, at most once a minute for each kind."""
        runtime = getattr(cls, "runtime", None)
        if runtime is not None:
            runtime.protocol_warnings.warn(
                what, "milter protocol error: %s (the MTA does not follow the milter "
                "protocol); answered tempfail", what)
        return Milter.TEMPFAIL

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
        if self.runtime.stopping:   # not taken: 451 at DATA or end of message, not in flight
            self.late = True
        else:
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
            self._end_message()         # not in flight: the drain does not wait for it
            self.late = True
            return self._restarting()
        return Milter.CONTINUE

    def _restarting(self) -> int:
        self.setreply("451", "4.3.2", RESTARTING_TEXT)
        return Milter.TEMPFAIL

    @Milter.noreply
    @Milter.decode("bytes")
    def header(self, name: str, value: bytes) -> int:
        try:
            if name.lower() == HEADER_NAME.lower():
                self.ours += 1
            line = name.encode("ascii", "replace") + b": " + value + b"\n"
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
        if self.late:               # begun while stopping (no DATA event on unix sockets)
            self._reset()
            return self._restarting()
        if not self._active:        # no MAIL since the last message ended
            self._reset()
            return self.out_of_order("end of message before MAIL")
        rt = self.runtime
        self.started = time.monotonic()
        outcome = Outcome(MILTER_LINE, queue=self._queue_id())
        try:
            if self.ours > MAX_INCOMING_HEADERS:
                return self._refuse_forged(outcome.queue)
            if self.problem:
                raise RuntimeError(self.problem)
            engine = rt.engine()
            if engine is None:
                return self._on_error(outcome, StoreUnavailable())
            raw = b"".join(self.headers) + b"\n" + b"".join(self.chunks)
            settings, recipients = rt.settings.milter, list(self.recipients)
            bare, sender = [_bare(r) for r in recipients], _bare(self.sender) or None

            def planned(verdict: Verdict) -> Disposition:
                return plan(verdict, settings, recipients, MILTER)
            with rt.coming(engine) as coming:
                try:
                    analysis = rt.analyses.analyse(
                        raw, None if self.whole_body is None else self.whole_body.digest())
                except OverBudget as error:     # judged by its Message-ID, or on_error
                    known = engine.process_known(raw, bare, planned, sender=sender)
                    if known is None:
                        return self._on_error(outcome, error)
                    decision = known
                else:
                    decision, outcome.counted = rt.process(engine, analysis, bare, sender,
                                                           planned, coming)
            verdict, disposition = decision.verdict, decision.plan
            outcome.action, outcome.verdict = disposition.action, verdict
            outcome.size, outcome.capped = self._size()
            outcome.rcpts, outcome.dropped = len(self.recipients), len(disposition.drop)
            outcome.note = disposition.note
            result = self._apply(disposition)
            recorded = "yes" if decision.recording is not None else \
                "failed" if decision.record_error else "no"
            if decision.recording is not None:
                rt.logger.debug("recorded 1 message(s) (queue %s)", outcome.queue)
            if decision.record_error:
                rt.store_warnings.warn("record", "cannot record an accepted message (queue "
                                       "%s): %s", outcome.queue, decision.record_error)
        except BaseException as error:  # never a traceback to the MTA: pymilter's answer
            # to one is TEMPFAIL whatever on_error says, and PyErr_Print ends the whole
            # process on SystemExit.  (No KeyboardInterrupt here: signals are blocked in
            # libmilter's threads.)
            return self._on_error(outcome, error)
        else:
            # Acted on and maybe recorded: from here on nothing may change the answer (a
            # 451 now would make the client's retry a duplicate of a message never sent).
            outcome.recorded = recorded
            outcome.ms = round((time.monotonic() - self.started) * 1000, 1)
            try:
                rt.outcomes.log(outcome)
            except Exception as error:  # noqa: BLE001
                log_failure(PROGRAM, error)
            return result
        finally:
            self._end_message()
            self._reset()

    def _refuse_forged(self, queue: str | None) -> int:
        """554 5.7.1 for a message with more than MAX_INCOMING_HEADERS X-Dupfilter fields
        (forged: they could not all be taken out), with its log line."""
        self.setreply("554", "5.7.1", _reply_text(
            f"too many {HEADER_NAME} header fields ({self.ours}), none may come from outside"))
        size, capped = self._size()
        self.runtime.outcomes.log(Outcome(
            MILTER_REFUSED_LINE, action=Action.REFUSED, queue=queue,
            refused_for="incoming-headers", limit=MAX_INCOMING_HEADERS, size=size,
            capped=capped, rcpts=len(self.recipients), reply=554))
        return Milter.REJECT

    def _apply(self, disposition: Disposition) -> int:
        """The disposition as pymilter calls; returns the answer to end of message."""
        if disposition.delivered:
            # Never let an X-Dupfilter from outside through: delete the last one first.
            for index in range(self.ours, 0, -1):
                self.chgheader(HEADER_NAME, index, "")
            for rcpt in disposition.drop:
                self.delrcpt(rcpt)
            if disposition.header is not None:
                self.addheader(HEADER_NAME, disposition.header)
            if disposition.quarantine is not None:
                self.quarantine(disposition.quarantine)
            return Milter.ACCEPT
        refusal = disposition.refusal
        if refusal is None:
            return Milter.DISCARD
        self.setreply(str(refusal.code), refusal.status, _reply_text(refusal.text))
        return Milter.REJECT if refusal.code >= 500 else Milter.TEMPFAIL

    def _on_error(self, outcome: Outcome, error: BaseException) -> int:
        rt = self.runtime
        disposition = plan_error(rt.settings.milter.on_error)
        size, capped = self._size()
        try:
            rt.outcomes.log(failed(Outcome(MILTER_ERROR_LINE, action=disposition.action,
                                           queue=outcome.queue, size=size, capped=capped),
                                   error))
        except Exception as error:  # noqa: BLE001 - logging must not turn into a reject
            log_failure(PROGRAM, error)
        if disposition.action is Action.ACCEPT:
            # Unchecked, but still no X-Dupfilter from outside (best effort).
            try:
                for index in range(self.ours, 0, -1):
                    self.chgheader(HEADER_NAME, index, "")
            except Exception:
                pass
            return Milter.ACCEPT
        refusal = disposition.refusal
        assert refusal is not None
        try:
            self.setreply(str(refusal.code), refusal.status, _reply_text(refusal.text))
        except Exception:  # plain TEMPFAIL then
            pass
        return Milter.TEMPFAIL

    def _size(self) -> tuple[int, bool]:
        """Bytes received, and whether more was received than kept."""
        capped = self.body_kept < self.body_size or self.headers_capped
        return self.header_bytes_kept + self.body_size, capped

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


def _bare(address: str) -> str:
    """An envelope address without angle brackets."""
    return address.strip().strip("<>").strip()


def _reply_text(text: str) -> str:
    """SMTP reply text for libmilter: one line, '%' doubled."""
    return clean_value(text).replace("%", "%%")
