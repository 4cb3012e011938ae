from __future__ import annotations

import asyncio

import httpx
import pytest

from sessiongate import Platform, SessionSource
from sessiongate.api.app import create_app
from sessiongate.core.source import ChatType
from sessiongate.gateway import GatewayRunner
from sessiongate.store.lanes import Inbound, InboxKind
from sessiongate.testing.agents import HeldAgent


def test_list_pages_with_has_more_and_next_offset(client, send):
    for name in ("a", "b", "c"):
        send("hi", chat_id=name)
    page = client.get("/v1/sessions", params={"limit": 2}).json()
    assert (len(page["sessions"]), page["total"], page["has_more"], page["next_offset"]) == (
        2,
        3,
        True,
        2,
    )
    rest = client.get("/v1/sessions", params={"limit": 2, "offset": 2}).json()
    assert (len(rest["sessions"]), rest["has_more"], rest["next_offset"]) == (1, False, None)


def test_a_row_has_the_documented_fields(client, send, key_path):
    key = send("hi")["session_key"]
    row = client.get(key_path(key)).json()
    for name in (
        "session_key",
        "session_id",
        "created_at",
        "updated_at",
        "display_name",
        "platform",
        "chat_type",
        "input_tokens",
        "output_tokens",
        "total_tokens",
        "archived",
        "pinned",
        "unread",
        "label",
        "next_reset_at",
    ):
        assert name in row
    assert (row["platform"], row["chat_type"], row["archived"]) == ("api", "dm", False)
    assert row["total_tokens"] > 0


def test_an_unknown_key_is_404_and_a_malformed_key_400(client, key_path):
    missing = client.get(key_path("agent:main:api:dm:nobody"))
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "session_not_found"
    bad = client.get(key_path("not a key"))
    assert bad.status_code == 400
    assert bad.json()["error"]["code"] == "invalid_session_key"
    control = client.get("/v1/sessions/agent%3Amain%0A")
    assert control.status_code == 400


def test_keys_with_colon_percent_and_slash_round_trip(client, store, key_path):
    entry = store.get_or_create_session(
        SessionSource(
            platform=Platform.MATRIX, chat_id="!r:srv/x%y", chat_type=ChatType.GROUP, user_id="@u:s"
        )
    )
    assert "%3A" in entry.session_key
    assert "/" in entry.session_key
    response = client.get(key_path(entry.session_key))
    assert response.status_code == 200, response.text
    assert response.json()["session_key"] == entry.session_key
    transcript = client.get(key_path(entry.session_key, "/transcript"))
    assert transcript.json()["session_id"] == entry.session_id


def test_transcript_of_all_branches_includes_the_rewound_one(client, send, key_path):
    key = send("first")["session_key"]
    send("second")
    client.post(key_path(key, "/rewind"), json={"turns": 1})
    active = client.get(key_path(key, "/transcript")).json()["events"]
    everything = client.get(key_path(key, "/transcript"), params={"branch": "all"}).json()
    assert [e["content"] for e in active] == ["first", "echo: first"]
    assert len(everything["events"]) == 4
    assert {"id", "parent_id", "type", "timestamp", "role", "content"} <= everything["events"][
        0
    ].keys()
    bad = client.get(key_path(key, "/transcript"), params={"branch": "some"})
    assert bad.status_code == 422


def test_context_is_what_the_next_turn_gets(client, send, key_path):
    key = send("remember this")["session_key"]
    context = client.get(key_path(key, "/context")).json()
    assert context["messages"] == [
        {"role": "user", "content": "remember this"},
        {"role": "assistant", "content": "echo: remember this"},
    ]


def test_search_finds_messages_across_sessions(client, send):
    send("the quick brown fox", chat_id="a")
    send("lazy dogs", chat_id="b")
    found = client.get("/v1/search", params={"q": "fox"}).json()
    assert {hit["session_key"] for hit in found["results"]} == {"agent:main:api:dm:a"}
    assert found["degraded"] is False
    assert client.get("/v1/search", params={"q": 'NOT " OR *'}).status_code == 200
    assert client.get("/v1/search").status_code == 422
    assert client.get("/v1/search", params={"q": "x", "limit": 0}).status_code == 422


def test_reset_starts_a_new_session_id(client, send, key_path):
    first = send("before")
    reset = client.post(key_path(first["session_key"], "/reset"))
    assert reset.status_code == 200
    assert reset.json()["session_id"] != first["session_id"]
    assert client.get(key_path(first["session_key"], "/transcript")).json()["events"] == []
    assert client.post(key_path("agent:main:api:dm:nobody", "/reset")).status_code == 404


