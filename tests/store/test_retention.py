"""Retention on a real store: the oldest archived lanes go first, then the oldest idle ones,
with their transcripts, search rows and archive blobs; pinned, protected, busy and
resume-pending lanes stay; a dry run's plan is what the pass removes; SQLite gives the space
back."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from sessiongate import SessionSource
from sessiongate.core.retention import RetentionPolicy

if TYPE_CHECKING:
    from sessiongate import SessionStore
    from sessiongate.core.clock import FakeClock

DAY = 86400


def _lane(store: SessionStore, clock: FakeClock, name: str, text: str) -> str:
    entry = store.get_or_create_session(
        SessionSource(platform="telegram", chat_id=name, user_id=name)
    )
    store.append_messages(
        entry.session_id,
        [{"role": "user", "content": text}, {"role": "assistant", "content": f"re {text}"}],
    )
    clock.advance(DAY)
    return entry.session_key


@pytest.fixture
def lanes(store: SessionStore, clock: FakeClock) -> dict[str, str]:
    names = ["pinned", "oldest", "protected", "resuming", "older", "archived", "new"]
    keys = {name: _lane(store, clock, name, f"{name}word") for name in names}
    store.patch_session(keys["pinned"], pinned=True)
    entry = store.get_session(keys["archived"])
    assert entry is not None
    store.patch_session(keys["archived"], archived=True, expected_session_id=entry.session_id)
    store.mark_resume_pending(keys["resuming"])
    return keys


def test_the_plan_and_the_pass_remove_archived_first_then_the_oldest(make_store, clock, lanes):
    store = make_store(protected_session_keys=[lanes["protected"]])
    plan = store.plan_retention(RetentionPolicy(max_sessions=4))
    expected = [lanes["archived"], lanes["oldest"], lanes["older"]]
    assert [r.session_key for r in plan.removals] == expected
    assert store.get_session(lanes["oldest"]) is not None  # planning changes nothing

    done = store.apply_retention(plan)
    assert [r.session_key for r in done] == expected
    remaining = {e.session_key for e in store.list_sessions()}
    assert remaining == {lanes[n] for n in ("pinned", "protected", "resuming", "new")}
    assert store.search("oldestword") == []
    assert store.search("newword")
    # Nothing over budget now: the next pass removes nothing.
    assert store.enforce_retention(RetentionPolicy(max_sessions=4)) == []


def test_max_age_keeps_pinned_protected_and_resume_pending_lanes(make_store, clock, lanes):
    store = make_store(protected_session_keys=[lanes["protected"]])
    clock.advance(29 * DAY)
    # 30 days after "new" was written, 36 after "oldest" (archiving moved "archived" to the
    # day after "new").
    done = store.enforce_retention(RetentionPolicy(max_age_days=30))
    assert {r.session_key for r in done} == {lanes["oldest"], lanes["older"]}
    clock.advance(2 * DAY)
    done = store.enforce_retention(RetentionPolicy(max_age_days=30))
    assert {r.session_key for r in done} == {lanes["new"], lanes["archived"]}
    remaining = {e.session_key for e in store.list_sessions()}
    assert remaining == {lanes[n] for n in ("pinned", "protected", "resuming")}


def test_a_lane_with_waiting_messages_is_busy_and_stays(store, clock, lanes):
    from sessiongate.store.lanes import Inbound, LaneStore
    from sessiongate.store.records import InboxKind

    source = SessionSource(platform="telegram", chat_id="oldest", user_id="oldest")
    entry = store.get_session(lanes["oldest"])
    assert entry is not None
    LaneStore(store).accept(
        Inbound(source=source, text="still waiting", message_id="w1"),
        session_key=entry.session_key,
        session_id=entry.session_id,
        kind=InboxKind.SLOT,
        cap=32,
    )
    plan = store.plan_retention(RetentionPolicy(max_sessions=1))
    assert lanes["oldest"] not in [r.session_key for r in plan.removals]


def test_a_removed_lane_loses_its_archive_blob_and_leaves_a_tombstone(store, clock, lanes):
    key = lanes["older"]
    entry = store.get_session(key)
    assert entry is not None
    folder = store.sessions_dir / "archive"
    folder.mkdir(exist_ok=True)
    (folder / f"{entry.session_id}.json.gz").write_bytes(b"old blob")
    store.enforce_retention(RetentionPolicy(max_age_days=1))
    assert not (folder / f"{entry.session_id}.json.gz").exists()
    with store.database.read() as conn:
        assert conn.tombstone_reason(key) == "expired"


@pytest.mark.sqlite_only
def test_sqlite_gives_the_space_back(store, clock, backend):
    big = "x" * 4000
    for n in range(40):
        _lane(store, clock, f"bulk{n}", f"{big}{n}")
    before = (store.db_path.stat().st_size, store.database.disk_bytes())
    store.enforce_retention(RetentionPolicy(max_sessions=2))
    store.database.checkpoint_now()
    assert store.database.wait_checkpoints(1, timeout=30)
    with store.database.read() as conn:
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]  # type: ignore[attr-defined]
    assert free == 0
    assert store.database.disk_bytes() < before[1] // 2
