"""Messages addressed to a lane by key: forks and incognito lanes through the runner."""

from __future__ import annotations

import asyncio

import pytest

from sessiongate import SessionSource
from sessiongate.errors import SessionNotFoundError
from sessiongate.gateway import MessageEvent
from sessiongate.store.lanes import TurnState

API = SessionSource(platform="api", chat_id="composer", user_id="op")


def _to(key: str, text: str, **fields) -> MessageEvent:
    return MessageEvent(source=API, text=text, session_key=key, **fields)


def _durable_rows(gw, table: str) -> int:
    with gw.store.database.read() as conn:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]  # noqa: S608


async def test_a_busy_incognito_lane_merges_and_interrupts_in_memory(gw):
    key = gw.store.create_incognito_session(gw.adapter.source("chat")).session_key
    gw.hub.blocking = True
    first = asyncio.ensure_future(gw.runner.handle_message(_to(key, "long question")))
    started = await gw.hub.next_started()
    gw.hub.blocking = False
    second = await gw.runner.handle_message(_to(key, "actually, this"))
    assert ((await first).status, second.status) == ("interrupted", "replied")
    assert gw.hub.cancelled == [started.turn_id]
    assert gw.lanes.get_turn(started.turn_id).state is TurnState.INTERRUPTED
    entry = gw.store.get_session(key)
    assert [m["content"] for m in gw.store.load_transcript(entry.session_id)] == [
        "long question",
        "actually, this",
        "re: actually, this",
    ]
    assert (_durable_rows(gw, "inbox"), _durable_rows(gw, "turns")) == (0, 0)
    # No lane appeared for the source the addressed messages came in on.
    assert gw.store.get_session("agent:main:api:dm:composer") is None


async def test_queued_rows_of_an_addressed_lane_run_there(gw):
    parent = await gw.adapter.receive("one")
    child, _ = gw.store.fork_session(parent.session_key, fork_from="active")
    gw.hub.blocking = True
    first = asyncio.ensure_future(gw.runner.handle_message(_to(child.session_key, "a")))
    await gw.hub.next_started()
    queued = await gw.runner.handle_message(_to(child.session_key, "/queue b"), wait=False)
    assert queued.status == "queued"
    gw.hub.release_all()
    await first
    await gw.runner.wait_idle()
    texts = [m["content"] for m in gw.store.load_transcript(child.session_id)]
    assert texts == ["one", "re: one", "a", "re: a", "b", "re: b"]
    assert gw.transcript() == [("user", "one"), ("assistant", "re: one")]


async def test_an_unknown_key_is_refused_and_writes_nothing(gw):
    with pytest.raises(SessionNotFoundError, match="no session"):
        await gw.runner.handle_message(_to("agent:main:api:dm:nobody", "hi"))
    assert (_durable_rows(gw, "inbox"), _durable_rows(gw, "routes")) == (0, 0)


async def test_a_restart_ends_an_incognito_lane_and_its_waiting_rows(make_gateway, tmp_path):
    gw = await make_gateway()
    key = gw.store.create_incognito_session(gw.adapter.source("chat")).session_key
    gw.hub.blocking = True
    running = asyncio.ensure_future(gw.runner.handle_message(_to(key, "running")))
    await gw.hub.next_started()
    assert (await gw.runner.handle_message(_to(key, "waiting"), wait=False)).status == "queued"
    gw.hub.release_all()
    await gw.runner.stop()
    assert (await running).status == "interrupted"  # by the follow-up (interrupt mode)
    gw.store.close()
    again = await make_gateway(home=tmp_path / "home")
    await again.runner.wait_idle()
    assert again.hub.requests == []
    with pytest.raises(SessionNotFoundError, match="ended when the gateway restarted"):
        await again.runner.handle_message(_to(key, "hello?"))
    assert again.store.list_incognito() == []


async def test_an_addressed_lane_rolls_over_by_its_own_reset_policy(make_gateway, clock):
    gw = await make_gateway(reset_policy={"mode": "idle", "idle_minutes": 5})
    parent = await gw.adapter.receive("one")
    child, _ = gw.store.fork_session(parent.session_key, fork_from="active")
    first = await gw.runner.handle_message(_to(child.session_key, "two"))
    assert first.session_id == child.session_id
    clock.advance(600)
    later = await gw.runner.handle_message(_to(child.session_key, "three"))
    assert later.session_id != child.session_id
    entry = gw.store.get_session(child.session_key)
    assert (entry.session_id, entry.auto_reset_reason) == (later.session_id, "idle")
    assert entry.origin == child.origin  # the api source the messages came in on is not kept
    assert [m["content"] for m in gw.store.load_transcript(later.session_id)] == [
        "three",
        "re: three",
    ]
