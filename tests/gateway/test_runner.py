"""The runner end to end through the loopback platform: replies, context, authorisation,
deduplication, one turn per lane, busy modes, the queue cap, failures."""

from __future__ import annotations

import asyncio
import threading

import pytest
from gateway_support import settle

from sessiongate import SessionSource
from sessiongate.core.transcript import build_model_context
from sessiongate.gateway import MessageEvent, ReceiptStatus, turns
from sessiongate.store.lanes import Inbound, TurnState


async def test_a_message_gets_one_reply_stored_and_delivered(gw):
    receipt = await gw.adapter.receive("hello", message_id="m1")
    assert receipt.status == "replied"
    assert receipt.reply == "re: hello"
    assert receipt.session_key == "agent:main:telegram:dm:chat"
    assert gw.adapter.texts() == ["re: hello"]
    assert gw.adapter.sent[0].turn_id == receipt.turn_id
    assert gw.transcript() == [("user", "hello"), ("assistant", "re: hello")]
    assert gw.lanes.get_turn(receipt.turn_id).state is TurnState.DELIVERED
    assert gw.runner.queue_depth(receipt.session_key) == 0
    assert not gw.runner.is_busy(receipt.session_key)


async def test_the_model_gets_history_the_session_prompt_and_the_new_message_last(gw):
    first = await gw.adapter.receive("one")
    await gw.adapter.receive("two")
    request = gw.hub.requests[-1]
    assert request.messages == [
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "re: one"},
        {"role": "user", "content": "two"},
    ]
    assert "## Current Session Context" in request.system_prompt
    assert f"Session id: {first.session_id}" in request.system_prompt
    assert (request.session_id, request.resume_note) == (first.session_id, None)


@pytest.fixture
def long_transcripts(monkeypatch):
    """Every transcript counts as long: its context is read on a worker thread."""
    monkeypatch.setattr(turns, "_INLINE_CONTEXT_ENTRIES", 0)


async def test_the_model_context_is_read_off_the_event_loop(gw, monkeypatch, long_transcripts):
    await gw.adapter.receive("one")
    read = gw.store.read_model_context
    threads: list[int] = []

    def spy(session_id, **kwargs):
        threads.append(threading.get_ident())
        return read(session_id, **kwargs)

    monkeypatch.setattr(gw.store, "read_model_context", spy)
    await gw.adapter.receive("two")
    assert threads
    assert threading.get_ident() not in threads
    assert [m["content"] for m in gw.hub.requests[-1].messages] == ["one", "re: one", "two"]


async def test_a_short_transcripts_context_is_read_on_the_loop(gw, monkeypatch):
    await gw.adapter.receive("one")
    threaded: list[str] = []
    monkeypatch.setattr(gw.store, "read_model_context", lambda sid, **kw: threaded.append(sid))
    await gw.adapter.receive("two")
    assert threaded == []
    assert [m["content"] for m in gw.hub.requests[-1].messages] == ["one", "re: one", "two"]


async def test_a_context_that_moved_while_it_was_read_is_read_again(
    gw, monkeypatch, long_transcripts
):
    first = await gw.adapter.receive("one")
    read = gw.store.read_model_context
    views = []

    def moving(session_id, **kwargs):
        view = read(session_id, **kwargs)
        if not views:
            # Another writer lands between the read and its use.
            gw.store.append_to_transcript(session_id, {"role": "assistant", "content": "late"})
        views.append(view)
        return view

    monkeypatch.setattr(gw.store, "read_model_context", moving)
    await gw.adapter.receive("two")
    assert len(views) == 2
    contents = [m["content"] for m in gw.hub.requests[-1].messages]
    assert contents == ["one", "re: one", "two", "late"]  # "two" is stored when its turn starts
    assert gw.hub.requests[-1].session_id == first.session_id


async def test_a_shared_group_prefixes_each_sender(make_gateway):
    gw = await make_gateway(group_sessions_per_user=False, busy_input_mode="queue")
    gw.hub.blocking = True
    common = {"chat_id": "g", "chat_type": "group", "chat_name": "Team"}
    await gw.adapter.receive("first", wait=False, user_id="a", user_name="Ann", **common)
    await gw.hub.next_started()
    bob = gw.adapter.receive("hi", user_id="b", user_name="Bob", **common)
    ann = gw.adapter.receive("hey", user_id="a", user_name="Ann", **common)
    gw.hub.release_all()
    await asyncio.gather(bob, ann)
    request = gw.hub.requests[-1]
    assert request.messages[-1]["content"] == "[Bob] hi\n[Ann] hey"
    assert "Multi-user session" in request.system_prompt


