"""The turn journal (`turns`), the stuck-loop counters (`restart_counts`) and the shutdown marker.

Every function runs inside the caller's transaction. A turn moves only along `TRANSITIONS`;
`transition` checks the current state in the same statement that changes it, so two writers
can never both move one turn, and an illegal move raises `StaleWriteError` naming the state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

from sessiongate.store.records import TRANSITIONS, TurnRow, TurnState, dumps, loads, refused_turn

if TYPE_CHECKING:
    import sqlite3

__all__ = [
    "TRANSITIONS",
    "TurnRow",
    "TurnState",
    "bump_restart_count",
    "finish_reply",
    "get_meta",
    "get_restart_count",
    "get_turn",
    "insert_turn",
    "merge_restart_counts",
    "pop_meta",
    "prune_turns",
    "reset_restart_count",
    "restart_counts",
    "set_meta",
    "transition",
    "turns_in_state",
]


_COLUMNS = (
    "id, session_key, session_id, inbox_id, state, attempt, resumes, source, reply, error, "
    "accepted_at, started_at, finished_at, delivered_at"
)
_GET = f"SELECT {_COLUMNS} FROM turns WHERE id = ?"  # noqa: S608
_IN_STATE = f"SELECT {_COLUMNS} FROM turns WHERE state = ? ORDER BY id"  # noqa: S608
_INSERT = (
    "INSERT INTO turns (session_key, session_id, inbox_id, state, source, accepted_at, "
    "started_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_AS_ROW = (
    "INSERT INTO turns (id, session_key, session_id, inbox_id, state, source, accepted_at, "
    "started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
)
_TRANSITION = (
    "UPDATE turns SET state = :to, "
    "attempt = attempt + :attempt, resumes = resumes + :resume, "
    "reply = coalesce(:reply, reply), error = coalesce(:error, error), "
    "started_at = coalesce(:started, started_at), finished_at = coalesce(:finished, finished_at), "
    "delivered_at = coalesce(:delivered, delivered_at) "
    "WHERE id = :id AND state IN (SELECT value FROM json_each(:allowed))"
)
# running -> replied, and -> delivered in the same statement when the receipt is the delivery.
_FINISH_REPLY = (
    "UPDATE turns SET state = :to, reply = :reply, finished_at = :at, "
    "delivered_at = CASE WHEN :to = 'delivered' THEN :at END "
    "WHERE id = :id AND state = 'running'"
)
_STATE_OF = "SELECT state FROM turns WHERE id = ?"
_PRUNE = (
    "DELETE FROM turns WHERE state IN ('delivered', 'failed', 'interrupted') "
    "AND coalesce(delivered_at, finished_at, accepted_at) < ?"
)
_COUNT_GET = "SELECT count FROM restart_counts WHERE session_key = ?"
_COUNT_BUMP = (
    "INSERT INTO restart_counts (session_key, count, updated_at) VALUES (?, 1, ?) "
    "ON CONFLICT (session_key) DO UPDATE SET count = count + 1, updated_at = excluded.updated_at "
    "RETURNING count"
)
_COUNT_MAX = (
    "INSERT INTO restart_counts (session_key, count, updated_at) VALUES (?, ?, ?) "
    "ON CONFLICT (session_key) DO UPDATE SET count = max(count, excluded.count)"
)
_COUNT_RESET = "DELETE FROM restart_counts WHERE session_key = ?"
_COUNT_ALL = "SELECT session_key, count FROM restart_counts ORDER BY session_key"
_META_GET = "SELECT value FROM meta WHERE key = ?"
_META_SET = (
    "INSERT INTO meta (key, value) VALUES (?, ?) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
_META_DEL = "DELETE FROM meta WHERE key = ?"


def _turn(raw: tuple[Any, ...]) -> TurnRow:
    return TurnRow(
        id=raw[0],
        session_key=raw[1],
        session_id=raw[2],
        inbox_id=raw[3],
        state=TurnState(raw[4]),
        attempt=raw[5],
        resumes=raw[6],
        source=loads(raw[7]),
        reply=raw[8],
        error=raw[9],
        accepted_at=raw[10],
        started_at=raw[11],
        finished_at=raw[12],
        delivered_at=raw[13],
    )


def get_turn(conn: sqlite3.Connection, turn_id: int) -> TurnRow | None:
    raw = conn.execute(_GET, (turn_id,)).fetchone()
    return None if raw is None else _turn(raw)


def turn_exists(conn: sqlite3.Connection, turn_id: int) -> bool:
    return conn.execute("SELECT 1 FROM turns WHERE id = ?", (turn_id,)).fetchone() is not None


def turns_in_state(conn: sqlite3.Connection, state: TurnState) -> list[TurnRow]:
    return [_turn(raw) for raw in conn.execute(_IN_STATE, (str(state),))]


def insert_turn(
    conn: sqlite3.Connection,
    *,
    session_key: str,
    session_id: str,
    inbox_id: int,
    source: dict[str, Any],
    accepted_at: int,
    started_at: int,
) -> int:
    """A new turn, journalled as running: it is claimed and dispatched in one transaction.

    The turn takes its inbox row's id when that id is free (one row is claimed by exactly one turn,
    and both ids only grow, so only a journal from before this rule can hold it), so a message
    accepted while its lane is busy already knows the id of the turn that will answer it.
    """
    values = (
        session_key,
        session_id,
        inbox_id,
        str(TurnState.RUNNING),
        dumps(source),
        accepted_at,
        started_at,
    )
    cursor = conn.execute(_INSERT_AS_ROW, (inbox_id, *values))
    if cursor.rowcount == 1:
        return inbox_id
    # A journal from before the rule may hold this id already: take the next free one.
    cursor = conn.execute(_INSERT, values)
    assert cursor.lastrowid is not None
    return cursor.lastrowid


def transition(
    conn: sqlite3.Connection,
    turn_id: int,
    to: TurnState,
    *,
    at: int,
    reply: str | None = None,
    error: str | None = None,
    resume: bool = False,
) -> None:
    """Move a turn to `to` if `TRANSITIONS` allows it from its current state; else raise.

    `resume` (ACCEPTED -> RUNNING only) counts one more attempt and one more resume.
    """
    allowed = [str(s) for s, targets in TRANSITIONS.items() if to in targets]
    params = {
        "to": str(to),
        "attempt": int(resume),
        "resume": int(resume),
        "reply": reply,
        "error": error,
        "started": at if to is TurnState.RUNNING else None,
        "finished": at
        if to in (TurnState.REPLIED, TurnState.FAILED, TurnState.INTERRUPTED)
        else None,
        "delivered": at if to is TurnState.DELIVERED else None,
        "id": turn_id,
        "allowed": dumps(allowed),
    }
    if conn.execute(_TRANSITION, params).rowcount == 1:
        return
    _refuse(conn, turn_id, to, allowed)


def finish_reply(
    conn: sqlite3.Connection, turn_id: int, *, at: int, reply: str, delivered: bool
) -> None:
    """The hot path's `transition(REPLIED)` (then `transition(DELIVERED)` when `delivered`)
    as one statement; the same rule: only a running turn can reply."""
    to = TurnState.DELIVERED if delivered else TurnState.REPLIED
    params = {"to": str(to), "reply": reply, "at": at, "id": turn_id}
    if conn.execute(_FINISH_REPLY, params).rowcount != 1:
        _refuse(conn, turn_id, TurnState.REPLIED, [str(TurnState.RUNNING)])


def _refuse(conn: sqlite3.Connection, turn_id: int, to: TurnState, allowed: list[str]) -> NoReturn:
    raw = conn.execute(_STATE_OF, (turn_id,)).fetchone()
    raise refused_turn(turn_id, to, allowed, None if raw is None else raw[0])


def prune_turns(conn: sqlite3.Connection, before: int) -> int:
    """Forget finished turns that ended before `before` (microseconds); returns how many."""
    return int(conn.execute(_PRUNE, (before,)).rowcount)


def get_restart_count(conn: sqlite3.Connection, session_key: str) -> int:
    raw = conn.execute(_COUNT_GET, (session_key,)).fetchone()
    return 0 if raw is None else int(raw[0])


def bump_restart_count(conn: sqlite3.Connection, session_key: str, *, at: int) -> int:
    return int(conn.execute(_COUNT_BUMP, (session_key, at)).fetchone()[0])


def reset_restart_count(conn: sqlite3.Connection, session_key: str) -> bool:
    return conn.execute(_COUNT_RESET, (session_key,)).rowcount > 0


def merge_restart_counts(conn: sqlite3.Connection, counts: dict[str, int], *, at: int) -> None:
    """Take the larger of the stored and the given count per key (file mirror → database)."""
    for key, count in counts.items():
        if count > 0:
            conn.execute(_COUNT_MAX, (key, count, at))


def restart_counts(conn: sqlite3.Connection) -> dict[str, int]:
    return {key: int(count) for key, count in conn.execute(_COUNT_ALL)}


def get_meta(conn: sqlite3.Connection, key: str) -> str | None:
    raw = conn.execute(_META_GET, (key,)).fetchone()
    return None if raw is None else str(raw[0])


def set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    conn.execute(_META_SET, (key, value))


def pop_meta(conn: sqlite3.Connection, key: str) -> str | None:
    value = get_meta(conn, key)
    if value is not None:
        conn.execute(_META_DEL, (key,))
    return value
