"""Helpers shared by several test packages (imported by name; the fixtures built on them are
in the root `conftest.py`).

- `lane(store, chat)`: a Telegram DM lane's (session key, session id), created if new.
- `talk(store, sid, *texts)`: one user/assistant exchange per text; the stored ids.
- `Gateway`: what the `make_gateway` fixture gives (a started runner, its store, its loopback
  platform and its agent).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sessiongate import SessionSource

if TYPE_CHECKING:
    from pathlib import Path

    from sessiongate import GatewayConfig, SessionStore
    from sessiongate.gateway import GatewayRunner
    from sessiongate.testing import LoopbackAdapter


def lane(store: SessionStore, chat: str = "1") -> tuple[str, str]:
    entry = store.get_or_create_session(SessionSource(platform="telegram", chat_id=chat))
    return entry.session_key, entry.session_id


def talk(store: SessionStore, sid: str, *texts: str) -> list[int]:
    ids: list[int] = []
    for text in texts:
        got = store.append_messages(
            sid,
            [{"role": "user", "content": text}, {"role": "assistant", "content": f"re: {text}"}],
        )
        ids.extend(i for i in got if i is not None)
    return ids


@dataclass
class Gateway:
    runner: GatewayRunner
    store: SessionStore
    adapter: LoopbackAdapter
    agent: Any
    home: Path
    config: GatewayConfig
