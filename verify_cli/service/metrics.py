"""The service's Prometheus metrics, in a registry of its own (one per service instance)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from verify_cli.sandbox.base import WarmStats

LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class _WarmCollector(Collector):
    """Warm-pool figures read from the executor at scrape time."""

    def __init__(self, stats: Callable[[], WarmStats | None]) -> None:
        self._stats = stats

    def collect(self) -> Iterator[GaugeMetricFamily]:
        s = self._stats()
        warm, cold = (s.warm_runs, s.cold_runs) if s else (0, 0)
        yield GaugeMetricFamily("verify_serve_warm_runs", "Runs that went warm.", value=warm)
        yield GaugeMetricFamily("verify_serve_cold_runs", "Runs that started cold.", value=cold)
        yield GaugeMetricFamily("verify_serve_warm_fallbacks", "Warm runs re-run cold after a worker failed.",
                                value=s.fallbacks if s else 0)
        yield GaugeMetricFamily("verify_serve_warm_workers_started", "Warm workers started (pool size so far).",
                                value=s.workers_started if s else 0)
        yield GaugeMetricFamily("verify_serve_warm_hit_rate", "warm / (warm + cold) runs; 0 before any run.",
                                value=warm / (warm + cold) if warm + cold else 0.0)


class ServiceMetrics:
    def __init__(self, warm_stats: Callable[[], WarmStats | None]) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.queue_depth = Gauge("verify_serve_queue_depth", "Candidates admitted and waiting for a worker.",
                                 registry=r)
        self.running = Gauge("verify_serve_running", "Candidates being graded or run now.", registry=r)
        self.workers = Gauge("verify_serve_workers", "Grading workers (the pool size).", registry=r)
        self.capacity = Gauge("verify_serve_queue_capacity", "Candidates admitted at most (running + waiting).",
                              registry=r)
        self.runs = Counter("verify_serve_runs", "Candidates answered, by status.", ["status"], registry=r)
        self.rejected = Counter("verify_serve_rejected", "Requests refused, by reason.", ["reason"], registry=r)
        self.replayed = Counter("verify_serve_replayed", "Results answered from the journal.", registry=r)
        self.grade_latency = Histogram("verify_serve_grade_seconds", "Grading one candidate (worker time).",
                                       buckets=LATENCY_BUCKETS, registry=r)
        self.queue_latency = Histogram("verify_serve_queue_seconds", "Waiting for a worker.",
                                       buckets=LATENCY_BUCKETS, registry=r)
        self.request_latency = Histogram("verify_serve_request_seconds", "Whole requests, by route.",
                                         ["route"], buckets=LATENCY_BUCKETS, registry=r)
        self.sessions_open = Gauge("verify_serve_sessions_open", "Agent sessions open now.", registry=r)
        self.sessions_opened = Counter("verify_serve_sessions_opened", "Agent sessions opened.", registry=r)
        self.sessions_ended = Counter("verify_serve_sessions_ended", "Agent sessions ended, by reason "
                                      "(submitted, deleted, reclaimed, shutdown, open_failed).", ["reason"], registry=r)
        self.loop_block = Gauge("verify_serve_loop_block_seconds_max", "The longest the event loop went without "
                                "running its monitor (a stall: every request waits this long).", registry=r)
        self.connections_refused = Gauge("verify_serve_connections_refused", "Connections closed at once: the "
                                         "connection cap was reached.", registry=r)
        self.header_timeouts = Gauge("verify_serve_header_timeouts", "Connections closed because their "
                                     "request head did not arrive in time.", registry=r)
        self.body_timeouts = Counter("verify_serve_body_timeouts", "Requests answered 408: the body did not "
                                     "arrive in time.", registry=r)
        r.register(_WarmCollector(warm_stats))

    def watch_connections(self, counters: Any) -> None:
        """Report a server's :class:`~verify_cli.service.connections.ConnectionCounters`."""
        self.connections_refused.set_function(lambda: counters.refused)
        self.header_timeouts.set_function(lambda: counters.header_timeouts)

    def render(self) -> bytes:
        return generate_latest(self.registry)
