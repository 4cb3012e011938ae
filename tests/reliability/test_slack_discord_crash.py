"""SIGKILL the real gateway process while it serves Slack (Socket Mode) or Discord (the
gateway websocket), with the platform's stub in this test's process: the kill falls between
the adapter accepting a message and the reply; the platform delivers the message again (Slack:
the unacknowledged envelope's retry; Discord: a replay after the new session); the restarted
gateway answers exactly once."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import pytest

from sessiongate.testing.stubs import discord as dc, slack as sl
from sg_process import GatewayProcess, is_drained, poll_until

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.torture


def _gateway(tmp_path: Path, platform: str, delay: float) -> GatewayProcess:
    config = tmp_path / "config.yaml"
    config.write_text(
        f"platforms:\n{platform}"
        "agent:\n"
        "  restart_drain_timeout: 1\n"
        f"  echo: {{delay_seconds: {delay}}}\n"
    )
    return GatewayProcess(tmp_path / "home", extra_args=("--config", str(config)))


def _claim_done(home: Path, event_id: str) -> bool:
    db = home / "sessions" / "state.db"
    if not db.exists():
        return False
    conn = sqlite3.connect(db, timeout=30)
    try:
        row = conn.execute(
            "SELECT state FROM platform_events WHERE event_id = ?", (event_id,)
        ).fetchone()
    except sqlite3.OperationalError:
        return False
    finally:
        conn.close()
    return row is not None and row[0] == "done"


async def test_slack_a_kill_between_accepting_and_replying_still_replies_once(tmp_path):
    stub = sl.SlackStub()
    async with sl.serve_stub(stub) as url:
        section = (
            "  slack:\n"
            f"    bot_token: '{stub.bot_token}'\n"
            f"    app_token: '{stub.app_token}'\n"
            f"    base_url: '{url}/api/'\n"
            "    allow_from: ['*']\n"
        )
        gateway = _gateway(tmp_path, section, delay=1.5)
        event = {"type": "message", "channel": "D0ANN", "channel_type": "im", "user": "U0ANN",
                 "text": "survive this", "ts": "1767225600.000100"}  # fmt: skip
        body = {"type": "event_callback", "team_id": "T0TEAM", "event_id": "Ev1", "event": event}
        try:
            await gateway.start()
            envelope = stub.push_event(body)
            # Acknowledged only after the durable hand-off; the echo agent is still waiting.
            await poll_until(lambda: envelope in stub.acks)
            assert stub.sent == []
            assert await gateway.kill() == -9
            # Slack retries an envelope whose ack it doubts; deliver it again.
            stub.redeliver(envelope)
            await gateway.start()
            await poll_until(lambda: len(stub.sent) >= 1)
            await poll_until(lambda: is_drained(gateway.home / "sessions" / "state.db"))
            assert await gateway.terminate() == 0
        finally:
            await gateway.aclose()
    assert [m["text"] for m in stub.sent] == ["echo: survive this"]


async def test_discord_a_kill_between_accepting_and_replying_still_replies_once(tmp_path):
    stub = dc.DiscordStub()
    async with dc.serve_stub(stub) as url:
        section = (
            "  discord:\n"
            f"    token: '{stub.token}'\n"
            f"    api_base_url: '{url}'\n"
            "    allow_from: ['*']\n"
        )
        gateway = _gateway(tmp_path, section, delay=1.5)
        message = {
            "id": "1250000000000000001", "channel_id": "1100000000000000001", "type": 0,
            "content": "survive this", "author": dc.user("5000000000000000001", "ann"),
            "timestamp": "2026-01-01T00:00:00.000000+00:00", "edited_timestamp": None,
            "tts": False, "mention_everyone": False, "mentions": [], "mention_roles": [],
            "attachments": [], "embeds": [], "pinned": False, "flags": 0,
        }  # fmt: skip
        try:
            await gateway.start()
            await poll_until(stub.session_ready.is_set)
            stub.dispatch("MESSAGE_CREATE", message)
            await poll_until(lambda: _claim_done(gateway.home, message["id"]))
            assert stub.sent == []
            assert await gateway.kill() == -9
            await gateway.start()
            await poll_until(stub.session_ready.is_set)
            # A new session: Discord would not replay it, but a zombie socket or a resume
            # from before the kill could; deliver it again.
            stub.dispatch("MESSAGE_CREATE", message)
            await poll_until(lambda: len(stub.sent) >= 1)
            await poll_until(lambda: is_drained(gateway.home / "sessions" / "state.db"))
            assert await gateway.terminate() == 0
        finally:
            await gateway.aclose()
    assert [m["content"] for m in stub.sent] == ["echo: survive this"]
