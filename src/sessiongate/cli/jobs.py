"""`sessiongate jobs add|list|show|pause|resume|remove|run-now|history`: scheduled jobs.

Jobs live in the store, so these work while the gateway runs: it reads the jobs at each of
its ticks. `run-now` claims a run at this instant; the running gateway hands it to the
job's lane at its next tick (within a minute; on a shared database once the claim is two
minutes old), or the next start does. Jobs named in the config's `jobs:` are put back as
configured at each start (a pause set here is kept).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.markup import escape
from rich.table import Table

from sessiongate.cli._common import (
    EXIT_USAGE,
    ConfigOption,
    HomeOption,
    JsonOption,
    console,
    emit_json,
    fail,
    load_paths_and_config,
    open_store,
    when,
)
from sessiongate.core.jobs import JobSpec
from sessiongate.errors import SessiongateError
from sessiongate.store.jobs import JobRecord, JobStore, validation_message

__all__ = ["app"]

app = typer.Typer(
    no_args_is_help=True,
    help="Scheduled jobs: add, list, show, pause, resume, remove, run now, history.",
)

JobId = Annotated[str, typer.Argument(help="The job's id.")]


def _with_jobs(home: Any, config_file: Any, action: Any) -> Any:
    paths, config = load_paths_and_config(home, config_file)
    store = open_store(paths, config)
    try:
        return action(JobStore(store), config)
    except SessiongateError as exc:
        fail(exc.message, error_code=exc.code)
    except ValidationError as exc:
        fail(validation_message(exc), EXIT_USAGE)
    except ValueError as exc:
        fail(str(exc), EXIT_USAGE)
    finally:
        store.close()


def _schedule(job: JobRecord) -> str:
    spec = job.spec
    if spec.cron is not None:
        return f"cron {spec.cron} ({spec.timezone})"
    if spec.every is not None:
        return f"every {spec.every}"
    at = spec.at_instant()
    return f"at {when(at)}"


def _target(job: JobRecord) -> str:
    spec = job.spec
    if spec.session_key is not None:
        return spec.session_key
    return f"{spec.deliver_to} ({spec.session})"


def _print_jobs(jobs: list[JobRecord]) -> None:
    if not jobs:
        typer.echo("No jobs.")
        return
    table = Table(title_justify="left")
    for column in ("id", "schedule", "target", "next", "state"):
        table.add_column(column, overflow="fold")
    for job in jobs:
        table.add_row(
            escape(job.job_id),
            escape(_schedule(job)),
            escape(_target(job)),
            when(job.next_at()),
            "[yellow]paused[/]" if job.paused else "[green]active[/]",
        )
    console.print(table)


@app.command("add")
def add(
    job_id: JobId,
    prompt: Annotated[str, typer.Option("--prompt", help="The text of each run's turn.")],
    cron: Annotated[str | None, typer.Option("--cron", help="A 5-field cron expression.")] = None,
    timezone: Annotated[str, typer.Option("--tz", help="The IANA zone of --cron.")] = "UTC",
    every: Annotated[str | None, typer.Option("--every", help="An interval: 30m, 2h.")] = None,
    at: Annotated[str | None, typer.Option("--at", help="One time, ISO 8601.")] = None,
    session_key: Annotated[
        str | None, typer.Option("--session-key", help="Run in this existing session.")
    ] = None,
    deliver_to: Annotated[
        str | None, typer.Option("--deliver-to", help="<platform>:<chat_id> to run for.")
    ] = None,
    session: Annotated[
        str, typer.Option("--session", help="With --deliver-to: shared or isolated.")
    ] = "shared",
    chat_type: Annotated[
        str, typer.Option("--chat-type", help="With --deliver-to: dm, group, channel, thread.")
    ] = "dm",
    agent: Annotated[
        str | None, typer.Option("--agent", help="The agent that serves the target.")
    ] = None,
    catch_up: Annotated[
        str, typer.Option("--catch-up", help="Missed slots: latest, all or none.")
    ] = "latest",
    noop_token: Annotated[
        str | None, typer.Option("--noop-token", help="A reply that delivers nothing.")
    ] = None,
    paused: Annotated[bool, typer.Option("--paused", help="Add it paused.")] = False,
    home: HomeOption = None,
    config_file: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Add a job: one schedule (--cron, --every or --at) and one target (--session-key or
    --deliver-to)."""
    fields: dict[str, Any] = {
        "id": job_id,
        "prompt": prompt,
        "cron": cron,
        "timezone": timezone,
        "every": every,
        "at": at,
        "session_key": session_key,
        "deliver_to": deliver_to,
        "session": session,
        "chat_type": chat_type,
        "agent": agent,
        "catch_up": catch_up,
        "noop_token": noop_token,
        "paused": paused,
    }

    def action(jobs: JobStore, config: Any) -> JobRecord:
        spec = JobSpec.model_validate({k: v for k, v in fields.items() if v is not None})
        problem = config.job_problem(spec)
        if problem is not None:
            fail(problem, EXIT_USAGE)
        return jobs.add(spec)

    job: JobRecord = _with_jobs(home, config_file, action)
    if as_json:
        emit_json(job.to_dict())
        return
    typer.echo(f"added job {job.job_id}: {_schedule(job)}, next {when(job.next_at()) or '-'}")


