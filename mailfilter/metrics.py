"""Prometheus metrics of the daemons (off by default; loopback by default).

Every message's :class:`~mailfilter.logs.Outcome` feeds both its log line and the metrics
(the daemon's :class:`~mailfilter.logs.OutcomeLog` calls :meth:`Metrics.observe`), so every
message is counted exactly where it is logged and no front end needs code of its own.

* ``dupfilter_messages_total{front_end, verdict, action}``
* ``dupfilter_errors_total{front_end, kind}`` — internal errors that fell back to on_error
  (``kind="store-unavailable"``, ``"StoreError"`` and ``"other"`` exist from start, at 0)
* ``dupfilter_record_failures_total{front_end}`` — messages checked (and acted on) whose
  recording failed (a full disk, a read-only store): later copies of them are not caught;
  exists from start, at 0
* ``dupfilter_check_seconds{front_end}`` — time from end of message to decision
* ``dupfilter_store_records{front_end}`` — records in the store (read at scrape time)
* ``dupfilter_store_up{front_end}`` — 1 while the store is open, 0 while messages get
  on_error because it could not be opened
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mailfilter.config import MetricsSettings
from mailfilter.logs import ERROR_KINDS

if TYPE_CHECKING:
    from mailfilter.logs import Outcome


class Metrics:
    """One daemon's Prometheus series and the HTTP server that exports them.  The daemon
    holds it and registers :meth:`observe` with its :class:`~mailfilter.logs.OutcomeLog`."""

    def __init__(self, settings: MetricsSettings, front_end: str,
                 records: Callable[[], float] | None = None,
                 store_up: Callable[[], bool] | None = None) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.listen = settings.listen
        self.front_end = front_end
        self.registry = registry = CollectorRegistry()
        self._messages = Counter("dupfilter_messages", "Messages decided, by verdict and "
                                 "action", ["front_end", "verdict", "action"], registry=registry)
        self._errors = Counter("dupfilter_errors", "Internal errors that fell back to on_error",
                               ["front_end", "kind"], registry=registry)
        for kind in ERROR_KINDS:
            self._errors.labels(front_end, kind)
        self._record_failures = Counter(
            "dupfilter_record_failures", "Messages checked whose recording failed",
            ["front_end"], registry=registry).labels(front_end)
        self._latency = Histogram("dupfilter_check_seconds",
                                  "Seconds from end of message to the decision", ["front_end"],
                                  buckets=(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25,
                                           0.5, 1.0, 2.5), registry=registry)
        # Label children, each looked up once (on first use, so that a series appears only
        # once it has a sample): ``labels()`` takes a lock and builds a key every call.
        self._message_counters: dict[tuple[str, str], Any] = {}
        self._latency_child: Any = None
        if records is not None:
            gauge = Gauge("dupfilter_store_records", "Records in the store", ["front_end"],
                          registry=registry)
            gauge.labels(front_end).set_function(records)
        if store_up is not None:
            up = Gauge("dupfilter_store_up", "1 while the store is open, 0 while it could not "
                       "be opened (messages get on_error)", ["front_end"], registry=registry)
            up.labels(front_end).set_function(lambda: 1.0 if store_up() else 0.0)

    def serve(self) -> str:
        """Listen on ``metrics.listen`` (loopback unless it names a host); returns it."""
        from prometheus_client import start_http_server

        host, _, port = self.listen.rpartition(":")
        start_http_server(int(port), addr=host.strip("[]") or "127.0.0.1",
                          registry=self.registry)
        return self.listen

    def observe(self, outcome: Outcome) -> None:
        """Count one message (an OutcomeLog observer)."""
        if outcome.error:
            self._errors.labels(self.front_end, outcome.error_kind or "other").inc()
        if outcome.recorded == "failed":
            self._record_failures.inc()
        verdict = outcome.verdict
        key = (str(verdict.kind) if verdict is not None else "unchecked",
               str(outcome.action or "-"))
        counter = self._message_counters.get(key)
        if counter is None:
            counter = self._message_counters[key] = self._messages.labels(self.front_end, *key)
        counter.inc()
        milliseconds = outcome.ms
        if milliseconds is not None:
            if self._latency_child is None:
                self._latency_child = self._latency.labels(self.front_end)
            self._latency_child.observe(milliseconds / 1000.0)


def start(settings: MetricsSettings, front_end: str,
          records: Callable[[], float] | None = None,
          store_up: Callable[[], bool] | None = None) -> Metrics | None:
    """The daemon's metrics, serving /metrics, if enabled (None if off)."""
    if not settings.enabled:
        return None
    metrics = Metrics(settings, front_end, records=records, store_up=store_up)
    metrics.serve()
    return metrics
