"""`/v1/deliveries`: the dead-letter list over HTTP, its retries, the ops page's count and the
Prometheus counter, against a runner whose platform (a loopback adapter) refuses sends."""

from __future__ import annotations

import pytest

from sessiongate.adapters.loopback import LoopbackAdapter
from sessiongate.agents import build_agent_factory
from sessiongate.gateway import GatewayRunner
from sessiongate.store.outbox import OutboxStore


@pytest.fixture
def adapter() -> LoopbackAdapter:
    return LoopbackAdapter()


@pytest.fixture
def runner(tmp_path, store, config, clock, adapter):
    return GatewayRunner(
        store,
        config,
        home=tmp_path / "home",
        clock=clock,
        agent_factory=build_agent_factory(config),
        adapters=[adapter],
    )


def test_failed_deliveries_are_listed_retried_one_by_one_or_all_and_counted(client, adapter):
    adapter.fail_sends = 3
    for chat in ("a", "b", "c"):
        client.portal.call(lambda chat=chat: adapter.receive("hello", chat_id=chat))
    listed = client.get("/v1/deliveries?status=failed").json()
    assert len(listed["deliveries"]) == 3
    assert listed["counts"] == {"failed": 3}
    first = listed["deliveries"][0]
    assert (first["status"], first["attempts"], first["kind"]) == ("failed", 1, "reply")
    assert first["reason"] == "ConnectionError: loopback: send refused"
    assert first["preview"] == "echo: hello"
    assert client.get("/v1/ops").json()["dead_letters_total"] == 3
    assert client.get("/v1/deliveries?status=sent").json()["deliveries"] == []

    one = client.post(f"/v1/deliveries/{first['id']}/retry")
    assert one.status_code == 200, one.text
    assert (one.json()["status"], one.json()["message_id"]) == ("sent", "loopback-1")
    again = client.post(f"/v1/deliveries/{first['id']}/retry")
    assert (again.status_code, again.json()["error"]["code"]) == (409, "already_sent")
    assert client.post("/v1/deliveries/retry").json() == {"retried": 2, "sent": 2}
    assert client.get("/v1/deliveries?status=failed").json()["deliveries"] == []
    assert client.get("/v1/deliveries").json()["counts"] == {"sent": 3}
    assert client.get("/v1/ops").json()["undelivered_total"] == 0
    metrics = client.get("/metrics").text
    assert 'sessiongate_deliveries_total{status="sent"} 3.0' in metrics
    assert 'sessiongate_deliveries_total{status="failed"} 3.0' in metrics


def test_bad_filters_and_unknown_ids_are_clear_errors(client):
    bad = client.get("/v1/deliveries?status=lost")
    assert (bad.status_code, bad.json()["error"]["code"]) == (422, "invalid_request")
    assert client.get("/v1/deliveries?limit=0").status_code == 422
    missing = client.post("/v1/deliveries/424242/retry")
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "delivery_not_found")
    assert client.post("/v1/deliveries/0/retry").status_code == 422


def test_webhook_events_are_listed_and_a_dead_one_retried(client, runner, store):
    OutboxStore(store).subscribe({"http://127.0.0.1:9/none": ["session.created"]})
    store.get_or_create_session(LoopbackAdapter().source("w"))
    (event,) = client.get("/v1/webhooks/events?status=pending").json()["events"]
    assert event["event"] == "session.created"
    not_dead = client.post(f"/v1/webhooks/events/{event['id']}/retry")
    assert (not_dead.status_code, not_dead.json()["error"]["code"]) == (409, "event_not_dead")
    row = runner.outbox.get(event["id"])
    runner.outbox.mark_failed(row, "HTTP 500", max_attempts=1, backoff=1, backoff_max=1)
    assert client.get("/v1/webhooks/events?status=dead").json()["events"][0]["reason"] == (
        "HTTP 500"
    )
    retried = client.post(f"/v1/webhooks/events/{event['id']}/retry")
    assert (retried.status_code, retried.json()["status"]) == (200, "pending")
    assert client.post("/v1/webhooks/events/77/retry").status_code == 404
    assert client.get("/v1/webhooks/events?status=lost").status_code == 422
