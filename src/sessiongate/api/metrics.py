"""Prometheus metrics of one app, in the app's own `CollectorRegistry`.

Gauges and counters the runner already keeps are read from `runner.statistics()` when the
metrics are scraped (nothing is double-counted or kept in sync by hand); what only the API sees
(turn latency as a caller waits for it, whether search fell back to a scan) is recorded here.
Every other numeric field of the statistics appears as `sessiongate_runner_<field>`, so a field
the runner adds later is exported without a change here; the running totals exported as
counters (turns by outcome, evictions) are not repeated there as gauges. Each platform
adapter with a `statistics()` (the adapter kit's) is read the same way, as
`sessiongate_platform_<field>` labelled with the platform, so "connected" is told from
"receiving" and "degraded".
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from prometheus_client.metrics_core import Metric

__all__ = [
    "CONTENT_TYPE_LATEST",
    "ApiMetrics",
    "LeaderCollector",
    "PlatformCollector",
    "RunnerCollector",
]

# Named statistics fields → (metric name, kind, help); anything else goes out generically.
_NAMED: dict[str, tuple[str, str, str]] = {
    "queued": ("sessiongate_queue_depth", "gauge", "Messages waiting in lane queues"),
    "running_turns": ("sessiongate_running_turns", "gauge", "Agent turns running now"),
    "lanes": ("sessiongate_lanes", "gauge", "Conversation lanes the runner holds"),
    "agent_cache_size": ("sessiongate_agent_cache_size", "gauge", "Agents in the cache"),
    "evictions": ("sessiongate_agent_evictions", "counter", "Agents evicted from the cache"),
}
# Statistics fields counting outbound messages, by status (`deliveries_<status>`): `sent`
# confirmed by the platform, `failed` sends refused (every try), `dead` deliveries given up.
_DELIVERY_STATUSES = ("sent", "failed", "dead")
# Statistics fields counting finished turns, by outcome (`turns_<outcome>`).
_TURN_OUTCOMES = ("completed", "failed", "interrupted")
# Fields exported under a name of their own above: not again as `sessiongate_runner_<field>`
# gauges (a running total would read as a level there, and a level would be there twice).
_COUNTED = frozenset(_NAMED) | {f"turns_{outcome}" for outcome in _TURN_OUTCOMES}
# What each other statistics field is, for its `sessiongate_runner_<field>` gauge's help.
_RUNNER_HELP: dict[str, str] = {
    "turns_resumed": "Turns resumed after a restart or a drain since start",
    "duplicates": "Inbound messages seen before (a redelivery or a retry), answered without "
    "a second turn, since start",
    "unauthorized": "Messages refused since start: the sender is not allowed on the platform",
    "queue_full": "Messages refused since start: their lane's queue was at its cap",
    "archived": "Messages refused since start: their session is archived",
    "rollovers": "Sessions rolled over to a new id by a reset policy or a suspension since start",
    "deliveries_failed": "Replies or notices a platform refused since start (they are retried)",
    "lane_errors": "Lane workers that stopped on an unexpected error since start",
    "waiters": "HTTP requests waiting for a turn's outcome now",
    "startup_gate_open": "1 once start-up recovery has finished and live messages run",
    "accepting": "1 while the gateway accepts messages (0 while it stops)",
    "instance_heartbeats": "Instance heartbeats written since start (PostgreSQL)",
    "instance_heartbeat_failures": "Instance heartbeats that failed since start (PostgreSQL)",
    "database_connected": "1 while the store's database answers",
    "fenced_commits": "Turn outcomes refused since start because the lane's lease moved on",
}
# A turn with the echo agent takes about a millisecond; one with a model, seconds to minutes.
_LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800)


def _numeric_fields(stats: object) -> dict[str, float]:
    if not dataclasses.is_dataclass(stats) or isinstance(stats, type):
        return {}
    out: dict[str, float] = {}
    for field in dataclasses.fields(stats):
        value: Any = getattr(stats, field.name)
        if isinstance(value, (bool, int, float)):
            out[field.name] = float(value)
    return out


class RunnerCollector:
    """Reads `statistics()` at scrape time and yields the metric families."""

    def __init__(self, statistics: Callable[[], object]) -> None:
        self._statistics = statistics

    def collect(self) -> Iterable[Metric]:
        values = _numeric_fields(self._statistics())
        for field, (name, kind, help_text) in _NAMED.items():
            if field not in values:
                continue
            if kind == "counter":
                yield CounterMetricFamily(name, help_text, value=values[field])
            else:
                yield GaugeMetricFamily(name, help_text, value=values[field])
        turns = CounterMetricFamily(
            "sessiongate_turns", "Agent turns finished, by outcome", labels=["outcome"]
        )
        for outcome in _TURN_OUTCOMES:
            value = values.get(f"turns_{outcome}")
            if value is not None:
                turns.add_metric([outcome], value)
        yield turns
        deliveries = CounterMetricFamily(
            "sessiongate_deliveries",
            "Outbound messages by status: sent (confirmed), failed (a refused send), dead "
            "(given up after its tries, or stale)",
            labels=["status"],
        )
        for status in _DELIVERY_STATUSES:
            value = values.get(f"deliveries_{status}")
            if value is not None:
                deliveries.add_metric([status], value)
        yield deliveries
        for field, value in values.items():
            if field in _COUNTED:
                continue  # a running total goes out once, as its counter above
            help_text = _RUNNER_HELP.get(field, f"RunnerStatistics.{field}")
            yield GaugeMetricFamily(f"sessiongate_runner_{field}", help_text, value=value)


class PlatformCollector:
    """The platform adapters' `statistics()` at scrape time, one sample per platform."""

    def __init__(self, adapters: Callable[[], Iterable[object]]) -> None:
        self._adapters = adapters

    def collect(self) -> Iterable[Metric]:
        families: dict[str, GaugeMetricFamily] = {}
        for adapter in self._adapters():
            statistics = getattr(adapter, "statistics", None)
            if not callable(statistics):
                continue
            platform = str(getattr(adapter, "platform", "unknown"))
            for field, value in _numeric_fields(statistics()).items():
                family = families.get(field)
                if family is None:
                    family = families[field] = GaugeMetricFamily(
                        f"sessiongate_platform_{field}",
                        f"AdapterStatistics.{field}, by platform",
                        labels=["platform"],
                    )
                family.add_metric([platform], value)
        yield from families.values()


class LeaderCollector:
    """`sessiongate_leader{connection}`: 1 for each singular connection this instance leads."""

    def __init__(self, leading: Callable[[], dict[str, bool]]) -> None:
        self._leading = leading

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily(
            "sessiongate_leader",
            "1 while this instance leads the singular platform connection",
            labels=["connection"],
        )
        for name, leads in self._leading().items():
            family.add_metric([name], 1.0 if leads else 0.0)
        yield family


class ApiMetrics:
    """The registry of one app plus the metrics the API records itself."""

    def __init__(
        self,
        statistics: Callable[[], object],
        *,
        adapters: Callable[[], Iterable[object]] | None = None,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(RunnerCollector(statistics))
        if adapters is not None:
            self.registry.register(PlatformCollector(adapters))
        self.turn_latency = Histogram(
            "sessiongate_turn_latency_seconds",
            "Time from accepting an API message to its reply, for callers that wait",
            labelnames=["status"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.search_degraded = Gauge(
            "sessiongate_search_degraded",
            "1 when the last search fell back to a scan because the index is stale",
            registry=self.registry,
        )
        self.http_requests = Counter(
            "sessiongate_http_requests",
            "HTTP requests answered, by route template and status",
            labelnames=["method", "route", "status"],
            registry=self.registry,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
