from __future__ import annotations

import asyncio

import httpx
import pytest

from sessiongate import GatewayConfig
from sessiongate.api.app import create_app
from sessiongate.core.transcript import SUMMARY_PREFIX
from sessiongate.gateway import GatewayRunner
from sessiongate.testing.agents import HeldAgent


def test_rewind_by_turns_returns_the_text_to_edit(client, send, key_path):
    key = send("first")["session_key"]
    send("second")
    body = client.post(key_path(key, "/rewind"), json={"turns": 1}).json()
    assert body == {"status": "rewound", "editor_text": "second", "rewound_count": 2}
    nothing = client.post(key_path(key, "/rewind"), json={"turns": 5}).json()
    assert nothing["status"] == "rewound"
    again = client.post(key_path(key, "/rewind"), json={"turns": 1}).json()
    assert again == {"status": "nothing_to_rewind", "editor_text": "", "rewound_count": 0}


def test_after_rewinding_everything_the_empty_start_is_the_active_position(client, send, key_path):
    key = send("first")["session_key"]
    send("second")
    assert client.post(key_path(key, "/rewind"), json={"turns": 5}).json()["status"] == "rewound"
    branches = client.get(key_path(key, "/branches")).json()["branches"]
    assert [b["active"] for b in branches] == [True, False]
    assert branches[0] == {
        "leaf_entry_id": None,
        "headline": "",
        "message_count": 0,
        "updated_at": None,
        "active": True,
    }
    assert branches[1]["message_count"] == 4  # the rewound branch, kept as a tip
    # Back on it, the empty start is no position of its own any more.
    tip = branches[1]["leaf_entry_id"]
    client.post(key_path(key, "/branches/switch"), json={"leaf_entry_id": tip})
    after = client.get(key_path(key, "/branches")).json()["branches"]
    assert [(b["leaf_entry_id"], b["active"]) for b in after] == [(tip, True)]


def test_rewind_to_an_entry_and_its_refusals(client, send, key_path):
    key = send("first")["session_key"]
    send("second")
    events = client.get(key_path(key, "/transcript")).json()["events"]
    user_second = events[2]["id"]
    reply = events[3]["id"]
    not_user = client.post(key_path(key, "/rewind"), json={"entry_id": reply})
    assert (not_user.status_code, not_user.json()["error"]["code"]) == (400, "invalid_entry")
    missing = client.post(key_path(key, "/rewind"), json={"entry_id": 10**9})
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "entry_not_found")
    done = client.post(key_path(key, "/rewind"), json={"entry_id": user_second}).json()
    assert done == {"status": "rewound", "editor_text": "second", "rewound_count": 2}
    off = client.post(key_path(key, "/rewind"), json={"entry_id": user_second})
    assert (off.status_code, off.json()["error"]["code"]) == (404, "entry_not_found")


@pytest.mark.parametrize(
    "body",
    [{}, {"entry_id": 1, "turns": 1}, {"turns": 0}, {"entry_id": -1}, {"entry_id": 2**63}],
)
def test_rewind_bodies_must_name_exactly_one_valid_target(client, send, key_path, body):
    key = send("x")["session_key"]
    response = client.post(key_path(key, "/rewind"), json=body)
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_request"


def test_branches_and_switching_between_them(client, send, key_path):
    key = send("first")["session_key"]
    send("second")
    client.post(key_path(key, "/rewind"), json={"turns": 1})
    send("second, edited")
    tips = client.get(key_path(key, "/branches")).json()["branches"]
    assert len(tips) == 2
    assert sum(t["active"] for t in tips) == 1
    inactive = next(t for t in tips if not t["active"])
    assert inactive["headline"] == "second"
    switched = client.post(
        key_path(key, "/branches/switch"), json={"leaf_entry_id": inactive["leaf_entry_id"]}
    ).json()
    assert switched == {"status": "switched"}
    events = client.get(key_path(key, "/transcript")).json()["events"]
    assert events[-1]["content"] == "echo: second"
    again = client.post(
        key_path(key, "/branches/switch"), json={"leaf_entry_id": inactive["leaf_entry_id"]}
    ).json()
    assert again == {"status": "already_active"}
    missing = client.post(key_path(key, "/branches/switch"), json={"leaf_entry_id": 10**9})
    assert missing.json() == {"status": "missing"}


def test_fork_at_a_message_copies_the_prefix_before_it(client, send, key_path):
    key = send("first")["session_key"]
    send("second")
    events = client.get(key_path(key, "/transcript")).json()["events"]
    fork = client.post(key_path(key, "/fork"), json={"entry_id": events[2]["id"]})
    assert fork.status_code == 200, fork.text
    child = fork.json()
    assert child["editor_text"] == "second"
    assert child["session_key"] != key
    copied = client.get(key_path(child["session_key"], "/transcript")).json()["events"]
    assert [e["content"] for e in copied] == ["first", "echo: first"]
    row = client.get(key_path(child["session_key"])).json()
    assert row["parent_session_key"] == key
    assert row["forked_from_parent"] is True


