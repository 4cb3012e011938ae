"""A hostile but valid-JSON `sessions.json` never crashes the store (store/session_store.py
`_import_mirror_file` and `import_entries`, store/legacy.py)."""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

import pytest

from sessiongate import GatewayConfig, SessionSource, SessionStore
from sessiongate.errors import StoreUnavailableError

if TYPE_CHECKING:
    from pathlib import Path

    from sessiongate.core.clock import FakeClock


def _entry(key: str, session_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "session_key": key,
        "session_id": session_id,
        "created_at": "2025-12-01T00:00:00+00:00",
        "updated_at": "2025-12-01T00:00:00+00:00",
        **fields,
    }


GOOD = "agent:main:telegram:dm:good"
BAD = "agent:main:telegram:dm:bad"


def _write(store_dir: Path, text: str) -> None:
    store_dir.mkdir(parents=True, exist_ok=True)
    (store_dir / "sessions.json").write_text(text, encoding="utf-8")


def _backups(store_dir: Path) -> list[str]:
    return sorted(p.name for p in store_dir.iterdir() if ".bad-" in p.name)


# Each file holds one good entry and one hostile one; the raw text is built by hand where JSON
# must carry a lone surrogate (json.dumps would escape it just the same, but say so plainly).
_HOSTILE = {
    "duplicate label": json.dumps(
        {
            GOOD: _entry(GOOD, "20251201_000000_aaaaaaaa", label="same"),
            BAD: _entry(BAD, "20251201_000000_bbbbbbbb", label="same"),
        }
    ),
    "timestamp out of range": json.dumps(
        {
            GOOD: _entry(GOOD, "20251201_000000_aaaaaaaa"),
            BAD: _entry(BAD, "20251201_000000_bbbbbbbb", updated_at="0001-01-01T00:00:00+14:00"),
        }
    ),
    "surrogate in display name": json.dumps(
        {
            GOOD: _entry(GOOD, "20251201_000000_aaaaaaaa"),
            BAD: _entry(BAD, "20251201_000000_bbbbbbbb", display_name="\ud800"),
        }
    ),
    # Past every field check: only the database bind refuses it (the per-entry savepoint).
    "surrogate in extra": json.dumps(
        {
            GOOD: _entry(GOOD, "20251201_000000_aaaaaaaa"),
            BAD: _entry(BAD, "20251201_000000_bbbbbbbb", extra={"note": "\ud800"}),
        }
    ),
    "surrogate in key": json.dumps(
        {
            GOOD: _entry(GOOD, "20251201_000000_aaaaaaaa"),
            BAD + "\ud800": _entry(BAD + "\ud800", "20251201_000000_bbbbbbbb"),
        }
    ),
}


@pytest.mark.parametrize("case", sorted(_HOSTILE))
def test_a_hostile_entry_is_skipped_reported_and_backed_up(
    make_store, store_dir: Path, case: str, caplog: pytest.LogCaptureFixture
):
    _write(store_dir, _HOSTILE[case])
    with caplog.at_level(logging.WARNING, logger="sessiongate.store._imports"):
        store = make_store()
    assert [e.session_key for e in store.list_sessions()] == [GOOD]
    assert len(store.problems) == 1
    assert "skipped" in store.problems[0]
    assert len(_backups(store_dir)) == 1
    # The problem is logged at open, not only kept on the store.
    assert any("skipped" in r.getMessage() for r in caplog.records)
    # The store works: the good lane takes messages, the bad key can be created afresh.
    store.append_messages(store.get_session(GOOD).session_id, [{"role": "user", "content": "x"}])
    fresh = store.get_or_create_session(SessionSource(platform="telegram", chat_id="bad"))
    assert fresh.session_key == BAD


def test_a_failed_open_closes_the_database(store_dir: Path, monkeypatch: pytest.MonkeyPatch):
    from sessiongate.store.sqlite.database import Database

    opened: list[Database] = []
    real_init = Database.__init__

    def spy(self: Database, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        opened.append(self)

    def boom(self: SessionStore) -> None:
        raise RuntimeError("injected")

    monkeypatch.setattr(Database, "__init__", spy)
    monkeypatch.setattr(SessionStore, "_import_mirror_file", boom)
    with pytest.raises(RuntimeError, match="injected"):
        SessionStore(store_dir, GatewayConfig())
    assert len(opened) == 1
    assert opened[0].closed
    with pytest.raises(StoreUnavailableError):
        opened[0].transaction().__enter__()


def test_an_unchanged_legacy_file_is_not_imported_again_after_a_prune(
    make_store, store_dir: Path, clock: FakeClock
):
    old = "agent:main:telegram:dm:old"
    _write(store_dir, json.dumps({old: _entry(old, "20250101_000000_aaaaaaaa")}))
    clock.set(clock.now().replace(year=2026, month=6))
    store = make_store(mirror_sessions_json=False)
    assert [e.session_key for e in store.list_sessions()] == [old]
    assert store.prune_old_entries(30) == 1
    store.close()
    again = make_store(mirror_sessions_json=False)
    assert again.list_sessions() == []


def test_a_changed_legacy_file_brings_new_keys_but_never_pruned_ones(
    make_store, store_dir: Path, clock: FakeClock
):
    old = "agent:main:telegram:dm:old"
    new = "agent:main:telegram:dm:new"
    _write(store_dir, json.dumps({old: _entry(old, "20250101_000000_aaaaaaaa")}))
    clock.set(clock.now().replace(year=2026, month=6))
    store = make_store(mirror_sessions_json=False)
    assert store.prune_old_entries(30) == 1
    store.close()
    # An older tool writes the file again, with one more lane.
    _write(
        store_dir,
        json.dumps(
            {
                old: _entry(old, "20250101_000000_aaaaaaaa"),
                new: _entry(new, "20250101_000000_bbbbbbbb"),
            }
        ),
    )
    again = make_store(mirror_sessions_json=False)
    assert [e.session_key for e in again.list_sessions()] == [new]
    # Pruning is routine, not damage: the file is neither reported nor backed up for it.
    assert again.problems == []
    assert _backups(store_dir) == []
