"""The event feed: ids, replay, resets, retention and slow subscribers (`gateway/feed.py`)."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from sessiongate.core.config import FeedConfig
from sessiongate.gateway.feed import EventFeed, Reset
from sessiongate.store.changes import Change, ChangeKind


def make_feed(clock, **settings) -> EventFeed:
    return EventFeed(FeedConfig(**settings), clock=clock, epoch="e1")


def publish(feed: EventFeed, n: int, key: str = "k") -> None:
    for i in range(n):
        feed.publish("queue.changed", {"session_key": key, "depth": i})


async def test_ids_carry_the_epoch_and_a_rising_sequence(clock):
    feed = make_feed(clock)
    sub = feed.subscribe()
    publish(feed, 3)
    batch = await sub.next_batch()
    assert isinstance(batch, list)
    assert [e.id for e in batch] == ["e1-1", "e1-2", "e1-3"]
    assert batch[0].payload()["type"] == "queue.changed"
    assert batch[0].frame().startswith(b"id: e1-1\nevent: queue.changed\ndata: {")


async def test_two_feeds_never_share_an_epoch(clock):
    assert EventFeed(FeedConfig(), clock=clock).epoch != EventFeed(FeedConfig(), clock=clock).epoch


async def test_a_reconnect_resumes_after_its_last_id(clock):
    feed = make_feed(clock)
    publish(feed, 5)
    sub = feed.subscribe(last_event_id="e1-2")
    batch = await sub.next_batch()
    assert isinstance(batch, list)
    assert [e.seq for e in batch] == [3, 4, 5]


@pytest.mark.parametrize(
    ("last_id", "reason"),
    [
        ("e0-3", "restarted"),
        ("e1-99", "unknown"),
        ("garbage", "unknown"),
        ("e1-x", "unknown"),
        # `str.isdigit` takes these and `int` refuses them (or, for 5000 digits, refuses the
        # length): each must be the explicit reset, never an error.
        ("e1-\u00b2", "unknown"),
        ("e1-1\u00b2", "unknown"),
        ("e1-\u0663", "unknown"),
        ("e1-" + "9" * 5000, "unknown"),
        ("e1-+3", "unknown"),
        ("e1- 3", "unknown"),
        ("e1-3_0", "unknown"),
    ],
)
async def test_an_id_the_feed_cannot_resume_from_gives_reset(clock, last_id, reason):
    feed = make_feed(clock)
    publish(feed, 5)
    sub = feed.subscribe(last_event_id=last_id)
    got = await sub.next_batch()
    assert got == Reset(reason, "e1-5")
    publish(feed, 1)
    after = await sub.next_batch()
    assert isinstance(after, list)
    assert [e.seq for e in after] == [6]


async def test_an_id_older_than_the_history_gives_reset(clock):
    feed = make_feed(clock, history_events=10, history_seconds=0, max_events=10)
    publish(feed, 25)
    sub = feed.subscribe(last_event_id="e1-3")
    assert await sub.next_batch() == Reset("expired", "e1-25")
    ok = feed.subscribe(last_event_id="e1-15")
    batch = await ok.next_batch()
    assert isinstance(batch, list)
    assert [e.seq for e in batch] == list(range(16, 26))


async def test_events_younger_than_history_seconds_are_kept_beyond_history_events(clock):
    feed = make_feed(clock, history_events=10, history_seconds=60, max_events=1000)
    publish(feed, 50)
    assert feed.statistics().retained == 50
    clock.advance(61)
    publish(feed, 1)
    assert feed.statistics().retained == 10
    publish(feed, 2000)
    assert feed.statistics().retained == 1000  # max_events bounds the memory


async def test_a_subscriber_that_falls_behind_gets_reset_and_skips_ahead(clock):
    feed = make_feed(clock, max_lag_events=100)
    sub = feed.subscribe()
    publish(feed, 150)
    got = await sub.next_batch()
    assert got == Reset("lagging", "e1-150")
    publish(feed, 1)
    batch = await sub.next_batch()
    assert isinstance(batch, list)
    assert [e.seq for e in batch] == [151]
    assert feed.statistics().resets == 1


async def test_the_session_filter_skips_other_sessions(clock):
    feed = make_feed(clock)
    sub = feed.subscribe(session_key="b")
    publish(feed, 2, key="a")
    publish(feed, 1, key="b")
    batch = await sub.next_batch()
    assert isinstance(batch, list)
    assert [(e.session_key, e.seq) for e in batch] == [("b", 3)]


async def test_a_waiting_subscriber_wakes_on_publish_from_another_thread(clock):
    feed = make_feed(clock)
    sub = feed.subscribe()
    waiting = asyncio.create_task(sub.next_batch())
    await asyncio.sleep(0)
    thread = threading.Thread(target=publish, args=(feed, 1))
    thread.start()
    thread.join()
    batch = await asyncio.wait_for(waiting, 10)
    assert isinstance(batch, list)
    assert len(batch) == 1


async def test_closing_the_feed_ends_every_subscription(clock):
    feed = make_feed(clock)
    sub = feed.subscribe()
    waiting = asyncio.create_task(sub.next_batch())
    await asyncio.sleep(0)
    feed.close()
    assert await asyncio.wait_for(waiting, 10) is None


async def test_publishing_with_no_subscribers_costs_no_frames(clock):
    feed = make_feed(clock)
    publish(feed, 3)
    sub = feed.subscribe(last_event_id="e1-0")
    batch = await sub.next_batch()
    assert isinstance(batch, list)
    assert all(e._frame is None for e in batch)  # built only when sent


def test_an_update_is_left_out_beside_a_stronger_event_of_its_session(clock):
    feed = make_feed(clock)
    feed.publish_changes(
        [
            Change(ChangeKind.SESSION_CREATED, "a", "s1"),
            Change(ChangeKind.SESSION_UPDATED, "a", "s1"),
            Change(ChangeKind.SESSION_UPDATED, "b", "s2"),
            Change(ChangeKind.SESSION_UPDATED, "b", "s2"),
            Change(ChangeKind.TRANSCRIPT_APPENDED, "b", "s2", entry_id=7, entry_type="message"),
        ]
    )
    sub_events = [feed._ring[i] for i in range(1, feed.statistics().published + 1)]
    assert [(e.type, e.session_key) for e in sub_events if e is not None] == [
        ("session.created", "a"),
        ("session.updated", "b"),
        ("transcript.appended", "b"),
    ]
    appended = sub_events[-1]
    assert appended is not None
    assert appended.data == {
        "session_key": "b",
        "session_id": "s2",
        "entry_id": 7,
        "entry_type": "message",
    }


def test_feed_settings_are_checked():
    with pytest.raises(ValueError, match="max_events"):
        FeedConfig(history_events=100, max_events=10)


async def test_a_frame_is_its_payload_as_one_json_line(clock):
    feed = make_feed(clock)
    sub = feed.subscribe()
    feed.publish("queue.changed", {"session_key": 'k "é"\n', "depth": 3, "none": None})
    feed.publish("bench.end", {})
    batch = await sub.next_batch()
    assert isinstance(batch, list)
    assert len(batch) == 2
    for event in batch:
        head, data = event.frame().decode().removesuffix("\n\n").split("\ndata: ")
        assert head == f"id: {event.id}\nevent: {event.type}"
        assert json.loads(data) == event.payload()


async def test_a_reader_gets_every_event_in_order_across_the_ring_wrapping(clock):
    feed = make_feed(clock, max_events=7, history_events=7, max_lag_events=7)
    sub = feed.subscribe()
    seen: list[int] = []
    for round_ in range(5):
        publish(feed, 3 + round_ % 3)
        while (batch := feed.read(sub, limit=4)) != []:
            assert isinstance(batch, list)
            seen.extend(event.seq for event in batch)
    assert seen == list(range(1, len(seen) + 1))
    assert len(seen) == 3 + 4 + 5 + 3 + 4
