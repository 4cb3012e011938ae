from __future__ import annotations

import pytest

from sessiongate import GatewayConfig, Platform, SessionSource
from sessiongate.api.schemas import MAX_KEY_COMPONENT_CHARS
from sessiongate.core.keys import MAX_KEY_CHARS, PARTICIPANT_TAG, build_session_key
from sessiongate.core.source import ChatType


def test_a_message_gets_the_echo_reply_on_the_api_platform(send):
    body = send("hello there")
    assert body["status"] == "replied"
    assert body["reply"] == "echo: hello there"
    assert body["session_key"] == "agent:main:api:dm:alice"
    assert body["session_id"]


def test_the_conversation_is_stored_and_listed(client, send, key_path):
    first = send("one")
    send("two")
    rows = client.get("/v1/sessions").json()["sessions"]
    assert [r["session_key"] for r in rows] == [first["session_key"]]
    events = client.get(key_path(first["session_key"], "/transcript")).json()["events"]
    assert [e["content"] for e in events] == ["one", "echo: one", "two", "echo: two"]


def test_a_retry_with_the_same_message_id_runs_no_second_turn(client, send, key_path):
    first = send("once", message_id="m-1")
    again = send("once", message_id="m-1")
    assert first["status"] == "replied"
    assert again["status"] == "duplicate"
    events = client.get(key_path(first["session_key"], "/transcript")).json()["events"]
    assert [e["content"] for e in events] == ["once", "echo: once"]


def test_a_reused_message_id_never_answers_with_another_persons_lane(client, send, key_path):
    # Per-user group lanes (the default): Alice and Bob both pick message_id "1".
    group = {"chat_id": "room", "chat_type": "group", "message_id": "1"}
    alice = send("alice's question", user_id="alice", **group)
    bob = send("bob's question", user_id="bob", **group)
    assert bob["status"] == "replied"
    assert bob["session_key"] != alice["session_key"]
    assert bob["reply"] == "echo: bob's question"
    events = client.get(key_path(bob["session_key"], "/transcript")).json()["events"]
    assert [e["content"] for e in events] == ["bob's question", "echo: bob's question"]
    # Two threads of one chat, same sender and id: two messages.
    first = send("in seven", thread_id="7", user_id="alice", **group)
    second = send("in eight", thread_id="8", user_id="alice", **group)
    assert (first["status"], second["status"]) == ("replied", "replied")
    assert second["session_key"] != first["session_key"]
    assert second["reply"].endswith("in eight")  # a shared thread's lane names its senders


def test_a_reused_message_id_with_new_text_is_409_and_discloses_nothing(client, send):
    first = send("the original", message_id="m-9")
    response = client.post(
        "/v1/messages", json={"chat_id": "alice", "text": "a different one", "message_id": "m-9"}
    )
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "message_id_conflict"
    for leaked in (first["session_key"], first["session_id"], "original", "echo"):
        assert leaked not in response.text
    # The retry of the original is still the ordinary duplicate.
    assert send("the original", message_id="m-9")["status"] == "duplicate"


def test_wait_false_answers_202_queued(client, runner):
    response = client.post("/v1/messages", json={"chat_id": "q", "text": "later", "wait": False})
    assert response.status_code == 202
    assert response.json()["status"] == "queued"
    client.portal.call(runner.wait_idle)
    key = response.json()["session_key"]
    assert client.get("/v1/sessions").json()["sessions"][0]["session_key"] == key


def test_group_sources_get_their_own_lanes(send):
    a = send("hi", chat_id="room", chat_type="group", user_id="u1")
    b = send("hi", chat_id="room", chat_type="group", user_id="u2")
    assert a["session_key"] != b["session_key"]


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"text": "no chat"}, 422, "invalid_request"),
        ({"chat_id": "a"}, 422, "invalid_request"),
        ({"chat_id": "a", "text": ""}, 422, "invalid_request"),
        ({"chat_id": 5, "text": "x"}, 422, "invalid_request"),
        ({"chat_id": "a", "text": "x", "wait": "yes"}, 422, "invalid_request"),
        ({"chat_id": "a", "text": "x", "platform": "telegram"}, 422, "invalid_request"),
        ({"chat_id": "a", "text": "x", "role_authorized": True}, 422, "invalid_request"),
        ({"chat_id": "a", "text": "x", "chat_type": "space"}, 422, "invalid_request"),
        ([1, 2], 422, "invalid_request"),
    ],
)
def test_bad_message_bodies_are_4xx_with_a_code(client, body, status, code):
    response = client.post("/v1/messages", json=body)
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code


