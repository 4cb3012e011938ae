"""Sessions addressed by key over HTTP: creating sessions, incognito lanes, messages to forks."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from sessiongate import SessionStore
from sessiongate.agents import build_agent_factory
from sessiongate.api.app import create_app
from sessiongate.gateway import GatewayRunner


def _create(client, **fields) -> dict:
    response = client.post("/v1/sessions", json={"chat_id": "alice", **fields})
    assert response.status_code in (200, 201), response.text
    return response.json()


def _say(client, key_path, key: str, text: str, **fields) -> dict:
    response = client.post(key_path(key, "/messages"), json={"text": text, **fields})
    assert response.status_code in (200, 202), response.text
    return response.json()


def _contents(client, key_path, key: str) -> list[str]:
    events = client.get(key_path(key, "/transcript")).json()["events"]
    return [e["content"] for e in events if e["type"] == "message"]


def test_creating_a_session_returns_the_lane_a_source_routes_to(client, send):
    created = client.post("/v1/sessions", json={"chat_id": "bob"})
    assert created.status_code == 201
    row = created.json()
    assert (row["session_key"], row["incognito"]) == ("agent:main:api:dm:bob", False)
    again = client.post("/v1/sessions", json={"chat_id": "bob"})
    assert again.status_code == 200
    assert again.json()["session_id"] == row["session_id"]
    assert send("hi", chat_id="bob")["session_id"] == row["session_id"]


def test_an_incognito_session_chats_through_the_gateway(client, key_path):
    row = _create(client, incognito=True)
    key = row["session_key"]
    assert row["incognito"] is True
    assert key.startswith("agent:main:api:dm:alice:%f")
    reply = _say(client, key_path, key, "whisper", message_id="w-1")
    assert (reply["status"], reply["reply"], reply["session_key"]) == (
        "replied",
        "echo: whisper",
        key,
    )
    turn = client.get(f"/v1/turns/{reply['turn_id']}").json()
    assert (turn["session_key"], turn["reply"]) == (key, "echo: whisper")
    assert _say(client, key_path, key, "whisper", message_id="w-1")["status"] == "duplicate"
    assert _contents(client, key_path, key) == ["whisper", "echo: whisper"]
    assert client.get(key_path(key)).json()["incognito"] is True


def test_incognito_sessions_are_hidden_from_search_and_listings(client, key_path, send):
    send("plain words", chat_id="bob")
    key = _create(client, incognito=True)["session_key"]
    _say(client, key_path, key, "secret words")
    listed = client.get("/v1/sessions").json()
    assert [r["session_key"] for r in listed["sessions"]] == ["agent:main:api:dm:bob"]
    hidden = client.get("/v1/sessions", params={"incognito": True}).json()
    assert ([r["session_key"] for r in hidden["sessions"]], hidden["total"]) == ([key], 1)
    hits = client.get("/v1/search", params={"q": "words"}).json()["results"]
    assert {h["session_key"] for h in hits} == {"agent:main:api:dm:bob"}


def test_nothing_of_an_incognito_conversation_reaches_the_disk(client, key_path, store, runner):
    key = _create(client, incognito=True)["session_key"]
    _say(client, key_path, key, "zebra-quartz-7781")
    _say(client, key_path, key, "/status")
    queued = _say(client, key_path, key, "zebra-quartz-later", wait=False)
    assert queued["status"] == "queued"
    client.portal.call(runner.wait_idle)
    store.database.checkpoint_now()
    for path in store.sessions_dir.rglob("*"):
        if path.is_file():
            assert b"zebra-quartz" not in path.read_bytes(), path
    with store.database.read() as conn:
        assert conn.execute("SELECT count(*) FROM inbox").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM turns").fetchone()[0] == 0
    assert _contents(client, key_path, key)[-2:] == [
        "zebra-quartz-later",
        "echo: zebra-quartz-later",
    ]


def test_a_fork_takes_messages_and_leaves_its_parent_alone(client, key_path, send):
    first = send("one")
    send("two")
    parent = first["session_key"]
    fork = client.post(key_path(parent, "/fork"), json={"fork_from": "active"})
    assert fork.status_code == 200, fork.text
    child = fork.json()["session_key"]
    reply = _say(client, key_path, child, "three on the fork")
    assert reply["session_key"] == child
    assert _contents(client, key_path, child) == [
        "one",
        "echo: one",
        "two",
        "echo: two",
        "three on the fork",
        "echo: three on the fork",
    ]
    assert _contents(client, key_path, parent) == ["one", "echo: one", "two", "echo: two"]
    # No session appeared for the api source the addressed message came in on.
    keys = {r["session_key"] for r in client.get("/v1/sessions").json()["sessions"]}
    assert keys == {parent, child}


def test_commands_run_on_the_addressed_lane(client, key_path, send):
    parent = send("one")["session_key"]
    child = client.post(key_path(parent, "/fork"), json={"fork_from": "active"}).json()
    before = client.get(key_path(parent)).json()["session_id"]
    answer = _say(client, key_path, child["session_key"], "/new")
    assert answer["status"] == "command"
    assert answer["session_id"] != child["session_id"]
    assert client.get(key_path(parent)).json()["session_id"] == before


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({}, 422, "invalid_request"),
        ({"text": ""}, 422, "invalid_request"),
        ({"text": "x", "chat_id": "a"}, 422, "invalid_request"),
        ({"text": "x", "wait": "no"}, 422, "invalid_request"),
    ],
)
def test_bad_addressed_messages_are_refused(client, key_path, send, body, status, code):
    key = send("hi")["session_key"]
    response = client.post(key_path(key, "/messages"), json=body)
    assert (response.status_code, response.json()["error"]["code"]) == (status, code)
    assert _contents(client, key_path, key) == ["hi", "echo: hi"]


def test_a_message_to_an_unknown_key_is_a_404_and_writes_nothing(client, key_path, store):
    response = client.post(key_path("agent:main:api:dm:nobody", "/messages"), json={"text": "x"})
    assert (response.status_code, response.json()["error"]["code"]) == (404, "session_not_found")
    assert client.get("/v1/sessions").json()["total"] == 0
    with store.database.read() as conn:
        assert conn.execute("SELECT count(*) FROM inbox").fetchone()[0] == 0


def test_a_message_to_an_archived_session_is_a_409(client, key_path, send):
    sent = send("hi")
    key = sent["session_key"]
    archived = client.patch(
        key_path(key), json={"archived": True, "expected_session_id": sent["session_id"]}
    )
    assert archived.status_code == 200
    for response in (
        client.post("/v1/messages", json={"chat_id": "alice", "text": "more"}),
        client.post(key_path(key, "/messages"), json={"text": "more"}),
    ):
        assert (response.status_code, response.json()["error"]["code"]) == (
            409,
            "session_archived",
        )
    assert _contents(client, key_path, key) == ["hi", "echo: hi"]


@pytest.mark.parametrize(
    "body",
    [
        {"chat_id": "a", "incognito": "yes"},
        {"incognito": True},
        {"chat_id": "a", "text": "not here"},
        {"chat_id": "a", "platform": "telegram"},
    ],
)
def test_bad_session_creations_are_refused(client, body):
    response = client.post("/v1/sessions", json=body)
    assert (response.status_code, response.json()["error"]["code"]) == (422, "invalid_request")
    assert client.get("/v1/sessions").json()["total"] == 0


def test_an_incognito_key_is_refused_after_a_restart(tmp_path, clock, config, key_path):
    def serve(store: SessionStore):
        runner = GatewayRunner(
            store,
            config,
            home=tmp_path / "home",
            clock=clock,
            agent_factory=build_agent_factory(config),
        )
        return runner, TestClient(
            create_app(runner, store, config),
            base_url="http://127.0.0.1",
            raise_server_exceptions=False,
        )

    sessions = tmp_path / "home" / "sessions"
    with SessionStore(sessions, config, clock=clock) as store:
        runner, client = serve(store)
        with client:
            client.portal.call(runner.start)
            key = _create(client, incognito=True)["session_key"]
            assert _say(client, key_path, key, "hello")["status"] == "replied"
            client.portal.call(runner.stop)
    with SessionStore(sessions, config, clock=clock) as store:
        runner, client = serve(store)
        with client:
            client.portal.call(runner.start)
            for response in (
                client.post(key_path(key, "/messages"), json={"text": "again"}),
                client.get(key_path(key)),
            ):
                assert response.status_code == 404
                assert "ended when the gateway restarted" in response.json()["error"]["message"]
            assert client.get("/v1/sessions").json()["total"] == 0
            client.portal.call(runner.stop)


def test_incognito_listing_pages(client):
    keys = [_create(client, chat_id=f"c{i}", incognito=True)["session_key"] for i in range(3)]
    page = client.get("/v1/sessions", params={"incognito": True, "limit": 2, "offset": 1}).json()
    assert page["total"] == 3
    assert len(page["sessions"]) == 2
    assert {r["session_key"] for r in page["sessions"]} <= set(keys)
