"""`JobStore`: scheduled jobs and their claimed slots, one transaction per call.

The rules (ISSUE: exactly once per slot):
- A slot is claimed by a row unique per (job, slot), committed before its turn is accepted.
  A second claim of the slot, by this process after a restart or by another instance on a
  shared PostgreSQL database, finds the row and gets nothing: the unique key is the fence.
- The job's cursor moves, in the claim's transaction, past every slot dealt with (run or
  passed over under `catch_up`), so a slot is never looked at twice.
- A run goes `claimed` → `prepared` (its lane exists) → `accepted` (its turn is in the
  journal). A run left `claimed` or `prepared` by a crash is resumed by the scheduler; its turn
  is accepted under the run's own message id, so a run whose turn was accepted just before the
  crash is recognised as a duplicate instead of running twice.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sessiongate.core.jobs import JobSpec, due_slots, next_slot
from sessiongate.errors import JobExistsError, JobNotFoundError
from sessiongate.store.records import JobRow, JobRunRow, from_us, to_us

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from datetime import datetime

    from pydantic import ValidationError

    from sessiongate.core.clock import Clock
    from sessiongate.store.protocol import Tx
    from sessiongate.store.session_store import SessionStore

__all__ = ["JobExistsError", "JobNotFoundError", "JobRecord", "JobRun", "JobStore"]


@dataclass(frozen=True, slots=True)
class JobRecord:
    spec: JobSpec
    paused: bool
    created_at: datetime
    updated_at: datetime
    cursor_at: datetime | None

    @property
    def job_id(self) -> str:
        return self.spec.id

    def next_at(self) -> datetime | None:
        """The job's next slot (None: paused, or it has none left)."""
        if self.paused:
            return None
        return next_slot(self.spec, self.cursor_at or self.created_at, anchor=self.created_at)

    def to_dict(self) -> dict[str, object]:
        next_at = self.next_at()
        return {
            **self.spec.model_dump(mode="json", exclude={"paused"}, exclude_none=True),
            "paused": self.paused,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "last_slot_at": None if self.cursor_at is None else self.cursor_at.isoformat(),
            "next_at": None if next_at is None else next_at.isoformat(),
        }


@dataclass(frozen=True, slots=True)
class JobRun:
    run_id: int
    job_id: str
    slot_at: datetime
    claimed_at: datetime
    owner: str
    state: str  # claimed | prepared | accepted
    session_key: str | None
    turn_id: int | None
    skipped: int
    detail: str | None

    def to_dict(self) -> dict[str, object]:
        return {
            "run_id": self.run_id,
            "job_id": self.job_id,
            "slot_at": self.slot_at.isoformat(),
            "claimed_at": self.claimed_at.isoformat(),
            "owner": self.owner,
            "state": self.state,
            "session_key": self.session_key,
            "turn_id": self.turn_id,
            "skipped": self.skipped,
            "detail": self.detail,
        }


@functools.lru_cache(maxsize=16_384)
def _parsed_spec(text: str, paused: bool) -> JobSpec:
    """The stored spec, validated once per text: a tick reads every job twice, and validating
    (its cron parsed) was most of the scheduler's own CPU in a burst of 10,000 jobs due."""
    return JobSpec.model_validate({**json.loads(text), "paused": paused})


def _record(row: JobRow) -> JobRecord:
    # A copy each time: a spec's fields are immutable, but the model itself is not.
    spec = _parsed_spec(row.spec, row.paused).model_copy()
    return JobRecord(
        spec=spec,
        paused=row.paused,
        created_at=from_us(row.created_at),
        updated_at=from_us(row.updated_at),
        cursor_at=None if row.cursor_at is None else from_us(row.cursor_at),
    )


def _run(row: JobRunRow) -> JobRun:
    return JobRun(
        run_id=row.run_id,
        job_id=row.job_id,
        slot_at=from_us(row.slot_at),
        claimed_at=from_us(row.claimed_at),
        owner=row.owner,
        state=row.state,
        session_key=row.session_key,
        turn_id=row.turn_id,
        skipped=row.skipped,
        detail=row.detail,
    )


