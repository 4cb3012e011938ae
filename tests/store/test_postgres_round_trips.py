"""A turn's writes on PostgreSQL, counted in round trips (libpq's protocol trace of the store's
writer connections): an append of several messages is one, with its COMMIT; a conversation's
first turn (its lane, its session and its messages) is at most three. The same results as one
statement at a time: ids chain, a key already stored is skipped, and a lane is never made
twice."""

from __future__ import annotations

import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import psycopg
import pytest

from sessiongate import GatewayConfig, SessionSource, SessionStore
from sessiongate.core.platform import Platform

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

GUARD_SECONDS = 30  # a hang guard: the waits below end as soon as their condition holds


@pytest.fixture
def store(pg_schema: Any, tmp_path: Path, clock: Any) -> Iterator[SessionStore]:
    config = GatewayConfig.model_validate(
        {"store": {"url": pg_schema.url}, "mirror_sessions_json": False}
    )
    opened = SessionStore(tmp_path / "sessions", config, clock=clock)
    yield opened
    opened.close()


def _round_trips(store: SessionStore, call: Callable[[], object]) -> int:
    """Times the client sent and then read the server's answer while `call` ran."""
    database: Any = store.database
    connections = database.writer_connections()
    with tempfile.TemporaryFile("w+") as trace:
        for conn in connections:
            conn.pgconn.trace(trace.fileno())
            conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            call()
        finally:
            for conn in connections:
                conn.pgconn.untrace()
        trace.seek(0)
        directions = [line.split("\t", 1)[0] for line in trace]
    sent = [d for d in directions if d in ("F", "B")]
    return sum(1 for i, d in enumerate(sent) if d == "F" and (i == 0 or sent[i - 1] == "B"))


def _source(chat: str) -> SessionSource:
    return SessionSource(platform=Platform.API, chat_id=chat)


def _messages(n: int, tag: str = "m") -> list[dict[str, Any]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"{tag}{i}"} for i in range(n)
    ]


def _first_turn(store: SessionStore, chat: str) -> str:
    with store.atomic(savepoints=False):
        session_id = store.get_or_create_session(_source(chat)).session_id
        store.append_messages(session_id, _messages(3))
    return session_id


def _sessions_of(store: SessionStore, chat: str) -> int:
    key = store.resolve_route(_source(chat))[0]
    database: Any = store.database
    with database.read() as tx:
        row = tx.conn.execute("SELECT count(*) FROM sessions WHERE session_key = %s", (key,))
        return int(row.fetchone()[0])


def _path(store: SessionStore, session_id: str) -> list[tuple[int, int | None, str]]:
    """(id, parent id, content) of the session's active path, root first."""
    database: Any = store.database
    with database.read() as tx:
        rows = tx.conn.execute(
            "SELECT e.id, e.parent_id, e.content FROM entries e JOIN sessions s USING (sid) "
            "WHERE s.session_id = %s AND e.on_path = 1 ORDER BY e.depth",
            (session_id,),
        )
        return [tuple(r) for r in rows.fetchall()]


def test_an_append_of_several_messages_is_one_round_trip_and_chains_its_entries(store):
    session_id = store.get_or_create_session(_source("a")).session_id
    store.append_messages(session_id, _messages(1, "warm"))
    ids: list[Any] = []
    assert (
        _round_trips(store, lambda: ids.extend(store.append_messages(session_id, _messages(3))))
        == 1
    )
    assert None not in ids
    assert ids == sorted(ids)
    path = _path(store, session_id)
    assert [content for _, _, content in path] == ["warm0", "m0", "m1", "m2"]
    assert [entry_id for entry_id, _, _ in path[1:]] == ids
    assert [parent for _, parent, _ in path[1:]] == [path[0][0], *ids[:2]]


def test_a_first_turn_is_at_most_three_round_trips_and_makes_one_session(store):
    _first_turn(store, "warm")  # statements prepared, connection open
    assert _round_trips(store, lambda: _first_turn(store, "new")) <= 3
    assert _sessions_of(store, "new") == 1
    session_id = _first_turn(store, "new")  # the route exists: nothing made beside it
    assert _sessions_of(store, "new") == 1
    assert [content for _, _, content in _path(store, session_id)] == ["m0", "m1", "m2"] * 2


def test_a_key_already_stored_is_skipped_and_the_next_entry_hangs_from_the_last_stored(store):
    session_id = store.get_or_create_session(_source("k")).session_id
    first = store.append_messages(session_id, _messages(2), idempotency_key="turn-1")
    again = store.append_messages(session_id, _messages(3), idempotency_key="turn-1")
    assert again[:2] == [None, None]
    path = _path(store, session_id)
    assert [content for _, _, content in path] == ["m0", "m1", "m2"]
    assert path[2][:2] == (again[2], first[1])


def test_a_new_conversation_routed_on_two_threads_at_once_gets_one_lane(store):
    start = threading.Barrier(2, timeout=GUARD_SECONDS)

    def route() -> str:
        start.wait()
        return store.get_or_create_session(_source("race")).session_id

    with ThreadPoolExecutor(2) as pool:
        ids = [f.result(GUARD_SECONDS) for f in [pool.submit(route) for _ in range(2)]]
    assert ids[0] == ids[1]
    assert _sessions_of(store, "race") == 1
