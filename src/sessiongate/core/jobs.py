"""Scheduled jobs as data, and the rules of their slots (pure; no I/O).

A job (`JobSpec`) has one schedule: `cron` (five fields, evaluated in `timezone`), `every`
(`30m`, `2h`, `1d`; slots on a fixed grid from the job's creation) or `at` (one time). Its
target is an existing `session_key`, or `deliver_to: <platform>:<chat_id>` with `session:
shared` (the chat's own lane) or `isolated` (a lane of the job's own, a fresh session each
run). A slot is one scheduled instant of a job; `due_slots` says which missed slots a
scheduler runs under the job's `catch_up`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sessiongate.core.cron import CronError, CronExpr
from sessiongate.core.platform import Platform

__all__ = [
    "CATCH_UP_CAP",
    "JOB_ID",
    "ON_TIME_SECONDS",
    "DueSlots",
    "JobSpec",
    "due_slots",
    "next_slot",
    "parse_every",
]

JOB_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
# `catch_up: all` runs at most this many missed slots (the latest ones) unless the job says.
CATCH_UP_CAP = 10
# `catch_up: none` still runs a slot this late (a scheduler wakes a little after the slot).
ON_TIME_SECONDS = 60
_EVERY = re.compile(r"(\d+)\s*(s|m|h|d)")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}
_MIN_EVERY = 60


def parse_every(text: str) -> timedelta:
    """`30m`, `2h`, `1d`, `90s` (or a sum, `1h30m`) → the interval; at least one minute."""
    cleaned = str(text).strip().lower().replace(" ", "")
    pos, seconds = 0, 0
    for match in _EVERY.finditer(cleaned):
        if match.start() != pos:
            break
        seconds += int(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if not cleaned or pos != len(cleaned):
        raise ValueError(f"every: {text!r} is not an interval like 30m, 2h, 1d or 1h30m")
    if seconds < _MIN_EVERY:
        raise ValueError(f"every: {text!r} is shorter than one minute")
    return timedelta(seconds=seconds)


class JobSpec(BaseModel):
    """One scheduled job: a schedule, a target, an agent and a prompt."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    id: str = Field(description="The job's id: 1-64 of a-z, 0-9, '_' and '-'.")
    cron: str | None = Field(None, description="A five-field cron expression (or `@daily`...).")
    timezone: str = Field("UTC", description="The IANA time zone `cron` is read in.")
    every: str | None = Field(None, description="An interval: `30m`, `2h`, `1d`, `1h30m`.")
    at: datetime | None = Field(
        None, description="One time (ISO 8601; without an offset it is in `timezone`)."
    )
    session_key: str | None = Field(None, description="Run in this existing session's lane.")
    deliver_to: str | None = Field(
        None, description="Run for this chat, `<platform>:<chat_id>`, and deliver there."
    )
    chat_type: Literal["dm", "group", "channel", "thread"] = Field(
        "dm", description="With `deliver_to`: the kind of chat it names."
    )
    session: Literal["shared", "isolated"] = Field(
        "shared",
        description="With `deliver_to`: the chat's own lane (`shared`), or a lane of the job's "
        "own with a fresh session per run (`isolated`).",
    )
    agent: str | None = Field(
        None, description="The agent that must serve the target (checked; default: its own)."
    )
    prompt: str = Field(min_length=1, description="The text of each run's turn.")
    catch_up: Literal["latest", "all", "none"] = Field(
        "latest",
        description="Slots missed while the gateway was down: run the latest, all (up to "
        "`catch_up_cap`, the latest ones), or none.",
    )
    catch_up_cap: int = Field(CATCH_UP_CAP, ge=1, le=1000, description="The cap of `all`.")
    noop_token: str | None = Field(
        None,
        description="A reply equal to this (e.g. `HEARTBEAT_OK`) delivers nothing; the run is "
        "a heartbeat.",
    )
    paused: bool = Field(False, description="A paused job claims no slots.")

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not JOB_ID.fullmatch(value):
            raise ValueError(f"job id {value!r}: 1-64 of a-z, 0-9, '_' and '-'")
        return value

    @field_validator("timezone")
    @classmethod
    def _tz(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"timezone {value!r} is not an IANA time zone") from None
        return value

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                CronExpr.parse(value)
            except CronError as exc:
                raise ValueError(str(exc)) from None
        return value

    @field_validator("every")
    @classmethod
    def _every(cls, value: str | None) -> str | None:
        if value is not None:
            parse_every(value)
        return value

    @field_validator("deliver_to")
    @classmethod
    def _deliver_to(cls, value: str | None) -> str | None:
        if value is not None:
            platform, sep, chat = value.partition(":")
            if not sep or not platform or not chat:
                raise ValueError(f"deliver_to {value!r} must be <platform>:<chat_id>")
            try:
                Platform(platform)
            except ValueError:
                raise ValueError(f"deliver_to {value!r}: unknown platform {platform!r}") from None
        return value

    @model_validator(mode="after")
    def _one_schedule_one_target(self) -> JobSpec:
        given = [n for n in ("cron", "every", "at") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError(
                f"job {self.id!r} needs exactly one schedule of cron, every and at"
                + (f" (has {', '.join(given)})" if given else "")
            )
        targets = [n for n in ("session_key", "deliver_to") if getattr(self, n) is not None]
        if len(targets) != 1:
            raise ValueError(f"job {self.id!r} needs exactly one of session_key and deliver_to")
        if self.session == "isolated" and self.deliver_to is None:
            raise ValueError(f"job {self.id!r}: session: isolated needs deliver_to")
        return self

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def at_instant(self) -> datetime | None:
        if self.at is None:
            return None
        at = self.at if self.at.tzinfo is not None else self.at.replace(tzinfo=self.zone)
        return at.astimezone(UTC)

    def target(self) -> tuple[str, str] | None:
        """(platform, chat id) of `deliver_to`, or None."""
        if self.deliver_to is None:
            return None
        platform, _, chat = self.deliver_to.partition(":")
        return platform, chat


def next_slot(spec: JobSpec, after: datetime, *, anchor: datetime) -> datetime | None:
    """The job's first slot strictly after `after` (aware UTC), or None when it has no more.
    `anchor` is where an `every` grid starts (the job's creation)."""
    if spec.cron is not None:
        return CronExpr.parse(spec.cron).next_after(after, spec.zone)
    if spec.every is not None:
        step = parse_every(spec.every)
        if after < anchor:
            return anchor
        return anchor + step * ((after - anchor) // step + 1)
    at = spec.at_instant()
    return at if at is not None and at > after else None


@dataclass(frozen=True, slots=True)
class DueSlots:
    """What a scheduler does at `now`: run `run` (oldest first), pass over `skipped` slots,
    and move the job's cursor to `cursor` (the latest slot seen, run or not)."""

    run: tuple[datetime, ...]
    skipped: int
    cursor: datetime | None


def due_slots(
    spec: JobSpec, *, cursor: datetime, now: datetime, anchor: datetime, window: int = 2000
) -> DueSlots:
    """The slots in (`cursor`, `now`] and which of them run under `catch_up`.

    `latest`: the latest; `all`: the latest `catch_up_cap`; `none`: only one no later than
    `ON_TIME_SECONDS` ago. The cost is bounded whatever the downtime: an `every` grid is
    counted, not walked; a cron schedule with more than `window` missed slots is walked only
    over the last stretch as long as its first `window` slots took, and `skipped` then counts
    the slots walked (a lower bound)."""
    if spec.every is not None:
        return _due_every(spec, cursor=cursor, now=now, anchor=anchor)
    slots = _walk(spec, cursor, now, anchor, window)
    passed = 0
    if len(slots) == window and slots[-1] < now:
        # Too many to walk: walk only the last stretch of the same length, which holds the
        # latest slots (those `catch_up` may run).
        tail = _walk(spec, max(slots[-1], now - (slots[-1] - slots[0])), now, anchor, window)
        if tail:
            passed, slots = len(slots), tail
    return _choose(spec, slots, now, passed)


def _walk(
    spec: JobSpec, after: datetime, now: datetime, anchor: datetime, window: int
) -> list[datetime]:
    slots: list[datetime] = []
    at = after
    while len(slots) < window:
        found = next_slot(spec, at, anchor=anchor)
        if found is None or found > now:
            break
        slots.append(found)
        at = found
    return slots


def _due_every(spec: JobSpec, *, cursor: datetime, now: datetime, anchor: datetime) -> DueSlots:
    first = next_slot(spec, cursor, anchor=anchor)
    if first is None or first > now:
        return DueSlots((), 0, None)
    step = parse_every(spec.every or "")
    count = (now - first) // step + 1
    keep = min(count, spec.catch_up_cap if spec.catch_up == "all" else 1)
    last = first + step * (count - 1)
    slots = [last - step * n for n in reversed(range(keep))]
    return _choose(spec, slots, now, count - keep)


def _choose(spec: JobSpec, slots: list[datetime], now: datetime, passed: int) -> DueSlots:
    """Which of the latest `slots` run; `passed` more slots before them are passed over."""
    if not slots:
        return DueSlots((), passed, None)
    if spec.catch_up == "latest":
        run = slots[-1:]
    elif spec.catch_up == "all":
        run = slots[-spec.catch_up_cap :]
    else:
        late = now - slots[-1]
        run = slots[-1:] if late <= timedelta(seconds=ON_TIME_SECONDS) else []
    return DueSlots(tuple(run), passed + len(slots) - len(run), slots[-1])
