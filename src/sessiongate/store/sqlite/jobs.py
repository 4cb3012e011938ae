"""SQL for scheduled jobs and their claimed slots (`JobsTx`), on SQLite.

`SqliteJobs` is the `JobsTx` third of `SqliteTx`; every method runs inside the caller's
transaction, and `store.jobs.JobStore` is the only caller. A slot's claim is one `INSERT … ON
CONFLICT DO NOTHING` against the unique (job, slot) key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sessiongate.store.records import JobRow, JobRunRow

if TYPE_CHECKING:
    import sqlite3

__all__ = ["SqliteJobs"]

_JOB_COLUMNS = "job_id, spec, paused, created_at, updated_at, cursor_at"
_RUN_COLUMNS = (
    "run_id, job_id, slot_at, claimed_at, owner, state, session_key, turn_id, skipped, detail"
)


def _job(row: tuple[Any, ...]) -> JobRow:
    return JobRow(str(row[0]), str(row[1]), bool(row[2]), int(row[3]), int(row[4]), row[5])


def _run(row: tuple[object, ...]) -> JobRunRow:
    return JobRunRow(*row)  # type: ignore[arg-type]  # columns in declaration order


class SqliteJobs:
    __slots__ = ()
    conn: sqlite3.Connection

    def insert_job(self, row: JobRow) -> bool:
        return bool(
            self.conn.execute(
                f"INSERT INTO jobs ({_JOB_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?) "  # noqa: S608  # constant columns
                "ON CONFLICT DO NOTHING",
                (row.job_id, row.spec, int(row.paused), row.created_at, row.updated_at, None),
            ).rowcount
        )

    def get_job(self, job_id: str, *, lock: bool = False) -> JobRow | None:
        # SQLite's write transactions are exclusive already: `lock` needs nothing more.
        row = self.conn.execute(
            f"SELECT {_JOB_COLUMNS} FROM jobs WHERE job_id = ?",  # noqa: S608  # constant columns
            (job_id,),
        ).fetchone()
        return None if row is None else _job(row)

    def list_jobs(self) -> list[JobRow]:
        rows = self.conn.execute(
            f"SELECT {_JOB_COLUMNS} FROM jobs ORDER BY job_id"  # noqa: S608  # constant columns
        ).fetchall()
        return [_job(r) for r in rows]

    def update_job(self, job_id: str, *, spec: str, paused: bool, at: int) -> bool:
        return bool(
            self.conn.execute(
                "UPDATE jobs SET spec = ?, paused = ?, updated_at = ? WHERE job_id = ?",
                (spec, int(paused), at, job_id),
            ).rowcount
        )

    def set_job_cursor(self, job_id: str, cursor_at: int) -> None:
        self.conn.execute(
            "UPDATE jobs SET cursor_at = ? WHERE job_id = ? "
            "AND (cursor_at IS NULL OR cursor_at < ?)",
            (cursor_at, job_id, cursor_at),
        )

    def delete_job(self, job_id: str) -> bool:
        self.conn.execute("DELETE FROM job_runs WHERE job_id = ?", (job_id,))
        return bool(self.conn.execute("DELETE FROM jobs WHERE job_id = ?", (job_id,)).rowcount)

    def claim_job_slot(
        self, job_id: str, slot_at: int, *, owner: str, at: int, skipped: int
    ) -> int | None:
        row = self.conn.execute(
            "INSERT INTO job_runs (job_id, slot_at, claimed_at, owner, state, skipped) "
            "VALUES (?, ?, ?, ?, 'claimed', ?) ON CONFLICT DO NOTHING RETURNING run_id",
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
            "UPDATE job_runs SET state = ?, session_key = coalesce(?, session_key), "
            "turn_id = coalesce(?, turn_id), detail = coalesce(?, detail) WHERE run_id = ?",
            (state, session_key, turn_id, detail, run_id),
        )

    def job_runs(self, job_id: str, limit: int) -> list[JobRunRow]:
        rows = self.conn.execute(
            f"SELECT {_RUN_COLUMNS} FROM job_runs WHERE job_id = ? "  # noqa: S608  # constant columns
            "ORDER BY slot_at DESC LIMIT ?",
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
            f"SELECT {_RUN_COLUMNS} FROM job_runs WHERE turn_id = ?",  # noqa: S608  # constant columns
            (turn_id,),
        ).fetchone()
        return None if row is None else _run(row)
