"""Bringing entries into the store: the `sessions.json` read at open (skipped when the file is
the mirror's own last write, or one already imported) and `import_entries`, which never trusts an
entry further than a key the database lacks.

`ImportOps` is mixed into `SessionStore`; it only uses the store's database, clock, file paths
and problem list.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import socket
from typing import TYPE_CHECKING

from sessiongate.core.keys import KeyParts, check_key_text, parse_session_key
from sessiongate.errors import InvalidSessionKeyError, SessiongateError
from sessiongate.store.changes import Change, ChangeKind
from sessiongate.store.legacy import backup_sessions_json, read_sessions_json
from sessiongate.store.records import to_us

if TYPE_CHECKING:
    import os
    from collections.abc import Iterable
    from pathlib import Path

    from sessiongate.core.clock import Clock
    from sessiongate.core.entry import SessionEntry
    from sessiongate.store.protocol import Backend, Tx

__all__ = ["ImportOps"]

log = logging.getLogger(__name__)


class ImportOps:
    _db: Backend
    clock: Clock
    json_path: Path
    problems: list[str]

    if TYPE_CHECKING:  # provided by SessionStore

        def _mirror_dirty(self) -> None: ...

    def _remember_mirror_write(self, stat: os.stat_result) -> None:
        with self._db.transaction() as conn:
            conn.set_meta(self._stamp_key("mirror_stamp"), _stamp(stat))

    def _stamp_key(self, name: str) -> str:
        """The meta key of this home's stamp `name`."""
        return name + self._stamp_suffix

    @functools.cached_property
    def _stamp_suffix(self) -> str:
        # A database instances share holds one stamp per home (host and path), so instances
        # with mirrors of their own never overwrite each other's and each start skips its own
        # unchanged file. Worked out once: the path's resolution touches the disk.
        if not self._db.shared:
            return ""
        home = f"{socket.gethostname()}:{self.json_path.resolve()}"
        return ":" + hashlib.sha256(home.encode()).hexdigest()[:16]

    def _import_mirror_file(self) -> None:
        """Bring in keys that `sessions.json` has and the database lacks (never overwrite).

        A file that is exactly the mirror's own last write, or the file this store already
        imported, holds nothing new, so it is not parsed again (with 100,000 lanes that is
        seconds and hundreds of MB at start), and a lane pruned since never comes back from it.
        Bad entries are skipped, reported in `problems` and logged, and the file is backed up.
        """
        try:
            stat: os.stat_result | None = self.json_path.stat()
        except FileNotFoundError:
            return
        except OSError:
            stat = None  # reading it fails too, and reports why
        stamp = None if stat is None else _stamp(stat)
        with self._db.read() as conn:
            seen = {conn.get_meta(self._stamp_key(k)) for k in ("mirror_stamp", "import_stamp")}
        if stamp is not None and stamp in seen:
            return
        now = self.clock.now()
        legacy = read_sessions_json(self.json_path, now=now)
        problems = list(legacy.problems)
        imported = 0
        if legacy.entries:
            imported = self.import_entries(legacy.entries, problems=problems, skip_pruned=True)
        if len(problems) > len(legacy.problems) and legacy.backup is None:
            # Entries the database refused (the read itself found nothing wrong, or it would
            # have made the backup already).
            backup_sessions_json(self.json_path, now)
        if stamp is not None:
            with self._db.transaction() as conn:
                conn.set_meta(self._stamp_key("import_stamp"), stamp)
        for problem in problems:
            # The text names the key and the fault, never a transcript.
            log.warning("sessions.json: %s", problem)
        self.problems.extend(problems)
        if imported:
            log.info("imported entries from sessions.json", extra={"count": imported})

    def import_entries(
        self,
        entries: Iterable[SessionEntry],
        *,
        problems: list[str] | None = None,
        skip_pruned: bool = False,
    ) -> int:
        """Insert entries whose keys the database lacks; returns how many were imported.

        Never trusted further than that: a deleted (tombstoned) key stays deleted, and an entry
        naming a session id that belongs to another key is refused, so an edited file cannot
        attach one person's lane to another person's transcript. Each entry is its own
        savepoint: one that cannot be stored (a taken label, text SQLite cannot hold, a key
        the HTTP API could never address) is skipped and reported in `problems` (default: the
        store's), the others go in. `skip_pruned` also skips keys whose route was pruned
        (their transcripts remain), as the automatic import at open must; an explicit import
        may bring them back.
        """
        sink = self.problems if problems is None else problems
        imported = 0
        with self._db.transaction() as conn:
            for entry in entries:
                key = entry.session_key
                # A key the HTTP API and the CLI could never address is not stored.
                try:
                    check_key_text(key)
                except InvalidSessionKeyError as exc:
                    sink.append(f"entry {key[:80]!r} skipped: {exc.message}")
                    continue
                try:
                    with self._db.transaction():
                        outcome = self._import_one(conn, entry, skip_pruned=skip_pruned)
                except (SessiongateError, ValueError, OverflowError) as exc:
                    outcome = f"{exc!s:.200}"
                if outcome is True:
                    imported += 1
                elif outcome:
                    sink.append(f"entry {entry.session_key[:80]!r} skipped: {outcome}")
        if imported:
            self._mirror_dirty()
        return imported

    def _import_one(self, conn: Tx, entry: SessionEntry, *, skip_pruned: bool) -> bool | str:
        """Import one entry: True when imported, False when skipped as expected (the key is
        present, or was pruned), else why it was refused."""
        key = entry.session_key
        if conn.get_route_parts(key) is not None:
            return False
        if conn.tombstone_reason(key) is not None:
            return "deleted"
        if skip_pruned and conn.key_has_history(key):
            return False  # pruned: routine, not damage
        existing = conn.get_session_row(entry.session_id)
        if existing is not None and existing.session_key != key:
            return "its session id belongs to another conversation"
        if entry.label is not None and conn.label_taken(entry.label):
            return f"its label {entry.label[:80]!r} is already used"
        if existing is None:
            conn.create_session_row(
                session_id=entry.session_id,
                session_key=key,
                parent_session_id=None,
                started_at=to_us(entry.created_at),
                header={
                    "type": "session",
                    "version": 1,
                    "id": entry.session_id,
                    "timestamp": entry.created_at.isoformat(),
                    "imported": True,
                },
            )
        conn.upsert_route(entry, _parts_of(entry))
        conn.note(Change(ChangeKind.SESSION_CREATED, key, entry.session_id))
        return True


def _stamp(stat: os.stat_result) -> str:
    return f"{stat.st_size}:{stat.st_mtime_ns}:{stat.st_ino}"


def _parts_of(entry: SessionEntry) -> KeyParts | None:
    try:
        parsed = parse_session_key(entry.session_key)
    except ValueError:
        return None
    return KeyParts(
        parsed["platform"],
        parsed["chat_type"],
        parsed["chat_id"],
        parsed["thread_id"],
        parsed["participant_id"],
    )
