"""Routing a message to its session: reset-policy rollovers (never swallowing the message that
triggers one, never under a running turn), system events left for the old session, archived
sessions that refuse new work."""

from __future__ import annotations

import asyncio

import pytest
from gateway_support import settle

from sessiongate.gateway.runner import ARCHIVED_NOTICE
from sessiongate.store.lanes import TurnState

IDLE = {"reset_policy": {"mode": "idle", "idle_minutes": 60}}
HOUR = 3600


def _types(gw, session_id: str) -> list[str]:
    return [e["type"] for e in gw.store.load_events(session_id)]


def _rows(gw, table: str) -> int:
    with gw.store.database.read() as conn:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # noqa: S608


async def test_an_idle_rollover_answers_the_message_that_triggered_it(make_gateway, clock):
    gw = await make_gateway(**IDLE)
    first = await gw.adapter.receive("before the break")
    clock.advance(2 * HOUR)
    second = await gw.adapter.receive("after the break", message_id="m2")
    assert second.status == "replied"
    assert second.reply == "re: after the break"
    assert second.session_id != first.session_id
    # The message is the first turn of the new session, and only there.
    assert [m["content"] for m in gw.store.load_transcript(second.session_id)] == [
        "after the break",
        "re: after the break",
    ]
    assert _types(gw, first.session_id) == ["message", "message", "reset"]
    assert gw.hub.requests[-1].messages == [{"role": "user", "content": "after the break"}]
    entry = gw.store.get_session(second.session_key)
    assert (entry.was_auto_reset, entry.auto_reset_reason) == (True, "idle")
    assert gw.runner.statistics().rollovers == 1
    # The dedup record names the new session.
    again = await gw.adapter.receive("after the break", message_id="m2")
    assert (again.status, again.session_id) == ("duplicate", second.session_id)


@pytest.mark.parametrize("mode", ["queue", "interrupt"])
async def test_a_rollover_waits_for_the_running_turn(make_gateway, clock, mode):
    gw = await make_gateway(busy_input_mode=mode, **IDLE)
    gw.hub.blocking = True
    running = asyncio.ensure_future(gw.adapter.receive("long job"))
    started = await gw.hub.next_started()
    old_id = started.session_id
    clock.advance(2 * HOUR)
    gw.hub.blocking = False
    follow_up = asyncio.ensure_future(gw.adapter.receive("are you done?"))
    await settle()
    if mode == "queue":
        # Accepted and waiting; the lane still points at the session whose turn is running.
        assert gw.store.get_session(started.session_key).session_id == old_id
    # (In interrupt mode the follow-up cut the turn short: its outcome committed first.)
    gw.hub.release_all()
    first, second = await running, await follow_up
    assert first.session_id == old_id
    assert first.status == ("replied" if mode == "queue" else "interrupted")
    assert second.status == "replied"
    assert second.session_id != old_id
    # The old turn's outcome is in the old session, before its reset boundary; the waiting
    # message opened the new one.
    assert _types(gw, old_id)[-1] == "reset"
    assert "long job" in [m["content"] for m in gw.store.load_transcript(old_id)]
    new = [m["content"] for m in gw.store.load_transcript(second.session_id)]
    assert new == ["are you done?", "re: are you done?"]


async def test_a_rollover_discards_system_events_queued_for_the_old_session(make_gateway, clock):
    gw = await make_gateway(busy_input_mode="queue", **IDLE)
    gw.hub.blocking = True
    await gw.adapter.receive("working", wait=False)
    started = await gw.hub.next_started()
    heartbeat = asyncio.ensure_future(gw.adapter.receive("heartbeat", event_kind="heartbeat"))
    await settle()
    clock.advance(2 * HOUR)
    user = asyncio.ensure_future(gw.adapter.receive("good morning"))
    await settle()
    assert gw.runner.queue_depth(started.session_key) == 2
    gw.hub.release_all()
    assert (await heartbeat).status == "interrupted"
    reply = await user
    assert reply.session_id != started.session_id
    assert gw.hub.user_texts() == ["working", "good morning"]
    assert gw.runner.queue_depth(started.session_key) == 0


