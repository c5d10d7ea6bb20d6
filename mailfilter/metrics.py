"""Prometheus metrics of the daemons (off by default; loopback by default).

Every message's :class:`~mailfilter.logs.Outcome` feeds both its log line and the metrics
(:func:`mailfilter.logs.log_outcome`), so every message is counted exactly where it is
logged and no front end needs code of its own.

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

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mailfilter.config import MetricsSettings

if TYPE_CHECKING:
    from mailfilter.logs import Outcome

_state: dict[str, Any] = {}
_ERROR_KIND = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*Error|[A-Za-z_][A-Za-z0-9_]*Exception)\b")
# Error kinds whose counters exist from start (an alert on them needs a series at 0).
ERROR_KINDS = ("store-unavailable", "StoreError", "other")


def error_kind(error: str) -> str:
    """The label of an Outcome's error: ``store-unavailable`` (the store is not open), the
    exception's class name, or ``other``."""
    if "store unavailable" in error:
        return "store-unavailable"
    match = _ERROR_KIND.match(error)
    return match.group(1) if match else "other"


def start(settings: MetricsSettings, front_end: str,
          records: Callable[[], float] | None = None,
          store_up: Callable[[], bool] | None = None) -> str | None:
    """Serve /metrics if enabled; returns the address it listens on (None if off)."""
    if not settings.enabled:
        return None
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

    registry = CollectorRegistry()
    _state["front_end"] = front_end
    _state["messages"] = Counter("dupfilter_messages", "Messages decided, by verdict and action",
                                 ["front_end", "verdict", "action"], registry=registry)
    _state["errors"] = Counter("dupfilter_errors", "Internal errors that fell back to on_error",
                               ["front_end", "kind"], registry=registry)
    for kind in ERROR_KINDS:
        _state["errors"].labels(front_end, kind)
    _state["record_failures"] = Counter(
        "dupfilter_record_failures", "Messages checked whose recording failed",
        ["front_end"], registry=registry).labels(front_end)
    _state["latency"] = Histogram("dupfilter_check_seconds",
                                  "Seconds from end of message to the decision", ["front_end"],
                                  buckets=(0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25,
                                           0.5, 1.0, 2.5), registry=registry)
    # Label children, each looked up once (on first use, so that a series appears only once
    # it has a sample, as before): ``labels()`` takes a lock and builds a key every call.
    _state["message_counters"] = {}
    _state["latency_child"] = None
    if records is not None:
        gauge = Gauge("dupfilter_store_records", "Records in the store", ["front_end"],
                      registry=registry)
        gauge.labels(front_end).set_function(records)
    if store_up is not None:
        up = Gauge("dupfilter_store_up", "1 while the store is open, 0 while it could not be "
                   "opened (messages get on_error)", ["front_end"], registry=registry)
        up.labels(front_end).set_function(lambda: 1.0 if store_up() else 0.0)
    host, _, port = settings.listen.rpartition(":")
    start_http_server(int(port), addr=host.strip("[]") or "127.0.0.1", registry=registry)
    return settings.listen


def observe(outcome: Outcome) -> None:
    """Count one message (no-op while metrics are off)."""
    if not _state:
        return
    front_end = _state["front_end"]
    if outcome.error:
        _state["errors"].labels(front_end, error_kind(outcome.error)).inc()
    if outcome.recorded == "failed":
        _state["record_failures"].inc()
    message_counters = _state["message_counters"]
    verdict = outcome.verdict
    key = (str(verdict.kind) if verdict is not None else "unchecked",
           str(outcome.action or "-"))
    counter = message_counters.get(key)
    if counter is None:
        counter = message_counters[key] = _state["messages"].labels(front_end, *key)
    counter.inc()
    milliseconds = outcome.ms
    if milliseconds is not None:
        latency = _state.get("latency_child")
        if latency is None:
            latency = _state["latency_child"] = _state["latency"].labels(front_end)
        latency.observe(milliseconds / 1000.0)


def stop() -> None:
    """Forget the metrics (tests start daemons in-process more than once)."""
    _state.clear()
