"""`SessionEntry`: the routing record of one lane (spec §2), its storage form and flags."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from sessiongate.core.entry import EntryAction, SessionEntry, next_action
from sessiongate.core.platform import Platform
from sessiongate.core.source import ChatType, SessionSource
from sessiongate.errors import InvalidSessionIdError

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SESSION_ID = "20260101_000000_0a1b2c3d"

# Spec §2: every field with its default (the four required fields excluded).
SPEC_DEFAULTS: dict[str, Any] = {
    "origin": None,
    "display_name": None,
    "platform": None,
    "chat_type": "dm",
    "input_tokens": 0,
    "output_tokens": 0,
    "cache_read_tokens": 0,
    "cache_write_tokens": 0,
    "total_tokens": 0,
    "estimated_cost_usd": 0.0,
    "cost_status": "unknown",
    "last_prompt_tokens": 0,
    "was_auto_reset": False,
    "auto_reset_reason": None,
    "reset_had_activity": False,
    "is_fresh_reset": False,
    "expiry_finalized": False,
    "suspended": False,
    "resume_pending": False,
    "resume_reason": None,
    "last_resume_marked_at": None,
}


def _entry(**changes: Any) -> SessionEntry:
    return SessionEntry("agent:main:telegram:dm:1", SESSION_ID, T0, T0, **changes)


def _full_entry() -> SessionEntry:
    origin = SessionSource(Platform.TELEGRAM, "1", user_id="42", user_name="Alice")
    return _entry(
        origin=origin,
        display_name="Alice",
        platform=Platform.TELEGRAM,
        chat_type=ChatType.GROUP,
        input_tokens=10,
        output_tokens=20,
        cache_read_tokens=3,
        cache_write_tokens=4,
        total_tokens=37,
        context_tokens=1234,
        estimated_cost_usd=0.25,
        cost_status="estimated",
        last_prompt_tokens=9,
        was_auto_reset=True,
        auto_reset_reason="suspended",
        reset_had_activity=True,
        is_fresh_reset=True,
        expiry_finalized=True,
        suspended=True,
        resume_pending=True,
        resume_reason="restart_interrupted",
        last_resume_marked_at=T0 + timedelta(minutes=1),
        session_started_at=T0,
        last_interaction_at=T0 + timedelta(minutes=2),
        last_activity_at=T0 + timedelta(minutes=3),
        archived_at=T0 + timedelta(days=1),
        pinned_at=T0 + timedelta(hours=1),
        last_read_at=T0 + timedelta(minutes=4),
        marked_unread_at=T0 + timedelta(minutes=5),
        label="work",
        thinking_level="high",
        model_override="gpt-x",
        compaction_count=2,
        memory_flush_at=T0,
        memory_flush_compaction_count=1,
        incognito=True,
        forked_from_parent=True,
        parent_session_key="agent:main:telegram:dm:0",
        extra={"k": [1, 2]},
    )


def test_every_spec_field_exists_with_its_default():
    entry = _entry()
    for name, default in SPEC_DEFAULTS.items():
        assert getattr(entry, name) == default, name
    assert entry.chat_type is ChatType.DM


def test_required_fields_are_the_spec_four():
    required = [
        f.name
        for f in dataclasses.fields(SessionEntry)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    assert required == ["session_key", "session_id", "created_at", "updated_at"]


def test_to_dict_from_dict_round_trip_through_json():
    entry = _full_entry()
    data = json.loads(json.dumps(entry.to_dict()))
    assert data["created_at"] == "2026-01-01T00:00:00+00:00"
    assert data["origin"]["user_name"] == "Alice"
    assert SessionEntry.from_dict(data) == entry


def test_minimal_entry_round_trips():
    entry = _entry()
    assert SessionEntry.from_dict(entry.to_dict()) == entry


def test_naive_timestamps_are_read_as_utc():
    data = _entry().to_dict() | {"updated_at": "2026-01-02T03:04:05"}
    loaded = SessionEntry.from_dict(data)
    assert loaded.updated_at == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert loaded.updated_at.utcoffset() == timedelta(0)


def test_offset_timestamps_are_converted_to_utc():
    data = _entry().to_dict() | {"created_at": "2026-01-01T02:00:00+02:00"}
    assert SessionEntry.from_dict(data).created_at == T0


@pytest.mark.parametrize(
    "session_id",
    [
        "..",
        "../etc/passwd",
        "a/b",
        "a\\b",
        "C:evil",
        ".hidden",
        "a..b",
        "",
        "x" * 200,
        "id with space",
    ],
)
def test_from_dict_rejects_ids_with_path_tricks(session_id):
    with pytest.raises(InvalidSessionIdError):
        SessionEntry.from_dict(_entry().to_dict() | {"session_id": session_id})


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("session_id", 20260101),
        ("session_key", ["agent"]),
        ("created_at", 1767225600),
        ("created_at", "yesterday"),
        ("input_tokens", "5"),
        ("input_tokens", True),
        ("estimated_cost_usd", "0.1"),
        ("suspended", "yes"),
        ("suspended", 1),
        ("platform", "myspace"),
        ("chat_type", "forum"),
        ("origin", "telegram"),
        ("origin", {"chat_id": "1"}),
        ("extra", []),
        ("display_name", 5),
        ("memory_flush_compaction_count", 1.5),
        # Valid ISO text whose UTC value is outside what datetime can hold.
        ("updated_at", "0001-01-01T00:00:00+14:00"),
        ("created_at", "9999-12-31T23:59:59-14:00"),
        # A lone surrogate cannot be encoded, so it could never be stored.
        ("display_name", "\ud800"),
        ("label", "x\udfff"),
    ],
)
def test_from_dict_rejects_wrong_types_with_value_error(field, value):
    with pytest.raises(ValueError, match=field):
        SessionEntry.from_dict(_entry().to_dict() | {field: value})


@pytest.mark.parametrize("missing", ["session_key", "session_id", "created_at", "updated_at"])
def test_from_dict_requires_the_required_fields(missing):
    data = _entry().to_dict()
    del data[missing]
    with pytest.raises(ValueError, match=missing):
        SessionEntry.from_dict(data)


def test_from_dict_rejects_non_objects():
    with pytest.raises(ValueError, match="object"):
        SessionEntry.from_dict(["not", "a", "mapping"])  # type: ignore[arg-type]


def test_from_dict_ignores_unknown_keys_and_nulls():
    data = _entry().to_dict() | {"future_field": 1, "display_name": None}
    assert SessionEntry.from_dict(data) == _entry()


def test_never_read_session_is_not_unread():
    assert not _entry(last_activity_at=T0).unread


def test_marked_unread_session_is_unread():
    assert _entry(marked_unread_at=T0).unread
    assert _entry(marked_unread_at=T0, last_read_at=T0 + timedelta(hours=1)).unread


def test_activity_after_last_read_is_unread():
    read = _entry(last_read_at=T0, last_activity_at=T0)
    assert not read.unread
    assert read.evolve(last_activity_at=T0 + timedelta(seconds=1)).unread


def test_archived_and_pinned_follow_their_timestamps():
    assert not _entry().archived
    assert not _entry().pinned
    assert _entry(archived_at=T0).archived
    assert _entry(pinned_at=T0).pinned


@pytest.mark.parametrize(
    ("suspended", "resume_pending", "action"),
    [
        (True, True, EntryAction.NEW_SUSPENDED),
        (True, False, EntryAction.NEW_SUSPENDED),
        (False, True, EntryAction.RESUME),
        (False, False, EntryAction.REUSE),
    ],
)
def test_next_action_precedence_is_suspended_then_resume_pending_then_reuse(
    suspended, resume_pending, action
):
    assert next_action(_entry(suspended=suspended, resume_pending=resume_pending)) is action


def test_evolve_returns_a_changed_copy():
    entry = _entry()
    changed = entry.evolve(suspended=True)
    assert changed.suspended
    assert not entry.suspended
    assert changed.session_id == entry.session_id
