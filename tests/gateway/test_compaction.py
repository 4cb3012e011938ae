"""Compaction: the plan over an active path, `GatewayRunner.compact` on a held lane, and
`/compress`."""

from __future__ import annotations

import asyncio

import pytest
from gateway_support import settle

from sessiongate.agents import EchoAgent
from sessiongate.core.transcript import SUMMARY_PREFIX, build_model_context
from sessiongate.errors import SessionArchivedError, SessionBusyError, StaleWriteError
from sessiongate.gateway.compaction import KEEP_FRACTION, keep_tokens, plan_compaction

# 1,000 tokens of window keeps about 250: three of the 130-token messages below do not fit.
SMALL_WINDOW = {"agent": {"context_window": 1000}}
LONG = "word " * 100  # about 130 tokens with the message overhead


def _path(*specs: tuple[str, str] | dict) -> list[dict]:
    """An active path from (role, content) pairs or whole entries, ids from 1."""
    events: list[dict] = []
    for i, spec in enumerate(specs, 1):
        event = dict(spec) if isinstance(spec, dict) else {"role": spec[0], "content": spec[1]}
        event.setdefault("type", "message")
        events.append({"id": i, "parent_id": i - 1 or None, **event})
    return events


def test_keep_is_a_quarter_of_the_window():
    assert KEEP_FRACTION == 4
    assert keep_tokens(100_000) == 25_000


def test_a_context_that_fits_has_nothing_to_compact():
    plan = plan_compaction(_path(("user", "hi"), ("assistant", "hello")), keep=1000)
    assert (plan.fresh, plan.summarize, plan.first_kept_entry_id) == (False, [], 1)
    assert plan.tokens_before > 0


def test_the_older_messages_go_to_the_summary_and_the_newest_stay():
    events = _path(("user", LONG), ("assistant", LONG), ("user", LONG), ("assistant", "ok"))
    plan = plan_compaction(events, keep=200)
    assert plan.first_kept_entry_id == 3
    assert plan.fresh
    assert [m["role"] for m in plan.summarize] == ["user", "assistant"]


def test_the_cut_never_separates_a_tool_call_from_its_results():
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    events = _path(
        ("user", LONG),
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": LONG},
        ("assistant", "done"),
    )
    # The budget holds the result and the last reply, not the call: both go to the summary.
    plan = plan_compaction(events, keep=150)
    assert plan.first_kept_entry_id == 4
    assert [m["role"] for m in plan.summarize] == ["user", "assistant", "tool"]


def test_an_explicit_plan_summarises_all_before_the_newest_turn_however_small():
    events = _path(("user", "a"), ("assistant", "b"), ("user", "c"), ("assistant", "d"))
    assert not plan_compaction(events, keep=1000).fresh  # automatic: it fits, nothing to do
    plan = plan_compaction(events, keep=1000, explicit=True)
    assert plan.fresh
    assert [m["content"] for m in plan.summarize] == ["a", "b"]
    assert plan.first_kept_entry_id == 3
    # Only the newest turn: nothing before it, whoever asks.
    assert not plan_compaction(events[2:], keep=1000, explicit=True).fresh


async def test_compress_summarises_a_short_conversation(gw):
    await gw.adapter.receive("first")
    receipt = await gw.adapter.receive("second")
    reply = (await gw.adapter.receive("/compress")).reply
    assert reply.startswith("Summarised the earlier conversation")
    assert gw.store.get_session(receipt.session_key).compaction_count == 1
    # Right after, only the kept turn and the summary remain: nothing to do, and it says so.
    again = (await gw.adapter.receive("/compress")).reply
    assert again == "Nothing to summarise yet: there is nothing before the latest exchange."


def test_only_a_previous_summary_before_the_cut_is_nothing_to_compact():
    events = _path(
        ("user", "old"),
        ("assistant", "old reply"),
        ("user", "kept"),
        {"type": "compaction", "summary": "- old", "first_kept_entry_id": 3, "tokens_before": 9},
    )
    plan = plan_compaction(events, keep=1000)
    assert not plan.fresh
    assert plan.summarize == [{"role": "user", "content": f"{SUMMARY_PREFIX}\n- old"}]


async def _talk(gw, n: int = 4) -> str:
    for i in range(n):
        receipt = await gw.adapter.receive(f"{i} {LONG}")
    return receipt.session_key


async def test_compact_writes_one_entry_and_raises_the_count(make_gateway):
    gw = await make_gateway(**SMALL_WINDOW)
    key = await _talk(gw)
    result = await gw.runner.compact(key)
    assert result["compacted"] is True
    assert result["tokens_after"] < result["tokens_before"]
    entry = gw.store.get_session(key)
    assert entry.compaction_count == 1
    events = gw.store.load_events(entry.session_id)
    compaction = events[-1]
    assert compaction["type"] == "compaction"
    assert (compaction["summary"], compaction["tokens_after"]) == (
        "summary",
        result["tokens_after"],
    )
    kept = next(e for e in events if e["id"] == compaction["first_kept_entry_id"])
    assert kept["type"] == "message"
    # The summary was asked for exactly what the kept part leaves out.
    summarized = gw.hub.summarized[0]
    assert summarized[0]["content"].startswith("0 ")
    context = build_model_context(events)
    assert context.messages[0]["content"] == f"{SUMMARY_PREFIX}\nsummary"
    assert len(summarized) + len(context.messages) - 1 == 2 * 4
    # The next turn gets the compacted context.
    await gw.adapter.receive("after")
    assert gw.hub.requests[-1].messages[0]["content"] == f"{SUMMARY_PREFIX}\nsummary"


