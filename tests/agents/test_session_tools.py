"""The built-in session tools, run by the OpenAI-compatible agent inside a real gateway (a
`GatewayRunner` on a real store) against the streaming fake server: what each tool sees, what
it changes, and that it never shows one person another person's conversation."""

from __future__ import annotations

import json

from fake_openai import Call, Calls, Reply
from sessiongate.agents import OpenAIAgent, TurnRequest
from sessiongate.agents.tools.sessions import is_visible
from sessiongate.core.config import OpenAIAgentConfig
from sessiongate.core.source import SessionSource
from sessiongate.core.turn_events import ToolResult
from sessiongate.gateway import MessageEvent


def test_visibility_rules() -> None:
    me = "agent:main:api:dm:alice"
    child = f"{me}:%fab12cd34"
    assert is_visible(me, caller=me, visibility="tree")
    assert is_visible(child, caller=me, visibility="tree")
    assert not is_visible("agent:main:api:dm:alicex", caller=me, visibility="tree")
    assert not is_visible("agent:main:api:dm:bob", caller=me, visibility="tree")
    assert not is_visible(me, caller=child, visibility="tree")  # a child never sees up
    assert is_visible("agent:main:api:dm:bob", caller=me, visibility="agent")
    assert not is_visible("agent:support:api:dm:bob", caller=me, visibility="agent")
    assert is_visible("agent:support:api:dm:bob", caller=me, visibility="all")


async def test_list_history_and_search_see_only_the_callers_own_sessions(make_gateway) -> None:
    gw = await make_gateway()
    await gw.say("bob", "bob's secret plan")
    gw.server.script(
        Calls(
            [
                Call("sessions_list"),
                Call("sessions_history", json.dumps({"session_key": gw.key("bob")})),
                Call("sessions_history", json.dumps({"session_key": "agent:main:api:dm:nobody"})),
                Call("sessions_search", json.dumps({"query": "plan"})),
            ]
        ),
        Reply("done"),
    )
    receipt = await gw.say("alice", "alice's plan")
    assert receipt.reply == "done"
    listed, bobs, nobodys, found = gw.tool_results(2)
    assert [row["session_key"] for row in listed] == [gw.key("alice")]
    # Someone else's session is answered exactly like one that does not exist.
    assert bobs["error"].replace(gw.key("bob"), "K") == nobodys["error"].replace(
        "agent:main:api:dm:nobody", "K"
    )
    assert "bob's secret" not in json.dumps(gw.tool_results(2))
    # Bob's message matches (the search finds it), but it is not the caller's to see.
    assert gw.key("bob") in {hit["session_key"] for hit in gw.store.search("plan")}
    assert {hit["session_key"] for hit in found} <= {gw.key("alice")}


async def test_history_returns_the_latest_messages_of_a_visible_session(make_gateway) -> None:
    gw = await make_gateway(session_tools={"visibility": "agent"})
    await gw.say("bob", "first words")
    gw.server.script(
        Calls([Call("sessions_history", json.dumps({"session_key": gw.key("bob"), "limit": 5}))]),
        Reply("ok"),
    )
    await gw.say("alice", "what did bob say?")
    [history] = gw.tool_results(2)
    assert [(m["role"], m["content"]) for m in history["messages"]] == [
        ("user", "first words"),
        ("assistant", "model says: first words"),
    ]


async def test_send_starts_a_system_turn_in_another_session(make_gateway) -> None:
    gw = await make_gateway(session_tools={"visibility": "agent"})
    await gw.say("bob", "hello")
    gw.server.script(
        Calls([Call("sessions_send", json.dumps({"session_key": gw.key("bob"), "text": "ping"}))]),
        Reply("sent it"),
    )
    receipt = await gw.say("alice", "tell bob ping")
    assert receipt.reply == "sent it"
    [sent] = gw.tool_results(2)
    assert sent == {"session_key": gw.key("bob"), "status": "queued"}
    await gw.runner.wait_idle()
    entry = gw.store.get_session(gw.key("bob"))
    transcript = gw.store.load_transcript(entry.session_id)
    ping = next(m for m in transcript if m["content"] == "ping")
    assert ping["role"] == "user"
    assert ping["metadata"]["event_kind"] == "system"
    assert transcript[-1] == {**transcript[-1], "role": "assistant", "content": "model says: ping"}