def test_a_lone_surrogate_is_refused_not_stored(client):
    response = client.post(
        "/v1/messages",
        content=b'{"chat_id": "a", "text": "\\ud800"}',
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 422
    assert client.get("/v1/sessions").json()["total"] == 0


def test_malformed_json_is_a_400(client):
    response = client.post(
        "/v1/messages", content=b'{"chat_id": ', headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_json"


def test_a_body_that_is_not_json_is_a_415(client):
    response = client.post("/v1/messages", content=b"chat_id=a&text=b")
    assert response.status_code == 415
    assert response.json()["error"]["code"] == "unsupported_media_type"


class TestLimits:
    @pytest.fixture
    def config(self) -> GatewayConfig:
        return GatewayConfig(api={"max_body_bytes": 2048, "max_message_chars": 100})

    def test_text_over_the_limit_is_a_413(self, client):
        response = client.post("/v1/messages", json={"chat_id": "a", "text": "x" * 101})
        assert response.status_code == 413
        assert response.json()["error"]["code"] == "message_too_long"

    def test_a_body_over_the_limit_is_refused_before_parsing(self, client):
        response = client.post(
            "/v1/messages",
            content=b"{" + b" " * 4096 + b"}",
            headers={"Content-Type": "application/json"},
        )
        assert response.status_code == 413
        assert response.json()["error"]["code"] == "payload_too_large"

    def test_a_chunked_body_over_the_limit_is_refused(self, client):
        def chunks():
            for _ in range(10):
                yield b" " * 1000

        response = client.post(
            "/v1/messages", content=chunks(), headers={"Content-Type": "application/json"}
        )
        assert response.status_code == 413

    def test_a_body_at_the_limit_is_accepted(self, client):
        body = b'{"chat_id": "a", "text": "hi"}'
        padded = body[:-1] + b" " * (2048 - len(body)) + b"}"
        response = client.post(
            "/v1/messages", content=padded, headers={"Content-Type": "application/json"}
        )
        assert response.status_code == 200, response.text


class TestAllowList:
    @pytest.fixture
    def config(self) -> GatewayConfig:
        return GatewayConfig(platforms={"api": {"allow_from": ["trusted"]}})

    def test_a_sender_off_the_allow_list_is_a_403_and_creates_nothing(self, client):
        response = client.post(
            "/v1/messages", json={"chat_id": "a", "user_id": "stranger", "text": "hi"}
        )
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "unauthorized"
        assert client.get("/v1/sessions").json()["total"] == 0

    def test_a_sender_on_the_allow_list_is_answered(self, client):
        response = client.post(
            "/v1/messages", json={"chat_id": "a", "user_id": "trusted", "text": "hi"}
        )
        assert response.json()["status"] == "replied"


# Per-user threads: a key then holds a chat id, a thread id and a participant id.
PER_USER_THREADS = GatewayConfig(thread_sessions_per_user=True)


@pytest.mark.parametrize("config", [PER_USER_THREADS])
def test_the_longest_valid_body_makes_a_key_every_session_route_takes(client, key_path):
    # A session the API creates must stay reachable by key: each key component id is bounded
    # so that, escaped, the key stays under the key routes' bound.
    longest = MAX_KEY_COMPONENT_CHARS
    worst = ":" * longest  # every `:` is escaped to three characters
    source = SessionSource(
        platform=Platform.API,
        chat_id=worst,
        chat_type=ChatType.CHANNEL,
        thread_id=worst,
        user_id=worst,
        user_id_alt=worst,
    )
    built = build_session_key(source, thread_sessions_per_user=True)
    # A collision tag and one fork suffix on top are still within the bound.
    assert len(built) + len(PARTICIPANT_TAG) + len(":%f") + 32 <= MAX_KEY_CHARS
    body = {
        "chat_id": worst,
        "chat_type": "channel",
        "thread_id": worst,
        "user_id": worst,
        "user_id_alt": worst,
        "chat_id_alt": worst,
        "guild_id": worst,
        "parent_chat_id": worst,
        "chat_name": "n" * 1024,
        "user_name": "u" * 1024,
        "chat_topic": "t" * 1024,
        "text": "long ids",
    }
    sent = client.post("/v1/messages", json=body)
    assert sent.status_code == 200, sent.text
    key = sent.json()["session_key"]
    assert key == built
    row = client.get(key_path(key))
    assert row.status_code == 200, row.text
    transcript = client.get(key_path(key, "/transcript"))
    assert transcript.status_code == 200, transcript.text
    assert [e["content"] for e in transcript.json()["events"]] == ["long ids", "echo: long ids"]


@pytest.mark.parametrize(
    "field",
    ["chat_id", "thread_id", "user_id", "user_id_alt", "chat_id_alt", "guild_id", "parent_chat_id"],
)
def test_a_key_component_id_over_the_bound_is_a_422(client, field):
    body = {"chat_id": "c", "chat_type": "thread", "text": "x"}
    body[field] = "i" * (MAX_KEY_COMPONENT_CHARS + 1)
    response = client.post("/v1/messages", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "invalid_request"
    assert field in response.json()["error"]["message"]
