"""The `jobs` family: scheduled jobs and their claimed slots (`store/jobs.py` states the
rules). SQLite: `sqlite/jobs.py`; PostgreSQL: `postgres/jobs.py`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from sessiongate.store.records import JobRow, JobRunRow

__all__ = ["JobsTx"]


class JobsTx(Protocol):
    """Scheduled jobs and their claimed slots (`store/jobs.py` states the rules). Every method
    runs in the caller's transaction; times are microseconds.

    The exactly-once fence is `claim_job_slot`: one row per (job, slot) under a unique key, so
    of several instances (or a process and its own restart) exactly one ever holds a slot.
    """

    def insert_job(self, row: JobRow) -> bool:
        """Add a job; False (and nothing written) when its id is taken."""
        ...

    def get_job(self, job_id: str, *, lock: bool = False) -> JobRow | None:
        """One job; with `lock`, its row stays locked until the transaction ends (PostgreSQL:
        `FOR UPDATE`, so concurrent schedulers of one job take turns)."""
        ...

    def list_jobs(self) -> list[JobRow]:
        """Every job, by id."""
        ...

    def update_job(self, job_id: str, *, spec: str, paused: bool, at: int) -> bool:
        """Replace a job's spec and paused flag; False when there is no such job."""
        ...

    def set_job_cursor(self, job_id: str, cursor_at: int) -> None:
        """Move the job's cursor forward to `cursor_at` (never back)."""
        ...

    def delete_job(self, job_id: str) -> bool:
        """Remove a job and its run history; False when there is no such job."""
        ...

    def claim_job_slot(
        self, job_id: str, slot_at: int, *, owner: str, at: int, skipped: int
    ) -> int | None:
        """Insert the run of (job, slot) as `claimed`; its id, or None when the slot is
        already claimed (by anyone, ever)."""
        ...

    def update_job_run(
        self,
        run_id: int,
        *,
        state: str,
        session_key: str | None = None,
        turn_id: int | None = None,
        detail: str | None = None,
    ) -> None:
        """Move a run to `state`, setting the given columns (None leaves one as it was)."""
        ...

    def job_runs(self, job_id: str, limit: int) -> list[JobRunRow]:
        """A job's runs, the latest slot first."""
        ...

    def unfinished_job_runs(self) -> list[JobRunRow]:
        """Runs claimed but not yet accepted (`claimed`, `prepared`), oldest slot first."""
        ...

    def job_run_of_turn(self, turn_id: int) -> JobRunRow | None:
        """The run whose turn is `turn_id`, if any."""
        ...
