"""The `local` terminal adapter with injected input and output."""

from __future__ import annotations

import asyncio
import io
import sys
from typing import Any

from sessiongate import GatewayConfig, SessionStore
from sessiongate.adapters.local import CUT_OFF_MARK, LocalAdapter, StdinLines
from sessiongate.agents import build_agent_factory
from sessiongate.agents.echo import split_deltas
from sessiongate.core.turn_events import TextDelta, TurnEnd
from sessiongate.gateway import GatewayRunner


def _lines(*lines: str | None):
    queue = list(lines)

    async def read() -> str | None:
        return queue.pop(0) if queue else None

    return read


async def _chat(tmp_path, clock, adapter: LocalAdapter, **config) -> GatewayRunner:
    cfg = GatewayConfig(**config)
    store = SessionStore(tmp_path / "sessions", cfg, clock=clock)
    runner = GatewayRunner(
        store,
        cfg,
        home=tmp_path,
        clock=clock,
        adapters=[adapter],
        agent_factory=build_agent_factory(cfg),
    )
    await runner.start()
    return runner


async def test_lines_become_messages_and_replies_are_printed(tmp_path, clock):
    out: list[str] = []
    adapter = LocalAdapter(
        user_id="me",
        read_line=_lines("hello", "   ", "/status", "/exit", "unread"),
        write=out.append,
        prompt="you> ",
    )
    runner = await _chat(tmp_path, clock, adapter)
    try:
        assert await adapter.run() == 2
        text = "".join(out)
        assert "agent> echo: hello\n" in text
        assert "agent> Session: " in text
        assert "unread" not in text
        assert text.startswith("you> ")
        entry = runner.store.get_session("agent:main:local:dm:me")
        contents = [m["content"] for m in runner.store.load_transcript(entry.session_id)]
        assert contents == ["hello", "echo: hello"]
    finally:
        await runner.stop()
        runner.store.close()


async def test_typing_while_the_agent_works_interrupts_it(tmp_path, clock):
    out: list[str] = []
    adapter = LocalAdapter(user_id="me", read_line=_lines("one", "two"), write=out.append)
    runner = await _chat(tmp_path, clock, adapter)
    try:
        await adapter.run()  # returns once the replies in flight have arrived
        # `two` arrived while `one` was running: in the default `interrupt` mode it took over,
        # and the cut-off turn is told rather than left to vanish.
        assert sorted("".join(out).splitlines()) == [
            '(the reply to "one" was cut off by "two")',
            "agent> echo: two",
        ]
        entry = runner.store.get_session("agent:main:local:dm:me")
        contents = [m["content"] for m in runner.store.load_transcript(entry.session_id)]
        assert contents == ["one", "two", "echo: two"]
    finally:
        await runner.stop()
        runner.store.close()


async def test_an_unauthorised_local_user_is_told(tmp_path, clock):
    out: list[str] = []
    adapter = LocalAdapter(user_id="eve", read_line=_lines("hi"), write=out.append)
    runner = await _chat(tmp_path, clock, adapter, platforms={"local": {"allow_from": ["me"]}})
    try:
        await adapter.run()
        assert out == ["(unauthorized)\n"]
    finally:
        await runner.stop()
        runner.store.close()


async def test_stdin_lines_reads_standard_input(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("first\nsecond\n"))
    read = StdinLines()
    assert [await read(), await read(), await read()] == ["first", "second", None]


async def test_waiting_for_replies_keeps_a_script_in_order(tmp_path, clock):
    out: list[str] = []
    script = _lines("hello", "/new", "again")
    adapter = LocalAdapter(read_line=script, write=out.append, wait_for_replies=True)
    runner = await _chat(tmp_path, clock, adapter)
    try:
        await adapter.run()
        assert "".join(out).splitlines(keepends=True) == [
            "agent> echo: hello\n",
            "agent> Started a new session.\n",
            "agent> echo: again\n",
        ]
    finally:
        await runner.stop()
        runner.store.close()


async def test_a_streamed_reply_is_printed_piece_by_piece_as_it_arrives(tmp_path, clock):
    out: list[str] = []
    adapter = LocalAdapter(user_id="me", read_line=_lines("hello there"), write=out.append)
    runner = await _chat(tmp_path, clock, adapter)
    try:
        await adapter.run()
        # The echo agent streams its reply in 8 pieces: each is printed when it arrives.
        pieces = split_deltas("echo: hello there")
        assert len(pieces) == 8
        assert out == [f"agent> {pieces[0]}", *pieces[1:], "\n"]
    finally:
        await runner.stop()
        runner.store.close()


class _HeldStream:
    """Streams "par", then holds the turn until it is cut off (no timing involved)."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.calls = 0

    async def stream_turn(self, request: Any) -> Any:
        self.calls += 1
        if self.calls == 1:
            yield TextDelta("par")
            self.started.set()
            await asyncio.Event().wait()  # until cancelled by the newer line
        yield TurnEnd("second answer")

    async def run_turn(self, request: Any) -> Any:
        raise AssertionError("streamed")

    async def summarize(self, messages: list[dict[str, Any]]) -> str:
        return ""

    async def aclose(self) -> None:
        return None


async def test_a_streamed_reply_cut_off_by_a_newer_line_is_closed_and_told(tmp_path, clock):
    out: list[str] = []
    lines: asyncio.Queue[str | None] = asyncio.Queue()
    agent = _HeldStream()
    adapter = LocalAdapter(user_id="me", read_line=lines.get, write=out.append)
    cfg = GatewayConfig()
    store = SessionStore(tmp_path / "sessions", cfg, clock=clock)
    runner = GatewayRunner(
        store, cfg, home=tmp_path, clock=clock, adapters=[adapter], agent_factory=lambda k: agent
    )
    await runner.start()
    try:
        lines.put_nowait("first")
        chat = asyncio.create_task(adapter.run())
        async with asyncio.timeout(10):
            await agent.started.wait()
            lines.put_nowait("second")
            lines.put_nowait(None)
            await chat
        text = "".join(out)
        assert f"agent> par {CUT_OFF_MARK}\n" in text
        assert '(the reply to "first" was cut off by "second")\n' in text
        assert "agent> second answer\n" in text
    finally:
        await runner.stop()
        store.close()
