"""Injected faults: the disk refuses, the index breaks, the files are damaged.

Canonical data is never lost or overwritten, and every failure is a store error with a clear
message, never a raw `sqlite3` exception.
"""

from __future__ import annotations

import contextlib
import sqlite3
from typing import TYPE_CHECKING

import pytest

from sessiongate.errors import StoreCorruptError, StoreUnavailableError
from sessiongate.store.sqlite import database
from suite_support import lane

if TYPE_CHECKING:
    from pathlib import Path

    from sessiongate import SessionStore

pytestmark = pytest.mark.sqlite_only  # disk faults, WAL, FTS5 damage: SQLite's own files


def turn(text: str) -> list[dict]:
    return [{"role": "user", "content": text}, {"role": "assistant", "content": "ok " * 200}]


def test_disk_full_while_appending_keeps_what_was_committed(store: SessionStore):
    sid = lane(store)[1]
    store.append_messages(sid, turn("kept"))
    conn = store.database.conn
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count={pages}")

    def fill() -> None:
        for i in range(200):
            store.append_messages(sid, turn(f"more {i}" + "x" * 4000))

    with pytest.raises(StoreUnavailableError, match="full"):
        fill()
    assert store.load_transcript(sid)[0]["content"] == "kept"
    conn.execute("PRAGMA max_page_count=1073741823")
    store.append_messages(sid, turn("after"))
    texts = [m["content"] for m in store.load_transcript(sid) if m["role"] == "user"]
    assert texts[0] == "kept"
    assert texts[-1] == "after"
    assert len(texts) == len(set(texts))  # no half-written turn


def test_read_only_database_refuses_writes_and_serves_reads(store: SessionStore):
    sid = lane(store)[1]
    store.append_messages(sid, turn("readable"))
    store.database.conn.execute("PRAGMA query_only=ON")
    with pytest.raises(StoreUnavailableError):
        store.append_messages(sid, turn("refused"))
    assert next(m["content"] for m in store.load_transcript(sid)) == "readable"
    hits, degraded = store.search_detailed("readable")
    assert hits
    assert degraded  # the index could not catch up, so search scanned
    store.database.conn.execute("PRAGMA query_only=OFF")


def test_missing_index_table_falls_back(store: SessionStore):
    sid = lane(store)[1]
    store.append_messages(sid, turn("still searchable"))
    with store.database.transaction() as conn:
        conn.execute("DROP TABLE entries_fts")
    hits, degraded = store.search_detailed("searchable")
    assert degraded
    assert hits
    assert store.search_index_status()["stale"]
    store.append_messages(sid, turn("writes go on"))
    store.rebuild_search_index()
    hits, degraded = store.search_detailed("searchable")
    assert not degraded
    assert hits