async def test_usage_lands_on_the_entry(gw):
    receipt = await gw.adapter.receive("hello")
    entry = gw.store.get_session(receipt.session_key)
    assert (entry.input_tokens, entry.output_tokens, entry.last_prompt_tokens) == (10, 5, 10)
    assert entry.estimated_cost_usd == pytest.approx(0.01)


async def test_an_unauthorised_sender_leaves_no_trace(make_gateway):
    gw = await make_gateway(platforms={"telegram": {"allow_from": ["ann"]}})
    receipt = await gw.adapter.receive("hello", chat_id="bob", user_id="bob", message_id="m1")
    assert receipt.status == "unauthorized"
    assert receipt.session_id is None
    assert receipt.session_key == "agent:main:telegram:dm:bob"
    assert gw.store.list_sessions() == []
    assert gw.hub.requests == []
    assert gw.adapter.sent == []
    with gw.store.database.read() as conn:
        counts = [
            conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]  # noqa: S608
            for t in ("inbox", "inbound_seen", "turns", "sessions")
        ]
    assert counts == [0, 0, 0, 0]
    allowed = await gw.adapter.receive("hello", chat_id="ann", user_id="ann")
    assert allowed.status == "replied"
    assert gw.runner.statistics().unauthorized == 1


async def test_a_star_lets_everyone_in(make_gateway):
    gw = await make_gateway(platforms={"telegram": {"allow_from": ["*"]}})
    assert (await gw.adapter.receive("hi", user_id="anyone")).status == "replied"


async def test_a_redelivery_is_acknowledged_without_a_second_turn(gw):
    first = await gw.adapter.receive("hello", message_id="m1")
    again = await gw.adapter.receive("hello", message_id="m1")
    assert again.status == "duplicate"
    assert (again.reply, again.turn_id) == (first.reply, first.turn_id)
    assert len(gw.hub.requests) == 1
    assert gw.adapter.texts() == ["re: hello"]
    assert gw.runner.statistics().duplicates == 1


async def test_an_old_redelivery_still_names_its_own_turn(gw):
    first = await gw.adapter.receive("one", message_id="m1")
    for i in range(2, 5):
        await gw.adapter.receive(f"n{i}", message_id=f"m{i}")
    again = await gw.adapter.receive("one", message_id="m1")
    assert (again.status, again.turn_id, again.reply) == ("duplicate", first.turn_id, "re: one")


async def test_a_client_retry_during_the_turn_waits_for_the_same_reply(gw):
    gw.hub.blocking = True
    first = asyncio.ensure_future(gw.adapter.receive("hello", message_id="m1"))
    await gw.hub.next_started()
    retry = asyncio.ensure_future(gw.adapter.receive("hello", message_id="m1"))
    await settle()
    gw.hub.release()
    original, duplicate = await first, await retry
    assert (original.status, duplicate.status) == ("replied", "duplicate")
    assert duplicate.reply == original.reply == "re: hello"
    assert len(gw.hub.requests) == 1


async def test_one_turn_per_key_and_lanes_run_side_by_side(make_gateway):
    gw = await make_gateway(busy_input_mode="queue")
    gw.hub.blocking = True
    await gw.adapter.receive("a1", chat_id="a", wait=False)
    await gw.adapter.receive("/queue a2", chat_id="a", wait=False)
    await gw.adapter.receive("/queue a3", chat_id="a", wait=False)
    await gw.adapter.receive("b1", chat_id="b", wait=False)
    started = {(await gw.hub.next_started()).messages[-1]["content"] for _ in range(2)}
    assert started == {"a1", "b1"}  # b does not wait for a
    assert gw.runner.is_busy(gw.key("a"))
    assert gw.runner.statistics().running_turns == 2
    gw.hub.release_all()
    await gw.runner.wait_idle()
    assert gw.hub.max_active[gw.key("a")] == 1
    assert [t for t in gw.hub.user_texts() if t.startswith("a")] == ["a1", "a2", "a3"]


async def test_queue_mode_merges_follow_ups_into_one_turn(make_gateway):
    gw = await make_gateway(busy_input_mode="queue")
    gw.hub.blocking = True
    first = asyncio.ensure_future(gw.adapter.receive("one"))
    await gw.hub.next_started()
    second = asyncio.ensure_future(gw.adapter.receive("two", message_id="m2"))
    third = asyncio.ensure_future(gw.adapter.receive("three", message_id="m3", media=("x.png",)))
    await settle()
    assert gw.runner.queue_depth(gw.key()) == 1
    gw.hub.release_all()
    r1, r2, r3 = await first, await second, await third
    assert r1.status == r2.status == r3.status == "replied"
    assert r2.turn_id == r3.turn_id != r1.turn_id
    assert gw.hub.requests[-1].messages[-1]["content"] == "two\nthree\n[attachment: x.png]"
    stored = gw.store.load_transcript(r2.session_id)[-2]
    assert stored["metadata"]["message_ids"] == ["m2", "m3"]
    assert stored["metadata"]["media"] == ["x.png"]