async def test_send_refuses_the_calling_session_and_invisible_ones(make_gateway) -> None:
    gw = await make_gateway()
    await gw.say("bob", "hello")
    gw.server.script(
        Calls(
            [
                Call("sessions_send", json.dumps({"session_key": gw.key("alice"), "text": "x"})),
                Call("sessions_send", json.dumps({"session_key": gw.key("bob"), "text": "x"})),
            ]
        ),
        Reply("no"),
    )
    await gw.say("alice", "try")
    mine, bobs = gw.tool_results(2)
    assert "this is the calling session" in mine["error"]
    assert "may see" in bobs["error"]
    entry = gw.store.get_session(gw.key("bob"))
    assert [m["content"] for m in gw.store.load_transcript(entry.session_id)] == [
        "hello",
        "model says: hello",
    ]


async def test_spawn_forks_the_active_branch_runs_the_task_and_reports_back(make_gateway) -> None:
    gw = await make_gateway()
    await gw.say("alice", "my name is Ada")
    gw.server.script(
        Calls([Call("sessions_spawn", json.dumps({"task": "find my name"}))]),
        Reply("Your name is Ada."),  # the sub-agent's turn
        Reply("The helper says: Ada."),  # the parent, after the tool result
    )
    receipt = await gw.say("alice", "ask a helper")
    assert receipt.reply == "The helper says: Ada."
    [spawned] = gw.tool_results(3)
    assert spawned["status"] == "replied"
    assert spawned["reply"] == "Your name is Ada."
    assert spawned["isolated_context"] is False
    child_key = spawned["session_key"]
    assert child_key.startswith(f"{gw.key('alice')}:%f")
    # The sub-agent saw the parent's branch, then its task.
    child_sees = [m.get("content") for m in gw.server.requests[2]["body"]["messages"]]
    assert "my name is Ada" in child_sees
    assert child_sees[-1] == "find my name"
    child = gw.store.get_session(child_key)
    assert child.forked_from_parent
    assert child.parent_session_key == gw.key("alice")
    # The parent's list now shows its child.
    gw.server.script(Calls([Call("sessions_list")]), Reply("ok"))
    await gw.say("alice", "list")
    listed = gw.tool_results(5)[-1]  # the earlier turn's spawn result comes first
    assert {row["session_key"] for row in listed} == {gw.key("alice"), child_key}


async def test_spawn_over_the_child_models_capacity_starts_isolated(make_gateway) -> None:
    gw = await make_gateway(session_tools={"context_windows": {"fake-model": 5}})
    await gw.say("alice", "a long conversation " * 10)
    gw.server.script(
        Calls([Call("sessions_spawn", json.dumps({"task": "summarise"}))]),
        Reply("nothing to see"),
        Reply("ok"),
    )
    await gw.say("alice", "spawn")
    [spawned] = gw.tool_results(3)
    assert spawned["isolated_context"] is True
    child_sees = [m.get("content") for m in gw.server.requests[2]["body"]["messages"]]
    assert not any("a long conversation" in str(c) for c in child_sees)
    assert child_sees[-1] == "summarise"
    assert gw.store.get_session(spawned["session_key"]).forked_from_parent


async def test_spawn_depth_is_capped(make_gateway) -> None:
    gw = await make_gateway(session_tools={"max_spawn_depth": 0})
    gw.server.script(Calls([Call("sessions_spawn", json.dumps({"task": "x"}))]), Reply("ok"))
    await gw.say("alice", "spawn")
    [refused] = gw.tool_results(1)
    assert "max_spawn_depth" in refused["error"]


async def test_session_tools_outside_a_gateway_answer_with_an_error(server) -> None:
    agent = OpenAIAgent(
        OpenAIAgentConfig(base_url=server.base_url, tools=["sessions_list"], max_retries=0)
    )
    server.script(Calls([Call("sessions_list")]), Reply("ok"))
    request = TurnRequest(
        session_key="agent:main:api:dm:a",
        session_id="20260101_000000_aaaaaaaa",
        system_prompt="",
        messages=[{"role": "user", "content": "x"}],
    )
    try:
        events = [event async for event in agent.stream_turn(request)]
    finally:
        await agent.aclose()
    [result] = [e for e in events if isinstance(e, ToolResult)]
    assert result.is_error
    assert "only inside a running gateway" in result.content


