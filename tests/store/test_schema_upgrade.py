"""A state.db written by an older sessiongate upgrades in place at open, keeping its lanes."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from sessiongate import GatewayConfig, SessionSource, SessionStore
from sessiongate.store.sqlite import _schema
from sessiongate.store.sqlite.database import migration_status

if TYPE_CHECKING:
    from pathlib import Path

    from sessiongate.core.clock import FakeClock


def _home_at_version(home: Path, clock: FakeClock, version: int) -> tuple[str, str]:
    """A home whose schema stops at `version`, with one lane and one turn in it."""
    with SessionStore(home, GatewayConfig(mirror_sessions_json=False), clock=clock) as store:
        entry = store.get_or_create_session(SessionSource(platform="telegram", chat_id="c1"))
        store.append_messages(entry.session_id, [{"role": "user", "content": "before"}])
    # Rebuild the file as the older release left it: its migrations only.
    old = sqlite3.connect(home / "state.db")
    rows = old.execute(
        "SELECT session_key, session_id, platform, chat_type, chat_id, thread_id, "
        "participant_id, updated_at, pinned_at, archived_at, suspended, resume_pending, label, "
        "data FROM routes"
    ).fetchall()
    sessions = old.execute("SELECT * FROM sessions").fetchall()
    entries = old.execute("SELECT * FROM entries").fetchall()
    old.close()
    for suffix in ("", "-wal", "-shm"):
        (home / f"state.db{suffix}").unlink(missing_ok=True)
    conn = sqlite3.connect(home / "state.db")
    conn.execute(
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
        "applied_at TEXT NOT NULL)"
    )
    for number, name, statements in _schema.MIGRATIONS:
        if number > version:
            break
        for statement in statements:
            conn.execute(statement)
        conn.execute("INSERT INTO schema_migrations VALUES (?, ?, 'then')", (number, name))
    for table, rows_of in (("routes", rows), ("sessions", sessions), ("entries", entries)):
        marks = ", ".join("?" * len(rows_of[0]))
        conn.executemany(f"INSERT INTO {table} VALUES ({marks})", rows_of)  # noqa: S608
    conn.commit()
    conn.close()
    return entry.session_key, entry.session_id


def test_routes_become_a_rowid_table_and_keep_every_lane(tmp_path, clock):
    home = tmp_path / "home"
    key, session_id = _home_at_version(home, clock, 7)
    statuses = migration_status(home / "state.db")
    assert [m["version"] for m in statuses if m["applied_at"] is None] == [8, 9, 10, 11, 12]

    with SessionStore(home, GatewayConfig(mirror_sessions_json=False), clock=clock) as store:
        entry = store.get_session(key)
        assert entry is not None
        assert entry.session_id == session_id
        assert store.lookup_by_session_id(session_id) == entry
        # The same source routes to the same lane, and a new one still gets its own.
        again = store.get_or_create_session(SessionSource(platform="telegram", chat_id="c1"))
        assert again.session_id == session_id
        other = store.get_or_create_session(SessionSource(platform="telegram", chat_id="c2"))
        assert other.session_id != session_id
        store.append_messages(session_id, [{"role": "assistant", "content": "after"}])
        assert [m["content"] for m in store.load_transcript(session_id)] == ["before", "after"]
        with store.database.read() as conn:
            table = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'routes'").fetchone()
            indexes = {r[0] for r in conn.execute("SELECT name FROM pragma_index_list('routes')")}
            # An older file is converted once to incremental auto-vacuum (retention gives
            # space back with it).
            auto_vacuum = conn.execute("PRAGMA auto_vacuum").fetchone()[0]
    assert auto_vacuum == 2
    assert "WITHOUT ROWID" not in table[0]
    assert {"routes_key", "routes_session_id", "routes_label"} <= indexes
    assert all(m["applied_at"] is not None for m in migration_status(home / "state.db"))


def test_a_second_lane_cannot_take_a_key_after_the_upgrade(tmp_path, clock):
    """The key stays unique: the upsert's conflict target is the new unique index."""
    home = tmp_path / "home"
    key, _ = _home_at_version(home, clock, 7)
    with SessionStore(home, GatewayConfig(mirror_sessions_json=False), clock=clock) as store:
        with store.database.read() as conn:
            count = conn.execute(
                "SELECT count(*) FROM routes WHERE session_key = ?", (key,)
            ).fetchone()[0]
        rotated = store.get_or_create_session(
            SessionSource(platform="telegram", chat_id="c1"), force_new=True
        )
        with store.database.read() as conn:
            rows = conn.execute(
                "SELECT session_id FROM routes WHERE session_key = ?", (key,)
            ).fetchall()
    assert count == 1
    assert rows == [(rotated.session_id,)]
