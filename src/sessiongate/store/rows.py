"""The row operations of the second spec on the store: pin, archive, unread, label, the model
choice, and delete with its archive blob and tombstone.

`RowOps` is mixed into `SessionStore`; it only uses the store's database, clock and config.
"""

from __future__ import annotations

import gzip
import hashlib
import os
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from sessiongate.core.clock import ensure_utc
from sessiongate.core.ids import is_safe_id
from sessiongate.core.sentinel import UNSET, Unset
from sessiongate.errors import (
    ConflictError,
    InvalidEntryError,
    SessionArchivedError,
    SessionNotFoundError,
    StaleWriteError,
    StoreCorruptError,
    StoreUnavailableError,
)
from sessiongate.store.changes import Change, ChangeKind
from sessiongate.store.records import dumps, loads, row_to_event, to_us

if TYPE_CHECKING:
    from collections.abc import Mapping
    from datetime import datetime
    from pathlib import Path

    from sessiongate.core.clock import Clock
    from sessiongate.core.config import GatewayConfig
    from sessiongate.core.entry import SessionEntry
    from sessiongate.store.placement import Placement
    from sessiongate.store.protocol import Backend

__all__ = ["RowOps"]

_MAX_LABEL = 512
_MAX_CHOICE = 200  # a model, provider or thinking-level name


