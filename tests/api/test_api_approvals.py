"""`GET /v1/approvals` and `POST /v1/approvals/{id}`: the operator lists and decides tool
approvals; one decision per approval, bound to the call when its hash is given; bad input is
a clear 4xx that changes nothing; the bearer token is checked before the body is read."""

from __future__ import annotations

import json

import pytest

from sessiongate import GatewayConfig

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def config() -> GatewayConfig:
    return GatewayConfig(api={"token": TOKEN})


def pending(runner, call_id: str = "call_1", timeout: float = 600):
    row, _ = runner.approvals.book.request(
        turn_id=3,
        call_id=call_id,
        session_key="agent:main:api:dm:alice",
        tool="delete_file",
        arguments=json.dumps({"path": "/srv/data"}),
        approvers=["api:alice"],
        timeout_seconds=timeout,
    )
    return row


def test_the_operator_lists_and_decides_an_approval_once(client, runner) -> None:
    row = pending(runner)
    listed = client.get("/v1/approvals?status=pending", headers=AUTH)
    assert listed.status_code == 200
    [shown] = listed.json()["approvals"]
    assert shown["id"] == row.id
    assert shown["tool"] == "delete_file"
    assert json.loads(shown["arguments"]) == {"path": "/srv/data"}
    assert shown["approvers"] == ["api:alice"]
    assert shown["status"] == "pending"
    decided = client.post(
        f"/v1/approvals/{row.id}",
        json={"decision": "approve", "arguments_sha256": shown["arguments_sha256"]},
        headers=AUTH,
    )
    assert decided.status_code == 200, decided.text
    assert decided.json()["status"] == "approved"
    assert decided.json()["decided_by"] == "operator"
    again = client.post(f"/v1/approvals/{row.id}", json={"decision": "deny"}, headers=AUTH)
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "approval_decided"
    assert client.get(f"/v1/approvals/{row.id}", headers=AUTH).json()["status"] == "approved"
    assert client.get("/v1/approvals?status=pending", headers=AUTH).json()["approvals"] == []


def test_a_decision_for_another_call_changes_nothing(client, runner) -> None:
    row = pending(runner)
    other = client.post(
        f"/v1/approvals/{row.id}",
        json={"decision": "approve", "arguments_sha256": "0" * 64},
        headers=AUTH,
    )
    assert other.status_code == 409
    assert runner.approvals.book.get(row.id).status == "pending"


def test_an_expired_approval_cannot_be_decided(client, runner, clock) -> None:
    row = pending(runner, timeout=60)
    clock.advance(61)
    late = client.post(f"/v1/approvals/{row.id}", json={"decision": "approve"}, headers=AUTH)
    assert late.status_code == 409
    assert "expired" in late.json()["error"]["message"]
    assert client.get("/v1/approvals?status=expired", headers=AUTH).json()["approvals"]


@pytest.mark.parametrize(
    ("path", "body", "status"),
    [
        ("/v1/approvals/abc123", {"decision": "approve"}, 404),
        ("/v1/approvals/not-hex!", {"decision": "approve"}, 422),
        ("/v1/approvals/{id}", {"decision": "maybe"}, 422),
        ("/v1/approvals/{id}", {"decision": "approve", "extra": 1}, 422),
        ("/v1/approvals/{id}", {"decision": "approve", "arguments_sha256": "short"}, 422),
        ("/v1/approvals/{id}", None, 422),
    ],
)
def test_bad_input_is_a_clear_error_that_changes_nothing(
    client, runner, path, body, status
) -> None:
    row = pending(runner)
    response = client.post(path.format(id=row.id), json=body, headers=AUTH)
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"]
    assert runner.approvals.book.get(row.id).status == "pending"


def test_the_token_is_checked_before_the_body(client, runner) -> None:
    row = pending(runner)
    response = client.post(f"/v1/approvals/{row.id}", content=b"{not json")
    assert response.status_code == 401
    assert client.get("/v1/approvals").status_code == 401
    assert runner.approvals.book.get(row.id).status == "pending"


def test_a_bad_status_filter_is_refused(client) -> None:
    response = client.get("/v1/approvals?status=whatever", headers=AUTH)
    assert response.status_code == 422
