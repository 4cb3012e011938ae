"""An operator takes a chat over (`gateway/takeover.py`), through a running gateway on the
loopback platform: people's messages are stored and not answered, the operator's replies go
out as delivery rows and are stored as the assistant's, hand-back (by hand, `/bot on`, or the
clock) lets the agent answer with everything in view, and a restart keeps the takeover."""

from __future__ import annotations

from datetime import timedelta

import pytest
from gateway_support import settle

from sessiongate.errors import NotTakenOverError, SessionNotFoundError
from sessiongate.gateway.receipts import ReceiptStatus
from sessiongate.gateway.takeover import HANDBACK_EVENT
from sessiongate.store.records import DeliveryStatus
from sessiongate.store.takeover import TakeoverStore

KEY = "agent:main:telegram:dm:chat"


def messages(gw) -> list[dict]:
    entry = gw.store.get_session(KEY)
    return gw.store.load_transcript(entry.session_id)


async def test_messages_are_stored_not_answered_and_the_operator_answers(gw) -> None:
    await gw.adapter.receive("hello")
    assert gw.adapter.texts() == ["re: hello"]
    taken, new = await gw.runner.takeovers.take_over(KEY, by="operator")
    assert new
    assert taken.taken_by == "operator"
    receipt = await gw.adapter.receive("is anyone there?", message_id="m1")
    assert (receipt.status, receipt.reply, receipt.turn_id) == (ReceiptStatus.HELD, None, None)
    # Redelivered: stored once.
    again = await gw.adapter.receive("is anyone there?", message_id="m1")
    assert again.status == ReceiptStatus.DUPLICATE
    await settle()
    assert len(gw.hub.requests) == 1  # no turn ran for it
    assert gw.adapter.texts() == ["re: hello"]
    last = messages(gw)[-1]
    assert (last["role"], last["content"]) == ("user", "is anyone there?")
    assert last["metadata"]["held"] == "takeover"
    reply = await gw.runner.takeovers.reply(KEY, "Yes, a person here.")
    assert reply.sent
    assert gw.adapter.texts() == ["re: hello", "Yes, a person here."]
    stored = messages(gw)[-1]
    assert (stored["role"], stored["content"]) == ("assistant", "Yes, a person here.")
    assert stored["metadata"] == {"written_by": "operator", "operator": "operator"}
    (row,) = [r for r in gw.runner.deliveries.find([DeliveryStatus.SENT]) if r.kind == "operator"]
    assert (row.session_key, row.text) == (KEY, "Yes, a person here.")
    # Handed back with the operator's answer last: the agent waits for the next message,
    # and its turn sees everything said meanwhile.
    assert await gw.runner.takeovers.hand_back(KEY, by="operator")
    await gw.runner.wait_idle()
    assert len(gw.hub.requests) == 1
    await gw.adapter.receive("thanks")
    seen = [(m["role"], m["content"]) for m in gw.hub.requests[-1].messages]
    assert seen[-4:] == [
        ("assistant", "re: hello"),
        ("user", "is anyone there?"),
        ("assistant", "Yes, a person here."),
        ("user", "thanks"),
    ]


async def test_hand_back_answers_what_people_said_meanwhile(gw) -> None:
    await gw.adapter.receive("hello")
    await gw.runner.takeovers.take_over(KEY, by="operator")
    await gw.adapter.receive("first")
    await gw.adapter.receive("second")
    assert gw.adapter.texts() == ["re: hello"]
    ended = await gw.runner.takeovers.hand_back(KEY, by="operator")
    assert ended is not None
    await gw.runner.wait_idle()
    request = gw.hub.requests[-1]
    texts = [m["content"] for m in request.messages]
    assert texts[-3:-1] == ["first", "second"]
    assert request.messages[-1]["content"].startswith("[The operator has handed")
    assert len(gw.adapter.texts()) == 2  # the agent's answer went out
    assert messages(gw)[-2]["metadata"]["event_kind"] == HANDBACK_EVENT
    assert await gw.runner.takeovers.hand_back(KEY, by="operator") is None


async def test_a_running_turn_is_stopped_and_approvals_are_cancelled(gw) -> None:
    await gw.adapter.receive("warm up")
    gw.hub.blocking = True
    pending = await gw.adapter.receive("long question", wait=False)
    await gw.hub.next_started()
    await gw.runner.takeovers.take_over(KEY, by="operator")
    assert gw.hub.cancelled == [pending.turn_id]
    assert not gw.runner.is_busy(KEY)
    receipt = await gw.adapter.receive("hello?")
    assert receipt.status == ReceiptStatus.HELD
    assert gw.hub.active[KEY] == 0


async def test_a_job_turn_waits_in_the_lane_until_hand_back(gw) -> None:
    await gw.adapter.receive("hello")
    await gw.runner.takeovers.take_over(KEY, by="operator")
    receipt = await gw.adapter.receive("tick", event_kind="cron", wait=False)
    assert receipt.status == ReceiptStatus.QUEUED
    await settle()
    assert len(gw.hub.requests) == 1
    assert gw.runner.queue_depth(KEY) == 1
    await gw.runner.takeovers.hand_back(KEY, by="operator")
    await gw.runner.wait_idle()
    assert gw.hub.user_texts()[-1].endswith("tick")
    assert gw.runner.queue_depth(KEY) == 0


