"""Scheduled jobs through a real runner (`gateway/scheduler.py`): each slot runs once as a
system turn in its lane, across restarts at every step of a slot, and `catch_up` decides the
slots missed while the gateway was down. Time moves only by the fake clock; `tick()` is what
the scheduler's loop calls at each slot."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest
from gateway_support import HANG_GUARD_SECONDS, Hub

from sessiongate.store.jobs import JobStore
from sessiongate.store.lanes import TurnState

if TYPE_CHECKING:
    from pathlib import Path

KEY = "agent:main:telegram:dm:chat"
HALF_HOUR = 30 * 60


def job(**fields: Any) -> dict[str, Any]:
    return {
        "id": "digest",
        "every": "30m",
        "deliver_to": "telegram:chat",
        "prompt": "digest",
    } | fields


@pytest.fixture
def make_gateway(make_gateway):
    """A started runner whose scheduler loop has made its first tick: from then on it sleeps
    until the next slot by the real clock, so only the test's own `tick()` calls claim the
    slots the fake clock makes due."""

    async def make(**kwargs: Any):
        gateway = await make_gateway(**kwargs)
        if kwargs.get("start", True):
            await until(lambda: gateway.runner.jobs.statistics().ticks > 0, "the first tick")
        return gateway

    return make


async def until(check, what: str) -> None:
    """Yield to the runner until `check()` holds (a hang guard, not a timing check)."""
    async with asyncio.timeout(HANG_GUARD_SECONDS):
        while not check():  # noqa: ASYNC110  # the state is rows in the database
            await asyncio.sleep(0.005)
    assert check(), what


def delivered(gw, turn_id: int | None) -> bool:
    assert turn_id is not None
    turn = gw.lanes.get_turn(turn_id)
    return turn is not None and turn.state is TurnState.DELIVERED


async def test_a_slot_runs_once_as_a_system_turn_in_the_chats_lane(make_gateway, clock):
    gw = await make_gateway(jobs=[job()], reset_policy={"mode": "idle", "idle_minutes": 60})
    await gw.adapter.receive("hi")
    before = gw.store.get_session(KEY)
    assert await gw.runner.jobs.tick() == []  # nothing due yet
    clock.advance(HALF_HOUR)
    [run] = await gw.runner.jobs.tick()
    assert (run.state, run.session_key) == ("accepted", KEY)
    await until(lambda: delivered(gw, run.turn_id), "the run's reply is delivered")
    assert gw.adapter.texts("chat") == ["re: hi", "re: digest"]
    assert await gw.runner.jobs.tick() == []  # the slot is done: never twice
    after = gw.store.get_session(KEY)
    assert after.session_id == before.session_id
    # A system turn never extends freshness.
    assert after.last_interaction_at == before.last_interaction_at
    [history] = JobStore(gw.store).history("digest")
    assert (history.state, history.turn_id) == ("accepted", run.turn_id)


async def test_a_run_waits_behind_a_running_turn_in_its_lane(make_gateway, clock):
    gw = await make_gateway(jobs=[job()], busy_input_mode="interrupt")
    gw.hub.blocking = True
    first = asyncio.create_task(gw.adapter.receive("slow"))
    await gw.hub.next_started()
    clock.advance(HALF_HOUR)
    [run] = await gw.runner.jobs.tick()
    assert run.state == "accepted"
    assert gw.lanes.get_turn(run.turn_id) is None  # waiting in the lane, not started
    assert gw.hub.cancelled == []  # a system event never interrupts
    gw.hub.release()
    await first
    await gw.hub.next_started()
    gw.hub.release()
    await until(lambda: delivered(gw, run.turn_id), "the run ran after the turn it waited for")
    assert gw.adapter.texts("chat") == ["re: slow", "re: digest"]


async def test_a_heartbeat_whose_reply_is_the_noop_token_delivers_nothing(make_gateway, clock):
    gw = await make_gateway(jobs=[job(prompt="HEARTBEAT_OK", noop_token="HEARTBEAT_OK")])
    gw.hub.extra_messages = []
    clock.advance(HALF_HOUR)
    [run] = await gw.runner.jobs.tick()
    # The hub answers "re: <prompt>": make the token that reply.
    await until(lambda: delivered(gw, run.turn_id), "the run finished")
    assert gw.adapter.texts() == ["re: HEARTBEAT_OK"]  # not the token: sent


async def test_the_noop_token_itself_is_never_sent(make_gateway, clock):
    gw = await make_gateway(jobs=[job(prompt="beat", noop_token="re: beat")])
    clock.advance(HALF_HOUR)
    [run] = await gw.runner.jobs.tick()
    await until(lambda: delivered(gw, run.turn_id), "the no-op reply is journaled delivered")
    assert gw.adapter.texts() == []
    assert gw.lanes.get_turn(run.turn_id).reply == "re: beat"


async def test_isolated_runs_get_a_fresh_session_each_and_deliver_to_the_chat(make_gateway, clock):
    gw = await make_gateway(jobs=[job(session="isolated")])
    clock.advance(HALF_HOUR)
    [first] = await gw.runner.jobs.tick()
    await until(lambda: delivered(gw, first.turn_id), "the first run is delivered")
    clock.advance(HALF_HOUR)
    [second] = await gw.runner.jobs.tick()
    await until(lambda: delivered(gw, second.turn_id), "the second run is delivered")
    assert first.session_key == second.session_key != KEY
    one = gw.lanes.get_turn(first.turn_id).session_id
    two = gw.lanes.get_turn(second.turn_id).session_id
    assert one != two
    assert [m.source.chat_id for m in gw.adapter.sent] == ["chat", "chat"]
    assert gw.store.get_session(KEY) is None  # the chat's own lane was not touched


async def test_a_job_on_a_missing_session_fails_its_run_with_the_reason(make_gateway, clock):
    gw = await make_gateway(jobs=[job(deliver_to=None, session_key="agent:main:telegram:dm:gone")])
    clock.advance(HALF_HOUR)
    [run] = await gw.runner.jobs.tick()
    assert run.state == "failed"
    assert "gone" in (run.detail or "")
    assert await gw.runner.jobs.tick() == []


@pytest.mark.parametrize("catch_up", ["latest", "all", "none"])
async def test_slots_missed_while_stopped_follow_catch_up(make_gateway, clock, tmp_path, catch_up):
    hub = Hub()
    spec = job(catch_up=catch_up, catch_up_cap=2)
    gw = await make_gateway(hub=hub, jobs=[spec])
    await gw.runner.stop()
    gw.store.close()
    clock.advance(4 * HALF_HOUR + 300)  # four slots missed while down, the last 5 min ago
    again = await make_gateway(home=tmp_path / "home", hub=hub, jobs=[spec])
    # The scheduler's first tick at the start caught up.
    assert await again.runner.jobs.tick() == []
    runs = JobStore(again.store).history("digest")
    assert len(runs) == {"latest": 1, "all": 2, "none": 0}[catch_up]
    for run in runs:
        await until(lambda run=run: delivered(again, run.turn_id), "the caught-up run ran")
    assert len(again.adapter.sent) == len(runs)


@pytest.mark.parametrize("step", ["claimed", "prepared", "accepted", "running", "delivered"])
async def test_a_restart_at_any_step_of_a_slot_runs_it_exactly_once(
    make_gateway, clock, tmp_path: Path, step
):
    """A runner stops (as a crash would leave it: the rows below are what a process killed at
    that step leaves) and a new one starts on the same home: the slot's turn runs once."""
    hub = Hub()
    spec = job(session="isolated" if step == "prepared" else "shared")
    # No drain at stop: a running turn is cut off as a crash would cut it.
    gw = await make_gateway(hub=hub, jobs=[spec], agent={"restart_drain_timeout": 0})
    jobs = gw.runner.jobs
    clock.advance(HALF_HOUR)
    if step in ("claimed", "prepared"):
        [run] = jobs.jobs.claim_due("digest", owner="a-dead-boot")
        if step == "prepared":
            source = gw.adapter.source("chat", user_id="job:digest")
            jobs._prepare_isolated(run, jobs.jobs.get("digest").spec, source)
    elif step == "accepted":
        # The turn was accepted but the process died before recording it on the run.
        [run] = jobs.jobs.claim_due("digest", owner="a-dead-boot")
        event, _ = jobs._event_for(run, jobs.jobs.get("digest").spec)
        hub.blocking = True
        await gw.runner.handle_message(event, wait=False)
        await hub.next_started()
    else:
        hub.blocking = step == "running"
        [run] = await jobs.tick()
        if step == "running":
            await hub.next_started()
        else:
            await until(lambda: delivered(gw, run.turn_id), "delivered before the restart")
    await gw.runner.stop()
    gw.store.close()
    hub.release_all()

    again = await make_gateway(home=tmp_path / "home", hub=hub, jobs=[spec])
    await again.runner.jobs.tick()
    [final] = JobStore(again.store).history("digest")
    assert final.state == "accepted"

    def sent() -> int:
        return again.adapter.texts().count("re: digest") + gw.adapter.texts().count("re: digest")

    await until(lambda: sent() == 1, "the slot's reply is delivered")
    prompts = [r for r in hub.requests if r.messages[-1]["content"] == "digest"]
    assert len({r.turn_id for r in prompts}) == 1  # one turn for the slot, resumed if cut off
    assert await again.runner.jobs.tick() == []
    assert sent() == 1


