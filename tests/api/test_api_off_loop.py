"""On PostgreSQL the API's handlers never make the event loop wait on the database (decision
15): their store calls run through the runner's `StoreCalls`, on the store's threads."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from sessiongate import GatewayConfig

if TYPE_CHECKING:
    from collections.abc import Callable

    from fastapi.testclient import TestClient

    from sessiongate import SessionStore


@pytest.fixture
def backend() -> str:
    return "postgres"


@pytest.fixture
def config() -> GatewayConfig:
    return GatewayConfig(mirror_sessions_json=False)


def _ok(client: TestClient, method: str, path: str, **kwargs: object) -> dict:
    response = client.request(method, path, **kwargs)  # type: ignore[arg-type]
    assert response.status_code < 300, (path, response.text)
    body: dict = response.json()
    return body


def test_requests_on_postgresql_never_make_the_loop_wait(
    client: TestClient, store: SessionStore, key_path: Callable[..., str]
) -> None:
    database = store.database
    waits = database.loop_waits  # what the start did (recovery reads, before serving)

    sent = _ok(client, "POST", "/v1/messages", json={"chat_id": "alice", "text": "hello"})
    assert sent["status"] == "replied"
    key = sent["session_key"]
    again = _ok(client, "POST", key_path(key, "/messages"), json={"text": "and you"})
    assert again["status"] == "replied"

    listed = _ok(client, "GET", "/v1/sessions")["sessions"]
    assert [row["session_key"] for row in listed] == [key]
    assert _ok(client, "GET", key_path(key))["message_count"] == 4
    events = _ok(client, "GET", key_path(key, "/transcript"))["events"]
    assert len(events) >= 4
    assert _ok(client, "GET", key_path(key, "/context"))["session_key"] == key
    assert len(_ok(client, "GET", key_path(key, "/branches"))["branches"]) == 1
    assert _ok(client, "GET", key_path(key, "/takeover"))["taken_over"] is False
    turn = _ok(client, "GET", f"/v1/turns/{sent['turn_id']}")
    assert (turn["state"], turn["session_key"]) == ("delivered", key)
    assert _ok(client, "GET", "/v1/search", params={"q": "hello"})["results"]

    assert _ok(client, "GET", "/v1/deliveries")["deliveries"] == []
    assert _ok(client, "GET", "/v1/webhooks/events")["events"] == []
    job = {"id": "digest", "every": "1h", "session_key": key, "prompt": "digest", "paused": True}
    assert client.post("/v1/jobs", json=job).status_code == 201
    assert [j["id"] for j in _ok(client, "GET", "/v1/jobs")["jobs"]] == ["digest"]
    assert _ok(client, "GET", "/v1/jobs/digest")["paused"] is True
    assert _ok(client, "GET", "/v1/jobs/digest/runs")["runs"] == []
    assert _ok(client, "GET", "/v1/ops")["verdict"] == "healthy"

    unknown = client.get(key_path("agent:main:api:dm:nobody"))
    assert unknown.status_code == 404
    assert unknown.json()["error"]["code"] == "session_not_found"
    assert client.get("/v1/turns/999999").status_code == 404
    assert client.get("/v1/approvals/abc123").status_code == 404

    assert database.loop_waits == waits