async def test_queued_items_run_in_order_after_the_slot(make_gateway):
    gw = await make_gateway(busy_input_mode="queue")
    gw.hub.blocking = True
    await gw.adapter.receive("first", wait=False)
    await gw.hub.next_started()
    for text in ("/queue q1", "/queue q2", "slot"):
        await gw.adapter.receive(text, wait=False)
    assert gw.runner.queue_depth(gw.key()) == 3
    gw.hub.release_all()
    await gw.runner.wait_idle()
    assert gw.hub.user_texts() == ["first", "slot", "q1", "q2"]
    assert [c for r, c in gw.transcript() if r == "user"] == ["first", "slot", "q1", "q2"]


async def test_interrupt_mode_cancels_the_running_turn_and_keeps_its_message(gw):
    gw.hub.blocking = True
    first = asyncio.ensure_future(gw.adapter.receive("long question"))
    started = await gw.hub.next_started()
    gw.hub.blocking = False  # the follow-up's own turn replies at once
    second = await gw.adapter.receive("actually, this")
    interrupted = await first
    assert interrupted.status == "interrupted"
    assert second.status == "replied"
    assert gw.hub.cancelled == [started.turn_id]
    assert gw.transcript() == [
        ("user", "long question"),
        ("user", "actually, this"),
        ("assistant", "re: actually, this"),
    ]
    assert gw.lanes.get_turn(started.turn_id).state is TurnState.INTERRUPTED
    # The follow-up's model context includes the interrupted message.
    assert [m["content"] for m in gw.hub.requests[-1].messages] == [
        "long question",
        "actually, this",
    ]
    assert gw.runner.statistics().turns_interrupted == 1


async def test_a_system_event_never_interrupts(gw):
    gw.hub.blocking = True
    user = asyncio.ensure_future(gw.adapter.receive("question"))
    await gw.hub.next_started()
    cron = asyncio.ensure_future(gw.adapter.receive("daily digest", event_kind="cron"))
    await settle()
    assert gw.hub.cancelled == []
    gw.hub.release_all()
    assert (await user).status == "replied"
    assert (await cron).status == "replied"
    assert gw.hub.user_texts() == ["question", "daily digest"]


async def test_a_full_queue_answers_the_sender(make_gateway):
    gw = await make_gateway(busy_input_mode="queue", queue_cap=2)
    gw.hub.blocking = True
    await gw.adapter.receive("running", wait=False)
    await gw.hub.next_started()
    await gw.adapter.receive("/queue q1", wait=False)
    await gw.adapter.receive("slot", wait=False)
    full = await gw.adapter.receive("/queue q2", message_id="m9")
    assert full.status == "queue_full"
    assert "not taken" in full.reply
    assert gw.adapter.texts()[-1] == full.reply
    # A follow-up still merges into the slot: merging adds no row.
    merged = await gw.adapter.receive("more", wait=False)
    assert merged.status == "queued"
    assert gw.runner.queue_depth(gw.key()) == 2
    gw.hub.release_all()
    await gw.runner.wait_idle()
    assert gw.hub.user_texts() == ["running", "slot\nmore", "q1"]
    # Refused, so not remembered: the same message id is taken once there is room.
    assert (await gw.adapter.receive("/queue q2", message_id="m9")).status == "replied"
    assert gw.runner.statistics().queue_full == 1


async def test_an_agent_error_fails_the_turn_with_a_short_notice(gw):
    gw.hub.fail = RuntimeError("model exploded")
    receipt = await gw.adapter.receive("hello")
    assert receipt.status == "failed"
    assert "went wrong" in receipt.reply
    assert "exploded" not in receipt.reply  # internals stay in the log
    assert gw.adapter.texts() == [receipt.reply]
    turn = gw.lanes.get_turn(receipt.turn_id)
    assert turn.state is TurnState.FAILED
    assert "model exploded" in turn.error
    assert [r for r, _ in gw.transcript()] == ["user", "assistant"]
    context = build_model_context(gw.store.load_events(receipt.session_id))
    assert context.messages == [{"role": "user", "content": "hello"}]
    gw.hub.fail = None
    assert (await gw.adapter.receive("again")).status == "replied"
    assert gw.runner.statistics().turns_failed == 1


