"""`sessiongate sessions takeover|handback KEY`, run as the real command on a real state.db:
the takeover is the store's row (read back by the store), a second takeover changes nothing,
hand-back of a lane not taken over and unknown keys are refused in one line."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from sessiongate import GatewayConfig, Platform, SessionSource, SessionStore
from sessiongate.store.takeover import TakeoverStore

if TYPE_CHECKING:
    from pathlib import Path


def _seed(home: Path) -> str:
    store = SessionStore(home / "sessions", GatewayConfig())
    try:
        source = SessionSource(platform=Platform.TELEGRAM, chat_id="ann", user_id="ann")
        return store.get_or_create_session(source).session_key
    finally:
        store.close()


def _row(home: Path, key: str):
    store = SessionStore(home / "sessions", GatewayConfig())
    try:
        return TakeoverStore(store).get(key)
    finally:
        store.close()


def test_takeover_and_handback(sg, home) -> None:
    key = _seed(home)
    taken = sg("sessions", "takeover", key, "--home", str(home), "--json")
    assert taken.returncode == 0, taken.stderr
    body = json.loads(taken.stdout)
    assert (body["taken_over"], body["taken_by"]) == (True, "operator")
    assert body["resume_at"] is not None  # the default 60 minutes
    row = _row(home, key)
    assert row is not None
    assert row.taken_by == "operator"
    again = sg("sessions", "takeover", key, "--home", str(home))
    assert again.returncode == 0
    assert "taken over already" in again.stdout
    assert _row(home, key) == row
    back = sg("sessions", "handback", key, "--home", str(home))
    assert back.returncode == 0, back.stderr
    assert _row(home, key) is None
    refused = sg("sessions", "handback", key, "--home", str(home))
    assert refused.returncode == 1
    assert "not taken over" in refused.stderr
    assert "Traceback" not in refused.stderr
    missing = sg("sessions", "takeover", "agent:main:telegram:dm:nobody", "--home", str(home))
    assert missing.returncode == 1
    assert "Traceback" not in missing.stderr
    assert _row(home, "agent:main:telegram:dm:nobody") is None
