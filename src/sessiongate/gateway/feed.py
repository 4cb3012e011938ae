"""The live event feed: what changed in the gateway, for operators and dashboards.

Fed by the store's change listener (`store.changes`): every committed session, transcript,
turn and queue change becomes one event, in commit order. Events carry ids `<epoch>-<seq>`:
the epoch is drawn fresh each time a feed is made (each gateway start), so an id from before a
restart can never name a later event, and a client that reconnects with one is told `reset`.

One ring buffer holds the history and every subscriber is only a cursor into it, so publishing
costs the same with 0 or 100 subscribers, and nothing a subscriber does (a slow or stalled
reader) can slow a turn. The ring keeps the last `history_events` events, and events younger
than `history_seconds` beyond those, up to `max_events`; a subscriber that falls further
behind than `max_lag_events`, or whose cursor left the ring, gets `reset` and goes on from
the newest event.

Publishing may happen on any thread (the store commits where it is called); subscribers live
on one event loop and are woken there.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import secrets
import threading
from dataclasses import dataclass
from datetime import timedelta
from json.encoder import encode_basestring
from typing import TYPE_CHECKING, Any, cast

from sessiongate.store.changes import Change, ChangeKind

if TYPE_CHECKING:
    from datetime import datetime

    from sessiongate.core.clock import Clock
    from sessiongate.core.config import FeedConfig

__all__ = [
    "RESET",
    "EventFeed",
    "FeedEvent",
    "FeedStatistics",
    "Reset",
    "Subscription",
    "join_frames",
]

log = logging.getLogger(__name__)

RESET = "reset"
# The sequence part of an event id: ASCII digits only (`str.isdigit` also takes `²`, which
# `int` refuses), and no longer than any sequence this process can reach.
_SEQUENCE = re.compile(r"[0-9]{1,19}")
# One encoder for every frame: `json.dumps` with options builds a new one per call.
_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_SESSION_KINDS = frozenset(
    {
        ChangeKind.SESSION_CREATED,
        ChangeKind.SESSION_UPDATED,
        ChangeKind.SESSION_ARCHIVED,
        ChangeKind.SESSION_DELETED,
    }
)


class _Stamp:
    """When a commit's events happened; its ISO text is formatted once for all of them, and
    only when a subscriber sends one (a feed without subscribers never formats it)."""

    __slots__ = ("at", "text")

    def __init__(self, at: datetime) -> None:
        self.at = at
        self.text: str | None = None

    def iso(self) -> str:
        if self.text is None:
            self.text = self.at.isoformat()
        return self.text


class FeedEvent:
    """One event; its wire form is built once, by the first subscriber that sends it."""

    __slots__ = ("_frame", "_stamp", "data", "id", "seq", "session_key", "type")

    def __init__(
        self,
        seq: int,
        event_id: str,
        kind: str,
        at: datetime | _Stamp,
        data: dict[str, Any],
    ) -> None:
        self.seq = seq
        self.id = event_id
        self.type = kind
        self._stamp = at if isinstance(at, _Stamp) else _Stamp(at)
        self.data = data
        self.session_key: str | None = data.get("session_key")
        self._frame: bytes | None = None

    @property
    def at(self) -> datetime:
        return self._stamp.at

    def payload(self) -> dict[str, Any]:
        return {"id": self.id, "type": self.type, "at": self._stamp.iso(), **self.data}

    def frame(self) -> bytes:
        """The server-sent-events frame (`id`, `event`, one `data` line of JSON)."""
        if self._frame is None:
            # `payload()`'s JSON without building it: the id (`<hex>-<n>`) and the ISO time
            # need no escaping, and the type's fields are encoded as they are.
            fields = _encode(self.data)
            data = (
                f'{{"id":"{self.id}","type":{encode_basestring(self.type)},'
                f'"at":"{self._stamp.iso()}"{"," + fields[1:] if len(fields) > 2 else "}"}'
            )
            self._frame = f"id: {self.id}\nevent: {self.type}\ndata: {data}\n\n".encode()
        return self._frame


def join_frames(events: list[FeedEvent]) -> bytes:
    """The frames of `events` as one write. Every subscriber joins every event, so the frame
    a first subscriber built is taken as it is, without a method call per event and reader."""
    return b"".join([event._frame or event.frame() for event in events])


@dataclass(frozen=True, slots=True)
class Reset:
    """The subscriber must refetch: `reason` is `restarted` (an id of an earlier gateway
    start), `expired` (older than the history), `unknown` (not an id of this feed) or
    `lagging` (it fell too far behind). `last_id` is where it goes on from."""

    reason: str
    last_id: str

    def frame(self) -> bytes:
        data = json.dumps({"type": RESET, "reason": self.reason, "id": self.last_id})
        return f"id: {self.last_id}\nevent: {RESET}\ndata: {data}\n\n".encode()


@dataclass(frozen=True, slots=True)
class FeedStatistics:
    epoch: str
    published: int  # events since the feed was made
    retained: int  # events in the ring now
    subscribers: int
    resets: int  # reset events sent to subscribers


class Subscription:
    """One reader's cursor; `next_batch()` waits for events (or a `Reset`)."""

    def __init__(self, feed: EventFeed, cursor: int, session_key: str | None) -> None:
        self._feed = feed
        self.cursor = cursor  # the seq of the next event this reader wants
        self.session_key = session_key
        self.pending_reset: Reset | None = None
        self.wake = asyncio.Event()

    async def next_batch(self, *, limit: int = 500) -> list[FeedEvent] | Reset | None:
        """The next events (at most `limit`) or a `Reset`; waits while there are none.
        None once the feed is closed (the gateway stops)."""
        while True:
            got = self._feed.read(self, limit=limit)
            if got is None or isinstance(got, Reset) or got:
                return got
            self.wake.clear()
            got = self._feed.read(self, limit=limit)  # published between read and clear
            if got is None or isinstance(got, Reset) or got:
                return got
            await self.wake.wait()

    def close(self) -> None:
        self._feed.unsubscribe(self)


