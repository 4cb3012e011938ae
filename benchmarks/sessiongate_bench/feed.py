"""The live feed under load: turns per second with 0 and with 10 subscribers, in one run.

One in-process gateway (echo agent, default configuration) answers `turns` messages at a
time, round robin over `chats` chats, once with no subscriber and once with `subscribers`
readers of `GET /v1/events`' byte stream (`api.routes_events.event_stream`: every frame built
as the route sends it, minus the socket), for `rounds` rounds, the two phases of a round in
turn first; the slowdown is the median of the rounds' own ratios. After each loaded phase
the readers must reach the newest event with no `reset`: that is what keeping up means.
Printed as one JSON line by `python -m sessiongate_bench.gateway feed HOME CHATS TURNS
SUBSCRIBERS`.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    from sessiongate.core.config import FeedConfig
    from sessiongate.gateway.feed import Subscription

__all__ = ["SLOWDOWN_AIM", "measure_feed"]

# The goal: 10 subscribers slow turns by at most 10 %.
SLOWDOWN_AIM = 0.10
# Short phases, alternating: a drift of the machine's load falls on both sides alike.
_ROUNDS = 40
_ISOLATED_REPEATS = 5
_END = "bench.end"
_END_FRAME = f"\nevent: {_END}\n".encode()
# A hang guard for readers that never catch up; never a timing assertion.
_CATCH_UP_GUARD_S = 60.0


async def measure_feed(home: Path, chats: int, turns: int, subscribers: int) -> dict[str, Any]:
    from sessiongate import GatewayConfig, SessionSource, SessionStore
    from sessiongate.agents import build_agent_factory

    # Imported before the clock runs: the readers' first round must not pay for the API's
    # imports.
    from sessiongate.api import routes_events  # noqa: F401
    from sessiongate.core.platform import Platform
    from sessiongate.gateway import GatewayRunner, MessageEvent

    config = GatewayConfig()
    store = SessionStore(home / "sessions", config)
    runner = GatewayRunner(store, config, home=home, agent_factory=build_agent_factory(config))
    await runner.start()
    sent = 0

    async def drive(n: int) -> tuple[float, float]:
        """`n` turns; their rate by the wall clock and by this process's CPU time."""
        nonlocal sent
        started, cpu = time.perf_counter(), time.process_time()
        for _ in range(n):
            source = SessionSource(platform=Platform.API, chat_id=f"c{sent % chats}")
            receipt = await runner.handle_message(MessageEvent(source=source, text=f"hi {sent}"))
            sent += 1
            if receipt.status != "replied":
                raise RuntimeError(f"turn not replied: {receipt}")
        return n / (time.perf_counter() - started), n / (time.process_time() - cpu)

    bare: list[tuple[float, float]] = []
    loaded: list[tuple[float, float]] = []
    lag_at_end = 0
    delivered = 0

    async def subscribed(n: int) -> tuple[float, float]:
        """`drive(n)` with `subscribers` readers, which must then have every event."""
        nonlocal lag_at_end, delivered
        subs = [runner.feed.subscribe() for _ in range(subscribers)]
        counts = [0] * subscribers
        readers = [
            asyncio.create_task(_read(sub, counts, i, config.feed.batch_seconds))
            for i, sub in enumerate(subs)
        ]
        first = runner.feed.statistics().published + 1
        rates = await drive(n)
        head = runner.feed.statistics().published
        lag_at_end = max(lag_at_end, *(head - sub.cursor + 1 for sub in subs))
        # The readers stop at this marker: each has then read every event before it.
        runner.feed.publish(_END, {"session_key": None})
        async with asyncio.timeout(_CATCH_UP_GUARD_S):
            await asyncio.gather(*readers)
        for sub in subs:
            sub.close()
        if any(count < head - first + 1 for count in counts):
            raise RuntimeError(f"a reader missed events: {counts} of {head - first + 1}")
        delivered += sum(counts)
        return rates

    try:
        await drive(200)  # warm-up: imports, caches, statements
        per_round = max(1, turns // _ROUNDS)
        for round_ in range(_ROUNDS):
            # Bare first in even rounds, subscribed first in odd ones: a turn costs more as
            # its chat's transcript grows, and a fixed order would charge that to one side.
            if round_ % 2 == 0:
                bare.append(await drive(per_round))
            loaded.append(await subscribed(per_round))
            if round_ % 2 == 1:
                bare.append(await drive(per_round))
        stats = runner.feed.statistics()
        keys = [f"agent:main:api:dm:c{i}" for i in range(chats)]
        # The best of alternating repeats: a microbenchmark's noise only ever adds time.
        alone: list[float] = []
        delivered_to: list[float] = []
        for _ in range(_ISOLATED_REPEATS):
            alone.append(await _isolated_us(keys, 0, config.feed))
            delivered_to.append(await _isolated_us(keys, subscribers, config.feed))
        isolated = {
            "publish_us_per_turn": min(alone),
            "publish_and_deliver_us_per_turn": min(delivered_to),
        }
    finally:
        await runner.stop()
        store.close()
    base, with_subs = (statistics.median(x for x, _ in r) for r in (bare, loaded))
    base_cpu, with_subs_cpu = (statistics.median(c for _, c in r) for r in (bare, loaded))
    return {
        "subscribers": subscribers,
        "turns": per_round * _ROUNDS * 2,
        "rounds": _ROUNDS,
        "turns_per_s_0": round(base, 1),
        "turns_per_s_subscribed": round(with_subs, 1),
        # Each round's subscribed phase against the bare one beside it, the median of those
        # ratios: a turn's cost grows with its chat's transcript (several-fold over a run of
        # 20 chats) and the machine's load drifts, and both move a round's two phases alike,
        # while the medians of each side's rates shift with where the run's trend is steep.
        "slowdown": _paired_slowdown(bare, loaded, 0),
        "slowdown_of_medians": round(1 - with_subs / base, 4),
        # By CPU time: what the subscribers cost this process, whatever else runs on the
        # machine (wall-clock rates swing with other processes' load).
        "cpu_turns_per_s_0": round(base_cpu, 1),
        "cpu_turns_per_s_subscribed": round(with_subs_cpu, 1),
        "cpu_slowdown": _paired_slowdown(bare, loaded, 1),
        "aim": SLOWDOWN_AIM,
        # The feed alone on a turn's six changes, best of repeats: a bound for the A/B above
        # that the machine's noise does not move (the readers there are not batched).
        "isolated": isolated,
        "events_per_turn": round(stats.published / sent, 2),
        "events_delivered": delivered,
        "max_lag_events": lag_at_end,
        "resets": stats.resets,
        "rounds_0": [round(x, 1) for x, _ in bare],
        "rounds_subscribed": [round(x, 1) for x, _ in loaded],
    }


def _paired_slowdown(
    bare: list[tuple[float, float]], loaded: list[tuple[float, float]], index: int
) -> float:
    ratios = (1 - s[index] / b[index] for s, b in zip(loaded, bare, strict=True))
    return round(statistics.median(ratios), 4)


async def _read(sub: Subscription, counts: list[int], index: int, batch: float) -> None:
    from sessiongate.api.routes_events import event_stream

    async for chunk in event_stream(sub, keepalive=3600.0, batch=batch):
        counts[index] += chunk.count(b"\nevent: ")
        if _END_FRAME in chunk:
            counts[index] -= 1
            return


async def _isolated_us(keys: list[str], subscribers: int, config: FeedConfig) -> float:
    """CPU microseconds per turn the feed itself costs: a turn's changes (as the store tells
    them, in its two commits) published 10,000 times or more, with `subscribers` readers
    streaming them."""
    from sessiongate.core.clock import SystemClock
    from sessiongate.gateway.feed import EventFeed
    from sessiongate.store.changes import Change, ChangeKind

    feed = EventFeed(config, clock=SystemClock())
    subs = [feed.subscribe() for _ in range(subscribers)]
    counts = [0] * subscribers
    readers = [
        # No pause between writes: the turns here take microseconds, not a millisecond, and
        # a reader woken at every yield is the most it can cost.
        asyncio.create_task(_read(sub, counts, i, 0.0))
        for i, sub in enumerate(subs)
    ]
    turns = max(len(keys) * 5, 10_000)
    started = time.process_time()
    for turn in range(turns):
        key, sid = keys[turn % len(keys)], "20260101_000000_0123abcd"
        feed.publish_changes(
            [
                Change(ChangeKind.SESSION_UPDATED, key, sid),
                Change(ChangeKind.TURN_STARTED, key, sid, turn_id=turn),
            ]
        )
        feed.publish_changes(
            [
                Change(
                    ChangeKind.TRANSCRIPT_APPENDED,
                    key,
                    sid,
                    entry_id=2 * turn,
                    entry_type="message",
                ),
                Change(
                    ChangeKind.TRANSCRIPT_APPENDED,
                    key,
                    sid,
                    entry_id=2 * turn + 1,
                    entry_type="message",
                ),
                Change(ChangeKind.SESSION_UPDATED, key, sid),
                Change(ChangeKind.TURN_FINISHED, key, sid, turn_id=turn, status="replied"),
            ]
        )
        if turn % 64 == 0:
            await asyncio.sleep(0)  # the readers run between turns, as they do in a gateway
    feed.publish(_END, {"session_key": None})
    async with asyncio.timeout(_CATCH_UP_GUARD_S):
        await asyncio.gather(*readers)
    return round((time.process_time() - started) / turns * 1e6, 2)
