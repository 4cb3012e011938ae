"""Outbound webhooks against a real HTTP receiver on loopback that is slow, failing, then
back: every event arrives, signed, in order per session, and a restart mid-way loses none.

Time is the fake clock's: a retry comes due when the test moves the clock and wakes the
sender; the test waits on what the receiver got, never on a sleep."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import pytest

from sessiongate.gateway.webhooks import EVENT_ID_HEADER, SIGNATURE_HEADER

if TYPE_CHECKING:
    from collections.abc import Iterator

SECRET = "webhook-secret-0123456789"
EVENTS = ["session.created", "turn.finished", "delivery.failed"]
GUARD_SECONDS = 20.0  # a hang guard, never a timing assertion


class Receiver:
    """A webhook receiver: holds requests while `hold` is clear, answers 500 to the next
    `fail` requests, records (headers, body) of the ones it accepts."""

    def __init__(self) -> None:
        self.hold = threading.Event()
        self.hold.set()
        self.fail = 0
        self.held = threading.Event()  # a request is waiting on `hold`
        self.accepted: list[tuple[dict[str, str], bytes]] = []
        self.refused = 0
        self._changed = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # the stdlib's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if not receiver.hold.is_set():
                    receiver.held.set()
                    receiver.hold.wait(GUARD_SECONDS)
                with receiver._changed:
                    if receiver.fail > 0:
                        receiver.fail -= 1
                        receiver.refused += 1
                        code = 500
                    else:
                        receiver.accepted.append((dict(self.headers), body))
                        code = 200
                    receiver._changed.notify_all()
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/events"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def wait_for(self, *, accepted: int = 0, refused: int = 0) -> bool:
        with self._changed:
            return self._changed.wait_for(
                lambda: len(self.accepted) >= accepted and self.refused >= refused,
                GUARD_SECONDS,
            )

    async def until(self, **counts: int) -> None:
        assert await asyncio.to_thread(self.wait_for, **counts), (counts, self.refused)

    def close(self) -> None:
        self.hold.set()
        self.server.shutdown()
        self.server.server_close()

    def events(self) -> list[dict[str, Any]]:
        """The accepted events, each checked against its signature and headers."""
        out = []
        for headers, body in self.accepted:
            expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
            assert hmac.compare_digest(headers[SIGNATURE_HEADER], expected)
            event = json.loads(body)
            assert headers[EVENT_ID_HEADER] == event["id"]
            out.append(event)
        return out


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver()
    yield made
    made.close()


def _config(receiver: Receiver) -> dict[str, Any]:
    return {"webhooks": {"outbound": [{"url": receiver.url, "events": EVENTS, "secret": SECRET}]}}


def _in_order_per_session(events: list[dict[str, Any]], outbox_ids: list[str]) -> None:
    """Each session's events arrive in the order they were written."""
    position = {event_id: n for n, event_id in enumerate(outbox_ids)}
    sessions: dict[str | None, list[int]] = {}
    for event in events:
        sessions.setdefault(event["data"]["session_key"], []).append(position[event["id"]])
    for key, seen in sessions.items():
        assert seen == sorted(seen), key


async def _settled(gw) -> None:
    """Until the sender has recorded the receiver's answers (it may still be reading the
    last one when the receiver has it): waited for on its progress, under a hang guard."""
    sender = gw.runner.webhooks
    async with asyncio.timeout(GUARD_SECONDS):
        while True:
            sender.progress.clear()
            if {e.status for e in gw.runner.outbox.find(limit=1000)} == {"sent"}:
                return
            await sender.progress.wait()


async def _retry_until_all_arrived(gw, clock, receiver: Receiver, total: int) -> None:
    """Move the clock past each back-off and wake the sender until `total` arrived."""
    for _ in range(50):
        if len(receiver.accepted) >= total:
            return
        clock.advance(gw.config.webhooks.retry_backoff_max_seconds)
        gw.runner.webhooks.wake()
        await asyncio.to_thread(receiver.wait_for, accepted=len(receiver.accepted) + 1)
    raise AssertionError(f"{len(receiver.accepted)} of {total} events arrived")


