"""Restart recovery and shutdown drain.

A crash is reproduced by writing, through the real `LaneStore`, exactly the rows a killed
process leaves (a turn journalled `running` holding its inbox row, a committed reply not yet
delivered, rows still pending) and then starting a runner on that home without the
`.clean_shutdown` marker. `test_crash.py` does the same with a real SIGKILL.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING
from urllib.parse import quote

import httpx
import pytest
from gateway_support import settle

from sessiongate import GatewayConfig, SessionSource, SessionStore
from sessiongate.api.app import create_app
from sessiongate.gateway.recovery import CLEAN_SHUTDOWN_FILE, RESTART_COUNTS_FILE
from sessiongate.gateway.turns import STALE_NOTICE, STUCK_NOTICE
from sessiongate.store.lanes import Inbound, InboxKind, LaneStore, TurnState

if TYPE_CHECKING:
    from pathlib import Path

    from sessiongate.core.clock import FakeClock
    from sessiongate.store.lanes import Claim


def _source(chat_id: str = "chat") -> SessionSource:
    return SessionSource(platform="telegram", chat_id=chat_id, user_id=chat_id)


class Crash:
    """Rows a killed gateway leaves behind in `home`."""

    def __init__(self, home: Path, clock: FakeClock) -> None:
        self.home = home
        self.store = SessionStore(home / "sessions", GatewayConfig(), clock=clock)
        self.lanes = LaneStore(self.store)

    def accept(self, text: str, chat_id: str = "chat", *, kind=InboxKind.SLOT) -> str:
        entry = self.store.get_or_create_session(_source(chat_id))
        self.lanes.accept(
            Inbound(_source(chat_id), text),
            session_key=entry.session_key,
            session_id=entry.session_id,
            kind=kind,
            cap=32,
        )
        return entry.session_key

    def running(self, text: str, chat_id: str = "chat") -> Claim:
        key = self.accept(text, chat_id)
        entry = self.store.get_session(key)
        claim = self.lanes.claim_next(key, entry.session_id)
        assert claim is not None
        return claim

    def close(self) -> None:
        self.store.close()


@pytest.fixture
def crash(tmp_path: Path, clock: FakeClock):
    made = Crash(tmp_path / "home", clock)
    yield made
    made.close()


async def _restart(make_gateway, crash: Crash, **config):
    crash.close()
    return await make_gateway(home=crash.home, **config)


async def test_a_clean_stop_writes_the_marker_and_the_next_start_consumes_it(make_gateway):
    gw = await make_gateway()
    receipt = await gw.adapter.receive("hello")
    await gw.runner.stop()
    marker = gw.home / CLEAN_SHUTDOWN_FILE
    assert marker.exists()
    gw.store.close()
    again = await make_gateway(home=gw.home)
    assert not marker.exists()
    assert again.lanes.consume_clean_shutdown() is None  # the record went with the file
    # A clean start does not mark recently active sessions.
    assert not again.store.get_session(receipt.session_key).resume_pending


async def test_an_unclean_start_marks_recently_active_sessions(make_gateway, crash):
    key = crash.accept("hello")
    claim = crash.lanes.claim_next(key, crash.store.get_session(key).session_id)
    crash.lanes.commit_reply(claim, [{"role": "user", "content": "hello"}], reply="hi")
    gw = await _restart(make_gateway, crash)
    entry = gw.store.get_session(key)
    assert (entry.resume_pending, entry.resume_reason) == (True, "restart_interrupted")
    await gw.adapter.receive("next")
    assert not gw.store.get_session(key).resume_pending


async def test_a_turn_running_at_the_crash_is_resumed_once_with_a_note(make_gateway, crash):
    claim = crash.running("book the flight")
    gw = await _restart(make_gateway, crash)
    await gw.runner.wait_idle()
    assert len(gw.hub.requests) == 1
    request = gw.hub.requests[0]
    assert request.turn_id == claim.turn.id
    assert "do NOT re-execute" in request.resume_note
    assert "attempt 2" in request.resume_note
    assert gw.transcript() == [("user", "book the flight"), ("assistant", "re: book the flight")]
    turn = gw.lanes.get_turn(claim.turn.id)
    assert (turn.state, turn.attempt, turn.resumes) == (TurnState.DELIVERED, 2, 1)
    assert gw.adapter.sent[0].turn_id == claim.turn.id
    assert gw.runner.statistics().turns_resumed == 1
    assert not gw.store.get_session(claim.turn.session_key).resume_pending


async def test_the_restart_counter_rises_when_the_resume_is_dispatched(make_gateway, crash):
    claim = crash.running("hang forever")
    key = claim.turn.session_key
    crash.close()
    gw = await make_gateway(home=crash.home, start=False)
    gw.hub.blocking = True
    await gw.runner.start()
    await gw.hub.next_started()
    # Counted before the resumed turn has done anything: a SIGKILL now still counts.
    counts_file = gw.home / RESTART_COUNTS_FILE
    assert gw.lanes.restart_count(key) == 1
    assert json.loads(counts_file.read_text()) == {key: 1}
    gw.hub.release_all()
    await gw.runner.wait_idle()
    assert gw.lanes.restart_count(key) == 0  # a successful turn resets it
    assert json.loads(counts_file.read_text()) == {}


async def test_a_stuck_loop_is_suspended_instead_of_resumed(make_gateway, crash):
    claim = crash.running("reboot the server")
    key = claim.turn.session_key
    (crash.home / RESTART_COUNTS_FILE).write_text(json.dumps({key: 3}))
    gw = await _restart(make_gateway, crash)
    await gw.runner.wait_idle()
    assert gw.hub.requests == []
    turn = gw.lanes.get_turn(claim.turn.id)
    assert (turn.state, turn.error) == (TurnState.FAILED, "stuck_loop")
    assert gw.store.get_session(key).suspended
    assert gw.adapter.texts() == [STUCK_NOTICE]
    assert gw.lanes.restart_count(key) == 0
    fresh = await gw.adapter.receive("hello again")
    assert fresh.session_id != claim.turn.session_id
    assert gw.hub.requests[-1].messages == [{"role": "user", "content": "hello again"}]


async def test_a_stale_turn_is_interrupted_and_its_text_kept(make_gateway, crash, clock):
    claim = crash.running("old question")
    clock.advance(3601)
    gw = await _restart(make_gateway, crash)
    await gw.runner.wait_idle()
    assert gw.hub.requests == []
    assert gw.lanes.get_turn(claim.turn.id).state is TurnState.INTERRUPTED
    assert gw.transcript() == [("user", "old question")]
    assert gw.adapter.texts() == [STALE_NOTICE]
    assert not gw.store.get_session(claim.turn.session_key).resume_pending


async def test_a_committed_reply_is_delivered_at_start(make_gateway, crash):
    claim = crash.running("hello")
    crash.lanes.commit_reply(
        claim,
        [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}],
        reply="hi",
    )
    gw = await _restart(make_gateway, crash)
    await gw.runner.wait_idle()
    assert [(m.text, m.turn_id) for m in gw.adapter.sent] == [("hi", claim.turn.id)]
    assert gw.lanes.get_turn(claim.turn.id).state is TurnState.DELIVERED
    assert gw.hub.requests == []
    assert gw.transcript() == [("user", "hello"), ("assistant", "hi")]


async def test_rows_waiting_at_the_crash_run_after_restart(make_gateway, crash):
    crash.accept("q1", kind=InboxKind.QUEUED)
    crash.accept("slot")
    gw = await _restart(make_gateway, crash)
    await gw.runner.wait_idle()
    assert gw.hub.user_texts() == ["slot", "q1"]


async def test_live_messages_wait_behind_the_startup_gate(make_gateway, crash):
    crash.running("resume me", chat_id="a")
    crash.close()
    gw = await make_gateway(home=crash.home, start=False)
    gw.hub.blocking = True
    await gw.runner.start()
    await gw.hub.next_started()
    receipt = await gw.adapter.receive("new message", chat_id="b", wait=False)
    assert receipt.status == "queued"  # accepted durably even while the gate is closed
    await settle()
    assert gw.hub.user_texts() == ["resume me"]
    assert not gw.runner.statistics().startup_gate_open
    gw.hub.release_all()
    await gw.runner.wait_idle()
    assert gw.hub.user_texts() == ["resume me", "new message"]


async def test_a_live_message_on_a_resuming_lane_waits_its_turn(make_gateway, crash):
    claim = crash.running("resume me")
    crash.close()
    gw = await make_gateway(home=crash.home, start=False)
    gw.hub.blocking = True
    await gw.runner.start()
    await gw.hub.next_started()
    live = asyncio.ensure_future(gw.adapter.receive("live"))
    await settle()
    assert gw.hub.cancelled == []  # the startup gate keeps the follow-up from interrupting
    assert len(gw.hub.requests) == 1
    gw.hub.release_all()
    assert (await live).status == "replied"
    assert gw.hub.user_texts() == ["resume me", "live"]
    assert gw.hub.max_active[claim.turn.session_key] == 1


@pytest.mark.parametrize(
    ("restart", "reason"), [(False, "shutdown_timeout"), (True, "restart_timeout")]
)
async def test_the_drain_timeout_leaves_work_for_the_next_start(make_gateway, restart, reason):
    gw = await make_gateway(busy_input_mode="queue", agent={"restart_drain_timeout": 0})
    gw.hub.hang = True
    waiting = asyncio.ensure_future(gw.adapter.receive("long"))
    started = await gw.hub.next_started()
    await gw.adapter.receive("next", wait=False)
    await gw.runner.stop(restart=restart)
    assert (await waiting).status == "queued"
    turn = gw.lanes.get_turn(started.turn_id)
    assert turn.state is TurnState.ACCEPTED
    entry = gw.store.get_session(started.session_key)
    assert (entry.resume_pending, entry.resume_reason) == (True, reason)
    assert gw.runner.queue_depth(started.session_key) == 1
    assert gw.transcript() == [("user", "long")]  # durable from the turn's start
    assert (gw.home / CLEAN_SHUTDOWN_FILE).exists()
    gw.store.close()
    again = await make_gateway(home=gw.home)
    await again.runner.wait_idle()
    assert [r.resume_note is not None for r in again.hub.requests] == [True, False]
    assert again.transcript() == [
        ("user", "long"),
        ("assistant", "re: long"),
        ("user", "next"),
        ("assistant", "re: next"),
    ]


async def test_stop_lets_a_running_turn_finish_within_the_drain(gw):
    gw.hub.blocking = True
    await gw.adapter.receive("hello", wait=False)
    started = await gw.hub.next_started()
    stopping = asyncio.ensure_future(gw.runner.stop())
    await settle()
    assert not stopping.done()
    late = await gw.adapter.receive("too late")
    assert late.status == "unavailable"
    assert late.reply.startswith("The gateway is shutting down")
    gw.hub.release_all()
    await stopping
    assert gw.lanes.get_turn(started.turn_id).state is TurnState.DELIVERED
    assert gw.adapter.stopped


async def test_stop_is_idempotent(gw):
    await asyncio.gather(gw.runner.stop(), gw.runner.stop())
    await gw.runner.stop()
    assert not gw.runner.statistics().accepting
    with pytest.raises(RuntimeError, match="cannot be started again"):
        await gw.runner.start()


# ---------------------------------------------------------------- restart counts: db is the truth


async def test_a_new_conversation_keeps_its_counter_reset_across_a_clean_restart(
    make_gateway, crash
):
    claim = crash.running("hang forever")
    key = claim.turn.session_key
    crash.close()
    gw = await make_gateway(home=crash.home, start=False)
    gw.hub.hang = True
    await gw.runner.start()
    await gw.hub.next_started()
    counts_file = gw.home / RESTART_COUNTS_FILE
    assert gw.lanes.restart_count(key) == 1
    assert (await gw.adapter.receive("/new")).status == "command"
    assert gw.lanes.restart_count(key) == 0
    await gw.runner.stop()
    # The mirror follows the database at the stop, so the next start cannot bring 1 back.
    assert json.loads(counts_file.read_text()) == {}
    gw.store.close()
    again = await make_gateway(home=gw.home)
    assert again.lanes.restart_count(key) == 0


async def test_the_counts_file_fills_in_only_keys_the_database_has_no_record_of(
    make_gateway, crash
):
    known = crash.accept("hello", chat_id="known")
    crash.lanes.merge_restart_counts({known: 1})
    counts_file = crash.home / RESTART_COUNTS_FILE
    counts_file.write_text(json.dumps({known: 3, "agent:main:telegram:dm:other": 2}))
    gw = await _restart(make_gateway, crash)
    expected = {known: 1, "agent:main:telegram:dm:other": 2}
    assert gw.lanes.restart_counts() == expected
    # Rewritten from the database once started.
    assert json.loads(counts_file.read_text()) == expected


async def test_the_http_reset_route_resets_the_counter_and_its_file(gw):
    receipt = await gw.adapter.receive("hello", chat_id="http")
    key = receipt.session_key
    gw.lanes.merge_restart_counts({key: 2})
    app = create_app(gw.runner, gw.store, gw.config)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        response = await http.post(f"/v1/sessions/{quote(key, safe='')}/reset")
    assert response.status_code == 200, response.text
    assert response.json()["session_id"] != receipt.session_id
    assert gw.lanes.restart_count(key) == 0
    assert json.loads((gw.home / RESTART_COUNTS_FILE).read_text()) == {}
