"""`POST /v1/erasure`: the token first, then the body; a plan changes nothing; the erasure
answers its receipt and the person's lane is gone."""

from __future__ import annotations

import pytest

from sessiongate import GatewayConfig

TOKEN = "erasure-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def config() -> GatewayConfig:
    return GatewayConfig(api={"token": TOKEN})


def test_erasure_needs_the_token_before_its_body_is_read(client):
    response = client.post("/v1/erasure", content=b"{not json")
    assert response.status_code == 401


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"user": "nocolon"}, 400),
        ({"user": "api:"}, 400),
        ({"user": "api:x", "dry_run": "yes"}, 422),
        ({"user": "api:x", "extra": 1}, 422),
        ({}, 422),
    ],
)
def test_a_bad_request_is_refused_and_changes_nothing(client, store, body, status):
    response = client.post("/v1/erasure", json=body, headers=AUTH)
    assert response.status_code == status, response.text
    assert "error" in response.json()
    assert store.erasure_receipts() == []


def test_a_plan_then_the_erasure(client, store):
    sent = client.post(
        "/v1/messages",
        json={"chat_id": "carol9", "user_id": "carol9", "text": "carol secret QQCAROL"},
        headers=AUTH,
    )
    assert sent.status_code == 200, sent.text
    key = sent.json()["session_key"]

    plan = client.post("/v1/erasure", json={"user": "api:carol9", "dry_run": True}, headers=AUTH)
    assert plan.status_code == 200, plan.text
    assert plan.json()["keys"] == [key]
    assert plan.json()["receipt_id"] is None
    assert store.get_session(key) is not None

    done = client.post("/v1/erasure", json={"user": "api:carol9"}, headers=AUTH)
    assert done.status_code == 200, done.text
    body = done.json()
    assert body["counts"]["lanes_deleted"] == 1
    assert body["receipt_id"] is not None
    assert store.get_session(key) is None
    assert store.search("QQCAROL") == []
    assert [r["id"] for r in store.erasure_receipts()] == [body["receipt_id"]]
