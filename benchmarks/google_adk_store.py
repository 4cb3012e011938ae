"""Google ADK `SqliteSessionService` (package `google-adk`) as a workload adapter.

ADK stores one event per message and has no batch append, so a turn of k messages is k
`append_event` calls. `append_event` needs the `Session` object it extends: the adapter keeps
the one returned by `create_session` (trimming the events it accumulates in memory, which a
server would drop after the turn), and after a `StaleSessionError` fetches it again before the
next turn, as a request handler would. Its API is async; calls run on one event loop owned by
the adapter.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from google.adk.events.event import Event
from google.adk.sessions.base_session_service import GetSessionConfig
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.genai import types

if TYPE_CHECKING:
    from google.adk.sessions.session import Session

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import durability, library

APP = "bench"
USER = "user"


class _Handle:
    __slots__ = ("name", "session")

    def __init__(self, name: str, session: Session | None) -> None:
        self.name = name
        self.session = session


class GoogleAdkSessions:
    max_thread_messages = None

    def __init__(self, work_dir: Path, options: dict[str, Any]) -> None:
        self.path = Path(work_dir) / "google_adk.db"
        self.loop = asyncio.new_event_loop()
        self.service = SqliteSessionService(str(self.path))

    def create_session(self, name: str) -> _Handle:
        session = self.loop.run_until_complete(
            self.service.create_session(app_name=APP, user_id=USER, session_id=name)
        )
        return _Handle(name, session)

    def open_session(self, name: str) -> _Handle:
        # The session is fetched by the read (`tail`) or, for a writer, before its first append.
        return _Handle(name, None)

    def append(self, handle: _Handle, messages: list[dict[str, str]]) -> None:
        self.loop.run_until_complete(self._append(handle, messages))

    async def _append(self, handle: _Handle, messages: list[dict[str, str]]) -> None:
        if handle.session is None:
            handle.session = await self.service.get_session(
                app_name=APP,
                user_id=USER,
                session_id=handle.name,
                config=GetSessionConfig(num_recent_events=0),
            )
            if handle.session is None:
                raise LookupError(f"no session {handle.name}")
        session = handle.session
        invocation = f"e-{uuid.uuid4()}"
        try:
            for message in messages:
                user = message["role"] == "user"
                event = Event(
                    invocation_id=invocation,
                    author=USER if user else "bench_agent",
                    content=types.Content(
                        role="user" if user else "model",
                        parts=[types.Part(text=message["content"])],
                    ),
                )
                await self.service.append_event(session, event)
        except Exception:
            handle.session = None  # stale or broken: fetch it again next turn
            raise
        finally:
            session.events.clear()

    def _get(self, name: str, n: int | None) -> list[Event]:
        config = GetSessionConfig(num_recent_events=n) if n is not None else None
        session = self.loop.run_until_complete(
            self.service.get_session(app_name=APP, user_id=USER, session_id=name, config=config)
        )
        if session is None:
            raise LookupError(f"no session {name}")
        return list(session.events)

    def tail(self, handle: _Handle, n: int) -> list[Event]:
        return self._get(handle.name, n)

    def load_all(self, handle: _Handle) -> list[Event]:
        return self._get(handle.name, None)

    def text(self, item: Event) -> str:
        parts = item.content.parts if item.content and item.content.parts else []
        return "".join(part.text or "" for part in parts)

    def files(self) -> list[Path]:
        return [self.path]

    def describe(self) -> dict[str, Any]:
        return {"library": library("google-adk"), **durability(self.path)}

    def close(self) -> None:
        self.loop.run_until_complete(self.service.close())
        self.loop.close()