def test_fork_of_the_active_branch(client, send, key_path):
    key = send("first")["session_key"]
    child = client.post(key_path(key, "/fork"), json={}).json()
    copied = client.get(key_path(child["session_key"], "/transcript")).json()["events"]
    assert len(copied) == 2
    assert child["editor_text"] == ""


def test_fork_errors_are_4xx(client, send, key_path):
    key = send("first")["session_key"]
    events = client.get(key_path(key, "/transcript")).json()["events"]
    not_user = client.post(key_path(key, "/fork"), json={"entry_id": events[1]["id"]})
    assert not_user.status_code == 400
    missing = client.post(key_path(key, "/fork"), json={"entry_id": 10**9})
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "entry_not_found"
    bad_mode = client.post(key_path(key, "/fork"), json={"fork_from": "elsewhere"})
    assert bad_mode.status_code == 422


# A 1,000-token window keeps about 250 tokens: the conversation below is well over that.
@pytest.mark.parametrize("config", [GatewayConfig(agent={"context_window": 1000})])
def test_compact_answers_the_token_counts(client, send, key_path):
    key = send("one " * 50)["session_key"]
    for i in range(6):
        send(f"message {i} " * 50)
    body = client.post(key_path(key, "/compact")).json()
    assert set(body) == {"compacted", "tokens_before", "tokens_after", "reason"}
    assert (body["compacted"], body["reason"]) == (True, None)
    assert body["tokens_after"] < body["tokens_before"]
    events = client.get(key_path(key, "/transcript")).json()["events"]
    assert events[-1]["type"] == "compaction"
    assert client.get(key_path(key)).json()["compaction_count"] == 1
    again = client.post(key_path(key, "/compact")).json()
    assert (again["compacted"], again["reason"]) == (False, "nothing_to_compact")
    assert again["tokens_after"] == again["tokens_before"]
    assert client.post(key_path("agent:main:api:dm:nobody", "/compact")).status_code == 404


def test_an_explicit_compact_summarises_a_short_conversation(client, send, key_path):
    # Far under the size threshold (the default window keeps ~32,000 tokens): asked for, the
    # older exchanges are summarised all the same, and the newest turn is kept.
    key = send("first question")["session_key"]
    send("second question")
    body = client.post(key_path(key, "/compact")).json()
    assert (body["compacted"], body["reason"]) == (True, None)
    context = client.get(key_path(key, "/context")).json()
    assert context["messages"][0]["content"].startswith(SUMMARY_PREFIX)
    assert [m["content"] for m in context["messages"][1:]] == [
        "second question",
        "echo: second question",
    ]


async def test_rewind_switch_and_fork_are_refused_while_a_turn_runs(
    tmp_path, store, config, clock, key_path
):
    agent = HeldAgent()
    agent.release.set()  # the first turn runs straight through
    runner = GatewayRunner(
        store, config, home=tmp_path / "home", clock=clock, agent_factory=lambda key: agent
    )
    app = create_app(runner, store, config)
    await runner.start()
    try:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            first = await http.post("/v1/messages", json={"chat_id": "a", "text": "hi"})
            assert first.status_code == 200, first.text
            key = first.json()["session_key"]
            agent.release = asyncio.Event()
            agent.started.clear()
            pending = asyncio.create_task(
                http.post("/v1/messages", json={"chat_id": "a", "text": "slow"})
            )
            await agent.started.wait()
            assert runner.is_busy(key)
            for method, suffix, body in [
                ("POST", "/rewind", {"turns": 1}),
                ("POST", "/branches/switch", {"leaf_entry_id": 1}),
                ("POST", "/fork", {}),
                ("POST", "/fork", {"entry_id": 1}),
                ("DELETE", "", None),
                ("POST", "/reset", None),
                ("POST", "/compact", None),
            ]:
                response = await http.request(method, key_path(key, suffix), json=body)
                assert response.status_code == 409, (suffix, response.text)
                assert response.json()["error"]["code"] == "session_busy"
            allowed = await http.post(key_path(key, "/fork"), json={"fork_from": "last-completed"})
            assert allowed.status_code == 200, allowed.text
            agent.release.set()
            assert (await pending).json()["status"] == "replied"
            await runner.wait_idle()
            after = await http.post(key_path(key, "/rewind"), json={"turns": 1})
            assert after.json()["status"] == "rewound"
    finally:
        agent.release.set()
        await runner.stop()
