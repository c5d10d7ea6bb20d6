"""dupfilter-smtpd's handler: aiosmtpd hooks that relay MAIL and RCPT to the next hop as
they come, and at the end of DATA ask the core for a verdict and a disposition
(:func:`~mailfilter.decision.plan`), then translate it: the tagged (or untagged) message to
the recipients kept, or a reply upstream (250 for a discard, 550, 451).  Check, plan and
record are one unit of work on the engine's group-commit writer (``Engine.process``), so a
copy arriving meanwhile is known as a duplicate; when the next hop then does not take the
message (or may not have), the record is taken back (``Engine.undo``): its retry must not
count as a copy.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiosmtpd.smtp import Envelope

from mailfilter.config import Settings
from mailfilter.decision import (
    DISCARDED_TEXT,
    SMTPD,
    UNCHECKED_TEXT,
    Disposition,
    plan,
    plan_error,
)
from mailfilter.headers import pass_through, tag_message
from mailfilter.logs import SMTPD_LINE, Outcome, ThrottledWarning, failed, log_failure
from mailfilter.names import Action
from mailfilter.service import LazyEngine, process_message
from mailfilter.smtpd.lifecycle import Lifecycle
from mailfilter.smtpd.nexthop import NextHop, NextHopError, NextHopUnsure, Relay
from mailfilter.smtpd.protocol import XFORWARD_ATTRIBUTES, FilterSMTP, RelayEnvelope, peer
from mailfilter.smtpd.wire import Reply, tempfail, to_crlf
from mailfilter.store import StoreUnavailable
from mailfilter.workers import AnalysisPool, OverBudget

if TYPE_CHECKING:
    from mailfilter.detector import Recording, Verdict
    from mailfilter.engine import Decision, Engine

PROGRAM = "dupfilter-smtpd"
_QUEUED_AS = re.compile(r"queued as ([0-9A-Za-z]+)")


@dataclass(slots=True)
class Checked:
    """One message after the core call (worked out in a worker thread)."""

    disposition: Disposition
    payload: bytes | None = None        # what goes to the next hop (CRLF lines)
    verdict: Verdict | None = None      # None: not checked (on_error)
    engine: Engine | None = None        # the engine that checked it (and recorded it)
    error: BaseException | None = None  # why it could not be checked (on_error)
    recording: Recording | None = None  # what recording did (taken back if not delivered)
    record_error: str | None = None     # why it could not be recorded (checked anyway)
    counted: bool = False               # its decision counted with its record (group commit)


class FilterHandler:
    """aiosmtpd handler: relay MAIL/RCPT as they come, decide and act at end of DATA."""

    def __init__(self, settings: Settings, engines: LazyEngine, pool: NextHop,
                 executor: concurrent.futures.Executor, logger: logging.Logger,
                 life: Lifecycle) -> None:
        self.settings = settings
        self.engines = engines
        self.pool = pool
        self.executor = executor
        self.logger = logger
        self.life = life
        # Store failures repeat for every message while they last: said once a minute.
        self.store_warnings = ThrottledWarning(logger)
        # Large messages are analysed in worker processes, within a deadline.
        self.analyses = AnalysisPool(settings.fingerprint, settings.analysis)

    async def handle_EHLO(self, server: FilterSMTP, session: Any, envelope: Envelope,
                          hostname: str, responses: list[str]) -> list[str]:
        session.host_name = hostname
        return responses[:-1] + ["250-PIPELINING",
                                 "250-XFORWARD " + " ".join(XFORWARD_ATTRIBUTES), "250 HELP"]

    async def handle_MAIL(self, server: FilterSMTP, session: Any, envelope: RelayEnvelope,
                          address: str, mail_options: list[str]) -> str:
        if self.life.draining:
            asyncio.get_running_loop().call_soon(server.close_transport)
            return "421 4.3.2 Service shutting down, try again later"
        envelope.mail_from = address
        envelope.mail_options.extend(mail_options)
        return "250 2.1.0 Ok"

    async def handle_RCPT(self, server: FilterSMTP, session: Any, envelope: RelayEnvelope,
                          address: str, rcpt_options: list[str]) -> str:
        if envelope.relay is None:
            envelope.relay = Relay(self.pool, envelope.mail_from or "",
                                   envelope.mail_options, envelope.xforward)
        reply = await envelope.relay.add_recipient(address)
        if reply.ok:
            envelope.rcpt_tos.append(address)
            envelope.rcpt_options.extend(rcpt_options)
        return str(reply)

    async def handle_DATA(self, server: FilterSMTP, session: Any,
                          envelope: RelayEnvelope) -> str:
        relay, envelope.relay = envelope.relay, None
        if relay is None:       # pragma: no cover - aiosmtpd needs a RCPT first
            return str(tempfail("no transaction at the next hop"))
        server.processing = True
        try:
            # Shielded: an upstream that hangs up mid-way does not leave a half-done job.
            task = asyncio.ensure_future(self._process(session, envelope, relay))
            self.life.track(task)
            return str(await asyncio.shield(task))
        finally:
            server.processing = False

    async def handle_exception(self, error: Exception) -> str:
        # Must not raise: aiosmtpd would answer "500 Error: ..." (a bounce) instead.
        try:
            self.logger.exception("internal error in the SMTP session: %r", error)
        except Exception as failure:  # noqa: BLE001
            log_failure(PROGRAM, failure)
        return str(tempfail("internal error"))

    # -- the work of one message ---------------------------------------------------

    def _check(self, raw: bytes, recipients: list[str], sender: str) -> Checked:
        """Core call, disposition and payload (CPU work: runs in the executor)."""
        engine = self.engines.get()
        if engine is None:          # the store could not be opened (yet): on_error
            raise StoreUnavailable
        settings = self.settings.smtpd

        def planned(verdict: Verdict) -> Disposition:
            return plan(verdict, settings, recipients, SMTPD)
        with engine.expect() as coming:
            try:
                analysis = self.analyses.analyse(raw)
            except OverBudget:              # judged by its Message-ID, or on_error
                known = engine.process_known(raw, recipients, planned, sender=sender)
                if known is None:
                    raise
                return self._checked(known, engine, raw)
            decision, counted = process_message(engine, analysis, recipients, planned,
                                                sender=sender, coming=coming)
        checked = self._checked(decision, engine, raw)
        checked.counted = counted
        return checked

    def _checked(self, decision: Decision[Disposition], engine: Engine, raw: bytes
                 ) -> Checked:
        """The decision and what goes to the next hop."""
        disposition = decision.plan
        checked = Checked(disposition, verdict=decision.verdict, engine=engine,
                          recording=decision.recording, record_error=decision.record_error)
        if disposition.delivered:
            checked.payload = self._untagged(raw) if disposition.header is None \
                else to_crlf(tag_message(raw, disposition.header))
        return checked

    def _unchecked(self, raw: bytes, error: BaseException) -> Checked:
        """``on_error``: the message goes on untagged, or is deferred."""
        disposition = plan_error(self.settings.smtpd.on_error)
        return Checked(disposition, self._untagged(raw) if disposition.delivered else None,
                       error=error)

    def _untagged(self, raw: bytes) -> bytes:
        """The message as it goes on without our header (``accept``, ``on_error``): any
        incoming ``X-Dupfilter:`` removed (a forged ``duplicate`` would be filed away), or
        unchanged if removing it fails for any reason: never lose the message over it."""
        payload, failure = pass_through(raw)
        if failure is not None:
            try:
                self.logger.warning("cannot remove an incoming X-Dupfilter header (%s: %s); "
                                    "passed on unchanged", type(failure).__name__, failure)
            except Exception as error:  # noqa: BLE001
                log_failure(PROGRAM, error)
        return to_crlf(payload)

    async def _process(self, session: Any, envelope: RelayEnvelope, relay: Relay) -> Reply:
        try:
            return await self._process_message(session, envelope, relay)
        finally:
            # Whatever happened, the next-hop connection is given back (a no-op once the
            # message was delivered or dropped): a leaked one is a pool slot lost for good.
            relay.abort()

    async def _process_message(self, session: Any, envelope: RelayEnvelope, relay: Relay
                               ) -> Reply:
        started = time.monotonic()
        loop = asyncio.get_running_loop()
        raw: bytes = envelope.original_content or b""
        recipients = list(envelope.rcpt_tos)
        outcome = Outcome(SMTPD_LINE, queue=envelope.xforward.get("IDENT"),  # upstream's id
                          client=envelope.xforward.get("ADDR") or peer(session),
                          sender=envelope.mail_from or "<>", rcpts=len(recipients),
                          size=len(raw))
        try:
            sender = "" if envelope.mail_from in (None, "<>") else envelope.mail_from
            checked = await loop.run_in_executor(self.executor, self._check, raw,
                                                 recipients, sender)
        except asyncio.CancelledError:
            raise
        except BaseException as error:  # the store, a parser bug, memory, even SystemExit
            # from a library in the worker thread (not a signal: those go to the main
            # thread): on_error
            checked = await loop.run_in_executor(self.executor, self._unchecked, raw, error)
        disposition = checked.disposition
        outcome.verdict, outcome.action = checked.verdict, disposition.action
        outcome.dropped = len(disposition.drop) if disposition.keep else None
        outcome.note = disposition.note
        outcome.counted = checked.counted
        if checked.error is not None:
            failed(outcome, checked.error)
        reply, next_hop = await self._act(checked, relay, outcome)
        recorded = await self._settle(checked, reply.ok and not outcome.maybe_delivered)
        # A failure to record is "failed" in the line, the status and the metrics.
        outcome.recorded = "failed" if checked.record_error and not recorded else recorded
        outcome.reply = reply.code
        outcome.next_hop = next_hop
        queued = _QUEUED_AS.search(next_hop or "")
        outcome.queued_as = queued.group(1) if queued else None
        outcome.ms = round((time.monotonic() - started) * 1000, 1)
        try:
            self.life.outcomes.log(outcome)
        except Exception as failure:  # noqa: BLE001 - the reply stands (it may be delivered)
            log_failure(PROGRAM, failure)
        return reply

    async def _act(self, checked: Checked, relay: Relay, outcome: Outcome
                   ) -> tuple[Reply, str | None]:
        """Carry out the disposition: (reply upstream, the next hop's reply or error)."""
        disposition = checked.disposition
        if not disposition.delivered or checked.payload is None:
            relay.abort()
            refusal = disposition.refusal
            if refusal is not None:
                return Reply(refusal.code, (f"{refusal.status} {refusal.text}",)), None
            if disposition.action is Action.DISCARD:
                return Reply(250, (f"2.0.0 {DISCARDED_TEXT}",)), None
            return tempfail(UNCHECKED_TEXT), None
        try:
            reply = await relay.deliver(checked.payload, disposition.keep or None)
        except NextHopUnsure as error:
            outcome.maybe_delivered = True
            return tempfail(f"next hop: {error}"), str(error)
        except NextHopError as error:
            return tempfail(f"next hop: {error}"), str(error)
        return reply, reply.text()

    async def _settle(self, checked: Checked, delivered: bool) -> bool:
        """Whether the message stays recorded: taken back (``Engine.undo``) when the next
        hop did not take it, or may not have (its retry is then not a copy); a failure to
        record it is said once a minute."""
        if checked.record_error:
            self.store_warnings.warn("record", "cannot record a delivered message: %s",
                                     checked.record_error)
        if checked.recording is None:
            return False
        if delivered:
            return True
        assert checked.engine is not None
        try:
            await asyncio.get_running_loop().run_in_executor(
                self.executor, checked.engine.undo, checked.recording)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001 - the reply stands; the log says why
            self.store_warnings.warn("record", "cannot take back the record of a message "
                                     "the next hop did not take: %s: %s",
                                     type(error).__name__, error)
        return False
