"""The conversation tree over a real HTTP server: nothing moves the active path under a running
turn, and rewind and fork answer the same mistake the same way, in words that name the field."""

from __future__ import annotations

import asyncio
import re

import httpx
import pytest

from live_server import serving
from sessiongate.api.app import create_app
from sessiongate.gateway import GatewayRunner
from sessiongate.testing.agents import HeldAgent


def _path(key: str, suffix: str = "") -> str:
    from urllib.parse import quote

    return f"/v1/sessions/{quote(key, safe='')}{suffix}"


async def test_the_tree_does_not_move_under_a_running_turn_over_http(
    tmp_path, store, config, clock
):
    agent = HeldAgent()
    agent.release.set()  # the first turn runs straight through
    runner = GatewayRunner(
        store, config, home=tmp_path / "home", clock=clock, agent_factory=lambda key: agent
    )
    await runner.start()
    try:
        async with serving(create_app(runner, store, config)) as server:
            assert server.bound is not None
            host, port = server.bound
            async with httpx.AsyncClient(base_url=f"http://{host}:{port}", timeout=30) as http:
                first = await http.post("/v1/messages", json={"chat_id": "a", "text": "one"})
                key = first.json()["session_key"]
                before = (await http.get(_path(key, "/transcript"))).json()["events"]
                agent.release = asyncio.Event()
                agent.started.clear()
                # Sent without waiting, as a client that polls would.
                queued = await http.post(
                    "/v1/messages", json={"chat_id": "a", "text": "two", "wait": False}
                )
                assert queued.status_code == 202
                await agent.started.wait()
                user_entry = before[0]["id"]
                for suffix, body in [
                    ("/rewind", {"turns": 1}),
                    ("/rewind", {"entry_id": user_entry}),
                    ("/fork", {"entry_id": user_entry}),
                    ("/fork", {}),
                    ("/fork", None),
                    ("/branches/switch", {"leaf_entry_id": user_entry}),
                ]:
                    response = await http.post(_path(key, suffix), json=body)
                    assert response.status_code == 409, (suffix, body, response.text)
                    assert response.json()["error"]["code"] == "session_busy"
                agent.release.set()
                await runner.wait_idle()
                after = (await http.get(_path(key, "/transcript"))).json()["events"]
    finally:
        agent.release.set()
        await runner.stop()
    # The running turn's messages landed after the first turn's, on one unbroken path.
    assert [e["content"] for e in after] == ["one", "done", "two", "done"]
    assert [e["parent_id"] for e in after[1:]] == [e["id"] for e in after[:-1]]


@pytest.fixture
def tree(client, send, key_path):
    """A conversation of two turns, with the second rewound onto a branch of its own."""
    key = send("first")["session_key"]
    send("second")
    events = client.get(key_path(key, "/transcript")).json()["events"]
    client.post(key_path(key, "/rewind"), json={"entry_id": events[2]["id"]})
    return key, events


@pytest.mark.parametrize(
    ("which", "status", "code"),
    [
        ("missing", 404, "entry_not_found"),
        ("off the active path", 404, "entry_not_found"),
        ("a reply off the active path", 404, "entry_not_found"),
        ("a reply", 400, "invalid_entry"),
    ],
)
def test_rewind_and_fork_refuse_a_bad_entry_alike(client, key_path, tree, which, status, code):
    key, events = tree
    entry_id = {
        "missing": 10**9,
        "off the active path": events[2]["id"],
        "a reply off the active path": events[3]["id"],
        "a reply": events[1]["id"],
    }[which]
    answers = [
        client.post(key_path(key, suffix), json={"entry_id": entry_id})
        for suffix in ("/rewind", "/fork")
    ]
    for response in answers:
        assert response.status_code == status, response.text
    assert answers[0].json() == answers[1].json()
    assert answers[0].json()["error"]["code"] == code
    # Nothing moved and nothing was made.
    assert client.get(key_path(key, "/transcript")).json()["events"] == events[:2]
    assert client.get("/v1/sessions").json()["total"] == 1


def test_a_fork_without_a_body_is_a_fork_of_the_active_branch(client, send, key_path):
    key = send("first")["session_key"]
    bare = client.post(key_path(key, "/fork"))
    assert bare.status_code == 200, bare.text
    empty = client.post(key_path(key, "/fork"), json={})
    for response in (bare, empty):
        child = response.json()["session_key"]
        copied = client.get(key_path(child, "/transcript")).json()["events"]
        assert [e["content"] for e in copied] == ["first", "echo: first"]


_CLASS_NAME = re.compile(r"\b[A-Z][a-z]+[A-Z]\w*")


@pytest.mark.parametrize(
    ("suffix", "body", "message"),
    [
        ("/rewind", {"turns": 0}, "turns: Input should be greater than or equal to 1"),
        ("/rewind", {"turns": 10_001}, "turns: Input should be less than or equal to 10000"),
        ("/rewind", {"entry_id": "7"}, "entry_id: Input should be a valid integer"),
        ("/rewind", {}, "give exactly one of entry_id (a user message's id) and turns"),
        ("/rewind", {"entry_id": 1, "turns": 1}, "give exactly one of entry_id"),
        ("/rewind", {"turn": 1}, "turn: not a field of this request; the fields are entry_id, "),
        ("/fork", {"entry_id": -1}, "entry_id: Input should be greater than or equal to 0"),
        ("/fork", {"entry_id": 1, "fork_from": "active"}, "give entry_id or fork_from, not both"),
        ("/fork", {"fork_from": "x"}, "fork_from: Input should be 'active' or 'last-completed'"),
        ("/branches/switch", {}, "leaf_entry_id: required"),
        ("", {"archived": True}, "expected_session_id is required with archived: true"),
        ("", [1], "the body must be a JSON object"),
    ],
)
def test_validation_errors_name_the_field_and_what_it_allows(
    client, send, key_path, suffix, body, message
):
    key = send("first")["session_key"]
    method = "PATCH" if suffix == "" else "POST"
    response = client.request(method, key_path(key, suffix), json=body)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert error["message"].startswith(message), error["message"]
    assert not _CLASS_NAME.search(response.text), response.text
    row = client.get(key_path(key)).json()
    assert row["archived"] is False
    assert len(client.get(key_path(key, "/transcript")).json()["events"]) == 2


def test_archiving_names_its_session(client, send, key_path):
    sent = send("first")
    key = sent["session_key"]
    archived = client.patch(
        key_path(key), json={"archived": True, "expected_session_id": sent["session_id"]}
    )
    assert archived.json()["archived"] is True


def test_query_parameters_are_named_too(client):
    response = client.get("/v1/sessions?limit=0")
    assert response.json()["error"]["message"] == (
        "limit: Input should be greater than or equal to 1"
    )