def test_patch_pins_labels_and_clears_the_label(client, send, key_path):
    send("a", chat_id="a")
    key = send("b", chat_id="b")["session_key"]
    send("c", chat_id="c")
    row = client.patch(key_path(key), json={"pinned": True, "label": "work"}).json()
    assert (row["pinned"], row["label"]) == (True, "work")
    listed = client.get("/v1/sessions").json()["sessions"]
    assert listed[0]["session_key"] == key
    cleared = client.patch(key_path(key), json={"label": None}).json()
    assert cleared["label"] is None
    assert cleared["pinned"] is True


def test_a_taken_label_is_a_409(client, send, key_path):
    a = send("a", chat_id="a")["session_key"]
    b = send("b", chat_id="b")["session_key"]
    client.patch(key_path(a), json={"label": "same"})
    response = client.patch(key_path(b), json={"label": "same"})
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "conflict"


def test_archive_needs_the_expected_session_id(client, send, key_path):
    sent = send("a")
    key = sent["session_key"]
    stale = client.patch(key_path(key), json={"archived": True, "expected_session_id": "x"})
    assert stale.status_code == 409
    assert stale.json()["error"]["code"] == "stale_write"
    row = client.patch(
        key_path(key), json={"archived": True, "expected_session_id": sent["session_id"]}
    ).json()
    assert row["archived"] is True
    assert client.get("/v1/sessions").json()["total"] == 0
    assert client.get("/v1/sessions", params={"archived": True}).json()["total"] == 1


async def test_archiving_is_refused_while_a_turn_runs_and_its_queue_waits(
    tmp_path, store, config, clock, key_path
):
    # Archiving under a running turn let the lane drop the queued messages it had already
    # acknowledged (202): they never ran, and their ids then answered `duplicate`.
    agent = HeldAgent(lambda request: f"done: {request.messages[-1]['content']}")
    agent.release.set()
    runner = GatewayRunner(
        store, config, home=tmp_path / "home", clock=clock, agent_factory=lambda key: agent
    )
    app = create_app(runner, store, config)
    await runner.start()
    try:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            first = (await http.post("/v1/messages", json={"chat_id": "a", "text": "hi"})).json()
            key, session_id = first["session_key"], first["session_id"]
            agent.release = asyncio.Event()
            agent.started.clear()
            running = asyncio.create_task(
                http.post("/v1/messages", json={"chat_id": "a", "text": "slow"})
            )
            await agent.started.wait()
            queued = await http.post(
                "/v1/messages",
                json={"chat_id": "a", "text": "/queue later", "message_id": "w1", "wait": False},
            )
            assert queued.status_code == 202, queued.text
            archive = {"archived": True, "expected_session_id": session_id}
            refused = await http.patch(key_path(key), json=archive)
            assert refused.status_code == 409, refused.text
            assert refused.json()["error"]["code"] == "session_busy"
            assert (await http.get(key_path(key))).json()["archived"] is False
            agent.release.set()
            assert (await running).json()["status"] == "replied"
            await runner.wait_idle()
            events = (await http.get(key_path(key, "/transcript"))).json()["events"]
            assert "done: later" in [e["content"] for e in events]
            done = await http.patch(key_path(key), json=archive)
            assert done.status_code == 200, done.text
            assert done.json()["archived"] is True
    finally:
        agent.release.set()
        await runner.stop()


def test_archiving_is_refused_while_messages_wait_on_an_idle_lane(client, send, key_path, runner):
    sent = send("hi")
    key = sent["session_key"]
    source = SessionSource(platform=Platform.API, chat_id="alice")
    # A row accepted but not yet picked up (as a restart leaves it before recovery runs).
    runner.lane_store.accept(
        Inbound(source=source, text="waiting", message_id="m-wait"),
        session_key=key,
        session_id=sent["session_id"],
        kind=InboxKind.QUEUED,
        cap=32,
    )
    archive = {"archived": True, "expected_session_id": sent["session_id"]}
    refused = client.patch(key_path(key), json=archive)
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["code"] == "session_busy"
    assert runner.queue_depth(key) == 1
    client.portal.call(runner.wake, key)
    client.portal.call(runner.wait_idle)
    assert client.patch(key_path(key), json=archive).json()["archived"] is True


