"""The core pipeline every front end calls: bytes → Message → Fingerprint → Verdict.

One direction of data flow (see docs/design.md).  A front end turns its protocol into
bytes plus envelope recipients, calls :meth:`Engine.check`, and turns the
:class:`~mailfilter.detector.Verdict` into its protocol's action.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from mailfilter import fingerprint as fingerprints
from mailfilter.aliases import load_aliases
from mailfilter.config import FingerprintSettings, Settings
from mailfilter.detector import UNIQUE, Detector, Verdict
from mailfilter.message import parse
from mailfilter.policy import compile_rules, first_match
from mailfilter.store import Store, open_store

if TYPE_CHECKING:       # the writer thread (and concurrent.futures) only for daemons and batches
    from concurrent.futures import Future

    from mailfilter.recorder import Recorder


@dataclass(frozen=True, slots=True)
class Analysis:
    """A parsed and fingerprinted message: all the store-free work, picklable."""

    message_id: str | None
    fingerprint: fingerprints.Fingerprint
    defects: tuple[str, ...]
    headers: tuple[tuple[str, str], ...] = ()


def analyse(raw: bytes, settings: FingerprintSettings, *, keep_headers: bool = True,
            whole_body: bytes | None = None) -> Analysis:
    """Parse and fingerprint one message (pure; safe to run in a worker process).

    ``keep_headers=False`` leaves the header fields out (only allow rules read them), so
    that a worker process has less to send back.  ``whole_body``: the
    :class:`~mailfilter.message.WholeBodyDigest` of a body of which ``raw`` holds only a
    prefix (see :func:`~mailfilter.message.parse`).
    """
    message = parse(raw, max_body_bytes=settings.max_body_bytes, whole_body=whole_body)
    fp = fingerprints.compute(
        message, histogram=settings.histogram, ngram=settings.ngram,
        sketch_size=settings.sketch_size, stoplist=frozenset(settings.stoplist),
        chunk_average=settings.chunk_average, chunk_sample=settings.chunk_sample)
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
        """Verdict on an already analysed message (see :func:`analyse`)."""
        when = int(time.time()) if now is None else now
        recipients = tuple(recipients)
        rule = first_match(self.rules, analysis.headers, sender, recipients) \
            if self.rules else None
        if rule is not None and rule.action == "skip":
            return Verdict(UNIQUE, analysis.fingerprint, analysis.message_id,
                           recipients=recipients, skipped_by=rule.name,
                           defects=analysis.defects)
        if rule is not None:
            record = False

        def check() -> Verdict:
            verdict = replace(
                self.detector.check(analysis.fingerprint, analysis.message_id, recipients,
                                    record_at=when if record else None),
                defects=analysis.defects, exempted_by=rule.name if rule else None)
            if record:
                self.detector.record(verdict, when)
            return verdict

        return self.store.atomically(check) if record else check()

    def record(self, verdict: Verdict, now: int | None = None) -> int | None:
        """Remember a message checked earlier with ``record=False`` (e.g. once accepted).

        A message an allow rule exempted from recording is not remembered (None).
        """
        if not verdict.record_allowed:
            return None
        when = int(time.time()) if now is None else now
        return self.store.atomically(lambda: self.detector.record(verdict, when))

    # -- group commit (see mailfilter/recorder.py) ----------------------------------------

    @property
    def recorder(self) -> Recorder:
        """The writer thread that commits queued work in batches (started on first use)."""
        recorder = self._recorder
        if recorder is None:
            with self._recorder_lock:
                if self._recorder is None:
                    from mailfilter.recorder import Recorder
                    self._recorder = Recorder(self.store.atomically)
                recorder = self._recorder
        return recorder

    def record_later(self, verdict: Verdict, now: int | None = None
                     ) -> Future[int | None] | None:
        """Queue the recording of an accepted message (see :meth:`record`) for the writer
        thread: the future's result is the record id (None: not remembered); the future
        itself is None when the queue is full (the message is then not remembered)."""
        when = int(time.time()) if now is None else now
        return self.recorder.submit(lambda: self.record(verdict, when))

    def decide_later(self, analyses: Sequence[Analysis], *, now: int | None = None
                     ) -> Future[list[Verdict]] | None:
        """Queue :meth:`decide` with recording of several messages for the writer thread
        (batch import and scan): they are checked and remembered in order, in one
        transaction with whatever else is queued.  None when the queue is full."""
        return self.recorder.submit(
            lambda: [self.decide(analysis, record=True, now=now) for analysis in analyses])

    def close(self) -> None:
        """Commit what the writer has queued, then close the store."""
        with self._recorder_lock:
            recorder, self._recorder = self._recorder, None
        if recorder is not None:
            recorder.close()
        self.store.close()
