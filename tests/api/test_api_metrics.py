from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from sessiongate.adapters.kit import AdapterStatistics
from sessiongate.api.app import create_app
from sessiongate.api.metrics import ApiMetrics


def _samples(text: str) -> dict[tuple[str, tuple], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def test_metrics_expose_the_runner_and_the_api(client, send):
    send("hello")
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    samples = _samples(response.text)
    names = {name for name, _ in samples}
    for name in (
        "sessiongate_queue_depth",
        "sessiongate_running_turns",
        "sessiongate_agent_cache_size",
        "sessiongate_search_degraded",
        "sessiongate_turn_latency_seconds_count",
    ):
        assert name in names, name
    assert samples[("sessiongate_turn_latency_seconds_count", (("status", "replied"),))] == 1
    assert samples[("sessiongate_turns_total", (("outcome", "completed"),))] >= 1
    assert samples[("sessiongate_running_turns", ())] == 0
    requests = (
        "sessiongate_http_requests_total",
        (("method", "POST"), ("route", "/v1/messages"), ("status", "200")),
    )
    assert samples[requests] == 1


def test_a_running_total_is_exported_once_as_a_counter_not_also_as_a_gauge(client, send):
    send("hello")
    families = {f.name: f.type for f in text_string_to_metric_families(client.get("/metrics").text)}
    assert families["sessiongate_turns"] == "counter"
    assert families["sessiongate_agent_evictions"] == "counter"
    for total in ("turns_completed", "turns_failed", "turns_interrupted", "evictions"):
        assert f"sessiongate_runner_{total}" not in families
    # Levels, and totals with no counter of their own, are still there.
    assert families["sessiongate_runner_waiters"] == "gauge"
    assert families["sessiongate_runner_turns_resumed"] == "gauge"


def test_each_app_has_its_own_registry(runner, store, config):
    first = create_app(runner, store, config)
    second = create_app(runner, store, config)
    assert first.state.metrics.registry is not second.state.metrics.registry


class _Adapter:
    """Just what the collector reads of a kit adapter."""

    def __init__(self, platform: str, *, degraded: bool) -> None:
        self.platform = platform
        self._degraded = degraded

    def statistics(self) -> AdapterStatistics:
        return AdapterStatistics(
            connected=True, receiving=not self._degraded, events=3, accepted=2, duplicates=1,
            dropped=0, pairing_codes=0, sent=2, refused=0, unconfirmed=0, plain_resends=0,
            rate_limited=0, reconnects=0, stalls=0, degraded=self._degraded,
            receive_failures=11 if self._degraded else 0,
        )  # fmt: skip


def test_metrics_expose_each_platform_adapter_by_platform():
    adapters = [_Adapter("telegram", degraded=True), _Adapter("slack", degraded=False), object()]
    metrics = ApiMetrics(lambda: None, adapters=lambda: adapters)
    samples = _samples(metrics.render().decode())
    assert samples[("sessiongate_platform_degraded", (("platform", "telegram"),))] == 1
    assert samples[("sessiongate_platform_degraded", (("platform", "slack"),))] == 0
    assert samples[("sessiongate_platform_receiving", (("platform", "telegram"),))] == 0
    assert samples[("sessiongate_platform_receive_failures", (("platform", "telegram"),))] == 11
    assert samples[("sessiongate_platform_accepted", (("platform", "slack"),))] == 2