async def test_the_gateway_timeout_fails_the_turn(make_gateway):
    # One real second: asyncio's timeout runs on the loop's clock, not the FakeClock.
    gw = await make_gateway(agent={"gateway_timeout": 1})
    gw.hub.hang = True
    receipt = await gw.adapter.receive("hello")
    assert receipt.status == "failed"
    assert "longer than 1 seconds" in receipt.reply
    assert gw.lanes.get_turn(receipt.turn_id).error == "gateway_timeout"


async def test_an_unstorable_agent_message_fails_the_turn_cleanly(gw):
    gw.hub.extra_messages = [{"role": "wizard", "content": "?"}]
    receipt = await gw.adapter.receive("hello")
    assert receipt.status == "failed"
    assert gw.transcript()[0] == ("user", "hello")


async def test_agent_messages_are_stored_before_the_reply(gw):
    call = {"id": "c1", "type": "function", "function": {"name": "now", "arguments": "{}"}}
    gw.hub.extra_messages = [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "noon"},
    ]
    await gw.adapter.receive("time?")
    assert [r for r, _ in gw.transcript()] == ["user", "assistant", "tool", "assistant"]


async def test_wait_false_answers_queued_after_the_durable_accept(gw):
    receipt = await gw.adapter.receive("hello", wait=False)
    assert receipt.status == "queued"
    await gw.runner.wait_idle()
    assert gw.adapter.texts() == ["re: hello"]
    # The receipt named the turn that answered it.
    turn = gw.lanes.get_turn(receipt.turn_id)
    assert (turn.state, turn.reply) == (TurnState.DELIVERED, "re: hello")


async def test_wait_false_behind_a_busy_lane_names_the_turn_that_will_answer_it(make_gateway):
    gw = await make_gateway(busy_input_mode="queue")
    gw.hub.blocking = True
    first = asyncio.ensure_future(gw.adapter.receive("long"))
    started = await gw.hub.next_started()
    queued = await gw.adapter.receive("next", wait=False)
    assert queued.status == "queued"
    assert queued.turn_id is not None
    assert queued.turn_id != started.turn_id
    assert gw.lanes.get_turn(queued.turn_id) is None  # not claimed yet
    gw.hub.release_all()
    await first
    await gw.runner.wait_idle()
    turn = gw.lanes.get_turn(queued.turn_id)
    assert (turn.state, turn.reply) == (TurnState.DELIVERED, "re: next")


async def test_the_reply_stays_replied_when_delivery_fails(gw):
    gw.adapter.fail_sends = 1
    receipt = await gw.adapter.receive("hello")
    assert receipt.status == "replied"
    assert gw.lanes.get_turn(receipt.turn_id).state is TurnState.REPLIED
    assert gw.runner.statistics().deliveries_failed == 1


async def test_a_platform_without_adapter_delivers_through_the_receipt(make_gateway):
    gw = await make_gateway()
    event = MessageEvent(
        source=gw.adapter.source("x").__class__(platform="api", chat_id="x"), text="hi"
    )
    receipt = await gw.runner.handle_message(event)
    assert receipt.status == ReceiptStatus.REPLIED
    assert gw.lanes.get_turn(receipt.turn_id).state is TurnState.DELIVERED
    assert gw.adapter.sent == []


async def test_statistics_describe_the_runner(gw):
    await gw.adapter.receive("one")
    await gw.adapter.receive("two", chat_id="other")
    stats = gw.runner.statistics()
    assert (stats.turns_completed, stats.lanes, stats.running_turns, stats.queued) == (2, 0, 0, 0)
    assert (stats.agent_cache_size, stats.accepting, stats.startup_gate_open) == (2, True, True)


async def test_the_agent_cache_closes_evicted_agents(make_gateway):
    gw = await make_gateway(agent={"agent_cache": {"max_size": 1}})
    await gw.adapter.receive("one", chat_id="a")
    await gw.adapter.receive("two", chat_id="b")
    stats = gw.runner.statistics()
    assert (stats.agent_cache_size, stats.evictions, gw.hub.closed) == (1, 1, 1)


async def test_housekeeping_sweeps_the_runners_agent_cache(gw, clock):
    receipt = await gw.adapter.receive("hello")
    clock.advance(3600)
    report = await gw.runner.housekeeping.tick()
    assert report.idle_evicted == (receipt.session_key,)
    assert gw.hub.closed == 1
    assert gw.runner.statistics().agent_cache_size == 0
    assert (await gw.adapter.receive("again")).status == "replied"  # a fresh agent