async def test_the_feed_tells_a_run_started_and_finished_and_a_run_failed(make_gateway, clock):
    gw = await make_gateway(jobs=[job()])
    sub = gw.runner.feed.subscribe()
    clock.advance(HALF_HOUR)
    [run] = await gw.runner.jobs.tick()
    await until(lambda: delivered(gw, run.turn_id), "the run is delivered")
    gw.runner.jobs.jobs.update("digest", {"deliver_to": None, "session_key": "agent:main:x"})
    clock.advance(HALF_HOUR)
    [failed] = await gw.runner.jobs.tick()
    events = gw.runner.feed.read(sub, limit=1000)
    assert isinstance(events, list)
    jobs = [(e.type, e.data["run_id"]) for e in events if e.type.startswith("job.")]
    assert jobs == [
        ("job.started", run.run_id),
        ("job.finished", run.run_id),
        ("job.failed", failed.run_id),
    ]
    finished = next(e for e in events if e.type == "job.finished")
    assert (finished.data["turn_id"], finished.session_key) == (run.turn_id, KEY)


async def test_a_run_claimed_from_the_command_line_is_run_at_the_next_tick(make_gateway):
    gw = await make_gateway(jobs=[job(paused=True)])
    # `sessiongate jobs run-now` in another process: a claim, and nothing more.
    claimed = JobStore(gw.store).claim_now("digest", owner="cli")
    [run] = await gw.runner.jobs.tick()
    assert (run.run_id, run.state) == (claimed.run_id, "accepted")
    await until(lambda: delivered(gw, run.turn_id), "the run is delivered")
    assert await gw.runner.jobs.tick() == []


async def test_a_run_for_a_platform_without_an_adapter_here_stays_claimed(make_gateway, clock):
    gw = await make_gateway(jobs=[job(deliver_to="slack:C1")])  # only telegram is connected
    clock.advance(HALF_HOUR)
    [run] = await gw.runner.jobs.tick()
    assert run.state == "claimed"
    assert [r.state for r in JobStore(gw.store).history("digest")] == ["claimed"]
    assert gw.adapter.sent == []
