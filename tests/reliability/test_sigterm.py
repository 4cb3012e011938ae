"""SIGTERM while the gateway is busy: a graceful drain, the drain time-out, nothing lost.

A first SIGTERM stops the server accepting, lets the running turns finish within
`agent.restart_drain_timeout`, cancels and journals the ones that do not (their sessions marked
`resume_pending`/`shutdown_timeout`), leaves queued rows in the inbox and exits 0. The next start
resumes and runs all of it. Both runs end with the torture checks (`torture.check_home`).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from typing import TYPE_CHECKING, Any

import httpx

from sg_process import (
    GatewayProcess,
    clean_env,
    count_rows,
    is_drained,
    poll_until,
    read_turn_states,
)
from torture import Sent, TortureConfig, TortureResult, check_home

if TYPE_CHECKING:
    from pathlib import Path

# A hang guard for polling the journal; never a timing assertion.
GUARD_SECONDS = 60.0


def _env(**extra: str) -> dict[str, str]:
    return clean_env(SESSIONGATE_BUSY_INPUT_MODE="queue", **extra)


async def _send(
    client: httpx.AsyncClient, url: str, item: Sent, *, queue: bool = False, wait: bool = False
) -> httpx.Response:
    text = f"/queue {item.token}" if queue else item.token
    response = await client.post(
        f"{url}/v1/messages",
        json={"chat_id": item.chat, "text": text, "message_id": item.message_id, "wait": wait},
        timeout=GUARD_SECONDS,
    )
    assert response.status_code in (200, 202), response.text
    item.acked_status = str(response.json()["status"])
    return response


async def _burst(
    client: httpx.AsyncClient, url: str, chats: dict[str, bool], per_chat: int
) -> dict[str, list[Sent]]:
    """`per_chat` messages on each chat (`/queue` items where `chats[chat]`), in order."""
    sent: dict[str, list[Sent]] = {}
    for seq in range(per_chat):
        for chat, queue in chats.items():
            item = Sent(chat, seq, f"{chat}-m{seq}", f"tok:{chat}:{seq}")
            sent.setdefault(chat, []).append(item)
            await _send(client, url, item, queue=queue)
    return sent


async def _wait_for(db: Path, predicate: Any) -> None:
    await poll_until(lambda: predicate(read_turn_states(db)))


def _routes(db: Path) -> dict[str, dict[str, Any]]:
    """Each routing entry's flag column and its entry's resume reason."""
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT session_key, resume_pending, data FROM routes").fetchall()
    finally:
        conn.close()
    return {
        str(key): {
            "resume_pending": bool(flag),
            "resume_reason": json.loads(data).get("resume_reason"),
        }
        for key, flag, data in rows
    }


def _check(home: Path, sent: dict[str, list[Sent]]) -> TortureResult:
    result = TortureResult(home=str(home))
    acked = {s.token: s for items in sent.values() for s in items}
    check_home(home, acked, sent, result, config=TortureConfig())
    return result


async def test_sigterm_drains_running_turns_and_keeps_the_queue_for_the_restart(tmp_path: Path):
    home = tmp_path / "home"
    db = home / "sessions" / "state.db"
    gateway = GatewayProcess(home, env=_env(SESSIONGATE_AGENT__ECHO__DELAY_SECONDS="0.4"))
    chats = {"a": False, "b": False, "c": False, "q1": True, "q2": True}
    try:
        url = await gateway.start()
        async with httpx.AsyncClient() as client:
            sent = await _burst(client, url, chats, per_chat=4)
            await _wait_for(db, lambda s: s.get("running", 0) >= len(chats))
            gateway.signal(15)
            # The drain lets the running turns finish: exit 0 and a clean-shutdown marker.
            assert await gateway.wait_exit() == 0
        states = read_turn_states(db)
        assert states.get("running", 0) == 0
        assert states.get("accepted", 0) == 0  # each finished within the drain time-out
        assert count_rows(db, "inbox") > 0  # the queue waits for the next start
        assert (home / ".clean_shutdown").exists()

        await gateway.start()
        await poll_until(lambda: is_drained(db))
        assert await gateway.terminate() == 0
    finally:
        await gateway.aclose()
    result = _check(home, sent)
    assert result.ok, result.problems
    assert result.resumed_turns == 0
    assert "error" not in {json.loads(line)["level"] for line in gateway.log_text().splitlines()}


async def test_drain_timeout_marks_sessions_shutdown_timeout_and_the_restart_finishes_them(
    tmp_path: Path,
):
    home = tmp_path / "home"
    db = home / "sessions" / "state.db"
    slow = _env(
        SESSIONGATE_AGENT__ECHO__DELAY_SECONDS="60",
        SESSIONGATE_AGENT__RESTART_DRAIN_TIMEOUT="0.3",
    )
    gateway = GatewayProcess(home, env=slow)
    chats = {"a": False, "b": False, "q": True}
    try:
        url = await gateway.start()
        async with httpx.AsyncClient() as client:
            sent = await _burst(client, url, chats, per_chat=3)
            await _wait_for(db, lambda s: s.get("running", 0) == len(chats))
            gateway.signal(15)
            assert await gateway.wait_exit() == 0
        states = read_turn_states(db)
        # The three running turns were cut off by the drain time-out and journalled for resume.
        assert states == {"accepted": len(chats)}
        routes = _routes(db)
        assert {r["resume_reason"] for r in routes.values()} == {"shutdown_timeout"}
        assert all(r["resume_pending"] for r in routes.values())

        gateway.env = _env(SESSIONGATE_AGENT__ECHO__DELAY_SECONDS="0.01")
        await gateway.start()
        await poll_until(lambda: is_drained(db))
        assert await gateway.terminate() == 0
    finally:
        await gateway.aclose()
    result = _check(home, sent)
    assert result.ok, result.problems
    assert result.resumed_turns == len(chats)
    assert not any(r["resume_pending"] for r in _routes(db).values())


async def test_a_waiting_client_gets_a_json_answer_when_sigterm_cuts_its_turn_off(tmp_path: Path):
    """wait=true clients (one whose turn runs, one queued behind it) get a JSON answer, never
    uvicorn's plain-text 500, and their turns are kept for the restart."""
    home = tmp_path / "home"
    db = home / "sessions" / "state.db"
    slow = _env(
        SESSIONGATE_AGENT__ECHO__DELAY_SECONDS="60",
        SESSIONGATE_AGENT__RESTART_DRAIN_TIMEOUT="0.3",
    )
    gateway = GatewayProcess(home, env=slow)
    try:
        url = await gateway.start()
        async with httpx.AsyncClient(timeout=GUARD_SECONDS) as client:

            async def post(text: str, message_id: str) -> httpx.Response:
                body = {"chat_id": "w", "text": text, "message_id": message_id, "wait": True}
                return await client.post(f"{url}/v1/messages", json=body)

            running = asyncio.ensure_future(post("tok:w:0", "w-m0"))
            await _wait_for(db, lambda s: s.get("running", 0) == 1)
            queued = asyncio.ensure_future(post("tok:w:1", "w-m1"))
            await poll_until(lambda: count_rows(db, "inbox") == 2)
            gateway.signal(15)
            responses = await asyncio.gather(running, queued)
            assert await gateway.wait_exit() == 0
        for response in responses:
            assert response.headers["content-type"] == "application/json", response.text
            assert response.status_code in (200, 202, 503), response.text
            if response.status_code != 503:
                assert response.json()["status"] in ("queued", "interrupted"), response.text
        assert read_turn_states(db) == {"accepted": 1}  # journalled for resume
        assert count_rows(db, "inbox") == 2
        log = gateway.log_text()
        assert "graceful shutdown exceeded" not in log
        assert "error" not in {json.loads(line)["level"] for line in log.splitlines()}

        gateway.env = _env(SESSIONGATE_AGENT__ECHO__DELAY_SECONDS="0.01")
        await gateway.start()
        await poll_until(lambda: is_drained(db))
        assert await gateway.terminate() == 0
    finally:
        await gateway.aclose()


