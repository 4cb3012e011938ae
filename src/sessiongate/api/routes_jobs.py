"""`/v1/jobs`: scheduled jobs over HTTP (operator only).

`GET /v1/jobs` lists them, `POST /v1/jobs` adds one (the body is a job as in the config's
`jobs:`), `GET|PATCH|DELETE /v1/jobs/{id}` reads, changes (any fields but the id, `paused`
too) or removes one, `POST /v1/jobs/{id}/run` runs it now (its turn is accepted before the
answer, which carries the run), and `GET /v1/jobs/{id}/runs` is its history. A change wakes
the running scheduler, so a new slot is seen at once.

A run carries how its turn stands (`turn_state`) and what became of its reply
(`delivery_status`, None when no delivery row was written, e.g. a chat without an adapter);
a listed job carries its latest run (`last_run`), so a list says how each job last went.
"""

# No `from __future__ import annotations`: FastAPI reads the dependency annotations at run time.
from typing import Any

from fastapi import APIRouter, Body, Depends, Query
from pydantic import ConfigDict, ValidationError

from sessiongate.api.auth import require_operator
from sessiongate.api.deps import ConfigDep, RunnerDep
from sessiongate.api.errors import ApiError
from sessiongate.api.responses import errors
from sessiongate.api.schemas import _In
from sessiongate.core.jobs import JobSpec
from sessiongate.gateway.runner import GatewayRunner
from sessiongate.store.jobs import JobRecord, JobRun, validation_message

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["jobs"], dependencies=[Depends(require_operator)])


class RunOut(_In):
    run_id: int
    job_id: str
    slot_at: str
    claimed_at: str
    owner: str
    state: str
    session_key: str | None
    turn_id: int | None
    skipped: int
    detail: str | None
    turn_state: str | None = None
    delivery_status: str | None = None


class JobOut(_In):
    model_config = ConfigDict(extra="allow")
    id: str
    paused: bool
    created_at: str
    updated_at: str
    last_slot_at: str | None
    next_at: str | None
    last_run: RunOut | None = None


class JobListOut(_In):
    jobs: list[JobOut]


class RunListOut(_In):
    runs: list[RunOut]


class DeletedOut(_In):
    removed: str


def _job(record: JobRecord, last_run: RunOut | None = None) -> JobOut:
    return JobOut.model_validate({**record.to_dict(), "last_run": last_run})


def _run(runner: GatewayRunner, run: JobRun) -> RunOut:
    """The run with its turn's state and its reply's delivery status (blocking reads)."""
    turn_state = delivery_status = None
    if run.turn_id is not None:
        turn = runner.lane_store.get_turn(run.turn_id)
        turn_state = None if turn is None else turn.state.value
        delivery = runner.deliveries.of_turn(run.turn_id)
        delivery_status = None if delivery is None else str(delivery.status)
    return RunOut.model_validate(
        {**run.to_dict(), "turn_state": turn_state, "delivery_status": delivery_status}
    )


def _listed(runner: GatewayRunner) -> list[JobOut]:
    jobs = []
    for record in runner.jobs.jobs.all():
        latest = runner.jobs.jobs.history(record.job_id, 1)
        jobs.append(_job(record, _run(runner, latest[0]) if latest else None))
    return jobs


def _history(runner: GatewayRunner, job_id: str, limit: int) -> list[RunOut]:
    """The job's last `limit` runs, the latest first (blocking reads)."""
    return [_run(runner, r) for r in runner.jobs.jobs.history(job_id, limit)]


def _invalid(exc: ValidationError) -> ApiError:
    return ApiError(422, "invalid_job", validation_message(exc))


@router.get("/jobs", response_model=JobListOut, responses=errors(401), summary="List jobs")
async def list_jobs(runner: RunnerDep) -> JobListOut:
    return JobListOut(jobs=await runner.calls.run(_listed, runner))


@router.post(
    "/jobs",
    response_model=JobOut,
    status_code=201,
    responses=errors(400, 401, 409, 413, 415, 422),
    summary="Add a job",
)
async def add_job(
    runner: RunnerDep,
    config: ConfigDep,
    body: dict[str, Any] = Body(  # noqa: B008  # FastAPI's declaration
        ..., description="A job, as in the config's `jobs:`."
    ),
) -> JobOut:
    try:
        spec = JobSpec.model_validate(body)
    except ValidationError as exc:
        raise _invalid(exc) from None
    problem = config.job_problem(spec)
    if problem is not None:
        raise ApiError(422, "invalid_job", problem)
    try:
        record = await runner.calls.run(runner.jobs.jobs.add, spec)
    except ValueError as exc:
        raise ApiError(422, "invalid_job", str(exc)) from None
    runner.jobs.wake()
    return _job(record)


@router.get("/jobs/{job_id}", response_model=JobOut, responses=errors(401, 404), summary="One job")
async def get_job(job_id: str, runner: RunnerDep) -> JobOut:
    return _job(await runner.calls.run(runner.jobs.jobs.get, job_id))


@router.patch(
    "/jobs/{job_id}",
    response_model=JobOut,
    responses=errors(400, 401, 404, 413, 415, 422),
    summary="Change a job (any fields but its id; `paused` pauses or resumes it)",
)
async def patch_job(
    job_id: str,
    runner: RunnerDep,
    config: ConfigDep,
    body: dict[str, Any] = Body(..., description="The fields to change."),  # noqa: B008
) -> JobOut:
    if "id" in body and body["id"] != job_id:
        raise ApiError(422, "invalid_job", "a job's id cannot change")
    try:
        record = await runner.calls.run(
            runner.jobs.jobs.update, job_id, body, check=config.job_problem
        )
    except ValidationError as exc:
        raise _invalid(exc) from None
    except ValueError as exc:
        raise ApiError(422, "invalid_job", str(exc)) from None
    runner.jobs.wake()
    return _job(record)


@router.delete(
    "/jobs/{job_id}",
    response_model=DeletedOut,
    responses=errors(401, 404),
    summary="Remove a job and its history",
)
async def delete_job(job_id: str, runner: RunnerDep) -> DeletedOut:
    await runner.calls.run(runner.jobs.jobs.remove, job_id)
    return DeletedOut(removed=job_id)


@router.post(
    "/jobs/{job_id}/run",
    response_model=RunOut,
    responses=errors(401, 404, 409),
    summary="Run a job now, outside its schedule",
)
async def run_job(job_id: str, runner: RunnerDep) -> RunOut:
    run = await runner.jobs.run_now(job_id)
    return await runner.calls.run(_run, runner, run)


@router.get(
    "/jobs/{job_id}/runs",
    response_model=RunListOut,
    responses=errors(401, 404),
    summary="A job's runs, the latest first",
)
async def job_runs(
    job_id: str,
    runner: RunnerDep,
    limit: int = Query(20, ge=1, le=500, description="How many runs."),
) -> RunListOut:
    return RunListOut(runs=await runner.calls.run(_history, runner, job_id, limit))
