"""Copying a store's database into PostgreSQL (`sessiongate db copy --to postgresql://…`).

The target must hold no sessiongate data, unless it holds an unfinished copy of the same
source that the copy is asked to resume (`postgres/copy_guard.py` checks before anything is
written). Every table is copied in key order, in batches; each batch commits together with
the key it reached (target meta `copy:<table>`), so a copy killed at any point resumes where
it stopped and never writes a row twice (rows already there are kept, not replaced). At the
end each table is verified on both sides: the row count, and a checksum of the rows in a
canonical form (times as microseconds, JSON parsed and re-serialised with sorted keys) that
does not depend on the order either database returns them in. The source is only read.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["TABLES", "CopySource", "CopyTarget", "Kind", "TableSpec", "copy_database", "digest"]


class Kind:
    TEXT = "text"
    INT = "int"
    TIME = "time"  # microseconds since the epoch at the seam
    JSON = "json"  # JSON text at the seam
    BOOL = "bool"


@dataclass(frozen=True, slots=True)
class TableSpec:
    name: str
    key: tuple[str, ...]
    columns: tuple[tuple[str, str], ...]  # (name, kind), key columns first
    # Rows the copy leaves behind: derived state of the source backend (FTS5's cursor) and
    # the copy's own resume positions.
    skip: Callable[[tuple[Any, ...]], bool] | None = None
    # A bigserial the target must move past the copied ids.
    serial: str | None = None


_T, _I, _TS, _J, _B = Kind.TEXT, Kind.INT, Kind.TIME, Kind.JSON, Kind.BOOL

TABLES: tuple[TableSpec, ...] = (
    TableSpec(
        "meta",
        ("key",),
        (("key", _T), ("value", _T)),
        skip=lambda row: str(row[0]).startswith(("fts_", "copy:")),
    ),
    TableSpec(
        "routes",
        ("session_key",),
        (
            ("session_key", _T),
            ("session_id", _T),
            ("platform", _T),
            ("chat_type", _T),
            ("chat_id", _T),
            ("thread_id", _T),
            ("participant_id", _T),
            ("updated_at", _TS),
            ("pinned_at", _TS),
            ("archived_at", _TS),
            ("suspended", _B),
            ("resume_pending", _B),
            ("label", _T),
            ("data", _J),
        ),
    ),
    TableSpec(
        "sessions",
        ("sid",),
        (
            ("sid", _I),
            ("session_id", _T),
            ("session_key", _T),
            ("parent_session_id", _T),
            ("started_at", _TS),
            ("ended_at", _TS),
            ("end_reason", _T),
            ("generation", _I),
            ("header", _J),
            ("counters", _J),
        ),
        serial="sid",
    ),
    TableSpec(
        "entries",
        ("id",),
        (
            ("id", _I),
            ("sid", _I),
            ("parent_id", _I),
            ("depth", _I),
            ("mdepth", _I),
            ("on_path", _I),
            ("type", _T),
            ("role", _T),
            ("content", _T),
            ("payload", _J),
            ("ts", _TS),
            ("idem", _T),
        ),
        serial="id",
    ),
    TableSpec("tips", ("sid", "entry_id"), (("sid", _I), ("entry_id", _I))),
    TableSpec(
        "identity_aliases",
        ("platform", "alias"),
        (("platform", _T), ("alias", _T), ("canonical", _T), ("created_at", _TS)),
    ),
    TableSpec(
        "tombstones",
        ("session_key",),
        (("session_key", _T), ("deleted_at", _TS), ("reason", _T)),
    ),
    TableSpec(
        "inbox",
        ("id",),
        (
            ("id", _I),
            ("session_key", _T),
            ("kind", _T),
            ("state", _T),
            ("turn_id", _I),
            ("text", _T),
            ("parts", _J),
            ("media", _J),
            ("message_id", _T),
            ("message_ids", _J),
            ("source", _J),
            ("message_type", _T),
            ("reply_to", _T),
            ("event_kind", _T),
            ("internal", _B),
            ("accepted_at", _TS),
            ("updated_at", _TS),
        ),
        serial="id",
    ),
    TableSpec(
        "inbound_seen",
        ("platform", "chat_id", "message_id", "session_key", "sender_id"),
        (
            ("platform", _T),
            ("chat_id", _T),
            ("message_id", _T),
            ("session_key", _T),
            ("sender_id", _T),
            ("content_hash", _T),
            ("session_id", _T),
            ("inbox_id", _I),
            ("turn_id", _I),
            ("status", _T),
            ("reply", _T),
            ("seen_at", _TS),
        ),
    ),
    TableSpec(
        "turns",
        ("id",),
        (
            ("id", _I),
            ("session_key", _T),
            ("session_id", _T),
            ("inbox_id", _I),
            ("state", _T),
            ("attempt", _I),
            ("resumes", _I),
            ("source", _J),
            ("reply", _T),
            ("error", _T),
            ("accepted_at", _TS),
            ("started_at", _TS),
            ("finished_at", _TS),
            ("delivered_at", _TS),
        ),
        serial="id",
    ),
    TableSpec(
        "restart_counts",
        ("session_key",),
        (("session_key", _T), ("count", _I), ("updated_at", _TS)),
    ),
    # What platform adapters keep (`platform_state.py`).
    TableSpec(
        "platform_events",
        ("platform", "event_id"),
        (
            ("platform", _T),
            ("event_id", _T),
            ("state", _T),
            ("owner", _T),
            ("claimed_at", _TS),
        ),
    ),
    TableSpec(
        "pairing",
        ("platform", "user_id"),
        (
            ("platform", _T),
            ("user_id", _T),
            ("code", _T),
            ("chat_id", _T),
            ("user_name", _T),
            ("created_at", _TS),
            ("expires_at", _TS),
            ("approved_at", _TS),
        ),
    ),
    TableSpec(
        "platform_threads",
        ("platform", "chat_id", "thread_id"),
        (("platform", _T), ("chat_id", _T), ("thread_id", _T), ("joined_at", _TS)),
    ),
    TableSpec(
        "platform_sends",
        ("platform", "turn_id"),
        (("platform", _T), ("turn_id", _I), ("state", _T), ("detail", _T), ("at", _TS)),
    ),
    TableSpec(
        "platform_cursors",
        ("platform", "account"),
        (("platform", _T), ("account", _T), ("cursor", _T), ("updated_at", _TS)),
    ),
    # Erasure receipts (`store/erasure.py`).
    TableSpec(
        "erasures",
        ("id",),
        (("id", _I), ("erased_at", _TS), ("subject_hash", _T), ("counts", _J)),
        serial="id",
    ),
    # Scheduled jobs and their claimed slots (`jobs.py`).
    TableSpec(
        "jobs",
        ("job_id",),
        (
            ("job_id", _T),
            ("spec", _J),
            ("paused", _B),
            ("created_at", _TS),
            ("updated_at", _TS),
            ("cursor_at", _TS),
        ),
    ),
    TableSpec(
        "job_runs",
        ("run_id",),
        (
            ("run_id", _I),
            ("job_id", _T),
            ("slot_at", _TS),
            ("claimed_at", _TS),
            ("owner", _T),
            ("state", _T),
            ("session_key", _T),
            ("turn_id", _I),
            ("skipped", _I),
            ("detail", _T),
        ),
        serial="run_id",
    ),
    # Tool calls waiting for approval (`store/approvals.py`).
    TableSpec(
        "approvals",
        ("id",),
        (
            ("id", _T),
            ("turn_id", _I),
            ("call_id", _T),
            ("session_key", _T),
            ("tool", _T),
            ("arguments", _T),
            ("arguments_sha256", _T),
            ("approvers", _J),
            ("status", _T),
            ("requested_at", _TS),
            ("expires_at", _TS),
            ("decided_at", _TS),
            ("decided_by", _T),
            ("used", _B),
        ),
    ),
    # Lanes an operator took over (`store/takeover.py`).
    TableSpec(
        "takeovers",
        ("session_key",),
        (("session_key", _T), ("taken_by", _T), ("since", _TS), ("resume_at", _TS)),
    ),
    # Every outbound message and its outcome (`store/deliveries.py`).
    TableSpec(
        "deliveries",
        ("id",),
        (
            ("id", _I),
            ("kind", _T),
            ("turn_id", _I),
            ("session_key", _T),
            ("platform", _T),
            ("source", _T),
            ("text", _T),
            ("status", _T),
            ("attempts", _I),
            ("message_id", _T),
            ("reason", _T),
            ("created_at", _TS),
            ("updated_at", _TS),
            ("next_at", _TS),
        ),
        serial="id",
    ),
    # Outbound webhook events (`store/outbox.py`).
    TableSpec(
        "webhook_outbox",
        ("id",),
        (
            ("id", _I),
            ("event_id", _T),
            ("target", _T),
            ("event", _T),
            ("session_key", _T),
            ("body", _T),
            ("status", _T),
            ("attempts", _I),
            ("reason", _T),
            ("created_at", _TS),
            ("updated_at", _TS),
            ("next_at", _TS),
        ),
        serial="id",
    ),
    # Delivery ids inbound webhook routes took (`store/hook_receipts.py`).
    TableSpec(
        "hook_receipts",
        ("route", "delivery_id"),
        (
            ("route", _T),
            ("delivery_id", _T),
            ("received_at", _TS),
            ("turn_id", _I),
            ("session_key", _T),
        ),
    ),
)


class CopySource(Protocol):
    def count_rows(self, table: TableSpec) -> int: ...
    def read_rows(
        self, table: TableSpec, after: Sequence[Any] | None, limit: int
    ) -> list[tuple[Any, ...]]: ...


class CopyTarget(CopySource, Protocol):
    def copy_position(self, table: TableSpec) -> list[Any] | None: ...
    def write_rows(
        self, table: TableSpec, rows: Sequence[tuple[Any, ...]], position: Sequence[Any]
    ) -> int: ...
    def finish_copy(self, table: TableSpec) -> None: ...
    def begin_copy(self, origin: str) -> None: ...
    def end_copy(self) -> None: ...


def canonical(table: TableSpec, row: Sequence[Any]) -> tuple[Any, ...]:
    """One row as both backends must agree on it."""
    out: list[Any] = []
    for (_, kind), value in zip(table.columns, row, strict=True):
        if value is None:
            out.append(None)
        elif kind == Kind.JSON:
            out.append(json.dumps(json.loads(value), sort_keys=True, ensure_ascii=False))
        elif kind == Kind.BOOL:
            out.append(bool(value))
        else:
            out.append(value)
    return tuple(out)


def digest(table: TableSpec, db: CopySource, *, batch: int = 2000) -> tuple[int, str]:
    """(row count, order-independent checksum) of a table's copied rows."""
    total = 0
    count = 0
    after: Sequence[Any] | None = None
    while True:
        rows = db.read_rows(table, after, batch)
        if not rows:
            break
        after = rows[-1][: len(table.key)]
        for row in rows:
            if table.skip is not None and table.skip(row):
                continue
            text = json.dumps(canonical(table, row), ensure_ascii=False, default=str)
            total = (total + int.from_bytes(hashlib.sha256(text.encode()).digest())) % 2**256
            count += 1
    return count, f"{total:064x}"


