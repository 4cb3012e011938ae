"""Replies growing in place: an adapter with the streaming methods gets start, edits no closer
than its `min_edit_interval` (on the runner's clock), and the final text; others get `send`."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest

from sessiongate import GatewayConfig, SessionStore
from sessiongate.adapters.local import RETRY_MARK, LocalAdapter
from sessiongate.adapters.loopback import LoopbackAdapter
from sessiongate.core.turn_events import StreamRetry, TextDelta, TurnEnd
from sessiongate.gateway import GatewayRunner
from sessiongate.gateway.adapter import StreamingAdapter

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from sessiongate.core.clock import FakeClock
    from sessiongate.core.source import SessionSource
    from sessiongate.gateway.agent import TurnRequest


class EditingAdapter(LoopbackAdapter):
    """A loopback platform that can edit its messages; records every call."""

    def __init__(self, *, min_edit_interval: float = 1.0) -> None:
        super().__init__()
        self.min_edit_interval = min_edit_interval
        self.calls: list[tuple[str, str]] = []
        self.fail_finish = False

    async def start_stream(self, source: SessionSource, text: str, *, turn_id: int) -> str:
        self.calls.append(("start", text))
        return f"m{turn_id}"

    async def edit_stream(self, source: SessionSource, handle: str, text: str) -> None:
        self.calls.append(("edit", text))

    async def finish_stream(
        self, source: SessionSource, handle: str, text: str, *, turn_id: int
    ) -> None:
        if self.fail_finish:
            raise ConnectionError("the platform refused the edit")
        self.calls.append(("finish", text))


class TickingAgent:
    """Streams `pieces` (text, or a `StreamRetry` that starts the text over), moving the fake
    clock `step` seconds before each one."""

    def __init__(self, clock: FakeClock, pieces: list[Any], step: float) -> None:
        self.clock = clock
        self.pieces = pieces
        self.step = step

    async def stream_turn(self, request: TurnRequest) -> AsyncIterator[Any]:
        text = ""
        for piece in self.pieces:
            self.clock.advance(self.step)
            if isinstance(piece, StreamRetry):
                text = ""
                yield piece
                continue
            text += piece
            yield TextDelta(piece)
        yield TurnEnd(text)

    async def run_turn(self, request: TurnRequest) -> Any:
        raise AssertionError("streamed")

    async def summarize(self, messages: list[dict[str, Any]]) -> str:
        return ""

    async def aclose(self) -> None:
        return None


@pytest.fixture
async def start(tmp_path, clock):
    made: list[tuple[GatewayRunner, SessionStore]] = []

    async def start(adapter: LoopbackAdapter, agent: TickingAgent) -> GatewayRunner:
        config = GatewayConfig()
        store = SessionStore(tmp_path / "home" / "sessions", config, clock=clock)
        runner = GatewayRunner(
            store,
            config,
            home=tmp_path / "home",
            clock=clock,
            agent_factory=lambda _key: agent,
            adapters=[adapter],
        )
        await runner.start()
        made.append((runner, store))
        return runner

    yield start
    for runner, store in made:
        await runner.stop()
        store.close()


def test_the_editing_adapter_is_a_streaming_adapter_and_the_plain_one_is_not():
    assert isinstance(EditingAdapter(), StreamingAdapter)
    assert not isinstance(LoopbackAdapter(), StreamingAdapter)


async def test_a_reply_grows_in_place_with_edits_no_closer_than_the_interval(start, clock):
    adapter = EditingAdapter(min_edit_interval=1.0)
    # Deltas 0.4 s apart: the message starts with the first, then is edited at most once a
    # second, and the final text always arrives with `finish`.
    agent = TickingAgent(clock, ["a", "b", "c", "d", "e", "f"], step=0.4)
    await start(adapter, agent)
    receipt = await adapter.receive("go")
    assert receipt.status == "replied"
    assert adapter.calls == [
        ("start", "a"),  # t=0.4
        ("edit", "abcd"),  # t=1.6, the first delta a second after the start
        ("finish", "abcdef"),  # t=2.4: too soon for an edit, but the end always shows
    ]
    assert adapter.texts() == []  # no second message: the streamed one is the reply


async def test_an_adapter_without_streaming_gets_the_final_text(start, clock):
    adapter = LoopbackAdapter()
    await start(adapter, TickingAgent(clock, ["x", "y"], step=5))
    await adapter.receive("go")
    assert adapter.texts() == ["xy"]


async def test_a_stream_that_cannot_be_finished_is_sent_whole(start, clock):
    adapter = EditingAdapter()
    adapter.fail_finish = True
    runner = await start(adapter, TickingAgent(clock, ["x", "y"], step=5))
    receipt = await adapter.receive("go")
    assert adapter.calls == [("start", "x"), ("edit", "xy")]
    assert adapter.texts() == ["xy"]
    assert runner.lane_store.get_turn(receipt.turn_id).state.value == "delivered"


BROKEN_THEN_RETRIED = [
    "The ans",
    "wer is",
    StreamRetry(attempt=2, reason="agent_unavailable"),
    "The answer",
    " is 42.",
]


async def test_a_retried_reply_restarts_the_edited_text_instead_of_appending(start, clock):
    adapter = EditingAdapter(min_edit_interval=1.0)
    await start(adapter, TickingAgent(clock, BROKEN_THEN_RETRIED, step=1.0))
    receipt = await adapter.receive("go")
    assert receipt.reply == "The answer is 42."
    # Each edit is the whole text of the attempt it belongs to: after the retry, the
    # abandoned text is replaced, never continued.
    assert adapter.calls == [
        ("start", "The ans"),
        ("edit", "The answer is"),
        ("edit", "The answer"),
        ("edit", "The answer is 42."),
        ("finish", "The answer is 42."),
    ]


async def test_a_terminal_marks_the_abandoned_text_and_prints_the_retry_on_its_own_line(
    start, clock
):
    printed: list[str] = []
    lines: asyncio.Queue[str | None] = asyncio.Queue()
    adapter = LocalAdapter(write=printed.append, read_line=lines.get, wait_for_replies=True)
    await start(adapter, TickingAgent(clock, BROKEN_THEN_RETRIED, step=1.0))
    lines.put_nowait("go")
    lines.put_nowait(None)
    async with asyncio.timeout(10):
        await adapter.run()
    mark = RETRY_MARK.format(attempt=2)
    assert "".join(printed) == f"agent> The answer is {mark}\nagent> The answer is 42.\n"


async def test_a_stream_starts_only_once_the_reply_has_taken_stream_after(start, clock):
    adapter = EditingAdapter(min_edit_interval=1.0)
    adapter.stream_after = 2.0  # type: ignore[attr-defined]
    await start(adapter, TickingAgent(clock, ["a", "b", "c", "d", "e", "f", "g"], step=0.4))
    await adapter.receive("go")
    assert adapter.calls == [
        ("start", "abcde"),  # t=2.0: the first delta past the hold
        ("finish", "abcdefg"),  # t=2.8: too soon for an edit
    ]


async def test_a_quick_reply_within_stream_after_is_one_message_without_edits(start, clock):
    adapter = EditingAdapter(min_edit_interval=1.0)
    adapter.stream_after = 2.0  # type: ignore[attr-defined]
    await start(adapter, TickingAgent(clock, ["x", "y", "z"], step=0.1))
    await adapter.receive("go")
    assert adapter.calls == []
    assert adapter.texts() == ["xyz"]