class EventFeed:
    def __init__(self, config: FeedConfig, *, clock: Clock, epoch: str | None = None) -> None:
        self._config = config
        self._clock = clock
        self.epoch = epoch or secrets.token_hex(6)
        self._max = config.max_events
        self._ring: list[FeedEvent | None] = [None] * self._max
        self._first = 1  # seq of the oldest retained event
        self._next = 1  # seq the next event gets
        self._lock = threading.Lock()
        self._subscribers: set[Subscription] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._resets = 0
        self._closed = False

    # ------------------------------------------------------------------ publishing

    def publish_changes(self, changes: list[Change]) -> None:
        """The store's change listener: one event per change of a committed transaction.
        A session's `updated` is left out when the same transaction created, archived or
        deleted it (that event says more), or already said it."""
        stronger = {
            c.session_key
            for c in changes
            if c.kind in _SESSION_KINDS and c.kind is not ChangeKind.SESSION_UPDATED
        }
        told: set[str | None] = set()
        events: list[tuple[str, dict[str, Any]]] = []
        for change in changes:
            if change.kind is ChangeKind.SESSION_UPDATED:
                if change.session_key in told or change.session_key in stronger:
                    continue
                told.add(change.session_key)
            events.append((str(change.kind), _data(change)))
        if events:
            self.publish_many(events)

    def publish(self, kind: str, data: dict[str, Any]) -> None:
        self.publish_many([(kind, data)])

    def publish_many(self, events: list[tuple[str, dict[str, Any]]]) -> None:
        now = self._clock.now()
        stamp = _Stamp(now)
        epoch = self.epoch
        with self._lock:
            for kind, data in events:
                seq = self._next
                self._next += 1
                if seq - self._first >= self._max:
                    self._drop_oldest()
                self._ring[seq % self._max] = FeedEvent(seq, f"{epoch}-{seq}", kind, stamp, data)
            self._expire(now)
        self._wake_all()

    def _drop_oldest(self) -> None:
        self._ring[self._first % self._max] = None
        self._first += 1

    def _expire(self, now: datetime) -> None:
        """Beyond the last `history_events`, keep only what is younger than `history_seconds`."""
        keep = self._config.history_events
        if self._next - self._first <= keep:
            return
        cutoff = now - timedelta(seconds=self._config.history_seconds)
        while self._next - self._first > keep:
            oldest = self._ring[self._first % self._max]
            if oldest is not None and oldest.at >= cutoff:
                return
            self._drop_oldest()

    def _wake_all(self) -> None:
        if not self._subscribers:
            return
        if threading.get_ident() == self._loop_thread:
            for sub in self._subscribers:
                sub.wake.set()
        elif self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._wake_all)

    # ------------------------------------------------------------------ reading

    def subscribe(
        self, *, last_event_id: str | None = None, session_key: str | None = None
    ) -> Subscription:
        """A cursor after `last_event_id` (replaying what was missed), or at the newest event
        when there is none; an id this feed cannot replay from gives a `Reset` first."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._loop, self._loop_thread = loop, threading.get_ident()
        with self._lock:
            head = self._next - 1
            sub = Subscription(self, head + 1, session_key)
            if last_event_id is not None:
                seq, reason = self._resume_point(last_event_id)
                if reason is None:
                    sub.cursor = seq + 1
                else:
                    sub.pending_reset = Reset(reason, self._id(head))
            self._subscribers.add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            self._subscribers.discard(sub)

    def _resume_point(self, last_event_id: str) -> tuple[int, str | None]:
        epoch, _, raw = last_event_id.strip().rpartition("-")
        if epoch != self.epoch:
            return 0, "restarted" if epoch else "unknown"
        if _SEQUENCE.fullmatch(raw) is None or int(raw) >= self._next:
            return 0, "unknown"
        seq = int(raw)
        if seq + 1 < self._first:
            return seq, "expired"
        return seq, None

    def read(self, sub: Subscription, *, limit: int) -> list[FeedEvent] | Reset | None:
        """The subscriber's next events from the ring (moving its cursor), a `Reset`, or None
        when the feed is closed."""
        with self._lock:
            if self._closed:
                return None
            if sub.pending_reset is not None:
                reset, sub.pending_reset = sub.pending_reset, None
                self._resets += 1
                return reset
            head = self._next - 1
            if sub.cursor < self._first or head - sub.cursor >= self._config.max_lag_events:
                reason = "lagging" if sub.cursor >= self._first else "expired"
                sub.cursor = head + 1
                self._resets += 1
                return Reset(reason, self._id(head))
            ring, size, key = self._ring, self._max, sub.session_key
            if key is None:
                # Every slot from `_first` to the head holds its event: slices, not a loop.
                end = min(head + 1, sub.cursor + limit)
                start, count = sub.cursor % size, end - sub.cursor
                sub.cursor = end
                if start + count <= size:
                    return cast("list[FeedEvent]", ring[start : start + count])
                return cast("list[FeedEvent]", ring[start:] + ring[: start + count - size])
            out: list[FeedEvent] = []
            seq = sub.cursor
            while seq <= head and len(out) < limit:
                event = ring[seq % size]
                seq += 1
                if event is not None and event.session_key == key:
                    out.append(event)
            sub.cursor = seq
            return out

    def close(self) -> None:
        """End every subscription (the gateway stops): their streams finish."""
        with self._lock:
            self._closed = True
        self._wake_all()

    def _id(self, seq: int) -> str:
        return f"{self.epoch}-{seq}"

    def statistics(self) -> FeedStatistics:
        with self._lock:
            return FeedStatistics(
                epoch=self.epoch,
                published=self._next - 1,
                retained=self._next - self._first,
                subscribers=len(self._subscribers),
                resets=self._resets,
            )


def _data(change: Change) -> dict[str, Any]:
    data: dict[str, Any] = {"session_key": change.session_key}
    if change.session_id is not None:
        data["session_id"] = change.session_id
    if change.entry_id is not None:
        data["entry_id"] = change.entry_id
        data["entry_type"] = change.entry_type
    if change.turn_id is not None:
        data["turn_id"] = change.turn_id
    if change.status is not None:
        data["status"] = change.status
    if change.depth is not None:
        data["depth"] = change.depth
    if change.approval_id is not None:
        data["approval_id"] = change.approval_id
        data["tool"] = change.tool
    if change.delivery_id is not None:
        data["delivery_id"] = change.delivery_id
    if change.reason is not None:
        data["reason"] = change.reason
    if change.by is not None:
        data["by"] = change.by
    return data
