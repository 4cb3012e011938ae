"""Writing an `ImportPlan` through the store: one transaction per session, routes last.

- **Never half a session.** A session's row, its whole tree (every branch, the active leaf),
  its end and its counters commit in one transaction, or nothing of it does.
- **Idempotent.** A session whose id the store already holds is left as it is ("present"),
  and a routing entry is written only for a key the store lacks (`import_entries`), so a
  second run changes nothing.
- **Resumable.** A run killed half-way left whole sessions behind; the next run skips them
  and goes on. The end of a complete run is recorded in `meta` (`import:<source>:<home>`),
  which `--dry-run` and the summary report.
- **Beside a running gateway.** Everything goes through the store's own transactions (on
  SQLite, WAL: the gateway's reads go on and its writes wait at most one session's commit).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sessiongate.core.clock import ensure_utc
from sessiongate.core.ids import is_safe_id
from sessiongate.core.transcript import validate_entry
from sessiongate.errors import SessiongateError
from sessiongate.store.records import EntryRecord, to_us
from sessiongate.store.transcript_ops import message_record

if TYPE_CHECKING:
    from collections.abc import Callable

    from sessiongate.store.foreign.model import ForeignNode, ForeignSession, ImportPlan
    from sessiongate.store.protocol import Tx
    from sessiongate.store.session_store import SessionStore

__all__ = ["ImportSummary", "apply_plan", "marker_key"]

# Entry fields that name another entry: refs of the source, mapped to the store's ids.
_REF_FIELDS = ("first_kept_entry_id", "from_entry_id", "target_id")


@dataclass(slots=True)
class ImportSummary:
    source: str
    home: str
    dry_run: bool
    sessions_imported: int = 0
    sessions_present: int = 0
    entries_imported: int = 0
    routes_imported: int = 0
    routes_present: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)
    completed_before: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "home": self.home,
            "dry_run": self.dry_run,
            "sessions_imported": self.sessions_imported,
            "sessions_present": self.sessions_present,
            "entries_imported": self.entries_imported,
            "routes_imported": self.routes_imported,
            "routes_present": self.routes_present,
            "skipped": self.skipped,
            "completed_before": self.completed_before,
        }


def marker_key(plan: ImportPlan) -> str:
    digest = hashlib.sha256(plan.home.encode("utf-8")).hexdigest()[:16]
    return f"import:{plan.source}:{digest}"


def apply_plan(
    store: SessionStore,
    plan: ImportPlan,
    *,
    dry_run: bool = False,
    progress: Callable[[str], None] | None = None,
) -> ImportSummary:
    """Import `plan` (or, with `dry_run`, count what would be imported); `progress` is told
    each session id as it is done."""
    summary = ImportSummary(plan.source, plan.home, dry_run)
    summary.skipped = [{"what": s.what, "why": s.why} for s in plan.skipped]
    db = store.database
    with db.read() as conn:
        summary.completed_before = conn.get_meta(marker_key(plan))
    for session in plan.sessions:
        if not is_safe_id(session.session_id):
            summary.skipped.append(
                {"what": f"session {session.session_id[:80]!r}", "why": "unusable session id"}
            )
            continue
        try:
            if dry_run:
                with db.read() as conn:
                    present = conn.get_session_row(session.session_id) is not None
                written = 0 if present else len(session.nodes)
            else:
                with db.transaction() as conn:
                    present, written = _write_session(conn, session)
        except (SessiongateError, ValueError, OverflowError) as exc:
            summary.skipped.append(
                {"what": f"session {session.session_id} ({session.origin})", "why": f"{exc!s:.200}"}
            )
            continue
        if present:
            summary.sessions_present += 1
        else:
            summary.sessions_imported += 1
            summary.entries_imported += written
        if progress is not None:
            progress(session.session_id)
    _import_routes(store, plan, summary, dry_run=dry_run)
    if not dry_run:
        stamp = json.dumps(
            {"at": store.clock.now().isoformat(), "sessions": len(plan.sessions)}, sort_keys=True
        )
        with db.transaction() as conn:
            conn.set_meta(marker_key(plan), stamp)
    return summary


def _import_routes(
    store: SessionStore, plan: ImportPlan, summary: ImportSummary, *, dry_run: bool
) -> None:
    wanted = []
    with store.database.read() as conn:
        for entry in plan.routes:
            if conn.get_route(entry.session_key) is not None:
                summary.routes_present += 1
            elif conn.get_session_row(entry.session_id) is None and not dry_run:
                summary.skipped.append(
                    {
                        "what": f"route {entry.session_key[:80]!r}",
                        "why": f"its session {entry.session_id} was not imported",
                    }
                )
            else:
                wanted.append(entry)
    if dry_run:
        summary.routes_imported = len(wanted)
        return
    problems: list[str] = []
    summary.routes_imported = store.import_entries(wanted, problems=problems)
    summary.skipped.extend({"what": "route", "why": p} for p in problems)


def _write_session(conn: Tx, session: ForeignSession) -> tuple[bool, int]:
    """(already present, entries written): the whole session in the caller's transaction."""
    if conn.get_session_row(session.session_id) is not None:
        return True, 0
    header = {
        "type": "session",
        "version": 1,
        "id": session.session_id,
        "timestamp": ensure_utc(session.started_at).isoformat(),
        "cwd": None,
        "parent_session": session.parent_session_id,
        "imported_from": session.origin,
    }
    row = conn.create_session_row(
        session_id=session.session_id,
        session_key=session.session_key,
        parent_session_id=session.parent_session_id,
        started_at=to_us(ensure_utc(session.started_at)),
        header=header,
    )
    ids: dict[str, int] = {}
    last: int | None = None
    for node in session.nodes:
        record = _record(node, ids, row.started_at)
        if record is None:
            continue
        parent = ids.get(node.parent) if node.parent is not None else None
        if node.parent is not None and parent is None:
            # An entry whose parent was not written hangs where its parent would have.
            parent = last
        if row.leaf_id != parent:
            row = conn.move_leaf(row, parent)
        written, row = conn.insert_entries(row, [record])
        if written[0] is not None:
            ids[node.ref] = last = written[0]
    leaf = ids.get(session.leaf) if session.leaf is not None else last
    if leaf is not None and row.leaf_id != leaf:
        row = conn.move_leaf(row, leaf)
    if session.ended_at is not None:
        conn.end_session_row(
            row.sid, at=to_us(ensure_utc(session.ended_at)), reason=session.end_reason
        )
    if session.counters:
        conn.save_counters(row.sid, session.counters)
    return False, len(ids)


def _record(node: ForeignNode, ids: dict[str, int], default_us: int) -> EntryRecord | None:
    if node.message is not None:
        message = dict(node.message)
        ts = message.get("timestamp")
        ts_us = to_us(ensure_utc(datetime.fromisoformat(ts))) if isinstance(ts, str) else default_us
        return message_record(message, ts_us)
    assert node.entry is not None
    entry = dict(node.entry)
    for name in _REF_FIELDS:
        if name in entry:
            mapped = ids.get(str(entry[name])) if entry[name] is not None else None
            if mapped is None:
                if name == "first_kept_entry_id":
                    entry.pop(name)
                    continue
                return None  # it names an entry that was not written
            entry[name] = mapped
    clean = validate_entry(entry)
    kind = clean.pop("type")
    clean.pop("id", None)
    clean.pop("parent_id", None)
    ts = clean.pop("timestamp", None)
    ts_us = to_us(ensure_utc(datetime.fromisoformat(ts))) if isinstance(ts, str) else default_us
    return EntryRecord(str(kind), None, None, clean or None, ts_us)