def test_truncated_state_db_refuses_to_open(make_store, store_dir: Path):
    store = make_store()
    sid = lane(store)[1]
    for i in range(50):
        store.append_messages(sid, turn(f"t{i}"))
    store.close()
    conn = sqlite3.connect(store_dir / "state.db")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = (store_dir / "state.db").read_bytes()
    (store_dir / "state.db").write_bytes(data[: len(data) // 3])

    def reopen() -> None:
        make_store().load_transcript(sid)

    with pytest.raises(StoreCorruptError, match="doctor"):
        reopen()


def test_garbage_state_db_refuses_to_open(make_store, store_dir: Path):
    store_dir.mkdir(parents=True)
    (store_dir / "state.db").write_bytes(b"\x00garbage" * 512)
    with pytest.raises(StoreCorruptError):
        make_store()


def test_no_sqlite_error_escapes_the_store(store: SessionStore):
    sid = lane(store)[1]
    store.close()
    with pytest.raises(StoreUnavailableError):
        store.append_messages(sid, turn("closed"))


def test_the_wal_is_checkpointed_off_the_writer(store: SessionStore, store_dir: Path):
    sid = lane(store)[1]
    db = store.database
    assert db.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
    for i in range(450):
        store.append_messages(sid, turn(f"t{i}"))
    # The checkpointer runs on its own thread, woken every 200 commits.
    assert db.wait_checkpoints(2, timeout=30)
    wal = store_dir / "state.db-wal"
    # PASSIVE checkpoints let SQLite reuse the log from the start instead of growing it.
    assert wal.stat().st_size < 16 * 1024 * 1024


def test_a_log_that_writes_never_let_finish_is_started_over(
    store: SessionStore, store_dir: Path, monkeypatch: pytest.MonkeyPatch
):
    # A PASSIVE pass copies the log as it was when it began; a commit that lands meanwhile
    # leaves the log unfinished, and under writes that never pause it would never start over.
    sid = lane(store)[1]
    db = store.database
    for i in range(20):
        store.append_messages(sid, turn(f"t{i}"))
    real = database._passive_checkpoint
    passes: list[int] = []

    def pass_with_a_commit_meanwhile(conn: sqlite3.Connection) -> int:
        if len(passes) >= 2:  # the pass under the writer's lock: nothing can land meanwhile
            return real(conn)
        # A reader's snapshot from before the commit stands for the pass's own: the pass
        # copies up to it, as a pass copies what the log held when it began.
        with contextlib.closing(sqlite3.connect(store_dir / "state.db")) as before:
            before.execute("BEGIN")
            before.execute("SELECT count(*) FROM entries").fetchone()
            store.append_messages(sid, turn(f"meanwhile {len(passes)}"))
            frames = real(conn)
            before.rollback()
        passes.append(frames)
        return frames

    monkeypatch.setattr(database, "WAL_RESTART_FRAMES", 8)
    monkeypatch.setattr(database, "_passive_checkpoint", pass_with_a_commit_meanwhile)
    done = db.checkpoints
    db.checkpoint_now()
    assert db.wait_checkpoints(done + 1, timeout=30)
    store.append_messages(sid, turn("after"))
    with contextlib.closing(sqlite3.connect(store_dir / "state.db")) as probe:
        _, frames, _ = probe.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    # Started over: the log holds the last append's pages, not the 23 commits before it.
    assert frames < 8, passes
    assert [m["content"] for m in store.load_transcript(sid)][-4::2] == ["meanwhile 1", "after"]


def test_an_index_without_its_structure_record_is_rebuilt(make_store, store_dir: Path):
    store = make_store()
    sid = lane(store)[1]
    store.append_messages(sid, turn("needle in the haystack"))
    assert store.search("needle")
    with store.database.transaction() as conn:
        conn.execute("DELETE FROM entries_fts_data WHERE id > 1")
    store.close()
    reopened = make_store()
    hits, degraded = reopened.search_detailed("needle")
    assert degraded
    assert hits
    assert reopened.rebuild_search_index() > 0
    hits, degraded = reopened.search_detailed("needle")
    assert not degraded
    assert hits[0]["session_id"] == sid


def test_opening_never_makes_a_read_only_state_db_writable(make_store, store_dir: Path):
    # An operator who made the store read-only (0400) meant it: opening may fail, but must not
    # grant the write bit back. Only group and other bits are taken away.
    make_store().close()
    path = store_dir / "state.db"
    path.chmod(0o440)
    # As root SQLite can still write it; otherwise the open fails with a store error.
    with contextlib.suppress(StoreCorruptError, StoreUnavailableError):
        make_store().close()
    assert path.stat().st_mode & 0o777 == 0o400


def test_opening_takes_group_and_other_bits_off_an_existing_state_db(make_store, store_dir):
    make_store().close()
    path = store_dir / "state.db"
    path.chmod(0o644)
    make_store().close()
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_state_db_that_cannot_be_opened_is_unavailable_not_corrupt(tmp_path):
    from sessiongate import GatewayConfig, SessionStore
    from sessiongate.errors import StoreCorruptError, StoreUnavailableError

    sessions = tmp_path / "sessions"
    (sessions / "state.db").mkdir(parents=True)  # the open fails as a permission problem would
    with pytest.raises(StoreUnavailableError, match="writable") as caught:
        SessionStore(sessions, GatewayConfig())
    assert not isinstance(caught.value, StoreCorruptError)