class RowOps:
    _db: Backend
    _placement: Placement
    clock: Clock
    config: GatewayConfig
    sessions_dir: Path

    if TYPE_CHECKING:  # provided by SessionStore

        def _mirror_dirty(self) -> None: ...
        def append_entry(self, session_id: str, entry: Mapping[str, Any]) -> int: ...

    def patch_session(
        self,
        session_key: str,
        *,
        pinned: bool | Unset = UNSET,
        archived: bool | Unset = UNSET,
        expected_session_id: str | Unset | None = UNSET,
        unread: bool | Unset = UNSET,
        expected_marked_unread_at: datetime | Unset | None = UNSET,
        label: str | Unset | None = UNSET,
    ) -> SessionEntry:
        """Pin, archive, read state and label, with the compare-and-set rules of the spec.

        - archiving needs `expected_session_id` (a conversation that rotated meanwhile is not
          archived by mistake), clears the pin, and is a no-op the second time; an archived
          session cannot be pinned (`SessionArchivedError`);
        - `unread=False` with `expected_marked_unread_at` is a conditional read-ack: a newer
          marker makes it a successful no-op; acks never bump `updated_at`; markers compare
          to the millisecond, as a JavaScript client echoes them;
        - labels are unique, 1 to 512 characters; `label=None` clears.
        """
        with self._placement.for_key(session_key).transaction() as conn:
            entry = conn.get_route(session_key)
            if entry is None:
                raise SessionNotFoundError(
                    f"no session with key {session_key!r}", session_key=session_key
                )
            now = self.clock.now()
            changes: dict[str, Any] = {}
            bump = False
            if not isinstance(archived, Unset):
                if archived and entry.archived_at is None:
                    if isinstance(expected_session_id, Unset) or expected_session_id is None:
                        raise StaleWriteError(
                            "archiving needs expected_session_id", session_key=session_key
                        )
                    if expected_session_id != entry.session_id:
                        raise StaleWriteError(
                            "the session moved on; reload before archiving",
                            expected=expected_session_id,
                            actual=entry.session_id,
                        )
                    if session_key in self.config.protected_session_keys:
                        raise ConflictError(f"{session_key!r} is protected and cannot be archived")
                    changes.update(archived_at=now, pinned_at=None)
                    conn.note(Change(ChangeKind.SESSION_ARCHIVED, session_key, entry.session_id))
                    bump = True
                elif not archived and entry.archived_at is not None:
                    changes["archived_at"] = None
                    bump = True
            if not isinstance(pinned, Unset):
                archived_after = changes.get("archived_at", entry.archived_at) is not None
                if pinned and archived_after:
                    # Pinned and archived together would show a row in no list as it expects.
                    raise SessionArchivedError(
                        f"{session_key!r} is archived; unarchive it to pin it",
                        session_key=session_key,
                    )
                if pinned and entry.pinned_at is None:
                    changes["pinned_at"] = now
                    bump = True
                elif not pinned and entry.pinned_at is not None:
                    changes["pinned_at"] = None
                    bump = True
            if not isinstance(unread, Unset):
                if unread:
                    changes["marked_unread_at"] = _next_marker(entry.marked_unread_at, now)
                elif isinstance(expected_marked_unread_at, Unset) or _same_ms(
                    expected_marked_unread_at, entry.marked_unread_at
                ):
                    changes.update(last_read_at=now, marked_unread_at=None)
                # else: a stale ack — a newer marker exists; write nothing for it.
            if not isinstance(label, Unset):
                if label is not None and not (0 < len(label) <= _MAX_LABEL):
                    raise InvalidEntryError("labels are 1 to 512 characters")
                if label is not None and conn.label_taken(label, except_key=session_key):
                    raise ConflictError(f"label {label!r} is already used", label=label)
                changes["label"] = label
                bump = True
            if not changes:
                return entry
            if bump:
                changes["updated_at"] = now
            entry = entry.evolve(**changes)
            conn.put_route(entry)
            conn.note(Change(ChangeKind.SESSION_UPDATED, session_key, entry.session_id))
        self._mirror_dirty()
        return entry

    def set_model_choice(
        self,
        session_key: str,
        *,
        model: str | Unset | None = UNSET,
        provider: str | Unset | None = UNSET,
        thinking_level: str | Unset | None = UNSET,
    ) -> SessionEntry:
        """Choose the lane's model (and provider) or thinking level; `None` goes back to the
        default. The entry's overrides change and the transcript records a `model_change` or
        `thinking_level_change` entry in the same transaction: the model context names the
        last change on the active path, so a rewind past a change takes it back, and the
        overrides carry the choice over a reset."""
        for name, value in (("model", model), ("provider", provider), ("level", thinking_level)):
            if isinstance(value, str) and not (0 < len(value.strip()) <= _MAX_CHOICE):
                raise InvalidEntryError(f"a {name} name is 1 to {_MAX_CHOICE} characters")
        with self._placement.for_key(session_key).transaction() as conn:
            entry = conn.get_route(session_key)
            if entry is None:
                raise SessionNotFoundError(
                    f"no session with key {session_key!r}", session_key=session_key
                )
            changes: dict[str, Any] = {}
            if not isinstance(model, Unset) or not isinstance(provider, Unset):
                chosen_model = entry.model_override if isinstance(model, Unset) else model
                chosen_provider = (
                    entry.provider_override if isinstance(provider, Unset) else provider
                )
                if (chosen_model, chosen_provider) != (
                    entry.model_override,
                    entry.provider_override,
                ):
                    changes.update(model_override=chosen_model, provider_override=chosen_provider)
                    self.append_entry(
                        entry.session_id,
                        {
                            "type": "model_change",
                            "model": chosen_model,
                            "provider": chosen_provider,
                        },
                    )
            if not isinstance(thinking_level, Unset) and thinking_level != entry.thinking_level:
                changes["thinking_level"] = thinking_level
                self.append_entry(
                    entry.session_id,
                    {"type": "thinking_level_change", "thinking_level": thinking_level},
                )
            if not changes:
                return entry
            entry = entry.evolve(updated_at=self.clock.now(), **changes)
            conn.put_route(entry)
            conn.note(Change(ChangeKind.SESSION_UPDATED, session_key, entry.session_id))
        self._mirror_dirty()
        return entry

    def delete_session(self, session_key: str) -> bool:
        """Delete a lane with every incarnation; an archive blob (gzip JSON + sha256) is
        written and synced first, and a tombstone keeps the key from being reused silently."""
        with self._placement.for_key(session_key).transaction() as conn:
            entry = conn.get_route(session_key)
            if entry is None:
                return False
            if session_key in self.config.protected_session_keys:
                raise ConflictError(f"{session_key!r} is protected and cannot be deleted")
            rows = conn.sessions_of_lane(session_key, entry.session_id)
            blob: dict[str, Any] = {"entry": entry.to_dict(), "sessions": []}
            for sid, session_id, header in rows:
                events = conn.all_entries(sid)
                blob["sessions"].append(
                    {
                        "session_id": session_id,
                        "header": loads(header),
                        "events": [row_to_event(e) for e in events],
                    }
                )
            if not entry.incognito:
                # Incognito transcripts never touch the disk, not even as an archive.
                self._write_archive_blob(entry.session_id, blob)
            for sid, _, _ in rows:
                try:
                    conn.drop_session_from_search(sid)
                except (StoreCorruptError, StoreUnavailableError) as exc:
                    conn.mark_search_stale(exc)
                conn.delete_session_rows(sid)
            conn.lower_search_cursor()
            conn.delete_route(session_key)
            conn.note(Change(ChangeKind.SESSION_DELETED, session_key, entry.session_id))
            conn.add_tombstone(session_key, reason="deleted", at=to_us(self.clock.now()))
        self._mirror_dirty()
        return True

    def _write_archive_blob(self, session_id: str, blob: dict[str, Any]) -> Path:
        if not is_safe_id(session_id):
            raise InvalidEntryError(f"unsafe session id {session_id!r}")
        folder = self.sessions_dir / "archive"
        folder.mkdir(mode=0o700, exist_ok=True)
        raw = dumps(blob).encode("utf-8")
        digest = hashlib.sha256(raw).hexdigest()
        path = folder / f"{session_id}.json.gz"
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as handle:
            tmp.chmod(0o600)
            handle.write(gzip.compress(raw))
            handle.flush()
            os.fsync(handle.fileno())
        tmp.replace(path)
        sums = folder / f"{session_id}.sha256"
        fd = os.open(sums, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(digest + "\n")
        return path


def _next_marker(previous: datetime | None, now: datetime) -> datetime:
    """A new unread marker: the later of now and the previous marker plus 1 ms.

    Markers compare to the millisecond, so a mark in the same millisecond as the previous one
    (or after the clock stepped back) would equal it, and an acknowledgement that carries the
    older marker would clear the newer mark. Strictly forward, it never can."""
    if previous is None:
        return now
    return max(now, ensure_utc(previous) + timedelta(milliseconds=1))


def _same_ms(a: datetime | None, b: datetime | None) -> bool:
    """Equal to the millisecond: a client echoing a marker through a JavaScript `Date` (or
    any millisecond clock) drops its microseconds, and must not read as stale."""
    if a is None or b is None:
        return a is b
    return to_us(ensure_utc(a)) // 1000 == to_us(ensure_utc(b)) // 1000
