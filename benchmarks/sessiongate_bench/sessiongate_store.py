"""The workload adapter for sessiongate's own store, through its public API only."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from sessiongate.core.config import GatewayConfig
from sessiongate.core.platform import Platform
from sessiongate.core.source import SessionSource
from sessiongate.store.session_store import SessionStore

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["SessiongateAdapter"]


class SessiongateAdapter:
    """`options["synchronous"]` is NORMAL (the default) or FULL; the JSON mirror is off.

    The mirror is written off the hot path and holds routing rows only, so leaving it off
    measures the transcript store the way the other contenders are measured.
    """

    max_thread_messages = None

    def __init__(self, work_dir: Path, options: dict[str, Any]) -> None:
        synchronous: Literal["NORMAL", "FULL"] = (
            "FULL" if str(options.get("synchronous", "NORMAL")).upper() == "FULL" else "NORMAL"
        )
        self.synchronous = synchronous
        self.dir = Path(work_dir)
        config = GatewayConfig(synchronous=synchronous, mirror_sessions_json=False)
        self.store = SessionStore(self.dir, config)

    def create_session(self, name: str) -> str:
        entry = self.store.get_or_create_session(SessionSource(platform=Platform.API, chat_id=name))
        return entry.session_id

    # Opening a session is the same call: a lookup by key, created if missing.
    open_session = create_session

    def append(self, handle: str, messages: list[dict[str, str]]) -> None:
        self.store.append_messages(handle, messages)

    def append_new(self, name: str, messages: list[dict[str, str]]) -> str:
        """A conversation's first turn: created and stored in one transaction, as the gateway
        routes a new chat's first message in the transaction that accepts it (whose calls
        take no savepoints)."""
        with self.store.atomic(savepoints=False):
            entry = self.store.get_or_create_session(
                SessionSource(platform=Platform.API, chat_id=name)
            )
            self.store.append_messages(entry.session_id, messages)
        return entry.session_id

    def tail(self, handle: str, n: int) -> Sequence[dict[str, Any]]:
        return self.store.load_transcript(handle, limit=n)

    def load_all(self, handle: str) -> Sequence[dict[str, Any]]:
        return self.store.load_transcript(handle)

    def text(self, item: dict[str, Any]) -> str:
        return str(item.get("content", ""))

    def files(self) -> list[Path]:
        return [self.dir / "state.db"]

    def describe(self) -> dict[str, Any]:
        from importlib.metadata import version

        return {
            "library": f"sessiongate {version('sessiongate')}",
            "journal_mode": "WAL",
            "synchronous": self.synchronous,
        }

    def close(self) -> None:
        self.store.close()
