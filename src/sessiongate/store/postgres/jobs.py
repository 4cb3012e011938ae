"""SQL for scheduled jobs and their claimed slots (`JobsTx`), on PostgreSQL.

`PostgresJobs` is the `JobsTx` third of `PostgresTx` (times stored as `timestamptz`); every
method runs inside the caller's transaction, and `store.jobs.JobStore` is the only caller. A
slot's claim is one `INSERT … ON CONFLICT DO NOTHING` against the unique (job, slot) key: of
several instances claiming at once, the others wait for the first commit, then find the row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sessiongate.store.records import JobRow, JobRunRow

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresJobs"]

_JOB_COLUMNS = "job_id, spec, paused, created_at, updated_at, cursor_at"
_JOB_SELECT = "job_id, spec::text, paused, sg_us(created_at), sg_us(updated_at), sg_us(cursor_at)"
_RUN_COLUMNS = (
    "run_id, job_id, sg_us(slot_at), sg_us(claimed_at), owner, state, session_key, turn_id, "
    "skipped, detail"
)


def _job(row: tuple[Any, ...]) -> JobRow:
    return JobRow(str(row[0]), str(row[1]), bool(row[2]), int(row[3]), int(row[4]), row[5])


def _run(row: tuple[Any, ...]) -> JobRunRow:
    return JobRunRow(*row)


class PostgresJobs:
    __slots__ = ()
    conn: psycopg.Connection[Any]

    def insert_job(self, row: JobRow) -> bool:
        return bool(
            self.conn.execute(
                f"INSERT INTO jobs ({_JOB_COLUMNS}) "  # noqa: S608  # constant columns
                "VALUES (%s, %s::jsonb, %s, sg_ts(%s), sg_ts(%s), %s) "
                "ON CONFLICT DO NOTHING",
                (row.job_id, row.spec, row.paused, row.created_at, row.updated_at, None),
            ).rowcount
        )

    def get_job(self, job_id: str, *, lock: bool = False) -> JobRow | None:
        lock_clause = " FOR UPDATE" if lock else ""
        row = self.conn.execute(
            f"SELECT {_JOB_SELECT} FROM jobs WHERE job_id = %s{lock_clause}",  # noqa: S608  # constant columns
            (job_id,),
        ).fetchone()
        return None if row is None else _job(row)

    def list_jobs(self) -> list[JobRow]:
        rows = self.conn.execute(
            f"SELECT {_JOB_SELECT} FROM jobs ORDER BY job_id"  # noqa: S608  # constant columns
        ).fetchall()
        return [_job(r) for r in rows]

    def update_job(self, job_id: str, *, spec: str, paused: bool, at: int) -> bool:
        return bool(
            self.conn.execute(
                "UPDATE jobs SET spec = %s::jsonb, paused = %s, updated_at = sg_ts(%s) "
                "WHERE job_id = %s",
                (spec, paused, at, job_id),
            ).rowcount
        )

    def set_job_cursor(self, job_id: str, cursor_at: int) -> None:
        self.conn.execute(
            "UPDATE jobs SET cursor_at = sg_ts(%s) WHERE job_id = %s "
            "AND (cursor_at IS NULL OR cursor_at < sg_ts(%s))",
            (cursor_at, job_id, cursor_at),
        )

    def delete_job(self, job_id: str) -> bool:
        self.conn.execute("DELETE FROM job_runs WHERE job_id = %s", (job_id,))
        return bool(self.conn.execute("DELETE FROM jobs WHERE job_id = %s", (job_id,)).rowcount)

    def claim_job_slot(
        self, job_id: str, slot_at: int, *, owner: str, at: int, skipped: int
    ) -> int | None:
        row = self.conn.execute(
            "INSERT INTO job_runs (job_id, slot_at, claimed_at, owner, state, skipped) "
            "VALUES (%s, sg_ts(%s), sg_ts(%s), %s, 'claimed', %s) ON CONFLICT DO NOTHING "
            "RETURNING run_id",
            (job_id, slot_at, at, owner, skipped),
        ).fetchone()
        return None if row is None else int(row[0])

    def update_job_run(
        self,
        run_id: int,
        *,
        state: str,
        session_key: str | None = None,
        turn_id: int | None = None,
        detail: str | None = None,
    ) -> None:
        self.conn.execute(
            "UPDATE job_runs SET state = %s, session_key = coalesce(%s::text, session_key), "
            "turn_id = coalesce(%s::bigint, turn_id), detail = coalesce(%s::text, detail) "
            "WHERE run_id = %s",
            (state, session_key, turn_id, detail, run_id),
        )

    def job_runs(self, job_id: str, limit: int) -> list[JobRunRow]:
        rows = self.conn.execute(
            f"SELECT {_RUN_COLUMNS} FROM job_runs WHERE job_id = %s "  # noqa: S608  # constant columns
            "ORDER BY slot_at DESC LIMIT %s",
            (job_id, limit),
        ).fetchall()
        return [_run(r) for r in rows]

    def unfinished_job_runs(self) -> list[JobRunRow]:
        rows = self.conn.execute(
            f"SELECT {_RUN_COLUMNS} FROM job_runs WHERE state IN ('claimed', 'prepared') "  # noqa: S608  # constant columns
            "ORDER BY slot_at, run_id"
        ).fetchall()
        return [_run(r) for r in rows]

    def job_run_of_turn(self, turn_id: int) -> JobRunRow | None:
        row = self.conn.execute(
            f"SELECT {_RUN_COLUMNS} FROM job_runs WHERE turn_id = %s",  # noqa: S608  # constant columns
            (turn_id,),
        ).fetchone()
        return None if row is None else _run(row)