async def test_compacting_again_right_away_has_nothing_to_do(make_gateway):
    gw = await make_gateway(**SMALL_WINDOW)
    key = await _talk(gw)
    assert (await gw.runner.compact(key))["compacted"]
    again = await gw.runner.compact(key)
    assert (again["compacted"], again["reason"]) == (False, "nothing_to_compact")
    assert again["tokens_before"] == again["tokens_after"]
    assert gw.store.get_session(key).compaction_count == 1


async def test_a_single_exchange_is_left_alone_and_says_why(gw):
    receipt = await gw.adapter.receive("hello")
    result = await gw.runner.compact(receipt.session_key)
    assert (result["compacted"], result["reason"]) == (False, "nothing_to_compact")
    assert gw.hub.summarized == []
    assert [e["type"] for e in gw.store.load_events(receipt.session_id)] == ["message"] * 2


async def test_the_echo_agent_summarises_deterministically(make_gateway):
    from gateway_support import Hub

    hub = Hub()
    hub.factory = lambda key: EchoAgent()  # type: ignore[method-assign]
    gw = await make_gateway(hub=hub, **SMALL_WINDOW)
    key = await _talk(gw)
    assert (await gw.runner.compact(key))["compacted"]
    summary = gw.store.load_events(gw.store.get_session(key).session_id)[-1]["summary"]
    assert summary.startswith("- 0 word word")


async def test_compact_is_refused_while_a_turn_runs(gw):
    gw.hub.blocking = True
    await gw.adapter.receive("hello", wait=False)
    await gw.hub.next_started()
    with pytest.raises(SessionBusyError):
        await gw.runner.compact(gw.key())


async def test_a_message_during_compaction_waits_behind_it(make_gateway):
    gw = await make_gateway(**SMALL_WINDOW)
    key = await _talk(gw)
    gw.hub.summary_gate = asyncio.Event()
    compacting = asyncio.ensure_future(gw.runner.compact(key))
    await gw.hub.summary_started.wait()
    assert gw.runner.is_busy(key)
    reply = asyncio.ensure_future(gw.adapter.receive("meanwhile"))
    await settle()
    assert not reply.done()
    assert gw.runner.queue_depth(key) == 1
    with pytest.raises(SessionBusyError):
        await gw.runner.compact(key)
    gw.hub.summary_gate.set()
    assert (await compacting)["compacted"]
    assert (await reply).status == "replied"
    # The turn ran after the compaction, on the compacted context.
    assert gw.hub.requests[-1].messages[0]["content"] == f"{SUMMARY_PREFIX}\nsummary"


async def test_a_transcript_that_moved_meanwhile_is_not_compacted(make_gateway):
    gw = await make_gateway(**SMALL_WINDOW)
    key = await _talk(gw)
    session_id = gw.store.get_session(key).session_id
    gw.hub.summary_gate = asyncio.Event()
    compacting = asyncio.ensure_future(gw.runner.compact(key))
    await gw.hub.summary_started.wait()
    gw.store.rewind_session(session_id, 1)  # straight on the store, past the lane
    gw.hub.summary_gate.set()
    with pytest.raises(StaleWriteError):
        await compacting
    assert all(e["type"] == "message" for e in gw.store.load_events(session_id))
    assert gw.store.get_session(key).compaction_count == 0
    # The lane is free again.
    assert (await gw.adapter.receive("next")).status == "replied"


async def test_a_failing_summary_compacts_nothing(make_gateway):
    gw = await make_gateway(**SMALL_WINDOW)
    key = await _talk(gw)
    gw.hub.summary_fail = RuntimeError("model down")
    result = await gw.runner.compact(key)
    assert (result["compacted"], result["reason"]) == (False, "summary_failed")
    assert gw.store.get_session(key).compaction_count == 0
    assert not gw.runner.is_busy(key)


async def test_an_archived_session_is_not_compacted(make_gateway):
    gw = await make_gateway(**SMALL_WINDOW)
    key = await _talk(gw)
    entry = gw.store.get_session(key)
    gw.store.patch_session(key, archived=True, expected_session_id=entry.session_id)
    with pytest.raises(SessionArchivedError):
        await gw.runner.compact(key)


async def test_compress_command_compacts_once_per_message_id(make_gateway):
    gw = await make_gateway(**SMALL_WINDOW)
    key = await _talk(gw)
    first = await gw.adapter.receive("/compress", message_id="c1")
    assert first.status == "command"
    assert first.reply.startswith("Summarised the earlier conversation")
    assert gw.adapter.texts()[-1] == first.reply
    again = await gw.adapter.receive("/compress", message_id="c1")
    assert (again.status, again.reply) == ("duplicate", first.reply)
    assert gw.store.get_session(key).compaction_count == 1
    nothing = await gw.adapter.receive("/compress", message_id="c2")
    assert nothing.reply.startswith("Nothing to summarise")


async def test_compress_is_refused_while_busy(gw):
    gw.hub.blocking = True
    await gw.adapter.receive("hello", wait=False)
    await gw.hub.next_started()
    refused = await gw.adapter.receive("/compress")
    assert (
        refused.reply
        == "Busy with the current reply: try /compress again after it arrives (or /stop it)."
    )