def _spec_text(spec: JobSpec) -> str:
    return json.dumps(
        spec.model_dump(mode="json", exclude={"paused"}, exclude_none=True), sort_keys=True
    )


class JobStore:
    def __init__(self, store: SessionStore, *, clock: Clock | None = None) -> None:
        self._db = store.database
        self._clock: Clock = clock or store.clock

    # ------------------------------------------------------------------ jobs

    def add(self, spec: JobSpec) -> JobRecord:
        """Add a job (one transaction); `JobExistsError` when its id is taken, `ValueError`
        for an `at` time already past (it would never run)."""
        at = spec.at_instant()
        if at is not None and at <= self._clock.now():
            raise ValueError(f"at: {at.isoformat()} is in the past; the job would never run")
        now = to_us(self._clock.now())
        row = JobRow(spec.id, _spec_text(spec), spec.paused, now, now, None)
        with self._db.transaction() as conn:
            if not conn.insert_job(row):
                raise JobExistsError(f"job {spec.id!r} exists already")
        return _record(row)

    def get(self, job_id: str) -> JobRecord:
        """One job; `JobNotFoundError` when there is none."""
        with self._db.read() as conn:
            row = conn.get_job(job_id)
        if row is None:
            raise JobNotFoundError(f"no job {job_id!r}")
        return _record(row)

    def all(self) -> list[JobRecord]:
        with self._db.read() as conn:
            return [_record(row) for row in conn.list_jobs()]

    def update(
        self,
        job_id: str,
        changes: dict[str, object],
        *,
        check: Callable[[JobSpec], str | None] | None = None,
    ) -> JobRecord:
        """Change fields of a job (validated whole, as a new spec; the id cannot change);
        `JobNotFoundError`, or `ValueError` (pydantic's `ValidationError`, or what `check`
        says of the new spec) with nothing written."""
        if "id" in changes and changes["id"] != job_id:
            raise ValueError("a job's id cannot change")
        now = to_us(self._clock.now())
        with self._db.transaction() as conn:
            row = conn.get_job(job_id, lock=True)
            if row is None:
                raise JobNotFoundError(f"no job {job_id!r}")
            current = _record(row).spec.model_dump()
            spec = JobSpec.model_validate({**current, **changes})
            problem = None if check is None else check(spec)
            if problem is not None:
                raise ValueError(problem)
            conn.update_job(job_id, spec=_spec_text(spec), paused=spec.paused, at=now)
            if row.paused and not spec.paused:
                # Resumed: the slots that passed while paused are passed over, not caught up.
                conn.set_job_cursor(job_id, now)
            updated = conn.get_job(job_id)
        assert updated is not None
        return _record(updated)

    def set_paused(self, job_id: str, paused: bool) -> JobRecord:
        return self.update(job_id, {"paused": paused})

    def remove(self, job_id: str) -> None:
        """Remove a job and its history; `JobNotFoundError` when there is none."""
        with self._db.transaction() as conn:
            if not conn.delete_job(job_id):
                raise JobNotFoundError(f"no job {job_id!r}")

    def sync(self, specs: Iterable[JobSpec]) -> None:
        """Make the configured jobs exist as configured (one transaction): new ones are added,
        changed ones take the new spec; a job's paused flag set at run time is kept, and jobs
        added by other means are left alone."""
        now = to_us(self._clock.now())
        with self._db.transaction() as conn:
            for spec in specs:
                text = _spec_text(spec)
                row = conn.get_job(spec.id, lock=True)
                if row is None:
                    conn.insert_job(JobRow(spec.id, text, spec.paused, now, now, None))
                elif json.loads(row.spec) != json.loads(text):
                    conn.update_job(spec.id, spec=text, paused=row.paused, at=now)

    # ------------------------------------------------------------------ slots

    def claim_due(self, job_id: str, *, owner: str) -> list[JobRun]:
        """Claim the job's due slots at the clock's now under its `catch_up` (one
        transaction, the job's row locked): the runs this call claimed, oldest first. A slot
        someone else claimed is not returned; the cursor moves past every slot looked at."""
        return self.claim_due_many([job_id], owner=owner)

    def claim_due_many(self, job_ids: Sequence[str], *, owner: str) -> list[JobRun]:
        """`claim_due` for several jobs in one transaction (a burst of jobs due together pays
        one commit, not one each): the runs claimed, job by job in the order given."""
        now = self._clock.now()
        claimed: list[JobRun] = []
        with self._db.transaction() as conn:
            for job_id in job_ids:
                claimed += self._claim_due_in(conn, job_id, owner=owner, now=now)
        return claimed

    def _claim_due_in(self, conn: Tx, job_id: str, *, owner: str, now: datetime) -> list[JobRun]:
        row = conn.get_job(job_id, lock=True)
        if row is None or row.paused:
            return []
        job = _record(row)
        due = due_slots(
            job.spec, cursor=job.cursor_at or job.created_at, now=now, anchor=job.created_at
        )
        if due.cursor is None:
            return []
        claimed: list[JobRun] = []
        skipped = due.skipped
        for slot in due.run:
            run_id = conn.claim_job_slot(
                job_id, to_us(slot), owner=owner, at=to_us(now), skipped=skipped
            )
            skipped = 0
            if run_id is not None:
                claimed.append(
                    JobRun(run_id, job_id, slot, now, owner, "claimed", None, None, 0, None)
                )
        conn.set_job_cursor(job_id, to_us(due.cursor))
        return claimed

    def claim_now(self, job_id: str, *, owner: str) -> JobRun:
        """Claim an extra slot at the clock's now (run-now), outside the schedule; the cursor
        does not move. `JobNotFoundError`; `JobExistsError` if this instant is claimed."""
        now = self._clock.now()
        with self._db.transaction() as conn:
            if conn.get_job(job_id) is None:
                raise JobNotFoundError(f"no job {job_id!r}")
            run_id = conn.claim_job_slot(job_id, to_us(now), owner=owner, at=to_us(now), skipped=0)
        if run_id is None:
            raise JobExistsError(f"job {job_id!r} already has a run at {now.isoformat()}")
        return JobRun(run_id, job_id, now, now, owner, "claimed", None, None, 0, "run now")

    def mark(
        self,
        run_id: int,
        state: str,
        *,
        session_key: str | None = None,
        turn_id: int | None = None,
        detail: str | None = None,
    ) -> None:
        with self._db.transaction() as conn:
            conn.update_job_run(
                run_id, state=state, session_key=session_key, turn_id=turn_id, detail=detail
            )

    def history(self, job_id: str, limit: int = 20) -> list[JobRun]:
        """The job's runs, the latest slot first; `JobNotFoundError`."""
        with self._db.read() as conn:
            if conn.get_job(job_id) is None:
                raise JobNotFoundError(f"no job {job_id!r}")
            return [_run(row) for row in conn.job_runs(job_id, limit)]

    def unfinished(self) -> list[JobRun]:
        """Runs a crash left before their turn was accepted, oldest slot first."""
        with self._db.read() as conn:
            return [_run(row) for row in conn.unfinished_job_runs()]

    def run_of_turn(self, turn_id: int) -> JobRun | None:
        with self._db.read() as conn:
            row = conn.job_run_of_turn(turn_id)
        return None if row is None else _run(row)


def validation_message(exc: ValidationError) -> str:
    """One line naming each invalid field of a job spec."""
    return "; ".join(
        f"{'.'.join(map(str, e['loc'])) or 'job'}: "
        + (
            "unknown field"
            if e["type"] == "extra_forbidden"
            else str(e["msg"]).removeprefix("Value error, ")
        )
        for e in exc.errors()
    )