async def test_system_events_never_roll_a_session_over(make_gateway, clock):
    gw = await make_gateway(**IDLE)
    first = await gw.adapter.receive("hello")
    clock.advance(2 * HOUR)
    event = await gw.adapter.receive("cron tick", event_kind="cron")
    assert (event.status, event.session_id) == ("replied", first.session_id)
    assert gw.runner.statistics().rollovers == 0


async def test_new_discards_waiting_system_events(make_gateway):
    gw = await make_gateway(busy_input_mode="queue")
    gw.hub.blocking = True
    await gw.adapter.receive("working", wait=False)
    await gw.hub.next_started()
    cron = asyncio.ensure_future(gw.adapter.receive("cron", event_kind="cron"))
    await settle()
    receipt = await gw.adapter.receive("/new")
    assert receipt.status == "command"
    assert "1 waiting message(s) were dropped" in receipt.reply
    assert (await cron).status == "interrupted"
    gw.hub.release_all()
    await gw.runner.wait_idle()
    assert gw.hub.user_texts() == ["working"]


async def _archive(gw, chat_id: str = "chat") -> str:
    receipt = await gw.adapter.receive("hello", chat_id=chat_id)
    gw.store.patch_session(
        receipt.session_key, archived=True, expected_session_id=receipt.session_id
    )
    return receipt.session_key


async def test_an_archived_session_refuses_a_message_and_writes_nothing(gw):
    key = await _archive(gw)
    entry = gw.store.get_session(key)
    counts = {t: _rows(gw, t) for t in ("entries", "inbox", "turns", "inbound_seen")}
    receipt = await gw.adapter.receive("anyone there?", message_id="m9")
    assert receipt.status == "archived"
    assert (receipt.reply, receipt.session_id, receipt.turn_id) == (
        ARCHIVED_NOTICE,
        entry.session_id,
        None,
    )
    assert gw.adapter.texts()[-1] == ARCHIVED_NOTICE
    assert {t: _rows(gw, t) for t in counts} == counts
    assert gw.store.get_session(key) == entry  # not even touched
    assert len(gw.hub.requests) == 1
    assert gw.runner.statistics().archived == 1


async def test_an_archived_session_answers_status_but_refuses_new(gw):
    key = await _archive(gw)
    entry = gw.store.get_session(key)
    status = await gw.adapter.receive("/status")
    assert status.status == "command"
    assert f"Session: {entry.session_id}" in status.reply
    refused = await gw.adapter.receive("/new fresh start")
    assert refused.status == "archived"
    assert gw.store.get_session(key).session_id == entry.session_id


async def test_unarchiving_lets_work_in_again(gw):
    key = await _archive(gw)
    gw.store.patch_session(key, archived=False)
    receipt = await gw.adapter.receive("back again")
    assert receipt.status == "replied"
    assert gw.lanes.get_turn(receipt.turn_id).state is TurnState.DELIVERED


async def test_other_lanes_are_not_affected_by_an_archive(gw):
    await _archive(gw, "a")
    assert (await gw.adapter.receive("hi", chat_id="b")).status == "replied"


async def test_a_message_waiting_when_its_session_is_archived_never_runs(make_gateway):
    gw = await make_gateway(busy_input_mode="queue")
    gw.hub.blocking = True
    running = asyncio.ensure_future(gw.adapter.receive("already running"))
    started = await gw.hub.next_started()
    waiting = asyncio.ensure_future(gw.adapter.receive("queued behind it"))
    await settle()
    gw.store.patch_session(
        started.session_key, archived=True, expected_session_id=started.session_id
    )
    gw.hub.release_all()
    assert (await running).status == "replied"  # it had started: it finishes
    refused = await waiting
    assert (refused.status, refused.reply, refused.turn_id) == ("archived", ARCHIVED_NOTICE, None)
    assert gw.adapter.texts()[-1] == ARCHIVED_NOTICE
    assert gw.hub.user_texts() == ["already running"]
    assert gw.runner.queue_depth(started.session_key) == 0
    assert _rows(gw, "inbox") == 0


async def test_a_system_event_to_an_archived_session_gets_no_notice(gw):
    await _archive(gw)
    sent = len(gw.adapter.sent)
    receipt = await gw.adapter.receive("heartbeat", event_kind="heartbeat")
    assert receipt.status == "archived"
    assert len(gw.adapter.sent) == sent
