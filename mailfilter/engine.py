"""The core pipeline every front end calls: bytes → Message → Fingerprint → Verdict.

One direction of data flow (see docs/design.md).  A front end turns its protocol into
bytes plus envelope recipients, calls :meth:`Engine.check`, and turns the
:class:`~mailfilter.detector.Verdict` into its protocol's action.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Generic, TypeVar

from mailfilter import fingerprint as fingerprints
from mailfilter.aliases import load_aliases
from mailfilter.config import FingerprintSettings, Settings
from mailfilter.detector import UNIQUE, Detector, Recording, Verdict
from mailfilter.message import first_look, parse
from mailfilter.policy import compile_rules, first_match
from mailfilter.store import Store, StoreError, open_store
from mailfilter.values import Value, fill, init, replace

if TYPE_CHECKING:       # the writer thread (and concurrent.futures) only for daemons and batches
    from concurrent.futures import Future

    from mailfilter.recorder import Coming, Recorder


P = TypeVar("P")


class Decision(Value, Generic[P]):
    """One processed message: its verdict, what the front end's plan made of it, and what
    recording did (None: not remembered)."""

    __slots__ = ("verdict", "plan", "recording", "record_error")

    def __init__(self, verdict: Verdict, plan: P, recording: Recording | None,
                 # Why the message could not be remembered (a full disk, say): checked
                 # all the same.
                 record_error: str | None = None) -> None:
        init(self, verdict=verdict, plan=plan, recording=recording,
             record_error=record_error)


class Keep(Value):
    """A plan that only says whether to remember the message (batch work, tests)."""

    __slots__ = ("record",)

    def __init__(self, record: bool) -> None:
        init(self, record=record)


KEEP, DROP = Keep(True), Keep(False)


# Errors of one message's own work (a bug in judging it): that message fails, not the
# others of its group-commit batch.  Store errors fail the batch (it is rolled back).
_OWN_ERRORS = (ArithmeticError, AttributeError, IndexError, KeyError, LookupError,
               RecursionError, TypeError, ValueError)


class _Failed(Value):
    """A job's own error, carried back as its result (see :func:`_settle`)."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        init(self, error=error)


def _isolated(job: Callable[[], P]) -> P | _Failed:
    try:
        return job()
    except _OWN_ERRORS as error:
        return _Failed(error)


def _future() -> Future:
    from concurrent.futures import Future
    return Future()


def _settle(outer: Future, done: Future) -> None:
    """``done``'s outcome in ``outer``, a job's own error raised from it."""
    if done.cancelled():
        outer.cancel()
        return
    error = done.exception()
    result = None if error is not None else done.result()
    if isinstance(result, _Failed):
        error = result.error
    if error is not None:
        outer.set_exception(error)
    else:
        outer.set_result(result)


def remember(verdict: Verdict) -> Keep:
    """The plan "remember it, whatever the verdict" (allow rules still apply)."""
    return KEEP


def _never(verdict: Verdict) -> Keep:
    return DROP


class Analysis(Value):
    """A parsed and fingerprinted message: all the store-free work, picklable."""

    __slots__ = ("message_id", "fingerprint", "defects", "headers")

    def __init__(self, message_id: str | None, fingerprint: fingerprints.Fingerprint,
                 defects: tuple[str, ...], headers: tuple[tuple[str, str], ...] = ()) -> None:
        fill(self, message_id, fingerprint, defects, headers)     # (one for every message)


def analyse(raw: bytes, settings: FingerprintSettings, *, keep_headers: bool = True,
            whole_body: bytes | None = None) -> Analysis:
    """Parse and fingerprint one message (pure; safe to run in a worker process).

    ``keep_headers=False`` leaves the header fields out (only allow rules read them), so
    that a worker process has less to send back.  ``whole_body``: the
    :class:`~mailfilter.message.WholeBodyDigest` of a body of which ``raw`` holds only a
    prefix (see :func:`~mailfilter.message.parse`).
    """
    message = parse(raw, max_body_bytes=settings.max_body_bytes, whole_body=whole_body)
    parameters = dict(histogram=settings.histogram, ngram=settings.ngram,
                      sketch_size=settings.sketch_size, stoplist=frozenset(settings.stoplist),
                      chunk_average=settings.chunk_average,
                      chunk_sample=settings.chunk_sample)
    # A message forwarded as an attachment is a message: its own digest, as it was
    # stored when it came alone (one level: what it carries in turn is its text).
    attached = tuple(fingerprints.compute(
        parse(inner, max_body_bytes=settings.max_body_bytes), **parameters).digest
        for inner in message.attached)
    fp = fingerprints.compute(message, attached_digests=attached, **parameters)
    return Analysis(message.message_id, fp, message.defects,
                    message.headers if keep_headers else ())