async def test_a_second_sigterm_cuts_the_drain_short_and_the_turn_still_resumes(tmp_path: Path):
    home = tmp_path / "home"
    db = home / "sessions" / "state.db"
    # A drain far longer than the hang guard: only the second signal can end it in time.
    stuck = _env(
        SESSIONGATE_AGENT__ECHO__DELAY_SECONDS="600",
        SESSIONGATE_AGENT__RESTART_DRAIN_TIMEOUT="600",
    )
    gateway = GatewayProcess(home, env=stuck)
    try:
        url = await gateway.start()
        async with httpx.AsyncClient(timeout=GUARD_SECONDS) as client:
            body = {"chat_id": "s", "text": "tok:s:0", "message_id": "s-m0", "wait": False}
            assert (await client.post(f"{url}/v1/messages", json=body)).status_code == 202
        await _wait_for(db, lambda s: s.get("running", 0) == 1)
        gateway.signal(15)
        await poll_until(lambda: "draining before shutdown" in gateway.log_text())
        gateway.signal(15)
        assert await gateway.wait_exit() == 0
        # Forced out: no clean-shutdown marker, and the turn is journalled for resume.
        assert not (home / ".clean_shutdown").exists()
        assert read_turn_states(db) == {"accepted": 1}

        gateway.env = _env(SESSIONGATE_AGENT__ECHO__DELAY_SECONDS="0.01")
        await gateway.start()
        await poll_until(lambda: is_drained(db))
        assert await gateway.terminate() == 0
    finally:
        await gateway.aclose()