def test_unread_marker_and_conditional_ack(client, send, key_path):
    key = send("a")["session_key"]
    marked = client.patch(key_path(key), json={"unread": True}).json()
    assert marked["unread"] is True
    stale_ack = client.patch(
        key_path(key), json={"unread": False, "expected_marked_unread_at": None}
    ).json()
    assert stale_ack["unread"] is True
    ack = client.patch(
        key_path(key),
        json={"unread": False, "expected_marked_unread_at": marked["marked_unread_at"]},
    ).json()
    assert ack["unread"] is False


def test_patch_refuses_unknown_fields_and_wrong_types(client, send, key_path):
    key = send("a")["session_key"]
    assert client.patch(key_path(key), json={"colour": "red"}).status_code == 422
    assert client.patch(key_path(key), json={"pinned": "yes"}).status_code == 422
    assert client.patch(key_path(key), json={"label": ""}).status_code == 422
    assert client.patch(key_path(key), json={"label": "x" * 513}).status_code == 422


def test_delete_removes_the_session_and_archives_it_first(client, send, key_path, store):
    key = send("bye")["session_key"]
    response = client.delete(key_path(key))
    assert response.status_code == 200
    assert response.json() == {"deleted": True, "session_key": key}
    assert client.get(key_path(key)).status_code == 404
    assert client.delete(key_path(key)).status_code == 404
    assert list((store.sessions_dir / "archive").glob("*.json.gz"))


def test_patch_chooses_the_model_and_records_it_in_the_transcript(client, send, key_path):
    key = send("hi")["session_key"]
    row = client.patch(key_path(key), json={"model": "m-1", "thinking_level": "high"}).json()
    assert (row["model_override"], row["thinking_level"]) == ("m-1", "high")
    context = client.get(key_path(key, "/context")).json()
    assert (context["model"], context["thinking_level"]) == ("m-1", "high")
    kinds = [e["type"] for e in client.get(key_path(key, "/transcript")).json()["events"]]
    assert kinds[-2:] == ["model_change", "thinking_level_change"]
    back = client.patch(key_path(key), json={"model": None}).json()
    assert back["model_override"] is None
    bad = client.patch(key_path(key), json={"model": ""})
    assert (bad.status_code, bad.json()["error"]["code"]) == (422, "invalid_request")


@pytest.mark.parametrize("mode", ["boundary", "new_session"])
def test_reset_can_keep_the_last_exchange(client, send, key_path, mode):
    for text in ("one", "two", "three", "four"):
        sent = send(text)
    key = sent["session_key"]
    response = client.post(key_path(key, "/reset"), json={"mode": mode, "keep_tail": True})
    assert response.status_code == 200, response.text
    assert (response.json()["session_id"] == sent["session_id"]) is (mode == "boundary")
    context = client.get(key_path(key, "/context")).json()["messages"]
    assert [m["content"] for m in context] == [
        "two",
        "echo: two",
        "three",
        "echo: three",
        "four",
        "echo: four",
    ]


def test_reset_with_a_bad_body_changes_nothing(client, send, key_path):
    sent = send("hi")
    response = client.post(key_path(sent["session_key"], "/reset"), json={"mode": "sideways"})
    assert response.status_code == 422
    assert client.get(key_path(sent["session_key"])).json()["session_id"] == sent["session_id"]


def test_the_context_route_shows_the_session_prompt_a_turn_gets(client, send, key_path):
    key = send("hi")["session_key"]
    context = client.get(key_path(key, "/context")).json()
    assert context["system_prompt"].startswith("## Current Session Context")
    assert "- Platform: api" in context["system_prompt"]


def test_list_and_row_carry_the_last_message_the_count_and_the_model(client, send, key_path):
    send("first line of a question\nand its second line", chat_id="preview")
    key = send("another\n\n  second ask\nmore", chat_id="preview")["session_key"]
    row = client.get(key_path(key)).json()
    assert row["message_count"] == 4
    assert row["last_message"]["role"] == "assistant"
    assert row["last_message"]["text"] == "echo: another"  # its first line only
    assert row["last_message"]["notice"] is None
    # The echo agent has no model; a session's own choice is the model that answers.
    assert (row["agent_kind"], row["model"]) == ("echo", None)
    client.patch(key_path(key), json={"model": "gpt-4o"})
    [listed] = [r for r in client.get("/v1/sessions").json()["sessions"] if r["session_key"] == key]
    assert listed["model"] == "gpt-4o"
    assert listed["message_count"] == 4
    assert listed["last_message"]["text"] == "echo: another"
    long = "x" * 500
    send(long, chat_id="preview")
    assert len(client.get(key_path(key)).json()["last_message"]["text"]) == 160