@app.command("list")
def list_jobs(
    home: HomeOption = None, config_file: ConfigOption = None, as_json: JsonOption = False
) -> None:
    """Every job, with its schedule, target and next slot."""
    jobs: list[JobRecord] = _with_jobs(home, config_file, lambda j, _c: j.all())
    if as_json:
        emit_json({"jobs": [j.to_dict() for j in jobs]})
        return
    _print_jobs(jobs)


@app.command("show")
def show(
    job_id: JobId,
    home: HomeOption = None,
    config_file: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """One job, every field."""
    job: JobRecord = _with_jobs(home, config_file, lambda j, _c: j.get(job_id))
    data = job.to_dict()
    if as_json:
        emit_json(data)
        return
    table = Table(show_header=False, title=f"job {escape(job_id)}", title_justify="left")
    table.add_column("field")
    table.add_column("value", overflow="fold")
    for name, value in data.items():
        table.add_row(name, escape("" if value is None else str(value)))
    console.print(table)


def _set_paused(job_id: str, paused: bool, home: Any, config_file: Any, as_json: bool) -> None:
    job: JobRecord = _with_jobs(home, config_file, lambda j, _c: j.set_paused(job_id, paused))
    if as_json:
        emit_json(job.to_dict())
        return
    typer.echo(f"job {job_id} {'paused' if paused else 'resumed'}")


@app.command("pause")
def pause(
    job_id: JobId,
    home: HomeOption = None,
    config_file: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Stop claiming the job's slots (slots passed while paused are not caught up)."""
    _set_paused(job_id, True, home, config_file, as_json)


@app.command("resume")
def resume(
    job_id: JobId,
    home: HomeOption = None,
    config_file: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Claim the job's slots again, from its next one (after --catch-up)."""
    _set_paused(job_id, False, home, config_file, as_json)


@app.command("remove")
def remove(
    job_id: JobId,
    home: HomeOption = None,
    config_file: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Remove a job and its history."""
    _with_jobs(home, config_file, lambda j, _c: j.remove(job_id))
    if as_json:
        emit_json({"removed": job_id})
        return
    typer.echo(f"removed job {job_id}")


@app.command("run-now")
def run_now(
    job_id: JobId,
    home: HomeOption = None,
    config_file: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Claim one run of the job at this instant (also when paused); the gateway runs it."""
    run = _with_jobs(home, config_file, lambda j, _c: j.claim_now(job_id, owner="cli"))
    if as_json:
        emit_json(run.to_dict())
        return
    typer.echo(f"job {job_id}: run {run.run_id} claimed; the gateway runs it at its next tick")


@app.command("history")
def history(
    job_id: JobId,
    limit: Annotated[int, typer.Option("--limit", min=1, help="How many runs.")] = 20,
    home: HomeOption = None,
    config_file: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """The job's runs, the latest first: slot, state, turn, skipped slots, detail."""
    runs = _with_jobs(home, config_file, lambda j, _c: j.history(job_id, limit))
    if as_json:
        emit_json({"runs": [r.to_dict() for r in runs]})
        return
    if not runs:
        typer.echo(f"job {job_id} has not run yet.")
        return
    table = Table(title_justify="left")
    for column in ("run", "slot", "state", "turn", "skipped", "detail"):
        table.add_column(column, overflow="fold")
    for run in runs:
        table.add_row(
            str(run.run_id),
            when(run.slot_at),
            run.state,
            "" if run.turn_id is None else str(run.turn_id),
            str(run.skipped),
            escape(run.detail or ""),
        )
    console.print(table)