@pytest.mark.parametrize("mode", ["interrupt", "queue"])
async def test_concurrent_arrivals_never_start_two_agents_on_one_key(make_gateway, mode):
    gw = await make_gateway(busy_input_mode=mode)
    gw.hub.blocking = True
    arrivals = [gw.adapter.receive(f"m{i}", message_id=f"m{i}", wait=False) for i in range(5)]
    receipts = await asyncio.gather(*arrivals)
    assert {r.status for r in receipts} == {"queued"}
    await gw.hub.next_started()
    await settle()
    assert len(gw.hub.requests) == 1
    gw.hub.release_all()
    await gw.runner.wait_idle()
    assert gw.hub.max_active[receipts[0].session_key] == 1


async def test_an_idle_lanes_turn_costs_two_transactions(make_gateway):
    gw = await make_gateway()
    api = SessionSource(platform="api", chat_id="x")
    await gw.runner.handle_message(MessageEvent(source=api, text="first"))
    traced: list[str] = []
    gw.store.database.conn.set_trace_callback(traced.append)
    try:
        receipt = await gw.runner.handle_message(MessageEvent(source=api, text="second"))
    finally:
        gw.store.database.conn.set_trace_callback(None)
    assert receipt.status == "replied"
    # One to route, accept and claim; one for the outcome (delivered with it: no adapter).
    assert traced.count("BEGIN IMMEDIATE") == 2
    # Their calls take no savepoints, but for the user message's, whose failure the claim
    # passes over (the turn runs without it).
    assert sum(t.startswith("SAVEPOINT") for t in traced) == 1
    assert gw.lanes.get_turn(receipt.turn_id).state is TurnState.DELIVERED


async def test_the_message_is_committed_before_its_turn_starts(gw):
    gw.hub.blocking = True
    await gw.adapter.receive("hello", message_id="m1", wait=False)
    request = await gw.hub.next_started()
    assert not gw.store.database.conn.in_transaction
    turn = gw.lanes.get_turn(request.turn_id)
    assert turn.state is TurnState.RUNNING
    assert gw.lanes.get_item(turn.inbox_id).text == "hello"
    seen = gw.lanes.lookup_seen(
        Inbound(gw.adapter.source(), "hello", message_id="m1"), turn.session_key
    )
    assert (seen.pending, seen.turn_id) == (True, request.turn_id)


async def test_the_agent_gets_the_lanes_model_choice(gw):
    first = await gw.adapter.receive("one")
    gw.store.set_model_choice(first.session_key, model="m-1", provider="p", thinking_level="low")
    await gw.adapter.receive("two")
    request = gw.hub.requests[-1]
    assert (request.model, request.provider, request.thinking_level) == ("m-1", "p", "low")
    # After a reset the transcript has no change entries; the lane's overrides carry over.
    await gw.adapter.receive("/new")
    await gw.adapter.receive("three")
    request = gw.hub.requests[-1]
    assert (request.model, request.thinking_level) == ("m-1", "low")


@pytest.mark.parametrize("pii_safe", [True, False])
async def test_the_adapters_pii_safe_trait_decides_id_hashing(make_gateway, pii_safe):
    from sessiongate.adapters.loopback import LoopbackAdapter
    from sessiongate.core.redaction import hash_user_id

    adapter = LoopbackAdapter()
    adapter.pii_safe = pii_safe  # telegram's registry entry says safe; the adapter decides
    gw = await make_gateway(adapter=adapter, redact_pii=True)
    await gw.adapter.receive("hi", chat_id="room", chat_type="group", user_id="4242")
    prompt = gw.hub.requests[-1].system_prompt
    assert ("4242" in prompt) is not pii_safe
    assert (hash_user_id("4242") in prompt) is pii_safe


async def test_the_user_message_shows_in_transcript_context_and_search_while_its_turn_runs(gw):
    gw.hub.blocking = True
    waiting = asyncio.ensure_future(gw.adapter.receive("a long question about zebras"))
    started = await gw.hub.next_started()
    assert gw.transcript() == [("user", "a long question about zebras")]
    context = gw.store.short_model_context(started.session_id, 100)
    assert [m["content"] for m in context.messages] == ["a long question about zebras"]
    assert [hit["session_id"] for hit in gw.store.search("zebras")] == [started.session_id]
    # The agent got it once, last, from the stored context.
    assert [m["content"] for m in started.messages] == ["a long question about zebras"]
    gw.hub.release_all()
    await waiting
    assert gw.transcript() == [
        ("user", "a long question about zebras"),
        ("assistant", "re: a long question about zebras"),
    ]