async def test_spawn_of_an_unlisted_model_falls_back_to_the_100k_cap(make_gateway) -> None:
    gw = await make_gateway()
    gw.server.script(Reply("noted"))
    await gw.say("alice", "word " * 90_000)  # about 112K tokens by the store's estimate
    gw.server.script(
        Calls([Call("sessions_spawn", json.dumps({"task": "go"}))]), Reply("fresh"), Reply("ok")
    )
    await gw.say("alice", "spawn")
    [spawned] = gw.tool_results(3)
    assert spawned["isolated_context"] is True


SECRET = "INCOGNITO-SECRET-7f3a"


async def test_no_tool_reads_or_copies_an_incognito_session_and_nothing_reaches_the_disk(
    make_gateway,
) -> None:
    gw = await make_gateway(session_tools={"visibility": "agent"})
    await gw.say("alice", "ordinary words")
    incognito = gw.store.create_incognito_session(
        SessionSource(platform="api", chat_id="alice", user_id="alice")
    )
    key = incognito.session_key
    assert key.startswith(f"{gw.key('alice')}:%f")  # looks like a fork of her session
    # The incognito session's own model tries to send its text into her ordinary session.
    gw.server.script(
        Calls(
            [Call("sessions_send", json.dumps({"session_key": gw.key("alice"), "text": SECRET}))]
        ),
        Reply("tried"),
    )
    event = MessageEvent(source=incognito.origin, text=SECRET, session_key=key)
    assert (await gw.runner.handle_message(event)).reply == "tried"
    [refused_send] = gw.tool_results(2)
    assert "incognito" in refused_send["error"]
    # Her ordinary session's model tries every tool on the incognito session.
    gw.server.script(
        Calls(
            [
                Call("sessions_list"),
                Call("sessions_history", json.dumps({"session_key": key})),
                Call("sessions_search", json.dumps({"query": "INCOGNITO"})),
                Call("sessions_send", json.dumps({"session_key": key, "text": "hi"})),
            ]
        ),
        Reply("done"),
    )
    assert (await gw.say("alice", "read my incognito chat")).reply == "done"
    listed, history, found, sent = gw.tool_results(4)
    assert key not in json.dumps(listed)
    assert "may see" in history["error"]
    assert SECRET not in json.dumps(found)
    assert key not in {hit["session_key"] for hit in found}
    assert "may see" in sent["error"]
    await gw.runner.wait_idle()
    gw.store.flush_mirror()
    home = gw.runner.home
    scanned = [p for p in home.rglob("*") if p.is_file()]
    assert any(p.name == "state.db" for p in scanned)
    assert [p for p in scanned if SECRET.encode() in p.read_bytes()] == []


async def test_search_finds_the_callers_own_hit_under_sixty_better_ones(make_gateway) -> None:
    gw = await make_gateway()
    other = gw.store.get_or_create_session(SessionSource(platform="api", chat_id="carol"))
    gw.store.append_messages(
        other.session_id,
        [{"role": "user", "content": "budget budget budget budget"} for _ in range(60)],
    )
    await gw.say("bob", "the budget is due friday")
    gw.server.script(
        Calls([Call("sessions_search", json.dumps({"query": "budget", "limit": 3}))]),
        Reply("found"),
    )
    await gw.say("bob", "search")
    [found] = gw.tool_results(2)
    assert found
    assert {hit["session_key"] for hit in found} == {gw.key("bob")}


async def test_a_spawn_or_fork_of_an_incognito_session_stays_in_memory(make_gateway) -> None:
    gw = await make_gateway()
    incognito = gw.store.create_incognito_session(
        SessionSource(platform="api", chat_id="alice", user_id="alice")
    )
    key = incognito.session_key
    gw.server.script(
        Reply("noted"),
        Calls([Call("sessions_spawn", json.dumps({"task": "summarise"}))]),
        Reply("child saw it"),  # the sub-agent's turn
        Reply("done"),
    )
    for text in (SECRET, "ask a helper"):
        event = MessageEvent(source=incognito.origin, text=text, session_key=key)
        await gw.runner.handle_message(event)
    [spawned] = gw.tool_results(3)
    assert spawned["status"] == "replied"
    assert gw.store.is_incognito(spawned["session_key"])
    # The sub-agent saw the incognito conversation: it is in memory with it.
    assert SECRET in json.dumps(gw.server.requests[2]["body"]["messages"])
    fork, _ = gw.store.fork_session(key)
    assert gw.store.is_incognito(fork.session_key)
    assert SECRET in json.dumps(gw.store.load_transcript(fork.session_id))
    await gw.runner.wait_idle()
    gw.store.flush_mirror()
    found = [
        p for p in gw.runner.home.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()
    ]
    assert found == []