async def test_auto_resume_by_the_clock(make_gateway, clock) -> None:
    gw = await make_gateway(takeover={"auto_resume_minutes": 10})
    await gw.adapter.receive("hello")
    taken, _ = await gw.runner.takeovers.take_over(KEY, by="operator")
    assert taken.resume_at == taken.since + timedelta(minutes=10)
    await gw.adapter.receive("still there?")
    clock.advance(9 * 60)
    assert await gw.runner.takeovers.tick() == []
    assert gw.runner.takeovers.get(KEY) is not None
    clock.advance(60)
    assert await gw.runner.takeovers.tick() == [KEY]
    assert gw.runner.takeovers.get(KEY) is None
    await gw.runner.wait_idle()
    # It answered what was waiting, and the lane answers again.
    assert gw.hub.requests[-1].messages[-2]["content"] == "still there?"
    receipt = await gw.adapter.receive("ok")
    assert receipt.status == ReceiptStatus.REPLIED


async def test_a_restart_keeps_the_takeover(make_gateway) -> None:
    gw = await make_gateway(takeover={"auto_resume_minutes": 0})
    await gw.adapter.receive("hello")
    taken, _ = await gw.runner.takeovers.take_over(KEY, by="operator")
    assert taken.resume_at is None
    await gw.runner.stop()
    gw.store.close()
    again = await make_gateway(home=gw.home)
    assert again.runner.takeovers.get(KEY) == taken
    receipt = await again.adapter.receive("after the restart")
    assert receipt.status == ReceiptStatus.HELD
    assert again.hub.requests == []


async def test_bot_off_and_on_from_the_chat_only_for_operators(make_gateway) -> None:
    gw = await make_gateway(takeover={"operators": ["telegram:boss"]})
    await gw.adapter.receive("hello")
    refused = await gw.adapter.receive("/bot off")
    assert refused.reply == "Only an operator may turn the bot off or on here."
    assert gw.runner.takeovers.get(KEY) is None
    done = await gw.adapter.receive("/bot off", user_id="boss")
    assert done.reply.startswith("The bot is off here")
    assert gw.runner.takeovers.get(KEY).taken_by == "telegram:boss"
    state = await gw.adapter.receive("/bot")
    assert state.reply.startswith("The bot is off here since")
    status = await gw.adapter.receive("/status")
    assert "Taken over: an operator answers here" in status.reply
    assert (await gw.adapter.receive("help please")).status == ReceiptStatus.HELD
    assert (await gw.adapter.receive("/bot on")).reply == refused.reply
    assert (await gw.adapter.receive("/bot on", user_id="boss")).reply == "The bot is back on."
    await gw.runner.wait_idle()
    assert gw.hub.requests[-1].messages[-2]["content"] == "help please"
    assert (await gw.adapter.receive("/bot sideways", user_id="boss")).reply.startswith("Usage")


async def test_unknown_sessions_and_replies_without_takeover_are_refused(gw) -> None:
    with pytest.raises(SessionNotFoundError):
        await gw.runner.takeovers.take_over("agent:main:telegram:dm:nobody", by="operator")
    await gw.adapter.receive("hello")
    with pytest.raises(NotTakenOverError):
        await gw.runner.takeovers.reply(KEY, "talking over the agent")
    assert gw.adapter.texts() == ["re: hello"]


async def test_takeover_and_handback_are_feed_events_and_webhook_events(make_gateway) -> None:
    hook = {"url": "http://127.0.0.1:9/hook", "secret": "s" * 16}
    gw = await make_gateway(
        webhooks={"outbound": [{**hook, "events": ["session.takeover", "session.handback"]}]}
    )
    await gw.adapter.receive("hello")
    sub = gw.runner.feed.subscribe(session_key=KEY)
    await gw.runner.takeovers.take_over(KEY, by="operator")
    await gw.runner.takeovers.hand_back(KEY, by="operator")
    batch = await sub.next_batch()
    kinds = [(e.type, e.data.get("by"), e.data.get("reason")) for e in batch]
    assert ("session.takeover", "operator", None) in kinds
    assert ("session.handback", "operator", "handback") in kinds
    events = sorted(e.event for e in gw.runner.outbox.find(limit=10))
    assert events == ["session.handback", "session.takeover"]


async def test_takeovers_made_by_another_process_are_followed(gw) -> None:
    await gw.adapter.receive("warm up")
    gw.hub.blocking = True
    pending = await gw.adapter.receive("long question", wait=False)
    await gw.hub.next_started()
    # The CLI writes the row; the gateway's next tick holds the lane and stops the turn.
    TakeoverStore(gw.store).start(KEY, by="operator")
    assert await gw.runner.takeovers.tick() == []
    assert gw.hub.cancelled == [pending.turn_id]
    assert (await gw.adapter.receive("anyone?")).status == ReceiptStatus.HELD
    gw.hub.blocking = False
    TakeoverStore(gw.store).end(KEY, by="operator", reason="handback")
    await gw.runner.takeovers.tick()
    await gw.runner.wait_idle()
    assert gw.hub.requests[-1].messages[-2]["content"] == "anyone?"
    assert (await gw.adapter.receive("and now")).status == ReceiptStatus.REPLIED
