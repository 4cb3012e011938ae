"""The `JournalTx` family on PostgreSQL: the turn journal, restart counters and meta.

Each method does what its twin in `sqlite/journal.py` does; a transition the state table
(`records.TRANSITIONS`) refuses raises `StaleWriteError`. A turn starts by claiming its inbox
row, so this builds on `PostgresInbox`.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, NoReturn

from sessiongate.store.postgres.inbox import PostgresInbox, inbox_values
from sessiongate.store.records import (
    TRANSITIONS,
    InboxKind,
    TurnRow,
    TurnState,
    dumps,
    loads,
    refused_turn,
)

if TYPE_CHECKING:
    from collections.abc import Callable


__all__ = ["PostgresJournal"]

_TURN = (
    "id, session_key, session_id, inbox_id, state, attempt, resumes, source::text, reply, error, "
    "sg_us(accepted_at), sg_us(started_at), sg_us(finished_at), sg_us(delivered_at)"
)

_TURN_EXISTS = "SELECT 1 FROM turns WHERE id = %s"

# `_INSERT_INBOX_IF_IDLE` of a row already claimed by the turn that `_START_TURN` would write,
# in one statement: (count, new row's id, turn id). The row takes its id from the sequence
# first, so it can name its turn (whose id is the row's when free, as `start_turn`'s).
_START_ROW_IF_IDLE = (
    "WITH d AS (SELECT count(*) AS n FROM inbox WHERE session_key = %s AND state = 'pending'), "
    "ins AS (INSERT INTO inbox (id, state, turn_id, session_key, kind, text, parts, media, "
    "message_id, message_ids, source, message_type, reply_to, event_kind, internal, "
    "accepted_at, updated_at) "
    "SELECT n.id, 'claimed', n.id, %s, %s, %s, %s::jsonb, %s::jsonb, %s, %s::jsonb, %s::jsonb, "
    "%s, %s, %s, %s, sg_ts(%s), sg_ts(%s) "
    "FROM (SELECT nextval('inbox_id_seq') AS id FROM d WHERE d.n = 0) n "
    "RETURNING id, session_key, source, accepted_at), "
    "t AS (INSERT INTO turns (id, session_key, session_id, inbox_id, state, source, "
    "accepted_at, started_at) SELECT id, session_key, %s, id, 'running', source, accepted_at, "
    "sg_ts(%s) FROM ins ON CONFLICT DO NOTHING RETURNING id) "
    "SELECT d.n, (SELECT id FROM ins), (SELECT id FROM t) FROM d"
)

_TRANSITION = (
    "UPDATE turns SET state = %(to)s, "
    "attempt = attempt + %(attempt)s, resumes = resumes + %(resume)s, "
    "reply = coalesce(%(reply)s, reply), error = coalesce(%(error)s, error), "
    "started_at = coalesce(sg_ts(%(started)s::bigint), started_at), "
    "finished_at = coalesce(sg_ts(%(finished)s::bigint), finished_at), "
    "delivered_at = coalesce(sg_ts(%(delivered)s::bigint), delivered_at) "
    "WHERE id = %(id)s AND state = ANY(%(allowed)s::text[])"
)

_INSERT_TURN = (
    "INSERT INTO turns (id, session_key, session_id, inbox_id, state, source, accepted_at, "
    "started_at) VALUES ({id}, %s, %s, %s, %s, %s::jsonb, sg_ts(%s), sg_ts(%s)) "
    "ON CONFLICT DO NOTHING RETURNING id"
)

# `insert_turn` with the row's id and `claim_inbox_row` in one statement: (turn id, rows
# claimed); (NULL, 0) when the id is taken (then the two go one after another).
_START_TURN = (
    "WITH t AS (INSERT INTO turns (id, session_key, session_id, inbox_id, state, source, "
    "accepted_at, started_at) VALUES (%(inbox)s, %(key)s, %(sid)s, %(inbox)s, %(state)s, "
    "%(source)s::jsonb, sg_ts(%(accepted)s), sg_ts(%(started)s)) "
    "ON CONFLICT DO NOTHING RETURNING id), "
    "c AS (UPDATE inbox SET state = 'claimed', turn_id = t.id FROM t "
    "WHERE inbox.id = %(inbox)s AND inbox.state = 'pending' RETURNING inbox.id) "
    "SELECT (SELECT id FROM t), (SELECT count(*) FROM c)"
)

_FINISH_REPLY = "SELECT sg_finish_reply(%s, %s, %s, %s)"

_RESET_RESTART_COUNT = "DELETE FROM restart_counts WHERE session_key = %s"

_META_SET = (
    "INSERT INTO meta (key, value) VALUES (%s, %s) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)


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


class PostgresJournal(PostgresInbox):
    """The turn journal of `PostgresTx`."""

    __slots__ = ()

    def get_turn(self, turn_id: int) -> TurnRow | None:
        raw = self._one(f"SELECT {_TURN} FROM turns WHERE id = %s", (turn_id,))  # noqa: S608
        return None if raw is None else _turn(raw)

    def turn_id_taken(self, turn_id: int) -> Callable[[], bool]:
        ahead = self._sent_ahead(_TURN_EXISTS, (turn_id,))
        if ahead is None:
            taken = self._one(_TURN_EXISTS, (turn_id,)) is not None
            return lambda: taken
        return functools.cache(lambda: ahead.fetchone() is not None)

    def turns_in_state(self, state: TurnState) -> list[TurnRow]:
        rows = self._all(
            f"SELECT {_TURN} FROM turns WHERE state = %s ORDER BY id",  # noqa: S608
            (str(state),),
        )
        return [_turn(r) for r in rows]

    def insert_turn(
        self,
        *,
        session_key: str,
        session_id: str,
        inbox_id: int,
        source: dict[str, Any],
        accepted_at: int,
        started_at: int,
    ) -> int:
        """The turn takes its inbox row's id when it is free, as on SQLite. The id is never
        drawn from the sequence (which explicit ids do not move): when a journal from before
        the rule holds it, the next id above the journal's is taken, again until one is free
        (another instance may take the same one first)."""
        values = (
            session_key,
            session_id,
            inbox_id,
            str(TurnState.RUNNING),
            dumps(source),
            accepted_at,
            started_at,
        )
        row = self._one(_INSERT_TURN.format(id="%s"), (inbox_id, *values))
        while row is None:
            row = self._one(_INSERT_TURN.format(id="(SELECT max(id) + 1 FROM turns)"), values)
        return int(row[0])

    def start_row_if_idle(
        self,
        *,
        session_id: str,
        started_at: int,
        session_key: str,
        kind: InboxKind,
        part: dict[str, Any],
        media: list[str],
        message_id: str | None,
        source: dict[str, Any],
        message_type: str,
        reply_to: str | None,
        event_kind: str | None,
        internal: bool,
        at: int,
    ) -> tuple[int, int | None, int | None]:
        values = inbox_values(
            session_key, kind, part, media, message_id, source, message_type, reply_to,
            event_kind, internal, at,
        )  # fmt: skip
        row = self._one(_START_ROW_IF_IDLE, (session_key, *values, session_id, started_at))
        assert row is not None
        depth, inbox_id, turn_id = row
        if inbox_id is None:
            return int(depth), None, None
        if turn_id is None:  # the id is taken (a journal from before the rule)
            turn_id = self.insert_turn(
                session_key=session_key,
                session_id=session_id,
                inbox_id=inbox_id,
                source=source,
                accepted_at=at,
                started_at=started_at,
            )
            self._send_sure("UPDATE inbox SET turn_id = %s WHERE id = %s", (turn_id, inbox_id))
        return int(depth), int(inbox_id), int(turn_id)

    def start_turn(
        self,
        *,
        session_key: str,
        session_id: str,
        inbox_id: int,
        source: dict[str, Any],
        accepted_at: int,
        started_at: int,
    ) -> int:
        params = {
            "inbox": inbox_id,
            "key": session_key,
            "sid": session_id,
            "state": str(TurnState.RUNNING),
            "source": dumps(source),
            "accepted": accepted_at,
            "started": started_at,
        }
        row = self._one(_START_TURN, params)
        assert row is not None
        if row[0] is None:  # the id is taken (a journal from before the rule)
            turn_id = self.insert_turn(
                session_key=session_key,
                session_id=session_id,
                inbox_id=inbox_id,
                source=source,
                accepted_at=accepted_at,
                started_at=started_at,
            )
            self.claim_inbox_row(inbox_id, turn_id)
            return turn_id
        if row[1] != 1:
            raise LookupError(f"inbox row {inbox_id} is not pending")
        return int(row[0])

    def transition_turn(
        self,
        turn_id: int,
        to: TurnState,
        *,
        at: int,
        reply: str | None = None,
        error: str | None = None,
        resume: bool = False,
    ) -> None:
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
            "allowed": allowed,
        }
        if self._count(_TRANSITION, params) == 1:
            return
        self._refuse(turn_id, to, allowed)

    def finish_reply(self, turn_id: int, *, at: int, reply: str, delivered: bool) -> None:
        # A refusal fails the transaction (`_errors.TURN_REFUSED`): the answer is not waited
        # for here, but comes with the next statement read, or the commit.
        to = TurnState.DELIVERED if delivered else TurnState.REPLIED
        self._send_sure(_FINISH_REPLY, (turn_id, str(to), reply, at))

    def _refuse(self, turn_id: int, to: TurnState, allowed: list[str]) -> NoReturn:
        raw = self._one("SELECT state FROM turns WHERE id = %s", (turn_id,))
        raise refused_turn(turn_id, to, allowed, None if raw is None else raw[0])

    def prune_turns(self, before: int) -> int:
        return self._count(
            "DELETE FROM turns WHERE state IN ('delivered', 'failed', 'interrupted') "
            "AND coalesce(delivered_at, finished_at, accepted_at) < sg_ts(%s)",
            (before,),
        )

    def get_restart_count(self, session_key: str) -> int:
        raw = self._one("SELECT count FROM restart_counts WHERE session_key = %s", (session_key,))
        return 0 if raw is None else int(raw[0])

    def bump_restart_count(self, session_key: str, *, at: int) -> int:
        row = self._one(
            "INSERT INTO restart_counts (session_key, count, updated_at) "
            "VALUES (%s, 1, sg_ts(%s)) ON CONFLICT (session_key) DO UPDATE SET "
            "count = restart_counts.count + 1, updated_at = excluded.updated_at RETURNING count",
            (session_key, at),
        )
        assert row is not None
        return int(row[0])

    def reset_restart_count(self, session_key: str) -> bool:
        return self._count(_RESET_RESTART_COUNT, (session_key,)) > 0

    def reset_restart_count_later(self, session_key: str) -> Callable[[], bool]:
        cursor = self._sent_ahead(_RESET_RESTART_COUNT, (session_key,))
        if cursor is None:
            reset = self.reset_restart_count(session_key)
            return lambda: reset
        return lambda: cursor.rowcount > 0

    def merge_restart_counts(self, counts: dict[str, int], *, at: int) -> None:
        for key, count in counts.items():
            if count > 0:
                self.conn.execute(
                    "INSERT INTO restart_counts (session_key, count, updated_at) "
                    "VALUES (%s, %s, sg_ts(%s)) ON CONFLICT (session_key) DO UPDATE SET "
                    "count = greatest(restart_counts.count, excluded.count)",
                    (key, count, at),
                )

    def restart_counts(self) -> dict[str, int]:
        rows = self._all("SELECT session_key, count FROM restart_counts ORDER BY session_key")
        return {key: int(count) for key, count in rows}

    def get_meta(self, key: str) -> str | None:
        raw = self._one("SELECT value FROM meta WHERE key = %s", (key,))
        return None if raw is None else str(raw[0])

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute(_META_SET, (key, value))

    def pop_meta(self, key: str) -> str | None:
        raw = self._one("DELETE FROM meta WHERE key = %s RETURNING value", (key,))
        return None if raw is None else str(raw[0])
