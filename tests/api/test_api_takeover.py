"""`/v1/sessions/{key}/takeover` and `/v1/sessions/{key}/reply`: the operator takes a session
over, people's messages are held (stored, not answered), the operator's reply is stored as the
assistant's, hand-back lets the agent answer; bad input is a clear 4xx that changes nothing,
and the bearer token is checked before the body is read."""

from __future__ import annotations

import pytest

from sessiongate import GatewayConfig
from sessiongate.store.takeover import TakeoverStore

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
KEY = "agent:main:api:dm:alice"


@pytest.fixture
def config() -> GatewayConfig:
    return GatewayConfig(api={"token": TOKEN, "max_message_chars": 100})


def say(client, text: str) -> dict:
    response = client.post("/v1/messages", json={"chat_id": "alice", "text": text}, headers=AUTH)
    assert response.status_code < 300, response.text
    return response.json()


def transcript(client, key_path) -> list[dict]:
    response = client.get(key_path(KEY, "/transcript"), headers=AUTH)
    assert response.status_code == 200, response.text
    return [e for e in response.json()["events"] if e.get("type", "message") == "message"]


def test_take_over_reply_and_hand_back(client, runner, key_path, clock) -> None:
    assert say(client, "hello")["status"] == "replied"
    path = key_path(KEY, "/takeover")
    assert client.get(path, headers=AUTH).json() == {
        "session_key": KEY,
        "taken_over": False,
        "taken_by": None,
        "since": None,
        "resume_at": None,
    }
    taken = client.post(path, headers=AUTH)
    assert taken.status_code == 201, taken.text
    assert taken.json()["taken_by"] == "operator"
    assert taken.json()["resume_at"] is not None  # the default 60 minutes
    assert client.post(path, headers=AUTH).status_code == 200  # already: unchanged
    held = say(client, "anyone?")
    assert (held["status"], held["reply"]) == ("held", None)
    replied = client.post(key_path(KEY, "/reply"), json={"text": "A person here."}, headers=AUTH)
    assert replied.status_code == 201, replied.text
    assert replied.json()["sent"] is True
    events = transcript(client, key_path)
    assert [(e["role"], e["content"]) for e in events][-3:] == [
        ("assistant", "echo: hello"),
        ("user", "anyone?"),
        ("assistant", "A person here."),
    ]
    assert events[-1]["metadata"]["written_by"] == "operator"
    back = client.delete(path, headers=AUTH)
    assert back.status_code == 200, back.text
    assert back.json()["taken_over"] is False
    again = client.delete(path, headers=AUTH)
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "not_taken_over"
    refused = client.post(key_path(KEY, "/reply"), json={"text": "late"}, headers=AUTH)
    assert refused.status_code == 409
    assert say(client, "and now?")["status"] == "replied"


def test_hand_back_answers_a_message_left_unanswered(client, runner, key_path) -> None:
    say(client, "hello")
    assert client.post(key_path(KEY, "/takeover"), headers=AUTH).status_code == 201
    say(client, "waiting for someone")
    assert client.delete(key_path(KEY, "/takeover"), headers=AUTH).status_code == 200
    client.portal.call(runner.wait_idle)
    roles = [e["role"] for e in transcript(client, key_path)]
    assert roles[-3:] == ["user", "user", "assistant"]  # the agent answered at once


def test_auth_unknown_sessions_and_bad_input(client, runner, key_path, store) -> None:
    say(client, "hello")
    path = key_path(KEY, "/takeover")
    assert client.post(path).status_code == 401
    assert client.get(path).status_code == 401
    # The token is checked before the body is read: a bad body without it is still a 401.
    assert client.post(key_path(KEY, "/reply"), content=b"{").status_code == 401
    missing = key_path("agent:main:api:dm:nobody", "/takeover")
    assert client.post(missing, headers=AUTH).status_code == 404
    assert client.get(missing, headers=AUTH).status_code == 404
    assert client.post(key_path("not a key", "/takeover"), headers=AUTH).status_code == 400
    assert client.post(path, headers=AUTH).status_code == 201
    reply = key_path(KEY, "/reply")
    for body, status in (
        ({"text": ""}, 422),
        ({"text": "   "}, 422),
        ({"text": 5}, 422),
        ({"text": "hi", "extra": 1}, 422),
        ({}, 422),
        ({"text": "x" * 101}, 413),
    ):
        response = client.post(reply, json=body, headers=AUTH)
        assert response.status_code == status, (body, response.text)
        assert "error" in response.json()
    json_type = {**AUTH, "Content-Type": "application/json"}
    not_json = client.post(reply, content=b"{", headers=json_type)
    assert 400 <= not_json.status_code < 500
    assert [e["role"] for e in transcript(client, key_path)] == ["user", "assistant"]
    assert TakeoverStore(store).get(KEY) is not None