def copy_database(
    source: CopySource,
    target: CopyTarget,
    *,
    origin: str,
    batch: int = 1000,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]:
    """Copy every table, resuming a copy that was cut short; then verify each one.

    The target is marked as a copy of `origin` (the source's location) before its first row
    and unmarked once every table verified, so a copy cut short is known for what it is
    (`postgres/copy_guard.py`). `on_progress(table, done, total)` is called after each batch.
    Returns per-table `{copied, rows, checksum, verified}` and `verified` overall.
    """
    report: dict[str, Any] = {"tables": {}, "verified": True}
    target.begin_copy(origin)
    for table in TABLES:
        total = source.count_rows(table)
        after = target.copy_position(table)
        done = 0 if after is None else _count_through(source, table, after, batch)
        copied = 0
        if on_progress is not None:
            on_progress(table.name, done, total)
        while True:
            rows = source.read_rows(table, after, batch)
            if not rows:
                break
            after = list(rows[-1][: len(table.key)])
            keep = [r for r in rows if table.skip is None or not table.skip(r)]
            copied += target.write_rows(table, keep, after)
            done += len(rows)
            if on_progress is not None:
                on_progress(table.name, done, total)
        target.finish_copy(table)
        src = digest(table, source)
        dst = digest(table, target)
        same = src == dst
        report["tables"][table.name] = {
            "copied": copied,
            "rows": src[0],
            "target_rows": dst[0],
            "checksum": src[1],
            "verified": same,
        }
        report["verified"] = report["verified"] and same
    if report["verified"]:
        target.end_copy()
    return report


def _count_through(source: CopySource, table: TableSpec, upto: Sequence[Any], batch: int) -> int:
    """How many source rows lie at or before `upto` (a resumed copy's progress so far)."""
    seen = 0
    after: Sequence[Any] | None = None
    while True:
        rows = source.read_rows(table, after, batch)
        if not rows:
            return seen
        for row in rows:
            if list(row[: len(table.key)]) > list(upto):
                return seen
            seen += 1
        after = rows[-1][: len(table.key)]
