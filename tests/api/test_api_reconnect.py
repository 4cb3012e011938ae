"""The one-shot reconnect claim over HTTP: `visible_session_id` on a message."""

from __future__ import annotations

import pytest

from sessiongate import GatewayConfig


@pytest.fixture
def config() -> GatewayConfig:
    return GatewayConfig(reset_policy={"mode": "idle", "idle_minutes": 5})


def test_a_reconnect_claim_keeps_a_stale_session_for_one_send(client, send, clock):
    first = send("hello")
    clock.advance(600)
    kept = send("back again", visible_session_id=first["session_id"])
    assert kept["session_id"] == first["session_id"]
    clock.advance(600)
    claimed_again = send("and again", visible_session_id=first["session_id"])
    assert claimed_again["session_id"] != first["session_id"]
    clock.advance(600)
    assert send("plain")["session_id"] != claimed_again["session_id"]