async def test_a_slow_then_failing_receiver_gets_every_event_signed_and_in_order(
    make_gateway, clock, receiver
) -> None:
    gw = await make_gateway(**_config(receiver))
    receiver.hold.clear()  # slow: the first POST hangs until released
    first = await gw.adapter.receive("one", chat_id="a")
    assert await asyncio.to_thread(receiver.held.wait, GUARD_SECONDS)
    # The receiver holds a POST; turns go on at full speed regardless.
    second = await gw.adapter.receive("two", chat_id="b")
    gw.adapter.fail_sends = 1
    third = await gw.adapter.receive("three", chat_id="a")
    assert [r.status for r in (first, second, third)] == ["replied"] * 3
    written = [e.event_id for e in reversed(gw.runner.outbox.find(limit=1000))]
    kinds = [e.event for e in reversed(gw.runner.outbox.find(limit=1000))]
    assert kinds.count("session.created") == 2
    assert kinds.count("turn.finished") == 3
    assert kinds.count("delivery.failed") == 1
    receiver.fail = 2  # then failing: the held POST (session a) and session b's first
    receiver.hold.set()
    await receiver.until(refused=2)
    # Each session waits for its refused event: nothing of theirs went ahead of it.
    assert receiver.accepted == []
    await _retry_until_all_arrived(gw, clock, receiver, len(written))
    events = receiver.events()
    assert sorted(e["id"] for e in events) == sorted(written)  # every one, none twice
    _in_order_per_session(events, written)
    failed = next(e for e in events if e["type"] == "delivery.failed")
    assert failed["data"]["status"] == "failed"
    assert failed["data"]["turn_id"] == third.turn_id
    await _settled(gw)


async def test_events_left_at_a_stop_are_sent_by_the_next_start(
    make_gateway, clock, receiver
) -> None:
    receiver.fail = 1_000  # down while the first gateway runs
    gw = await make_gateway(**_config(receiver))
    await gw.adapter.receive("one", chat_id="a")
    await gw.adapter.receive("two", chat_id="a")
    await receiver.until(refused=1)
    written = [e.event_id for e in reversed(gw.runner.outbox.find(limit=1000))]
    assert len(written) == 3
    await gw.runner.stop()
    gw.store.close()
    receiver.fail = 0
    again = await make_gateway(home=gw.home, **_config(receiver))
    await _retry_until_all_arrived(again, clock, receiver, len(written))
    events = receiver.events()
    assert [e["id"] for e in events] == written  # one session: exactly the written order
    assert [e["type"] for e in events] == ["session.created", "turn.finished", "turn.finished"]


async def test_an_event_refused_past_its_tries_is_dead_and_holds_nothing_back(
    make_gateway, clock, receiver
) -> None:
    config = _config(receiver)
    config["webhooks"]["max_attempts"] = 1
    receiver.fail = 1
    gw = await make_gateway(**config)
    await gw.adapter.receive("one", chat_id="a")
    await receiver.until(refused=1, accepted=1)
    dead = gw.runner.outbox.find(["dead"])
    assert [(e.event, e.reason) for e in dead] == [("session.created", "HTTP 500")]
    await _retry_until_all_arrived(gw, clock, receiver, 1)
    assert [e["type"] for e in receiver.events()] == ["turn.finished"]
    assert gw.runner.outbox.reopen(dead[0].id)
    gw.runner.webhooks.wake()
    await receiver.until(accepted=2)
    assert receiver.events()[1]["id"] == dead[0].event_id


async def test_on_a_shared_database_the_leader_sends_and_a_stop_ends_it(
    make_gateway, clock, receiver, pg_schema
) -> None:
    config = _config(receiver)
    gw = await make_gateway(store={"url": str(pg_schema.url)}, **config)
    await gw.adapter.receive("one", chat_id="a")
    await receiver.until(accepted=2)
    assert [e["type"] for e in receiver.events()] == ["session.created", "turn.finished"]
    async with asyncio.timeout(GUARD_SECONDS):  # a hang guard: the lead is given up
        await gw.runner.stop()
