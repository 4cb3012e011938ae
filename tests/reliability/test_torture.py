"""Crash torture over HTTP (`torture.py`): SIGKILL the real gateway while clients talk to it.

Both busy modes are tortured: `queue`, and the gateway's default `interrupt`, where follow-ups
merge into the pending slot and cut the running turn off. The tiny runs (one per mode) are part
of every test run; the sized runs are opt-in (`pytest -m torture`, size from `TORTURE_KILLS` /
`TORTURE_CHATS`), and `python tests/reliability/torture.py --kills 200 [--busy-mode interrupt]`
is the full one. The checker itself is shown to catch a turn left running, a token stored twice
and a lost acknowledged message on a home the tiny run left behind, and, in interrupt mode, a
turn journalled interrupted whose message was answered.
"""

from __future__ import annotations

import os
import sqlite3
from typing import TYPE_CHECKING

import pytest

from sessiongate import GatewayConfig, SessionStore
from sg_process import selected_by_marker
from torture import (
    BUSY_MODES,
    Sent,
    TortureConfig,
    TortureResult,
    check_home,
    load_ledger,
    run_torture,
)

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.torture


def _describe(result: TortureResult) -> str:
    return "\n".join(result.problems) + f"\n(home: {result.home})"


async def test_tiny_torture_loses_duplicates_and_reorders_nothing(tmp_path: Path):
    config = TortureConfig(kills=3, chats=4, seed=7, max_uptime=0.8, startup_kill_share=0.34)
    result = await run_torture(config, tmp_path)
    assert result.ok, _describe(result)
    assert result.kills == 3
    assert result.starts == 4
    assert result.messages_acked > 0
    assert result.user_turns == result.turns.get("delivered", 0) + result.turns.get("failed", 0)
    assert result.interrupted_turns == 0
    _checker_catches_damage(tmp_path, config)


async def test_tiny_interrupt_torture_keeps_every_message_exactly_once(tmp_path: Path):
    # Bursts make several follow-ups reach a busy lane together, so the pending slot merges
    # too; lone follow-ups cut the running turn off.
    config = TortureConfig(
        kills=3,
        chats=4,
        seed=11,
        max_uptime=0.8,
        startup_kill_share=0.34,
        busy_mode="interrupt",
        burst_share=0.3,
    )
    result = await run_torture(config, tmp_path)
    assert result.ok, _describe(result)
    assert result.kills == 3
    assert result.messages_acked > 0
    assert result.interrupted_turns > 0, result
    assert result.merged_turns > 0, result
    assert result.user_turns == sum(
        result.turns.get(state, 0) for state in ("delivered", "failed", "interrupted")
    )
    _checker_catches_damage(tmp_path, config)
    _checker_catches_an_answered_interrupt(tmp_path, config)


def _checker_catches_damage(workdir: Path, config: TortureConfig) -> None:
    """The same checks on the same home, after breaking it on purpose, must complain."""
    home = workdir / "home"
    acked, sent = load_ledger(workdir)
    token = next(iter(acked))
    db = home / "sessions" / "state.db"
    conn = sqlite3.connect(db)
    try:
        with conn:
            conn.execute(
                "UPDATE turns SET state = 'running' WHERE id = (SELECT MAX(id) FROM turns)"
            )
    finally:
        conn.close()
    with SessionStore(home / "sessions", GatewayConfig(mirror_sessions_json=False)) as store:
        entry = store.list_sessions()[0]
        store.append_messages(
            entry.session_id,
            [
                {"role": "user", "content": token, "metadata": {"turn_id": 10**9}},
                {"role": "assistant", "content": f"echo: {token}"},
            ],
        )
    lost = Sent("c00", 10**6, "c00-lost", "tok:c00:lost")
    lost.acked_status = "queued"
    damaged = TortureResult()
    check_home(home, {**acked, lost.token: lost}, sent, damaged, config=config)
    text = "\n".join(damaged.problems)
    assert "turns left 'running'" in text
    assert f"{token} is stored 2 times" in text
    assert "tok:c00:lost is in no transcript" in text
    assert f"turn {10**9}, which the journal lacks" in text


def _checker_catches_an_answered_interrupt(workdir: Path, config: TortureConfig) -> None:
    """A delivered turn relabelled `interrupted` in the journal: its message was answered and
    is not marked, which the interrupt-mode checks must report."""
    home = workdir / "home"
    acked, sent = load_ledger(workdir)
    conn = sqlite3.connect(home / "sessions" / "state.db")
    try:
        with conn:
            (turn_id,) = conn.execute(
                "SELECT MIN(id) FROM turns WHERE state = 'delivered' AND error IS NULL"
            ).fetchone()
            conn.execute(
                "UPDATE turns SET state = 'interrupted', error = 'interrupt' WHERE id = ?",
                (turn_id,),
            )
    finally:
        conn.close()
    damaged = TortureResult()
    check_home(home, acked, sent, damaged, config=config)
    assert any(f"interrupted turn {turn_id} " in p for p in damaged.problems), damaged.problems


@pytest.mark.parametrize("busy_mode", BUSY_MODES)
async def test_sized_torture(request: pytest.FixtureRequest, tmp_path: Path, busy_mode):
    if not selected_by_marker(request, "torture"):
        pytest.skip("opt-in: run with -m torture (size: TORTURE_KILLS, TORTURE_CHATS)")
    config = TortureConfig(
        kills=int(os.environ.get("TORTURE_KILLS", "20")),
        chats=int(os.environ.get("TORTURE_CHATS", "10")),
        seed=int(os.environ.get("TORTURE_SEED", "1")),
        startup_kill_share=0.3,
        busy_mode=busy_mode,
        burst_share=0.3 if busy_mode == "interrupt" else 0.0,
    )
    result = await run_torture(config, tmp_path)
    assert result.ok, _describe(result)
    assert result.kills == config.kills
