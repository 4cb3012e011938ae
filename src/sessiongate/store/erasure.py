"""Right to erasure: forget one person everywhere the store keeps them (`forget_user`).

What goes, in one transaction: every session of a lane that is theirs (`core/erasure.py` says
which: DMs, per-user lanes; every incarnation of the key, forks of it and their forks), with
its routing entry, search rows, inbound queue, dedup records, journal turns and restart
counter; in shared lanes, each message of theirs (a tombstone in its place, with what the
agent answered to it in that turn; the other senders' parts of a merged message stay) and
the summaries written after it (a compaction or branch summary may quote them); their
identity aliases (every WhatsApp spelling) and pairing rows. No tombstone is left for an
erased key (a tombstone names the key, and the key names the person). A receipt (counts, an
HMAC of the subject under the home's salt, the time) goes into the `erasures` table.

After the commit: archive blobs of their lanes are deleted and blobs of shared lanes are
rewritten without their messages, the `sessions.json` mirror is rewritten, the kept model
contexts are dropped, and the database is scrubbed (`Backend.scrub`: on SQLite a VACUUM and a
TRUNCATE checkpoint, so neither the file nor its log keeps the deleted text).

A dry run runs the same transaction and rolls it back, so the plan it prints is what the real
request removes.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import logging
import os
import secrets
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from sessiongate.core.erasure import (
    TOMBSTONE_TEXT,
    Subject,
    lane_belongs_to,
    redact_user_message,
    subject_hash,
)
from sessiongate.core.keys import KeyParts, parse_session_key
from sessiongate.errors import InvalidSessionKeyError, StoreUnavailableError
from sessiongate.store.changes import Change, ChangeKind
from sessiongate.store.records import dumps, iso_from_us, loads, to_us

if TYPE_CHECKING:
    from collections.abc import Collection, Iterator
    from pathlib import Path

    from sessiongate.core.clock import Clock
    from sessiongate.store.kept_contexts import KeptContexts
    from sessiongate.store.mirror import SessionsMirror
    from sessiongate.store.placement import Placement
    from sessiongate.store.protocol import Backend, Tx
    from sessiongate.store.records import EntryRow

__all__ = ["ErasureOps", "ErasureReceipt"]

log = logging.getLogger(__name__)

_SALT_KEY = "erasure_salt"
_SUMMARY_ERASED = "[summary erased: it covered messages erased at a sender's request]"
_SUMMARY_TYPES = ("compaction", "branch_summary")
_EVENT_FRAME = ("id", "parent_id", "type", "timestamp", "on_path")


@dataclass(slots=True)
class ErasureReceipt:
    """What an erasure removed (or, for a dry run, would remove)."""

    subject_hash: str
    erased_at: str
    dry_run: bool
    sessions_deleted: int = 0
    lanes_deleted: int = 0
    messages_tombstoned: int = 0
    messages_trimmed: int = 0
    summaries_erased: int = 0
    routes_scrubbed: int = 0
    blobs_deleted: int = 0
    blobs_rewritten: int = 0
    dedup_rows: int = 0
    inbox_rows: int = 0
    journal_turns: int = 0
    identity_aliases: int = 0
    pairing_rows: int = 0
    deliveries: int = 0
    webhook_events: int = 0
    hook_receipts: int = 0
    receipt_id: int | None = None
    # Whether the files were rewritten after the commit (`Backend.scrub`); False when another
    # process kept the database busy: running the erasure again (it finds nothing left to
    # delete) rewrites them.
    scrubbed: bool = True
    # The erased lanes' keys, for the operator's plan; never stored (they name the person).
    keys: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        data = asdict(self)
        return {
            k: v
            for k, v in data.items()
            if isinstance(v, int) and not isinstance(v, bool) and k != "receipt_id"
        }

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _DryRun(Exception):
    """Raised to roll back an erasure that was only planned."""


class ErasureOps:
    _db: Backend
    _placement: Placement
    clock: Clock
    sessions_dir: Path
    _contexts: KeptContexts
    _mirror: SessionsMirror | None

    def forget_user(self, subject: Subject, *, dry_run: bool = False) -> ErasureReceipt:
        """Erase `subject` (see the module docstring); the receipt is returned, and kept in
        the `erasures` table unless `dry_run`."""
        now = self.clock.now()
        receipt = ErasureReceipt("", now.isoformat(), dry_run)
        keys: set[str] = set()
        incognito: set[str] = set()
        with self._db.transaction() as conn:
            # Its own transaction: a plan's hash is the erasure's.
            salt = _salt(conn)
            ids = _known_ids(conn, subject)
        memory = self._placement.memory
        if memory is not None:
            # Incognito lanes live in memory until a restart; they go now too.
            try:
                with memory.transaction() as conn:
                    more, _ = _erase_in(conn, subject.platform, ids, receipt, rebuild_index=False)
                    conn.erase_person_records(subject.platform, sorted(ids), sorted(more))
                    incognito = more
                    if dry_run:
                        raise _DryRun
            except _DryRun:
                pass
        try:
            with self._db.transaction() as conn:
                ids = _known_ids(conn, subject)
                keys, _ = _erase_in(conn, subject.platform, ids, receipt, rebuild_index=not dry_run)
                records = conn.erase_person_records(subject.platform, sorted(ids), sorted(keys))
                for name, count in records.items():
                    setattr(receipt, name, count)
                receipt.subject_hash = subject_hash(subject, salt)
                if dry_run:
                    raise _DryRun
                receipt.receipt_id = conn.insert_erasure(
                    at=to_us(now),
                    subject_hash=receipt.subject_hash,
                    counts=json.dumps(receipt.counts(), sort_keys=True),
                )
        except _DryRun:
            pass
        receipt.keys = sorted(keys | incognito)
        folder = self.sessions_dir / "archive"
        for path, action in _blob_plan(folder, subject.platform, ids):
            if action is None:
                receipt.blobs_deleted += 1
                if not dry_run:
                    _unlink_blob(path)
            else:
                receipt.blobs_rewritten += 1
                if not dry_run:
                    _write_blob(path, action)
        if dry_run:
            return receipt
        self._contexts.clear()
        if self._mirror is not None:
            self._mirror.mark_dirty()
            self._mirror.flush()
        try:
            self._db.scrub()
        except StoreUnavailableError as exc:
            # The rows are gone; only the rewrite of the file waits (a run again redoes it).
            receipt.scrubbed = False
            log.warning("erasure committed but the database was not scrubbed: %s", exc.message)
        log.info(
            "erasure done",
            extra={"receipt_id": receipt.receipt_id, "subject_hash": receipt.subject_hash},
        )
        return receipt

    def erasure_receipts(self, limit: int = 100) -> list[dict[str, Any]]:
        """The audit trail, newest first: `{id, erased_at, subject_hash, counts}`."""
        with self._db.read() as conn:
            rows = conn.list_erasures(limit)
        return [
            {
                "id": r[0],
                "erased_at": iso_from_us(r[1]),
                "subject_hash": r[2],
                "counts": loads(r[3]),
            }
            for r in rows
        ]


def _salt(conn: Tx) -> bytes:
    value = conn.get_meta(_SALT_KEY)
    if value is None:
        value = secrets.token_hex(32)
        conn.set_meta(_SALT_KEY, value)
    return bytes.fromhex(value)


def _known_ids(conn: Tx, subject: Subject) -> set[str]:
    """The person's ids: as given, normalised, the canonical id an alias points at, and every
    alias of a canonical one."""
    ids = subject.ids()
    for ident in list(ids):
        canonical = conn.alias_of(subject.platform, ident)
        if canonical is not None:
            ids.add(canonical)
    for ident in list(ids):
        ids.update(conn.aliases_of(subject.platform, ident))
    return ids


def _parts_of_key(key: str) -> KeyParts | None:
    try:
        parsed = parse_session_key(key)
    except (InvalidSessionKeyError, ValueError):
        return None
    return KeyParts(
        str(parsed.get("platform") or ""),
        str(parsed.get("chat_type") or ""),
        parsed.get("chat_id"),
        parsed.get("thread_id"),
        parsed.get("participant_id"),
    )


def _owned(key: str | None, parts: KeyParts | None, platform: str, ids: Collection[str]) -> bool:
    if key is None:
        return False
    if parts is None:
        parts = _parts_of_key(key)
    return parts is not None and lane_belongs_to(parts, platform, ids)


def _erase_in(
    conn: Tx, platform: str, ids: set[str], receipt: ErasureReceipt, *, rebuild_index: bool
) -> tuple[set[str], set[str]]:
    """Delete the person's lanes and tombstone their messages elsewhere; (erased keys, shared
    session ids touched)."""
    route_keys = {entry.session_key: entry for entry in conn.iter_routes()}
    owned_keys = {
        key for key in route_keys if _owned(key, conn.get_route_parts(key), platform, ids)
    }
    sessions = conn.all_session_ids()
    doomed: dict[int, str] = {}
    for sid, session_id, key in sessions:
        if key is None:
            continue
        if key in owned_keys or (key not in route_keys and _owned(key, None, platform, ids)):
            doomed[sid] = session_id
            owned_keys.add(key)
    # Forks of the person's lanes: keys under theirs, and sessions forked from theirs.
    for sid, session_id, key in sessions:
        if key is not None and any(key.startswith(k + ":") for k in owned_keys):
            doomed[sid] = session_id
            owned_keys.add(key)
    frontier = list(doomed.values())
    while frontier:
        children = conn.sessions_forked_from(frontier)
        frontier = []
        for sid, session_id, key in children:
            if sid not in doomed:
                doomed[sid] = session_id
                frontier.append(session_id)
                if key is not None:
                    owned_keys.add(key)
    for key in owned_keys:
        entry = route_keys.get(key)
        if entry is not None:
            doomed.update((row[0], row[1]) for row in conn.sessions_of_lane(key, entry.session_id))
    for sid in doomed:
        conn.drop_session_from_search(sid)
        conn.delete_session_rows(sid)
    for key in owned_keys:
        conn.delete_takeover(key)  # an operator's hold on the lane goes with it
        if conn.delete_route(key):
            receipt.lanes_deleted += 1
            conn.note(Change(ChangeKind.SESSION_DELETED, key))
    receipt.sessions_deleted += len(doomed)
    for key, entry in route_keys.items():
        origin = entry.origin
        if key in owned_keys or origin is None or origin.platform != platform:
            continue
        if origin.user_id in ids or origin.user_id_alt in ids:
            # A shared lane remembers its last sender: that is no longer them.
            blank = replace(origin, user_id=None, user_name=None, user_id_alt=None, message_id=None)
            conn.put_route(entry.evolve(origin=blank))
            receipt.routes_scrubbed += 1
    touched: set[str] = set()
    for sid, session_id, key in sessions:
        if sid in doomed or key is None:
            continue
        parts = conn.get_route_parts(key) if key in route_keys else _parts_of_key(key)
        if parts is not None and parts.platform != platform:
            continue
        if _tombstone_messages(conn, conn.all_entries(sid), ids, receipt):
            touched.add(session_id)
            if key in route_keys:
                conn.note(Change(ChangeKind.SESSION_UPDATED, key, session_id))
    if rebuild_index:
        # Rebuilt, not patched: the index's old segments would keep the erased words until
        # a merge, and its freed pages go with the scrub that follows.
        conn.lower_search_cursor()
        conn.rebuild_search_index()
    return owned_keys, touched


def _tombstone_messages(
    conn: Tx, rows: list[EntryRow], ids: Collection[str], receipt: ErasureReceipt
) -> bool:
    """Tombstone the person's messages in one shared session's entries; whether any was."""
    children: dict[int | None, list[EntryRow]] = {}
    for row in rows:
        children.setdefault(row.parent_id, []).append(row)
    first_erased: int | None = None
    for row in rows:
        entry_id = row.id
        if row.type != "message" or row.role != "user":
            continue
        data = loads(row.payload) if row.payload is not None else None
        redaction = redact_user_message(str(row.content or ""), data, ids)
        if redaction is None:
            continue
        first_erased = entry_id if first_erased is None else min(first_erased, entry_id)
        conn.redact_entry(
            entry_id, role="user", content=redaction.content, payload=dumps(redaction.payload)
        )
        if not redaction.whole:
            receipt.messages_trimmed += 1
            continue
        receipt.messages_tombstoned += 1
        for answer in _answers(children, entry_id):
            conn.redact_entry(
                answer.id,
                role="assistant",
                content=TOMBSTONE_TEXT,
                payload=dumps({"metadata": {"erased": True}}),
            )
            receipt.messages_tombstoned += 1
    if first_erased is None:
        return False
    for row in rows:
        if row.type in _SUMMARY_TYPES and row.id > first_erased:
            data = loads(row.payload) if row.payload is not None else {}
            if isinstance(data, dict):
                data["summary"] = _SUMMARY_ERASED
            conn.redact_entry(row.id, role=row.role, content=None, payload=dumps(data))
            receipt.summaries_erased += 1
    return True


def _answers(children: dict[int | None, list[EntryRow]], entry_id: int) -> Iterator[EntryRow]:
    """The agent's messages below a user message, up to the next user message on each
    branch: its answer in that turn (tool calls and results included)."""
    stack = list(children.get(entry_id, []))
    while stack:
        row = stack.pop()
        if row.type == "message" and row.role == "user":
            continue
        if row.type == "message" and row.role in ("assistant", "tool"):
            yield row
        stack.extend(children.get(row.id, []))


# ---------------------------------------------------------------------- archive blobs


def _blob_plan(
    folder: Path, platform: str, ids: Collection[str]
) -> list[tuple[Path, dict[str, Any] | None]]:
    """(blob, None) to delete a blob of the person's lane, (blob, new content) to rewrite one
    of a shared lane without their messages."""
    plan: list[tuple[Path, dict[str, Any] | None]] = []
    if not folder.is_dir():
        return plan
    for path in sorted(folder.glob("*.json.gz")):
        try:
            blob = json.loads(gzip.decompress(path.read_bytes()))
            key = str(blob["entry"]["session_key"])
        except (OSError, ValueError, KeyError, TypeError, EOFError) as exc:
            log.warning("archive blob %s unreadable, left as is: %s", path.name, exc)
            continue
        if _owned(key, None, platform, ids):
            plan.append((path, None))
            continue
        changed = False
        origin = blob["entry"].get("origin")
        if isinstance(origin, dict) and (
            origin.get("user_id") in ids or origin.get("user_id_alt") in ids
        ):
            for name in ("user_id", "user_name", "user_id_alt", "message_id"):
                origin[name] = None
            changed = True
        for session in blob.get("sessions") or []:
            if _redact_events(session.get("events") or [], ids):
                changed = True
        if changed:
            plan.append((path, blob))
    return plan


def _redact_events(events: list[dict[str, Any]], ids: Collection[str]) -> bool:
    by_parent: dict[Any, list[dict[str, Any]]] = {}
    for event in events:
        by_parent.setdefault(event.get("parent_id"), []).append(event)
    changed = False
    first: int | None = None
    for event in events:
        if event.get("type") != "message" or event.get("role") != "user":
            continue
        redaction = redact_user_message(str(event.get("content") or ""), event, ids)
        if redaction is None:
            continue
        changed = True
        first = event["id"] if first is None else min(first, event["id"])
        keep = _frame(event)
        event.clear()
        event.update(keep, role="user", content=redaction.content, **redaction.payload)
        if redaction.whole:
            stack = list(by_parent.get(keep.get("id"), []))
            while stack:
                child = stack.pop()
                if child.get("type") == "message" and child.get("role") == "user":
                    continue
                if child.get("type") == "message":
                    base = _frame(child)
                    child.clear()
                    child.update(
                        base, role="assistant", content=TOMBSTONE_TEXT, metadata={"erased": True}
                    )
                stack.extend(by_parent.get(child.get("id"), []))
    if first is not None:
        for event in events:
            if event.get("type") in _SUMMARY_TYPES and event.get("id", 0) > first:
                event["summary"] = _SUMMARY_ERASED
    return changed


def _frame(event: dict[str, Any]) -> dict[str, Any]:
    return {k: event[k] for k in _EVENT_FRAME if k in event}


def _unlink_blob(path: Path) -> None:
    for target in (path, path.with_name(path.name.removesuffix(".json.gz") + ".sha256")):
        with contextlib.suppress(FileNotFoundError):
            target.unlink()


def _write_blob(path: Path, blob: dict[str, Any]) -> None:
    raw = dumps(blob).encode("utf-8")
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as handle:
        tmp.chmod(0o600)
        handle.write(gzip.compress(raw))
        handle.flush()
        os.fsync(handle.fileno())
    tmp.replace(path)
    sums = path.with_name(path.name.removesuffix(".json.gz") + ".sha256")
    fd = os.open(sums, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(hashlib.sha256(raw).hexdigest() + "\n")