class Engine:
    """A store plus a detector, opened once per process and shared by its threads."""

    def __init__(self, settings: Settings, location: str | None = None, *,
                 readonly: bool = False, create: bool = True, store: Store | None = None
                 ) -> None:
        self.settings = settings
        fp = settings.fingerprint
        self.store = store or open_store(
            location or settings.store.location(), fp.store_parameters(),
            map_size_mb=settings.store.map_size_mb,
            file_mode=int(settings.store.file_mode, 8), create=create, readonly=readonly,
            key_prefix=settings.store.key_prefix, timeout=settings.store.timeout,
            retention_seconds=settings.store.retention_seconds())
        self.detector = Detector(self.store, settings.detector, sketch_size=fp.sketch_size,
                                 index_size=fp.index_size,
                                 aliases=load_aliases(settings.detector.aliases))
        self.rules = compile_rules(settings.policy.rules)
        self._recorder: Recorder | None = None       # started by the first *_later call
        self._recorder_lock = threading.Lock()
        self._closed = False

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def analyse(self, raw: bytes, *, whole_body: bytes | None = None) -> Analysis:
        return analyse(raw, self.settings.fingerprint, whole_body=whole_body)

    def check(self, raw: bytes, recipients: Sequence[str] = (), *, record: bool = True,
              now: int | None = None, sender: str | None = None,
              whole_body: bytes | None = None) -> Verdict:
        """Verdict on ``raw``; with ``record`` it is remembered in the same transaction.

        ``recipients`` and ``sender`` are the envelope's, when the front end knows them;
        ``whole_body`` when ``raw`` holds only a prefix of the body (see :func:`analyse`).
        """
        return self.decide(self.analyse(raw, whole_body=whole_body), recipients,
                           record=record, now=now, sender=sender)

    def decide(self, analysis: Analysis, recipients: Sequence[str] = (), *,
               record: bool = True, now: int | None = None,
               sender: str | None = None) -> Verdict:
        """Verdict on an already analysed message (see :func:`analyse`), remembered when
        ``record`` (and no allow rule exempts it): :meth:`process` whatever the verdict."""
        if not record:      # a read: nothing is added, not even for a moment
            return self._process(analysis, recipients, _never, now, sender,
                                 record=False).verdict
        return self.process(analysis, recipients, remember, now=now, sender=sender).verdict

    def process(self, analysis: Analysis, recipients: Sequence[str],
                plan: Callable[[Verdict], P], *, now: int | None = None,
                sender: str | None = None) -> Decision[P]:
        """Check, plan and record one message as one unit of work — the one recording
        path of every front end.

        ``plan`` turns the verdict into what the front end will do (``decision.plan``);
        its ``record`` says whether the message is to be remembered.  On LMDB the whole
        runs in one write transaction: two copies of one message checked at the same time,
        through any front ends, leave one record and one duplicate verdict.  On Redis the
        check adds a new message in the same script (``Store.lookup_or_add``).  When the
        front end then fails to pass the message on, :meth:`undo` takes the record back.
        """
        try:
            return self.store.atomically(
                lambda: self._process(analysis, recipients, plan, now, sender))
        except StoreError as error:
            return self.process_unrecorded(analysis, recipients, plan, error, now=now,
                                           sender=sender)

    def process_unrecorded(self, analysis: Analysis, recipients: Sequence[str],
                           plan: Callable[[Verdict], P], error: BaseException, *,
                           now: int | None = None, sender: str | None = None
                           ) -> Decision[P]:
        """:meth:`process` without remembering, after recording failed with ``error``: the
        message still gets its verdict (an unreachable store raises again here)."""
        decision = self._process(analysis, recipients, plan, now, sender, record=False)
        return replace(decision, record_error=f"{type(error).__name__}: {error}")

    def process_later(self, analysis: Analysis, recipients: Sequence[str],
                      plan: Callable[[Verdict], P], *, now: int | None = None,
                      sender: str | None = None,
                      then: Callable[[Decision[P]], object] | None = None
                      ) -> Future[Decision[P]] | None:
        """:meth:`process` on the writer thread (group commit: many messages a
        transaction, each seeing what the ones before it wrote); None when its queue is
        full.  ``then(decision)`` runs right after, in the same transaction (the milter
        counts its decision there: one commit a message, not two)."""
        inner = self.recorder.submit(self._job(analysis, recipients, plan, now, sender, then))
        if inner is None:
            return None
        outer: Future[Decision[P]] = _future()
        inner.add_done_callback(lambda done: _settle(outer, done))
        return outer

    def process_grouped(self, analysis: Analysis, recipients: Sequence[str],
                        plan: Callable[[Verdict], P], *, timeout: float,
                        sender: str | None = None,
                        then: Callable[[Decision[P]], object] | None = None,
                        coming: Coming | None = None) -> Decision[P] | None:
        """:meth:`process_later` for a caller that waits for it: committed with whatever
        is queued, by this thread when no other is committing (no hand-off to the writer;
        see :meth:`Recorder.run`).  None when the queue is full; TimeoutError after
        ``timeout`` seconds.  ``coming``: what :meth:`expect` gave for this message."""
        from mailfilter.recorder import NOT_TAKEN
        result = self.recorder.run(self._job(analysis, recipients, plan, None, sender, then),
                                   timeout, coming)
        if result is NOT_TAKEN:
            return None
        if isinstance(result, _Failed):
            raise result.error
        return result

    def _job(self, analysis: Analysis, recipients: Sequence[str],
             plan: Callable[[Verdict], P], now: int | None, sender: str | None,
             then: Callable[[Decision[P]], object] | None
             ) -> Callable[[], Decision[P] | _Failed]:
        """One message's group-commit job: :meth:`_process`, then ``then``; an error of
        its own fails it alone, not its batch."""
        def job() -> Decision[P]:
            decision = self._process(analysis, recipients, plan, now, sender)
            if then is not None:
                then(decision)
            return decision
        return lambda: _isolated(job)

    def _process(self, analysis: Analysis, recipients: Sequence[str],
                 plan: Callable[[Verdict], P], now: int | None,
                 sender: str | None, *, record: bool = True) -> Decision[P]:
        when = int(time.time()) if now is None else now
        recipients = tuple(recipients)
        rule = first_match(self.rules, analysis.headers, sender, recipients) \
            if self.rules else None
        if rule is not None and rule.action == "skip":
            verdict = Verdict(UNIQUE, analysis.fingerprint, analysis.message_id,
                              recipients=recipients, skipped_by=rule.name,
                              defects=analysis.defects)
            return Decision(verdict, plan(verdict), None)
        # A store that adds while checking (Redis) adds a new message in its check; taken
        # back below when the plan does not keep it.  LMDB records it once judged.
        verdict = self.detector.check(
            analysis.fingerprint, analysis.message_id, recipients,
            record_at=when if record and rule is None and not self.store.readonly else None,
            defects=analysis.defects, exempted_by=rule.name if rule else None)
        disposition = plan(verdict)
        if record and getattr(disposition, "record", False) and verdict.record_allowed:
            return Decision(verdict, disposition, self.detector.record(verdict, when))
        if verdict.recorded_id is not None:
            self.detector.forget_added(verdict, when)
            verdict = replace(verdict, recorded_id=None)
        return Decision(verdict, disposition, None)

    def process_known(self, raw: bytes, recipients: Sequence[str],
                      plan: Callable[[Verdict], P], *, sender: str | None = None
                      ) -> Decision[P] | None:
        """A message whose analysis ran out of time (``mailfilter.workers``), judged on
        what is known without its body: its Message-ID.  The decision when that names a
        stored message (a duplicate); None when it says nothing — the front end then acts
        as ``on_error`` says.  Nothing is recorded."""
        preview = first_look(raw)
        if not preview.message_id:
            return None
        known = Analysis(preview.message_id, fingerprints.Fingerprint(
            histogram=bytes(fingerprints.HISTOGRAM_BINS), histogram_sum=0, histogram_chars=0,
            sketch=(), shingle_count=0, word_count=0, digest=preview.body_digest),
            ("over budget",))
        decision = self._process(known, recipients, plan, None, sender, record=False)
        return decision if decision.verdict.measure == "message-id" else None

    def undo(self, recording: Recording) -> None:
        """Take back what recording a message did (it was not passed on after all)."""
        self.store.atomically(lambda: self.detector.undo(recording))

    # -- group commit (see mailfilter/recorder.py) ----------------------------------------

    @property
    def recorder(self) -> Recorder:
        """The writer thread that commits queued work in batches (started on first use)."""
        recorder = self._recorder
        if recorder is None:
            with self._recorder_lock:
                if self._closed:        # no writer again on a closed store
                    raise StoreError("the store is closed")
                if self._recorder is None:
                    from mailfilter.recorder import Recorder
                    self._recorder = Recorder(self.store.atomically)
                recorder = self._recorder
        return recorder

    def expect(self) -> Coming:
        """A message is being analysed and will be processed with group commit: a commit
        about to start waits a moment for it (:meth:`Recorder.expect`; ``with`` it)."""
        return self.recorder.expect()

    def decide_later(self, analyses: Sequence[Analysis], *, now: int | None = None
                     ) -> Future[list[Verdict]] | None:
        """:meth:`decide` with recording of several messages on the writer thread (batch
        import and scan): checked and remembered in order, in one transaction with
        whatever else is queued.  None when the queue is full."""
        return self.recorder.submit(lambda: [
            self._process(analysis, (), remember, now, None).verdict for analysis in analyses])

    def close(self) -> None:
        """Commit what the writer has queued, then close the store (left open, for the
        process's exit, when the writer is still at work after its time)."""
        with self._recorder_lock:
            self._closed = True
            recorder, self._recorder = self._recorder, None
        if recorder is not None and not recorder.close():
            return
        self.store.close()
