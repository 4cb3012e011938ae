"""The built-in `schedule` tool: an agent schedules work for its own conversation.

Off unless named in the agent's `tools`. It creates, lists and cancels scheduled jobs
(`core/jobs.py`) whose target is the calling session and nothing else: a job it makes runs
its prompt as a system turn in the caller's lane (like any job's run), and it lists and
cancels only the jobs it made for that session. A job of another session, or one an
operator configured, is answered like one that does not exist.

Bounds (`session_tools`): at most `schedule_max_jobs` active jobs per session, and no two
runs closer than `schedule_min_interval_seconds` (an `every` interval, or the gaps between
a `cron` schedule's next slots). An incognito session schedules nothing (a job is kept on
disk).
"""

from __future__ import annotations

import hashlib
import itertools
import uuid
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from sessiongate.agents.tools.base import ToolContext, ToolError, make_tool
from sessiongate.core.jobs import JobSpec, next_slot, parse_every
from sessiongate.store.jobs import JobExistsError, JobNotFoundError, JobStore, validation_message

if TYPE_CHECKING:
    from sessiongate.agents.tools.base import Tool
    from sessiongate.store.jobs import JobRecord

__all__ = ["SCHEDULE_TOOLS", "schedule"]

_PREFIX = "sched-"
_PROMPT_CHARS = 4_000
# How many upcoming slots of a cron schedule are looked at for the shortest gap.
_CRON_SLOTS = 24


def _own_prefix(session_key: str) -> str:
    """The ids of the jobs this tool made for one session start with this."""
    return f"{_PREFIX}{hashlib.sha256(session_key.encode()).hexdigest()[:12]}-"


def _store(context: ToolContext) -> JobStore:
    if context.host is None:
        raise ToolError("the schedule tool works only inside a running gateway")
    return JobStore(context.host.store)


def _own(context: ToolContext, jobs: JobStore) -> list[JobRecord]:
    prefix = _own_prefix(context.session_key)
    return [
        job
        for job in jobs.all()
        if job.job_id.startswith(prefix) and job.spec.session_key == context.session_key
    ]


def _row(job: JobRecord) -> dict[str, Any]:
    next_at = job.next_at()
    schedule = {k: v for k in ("every", "cron", "at") if (v := getattr(job.spec, k)) is not None}
    return {
        "job_id": job.job_id,
        "prompt": job.spec.prompt,
        **{k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in schedule.items()},
        "timezone": job.spec.timezone,
        "next_at": None if next_at is None else next_at.isoformat(),
    }


def _shortest_gap(spec: JobSpec, now: datetime) -> timedelta | None:
    if spec.every is not None:
        return parse_every(spec.every)
    if spec.cron is None:
        return None
    slots: list[datetime] = []
    at = now
    while len(slots) < _CRON_SLOTS:
        found = next_slot(spec, at, anchor=now)
        if found is None:
            break
        slots.append(found)
        at = found
    gaps = [b - a for a, b in itertools.pairwise(slots)]
    return min(gaps) if gaps else None


async def schedule(
    context: ToolContext,
    action: Literal["create", "list", "cancel"],
    prompt: str | None = None,
    every: str | None = None,
    cron: str | None = None,
    at: str | None = None,
    timezone: str = "UTC",
    job_id: str | None = None,
) -> dict[str, Any]:
    """Schedule work for this conversation: `create` a job that sends `prompt` back here as a
    message on a schedule (exactly one of `every`, `cron`, `at`), `list` this conversation's
    jobs, or `cancel` one by its `job_id`.

    Args:
        action: create, list or cancel
        prompt: with create, the message each run brings (what to do then)
        every: with create, an interval such as 30m, 2h, 1d or 1h30m
        cron: with create, a five-field cron expression (minute hour day month weekday)
        at: with create, one time in ISO 8601 (e.g. 2030-01-01T09:00:00+01:00)
        timezone: with create, the IANA time zone cron and a bare `at` are read in
        job_id: with cancel, the job's id as create or list gave it
    """
    jobs = _store(context)
    own = _own(context, jobs)
    if action == "list":
        return {"jobs": [_row(job) for job in own]}
    if action == "cancel":
        found = next((job for job in own if job.job_id == job_id), None)
        if found is None:
            raise ToolError(f"no job {job_id!r} in this conversation")
        try:
            jobs.remove(found.job_id)
        except JobNotFoundError:
            raise ToolError(f"no job {job_id!r} in this conversation") from None
        _wake(context)
        return {"cancelled": found.job_id}
    return _create(context, jobs, own, prompt, every, cron, at, timezone)


def _create(
    context: ToolContext,
    jobs: JobStore,
    own: list[JobRecord],
    prompt: str | None,
    every: str | None,
    cron: str | None,
    at: str | None,
    timezone: str,
) -> dict[str, Any]:
    host = context.host
    assert host is not None  # _store checked it
    if host.store.is_incognito(context.session_key):
        raise ToolError("an incognito conversation cannot schedule anything")
    text = (prompt or "").strip()
    if not text:
        raise ToolError("create needs a prompt: what each run should do")
    if len(text) > _PROMPT_CHARS:
        raise ToolError(f"the prompt is longer than {_PROMPT_CHARS} characters")
    settings = context.settings
    active = [job for job in own if job.next_at() is not None]
    if len(active) >= settings.schedule_max_jobs:
        raise ToolError(
            f"this conversation has {len(active)} scheduled jobs, the most allowed; cancel one "
            "first"
        )
    fields: dict[str, Any] = {
        "id": f"{_own_prefix(context.session_key)}{uuid.uuid4().hex[:8]}",
        "session_key": context.session_key,
        "prompt": text,
        "timezone": timezone,
        **{k: v for k, v in (("every", every), ("cron", cron), ("at", at)) if v is not None},
    }
    try:
        spec = JobSpec.model_validate(fields)
    except ValidationError as exc:
        raise ToolError(validation_message(exc)) from None
    now = host.store.clock.now()
    gap = _shortest_gap(spec, now)
    least = timedelta(seconds=settings.schedule_min_interval_seconds)
    if gap is not None and gap < least:
        raise ToolError(
            f"runs would come {int(gap.total_seconds())} s apart; the shortest interval "
            f"allowed is {int(least.total_seconds())} s"
        )
    try:
        record = jobs.add(spec)
    except (ValueError, JobExistsError) as exc:
        raise ToolError(str(exc)) from None
    _wake(context)
    return {"created": _row(record)}


def _wake(context: ToolContext) -> None:
    """Tell the gateway's scheduler the jobs changed (its loop also looks every minute)."""
    scheduler = getattr(context.host, "jobs", None)
    wake = getattr(scheduler, "wake", None)
    if callable(wake):
        wake()


SCHEDULE_TOOLS: dict[str, Tool] = {made.name: made for made in (make_tool(schedule),)}
