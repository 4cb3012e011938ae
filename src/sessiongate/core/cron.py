"""Five-field cron expressions, evaluated in an IANA time zone (pure; no I/O).

`CronExpr.parse("*/15 9-17 * * mon-fri")` accepts the classic fields (minute, hour, day of
month, month, day of week) with `*`, numbers, names (`jan`..`dec`, `sun`..`sat`, 7 is Sunday
too), ranges `a-b`, steps `*/n`, `a-b/n` and `a/n`, and lists `a,b`; plus the macros
`@yearly`/`@annually`, `@monthly`, `@weekly`, `@daily`/`@midnight` and `@hourly`. When both
day of month and day of week are restricted a day matches either (as cron does).

`next_after(after, tz)` is the first firing strictly after the instant `after`. Wall times
are those of `tz`, DST-correct:
- a wall time skipped by a spring-forward gap fires when the gap ends (02:30 on a day
  without 02:30 fires at 03:00 local), never not at all; several times of one gap fire once;
- a wall time repeated by a fall-back fires once, at its first occurrence.

So wall times map to instants without ever going back, and the first matching wall time
whose instant is past `after` is the answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

__all__ = ["CronError", "CronExpr"]

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
# (name, low, high, names whose index is their value offset by `low`)
_FIELDS: tuple[tuple[str, int, int, tuple[str, ...]], ...] = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day of month", 1, 31, ()),
    ("month", 1, 12, _MONTHS),
    ("day of week", 0, 7, _DAYS),
)
# A search longer than this finds nothing more: every valid expression fires within four
# years (29 February on a given weekday can take up to 28, which is refused at parse below).
_HORIZON_DAYS = 366 * 4 + 1


class CronError(ValueError):
    """An expression that is not valid cron; the message names the field and the reason."""


def _number(text: str, name: str, low: int, high: int, names: tuple[str, ...]) -> int:
    lowered = text.lower()
    if names and lowered in names:
        return names.index(lowered) + (1 if name == "month" else 0)
    if not text.isdigit():
        raise CronError(f"{name}: {text!r} is not a number" + (" or a name" if names else ""))
    value = int(text)
    if not low <= value <= high:
        raise CronError(f"{name}: {value} is outside {low}-{high}")
    return value


def _field(text: str, name: str, low: int, high: int, names: tuple[str, ...]) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        if not part:
            raise CronError(f"{name}: an empty list item in {text!r}")
        span, _, step_text = part.partition("/")
        step = 1
        if step_text or part.endswith("/"):
            if not step_text.isdigit() or int(step_text) == 0:
                raise CronError(f"{name}: the step in {part!r} must be a positive number")
            step = int(step_text)
        if span == "*":
            first, last = low, high
        elif "-" in span:
            a, _, b = span.partition("-")
            first = _number(a, name, low, high, names)
            last = _number(b, name, low, high, names)
            if first > last:
                raise CronError(f"{name}: the range {span!r} runs backwards")
        else:
            first = _number(span, name, low, high, names)
            last = high if step_text else first
        values.update(range(first, last + 1, step))
    return frozenset(values)


@dataclass(frozen=True, slots=True)
class CronExpr:
    """A parsed expression: the allowed values of each field (day of week 0-6, Sunday 0)."""

    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    days_restricted: bool
    weekdays_restricted: bool

    @classmethod
    def parse(cls, text: str) -> CronExpr:
        if not isinstance(text, str):
            raise CronError("a cron expression must be text")
        source = text.strip()
        expanded = _MACROS.get(source.lower(), source)
        if expanded.startswith("@"):
            raise CronError(f"unknown macro {source!r} (known: {', '.join(sorted(_MACROS))})")
        parts = expanded.split()
        if len(parts) != 5:
            raise CronError(
                f"{source!r} has {len(parts)} fields; cron needs 5 "
                "(minute hour day-of-month month day-of-week)"
            )
        fields = [
            _field(part, name, low, high, names)
            for part, (name, low, high, names) in zip(parts, _FIELDS, strict=True)
        ]
        weekdays = frozenset(0 if d == 7 else d for d in fields[4])
        expr = cls(
            text=source,
            minutes=fields[0],
            hours=fields[1],
            days=fields[2],
            months=fields[3],
            weekdays=weekdays,
            days_restricted=parts[2] != "*",
            weekdays_restricted=parts[4] != "*",
        )
        if not expr.weekdays_restricted and not any(
            day <= _longest_month(month) for month in expr.months for day in expr.days
        ):
            raise CronError(f"{source!r} names a day that no chosen month has")
        return expr

    def matches_day(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        in_days = day.day in self.days
        in_weekdays = (day.isoweekday() % 7) in self.weekdays
        if self.days_restricted and self.weekdays_restricted:
            return in_days or in_weekdays
        return in_days and in_weekdays

    def wall_times_from(self, start: datetime) -> datetime | None:
        """The first naive wall time at or after naive `start` (to the minute) that matches."""
        moment = start.replace(second=0, microsecond=0)
        if moment < start:
            moment += timedelta(minutes=1)
        day = moment.date()
        hour, minute = moment.hour, moment.minute
        for _ in range(_HORIZON_DAYS):
            if self.matches_day(day):
                for h in sorted(x for x in self.hours if x >= hour):
                    first = minute if h == hour else 0
                    found = [m for m in self.minutes if m >= first]
                    if found:
                        return datetime(day.year, day.month, day.day, h, min(found))  # noqa: DTZ001  # a wall time
            day += timedelta(days=1)
            hour = minute = 0
        return None

    def next_after(self, after: datetime, tz: ZoneInfo) -> datetime | None:
        """The first firing strictly after aware `after`, as aware UTC; None if it never fires
        again within four years (29 February on a weekday, say, is still found)."""
        after_utc = after.astimezone(UTC)
        local = after_utc.astimezone(tz)
        wall = local.replace(tzinfo=None)
        if (after_utc - _NEAR).astimezone(tz).utcoffset() != (after_utc + _NEAR).astimezone(
            tz
        ).utcoffset():
            # Near a change of offset: start before `after`'s own wall time, to cover a
            # repeated hour and the times of a gap (which fire at its end).
            wall -= _NEAR
        while True:
            found = self.wall_times_from(wall)
            if found is None:
                return None
            instant = _instant(found, tz)
            if instant > after_utc:
                return instant
            wall = found + timedelta(minutes=1)


# Longer than any change of a zone's UTC offset.
_NEAR = timedelta(hours=3)
_MINUTE = timedelta(minutes=1)


def _instant(wall: datetime, tz: ZoneInfo) -> datetime:
    """The instant of a naive wall time: its first occurrence, or for a time inside a gap the
    gap's end."""
    instant = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
    if instant.astimezone(tz).replace(tzinfo=None) == wall:
        return instant
    # In a gap: `fold=0` read it with the offset before the gap, past the gap's end; step back
    # to the first instant after the jump (gaps are whole minutes, at most a few hours).
    while (instant - _MINUTE).astimezone(tz).replace(tzinfo=None) > wall:
        instant -= _MINUTE
    return instant


def _longest_month(month: int) -> int:
    return 29 if month == 2 else 30 if month in (4, 6, 9, 11) else 31
