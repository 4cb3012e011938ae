"""`sessiongate chat --url` against a real uvicorn server (`live_server.serving`) around a real
runner: the reply is printed as its deltas stream in, a retried model stream is printed once
after a marked abandoned line, the token is sent, and an unreachable gateway is one line."""

from __future__ import annotations

import asyncio
import socket
from typing import TYPE_CHECKING, Any

import pytest

from fake_openai import Broken, FakeOpenAI, Reply
from live_server import serving
from sessiongate import GatewayConfig
from sessiongate.adapters.local import RETRY_MARK
from sessiongate.agents import build_agent_factory
from sessiongate.api.app import create_app
from sessiongate.cli._chat_remote import RemoteChat
from sessiongate.cli.chat import REPLY_PREFIX, CtrlC
from sessiongate.core.turn_events import StreamRetry
from sessiongate.gateway import GatewayRunner
from sessiongate.testing.agents import GatedAgent

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable


TOKEN = "chat-remote-token"
# A hang guard, never a timing assertion.
GUARD_SECONDS = 30.0


class Screen:
    """What the chat printed, and a way to wait until some text is there."""

    def __init__(self) -> None:
        self.text = ""
        self._changed = asyncio.Event()
        self.remote: RemoteChat | None = None

    def write(self, text: str) -> None:
        self.text += text
        self._changed.set()

    async def wait_for(self, text: str) -> None:
        async with asyncio.timeout(GUARD_SECONDS):
            while text not in self.text:
                self._changed.clear()
                await self._changed.wait()


@pytest.fixture
async def gateway(tmp_path, clock, make_store) -> AsyncIterator[Callable[..., Any]]:
    """Starts a runner behind a real server and the chat against it: (its input lines, the
    screen it prints on, its task)."""
    stops: list[Any] = []

    async def start(scripted: Any = None, **fields: Any) -> tuple[Any, Screen, Any]:
        """`scripted` serves every key (default: the configured agents); `fields` are
        GatewayConfig fields; the API takes the token `TOKEN`."""
        config = GatewayConfig(api={"token": TOKEN}, **fields)
        store = make_store(config)
        factory = build_agent_factory(config) if scripted is None else (lambda _key: scripted)
        runner = GatewayRunner(
            store, config, home=tmp_path / "home", clock=clock, agent_factory=factory
        )
        await runner.start()
        server_cm = serving(create_app(runner, store, config))
        server = await server_cm.__aenter__()
        stops.append((server_cm, runner, store))
        host, port = server.bound
        lines: asyncio.Queue[str | None] = asyncio.Queue()
        screen = Screen()
        screen.remote = RemoteChat(
            f"http://{host}:{port}",
            TOKEN,
            {"chat_id": "remote", "user_id": "me", "user_name": "me"},
            lines.get,
            screen.write,
            prefix=REPLY_PREFIX,
        )
        chat = asyncio.create_task(screen.remote.run())
        return lines, screen, chat

    yield start
    for server_cm, runner, store in stops:
        await server_cm.__aexit__(None, None, None)
        await runner.stop()
        store.close()


async def test_the_reply_is_printed_as_its_deltas_arrive(gateway) -> None:
    agent = GatedAgent(["par", "tial", " reply"], reply="partial reply")
    gate = agent.gate(1)
    lines, screen, chat = await gateway(agent)
    lines.put_nowait("hello")
    # The first piece is on screen while the agent still holds the rest back.
    await screen.wait_for(f"{REPLY_PREFIX}par")
    assert "tial" not in screen.text
    gate.set()
    await screen.wait_for("\n")
    lines.put_nowait(None)
    async with asyncio.timeout(GUARD_SECONDS):
        await chat
    assert screen.text == f"{REPLY_PREFIX}partial reply\n"


async def test_a_retry_marks_the_abandoned_line_and_prints_the_new_attempt_once(gateway) -> None:
    retry = StreamRetry(attempt=2, reason="agent_unavailable")
    agent = GatedAgent(["Hel", "lo wor", retry, "Hel", "lo"], reply="Hello")
    gate = agent.gate(2)
    lines, screen, chat = await gateway(agent)
    lines.put_nowait("hi")
    await screen.wait_for("lo wor")
    gate.set()
    await screen.wait_for("Hello\n")
    lines.put_nowait("/quit")
    async with asyncio.timeout(GUARD_SECONDS):
        await chat
    mark = RETRY_MARK.format(attempt=2)
    assert screen.text == f"{REPLY_PREFIX}Hello wor {mark}\n{REPLY_PREFIX}Hello\n"


async def test_a_model_stream_broken_mid_way_prints_its_reply_once(gateway) -> None:
    with FakeOpenAI() as model:
        openai = {"base_url": model.base_url, "model": "m", "retry_backoff_seconds": 0}
        model.script(Broken(["The answer ", "is "]), Reply("The answer is 42."))
        lines, screen, chat = await gateway(agent={"openai": openai})
        lines.put_nowait("what is the answer?")
        await screen.wait_for("42.\n")
        lines.put_nowait(None)
        async with asyncio.timeout(GUARD_SECONDS):
            await chat
        assert len(model.requests) == 2
    *abandoned, last = screen.text.splitlines()
    assert last == f"{REPLY_PREFIX}The answer is 42."
    assert screen.text.count("The answer is 42.") == 1
    # The broken attempt's text, when it made it to the screen at all, is marked abandoned.
    assert all(line.endswith(RETRY_MARK.format(attempt=2)) for line in abandoned)


def test_an_unreachable_gateway_is_one_clean_line(sg, tmp_path) -> None:
    with socket.socket() as probe:  # a port nothing listens on: the connection is refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    result = sg("chat", "--home", str(tmp_path / "c"), "--url", url, input="hello\n")
    assert result.returncode == 1
    assert f"cannot reach the gateway at {url}" in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


async def test_ctrl_c_during_a_reply_stops_the_turn_and_a_second_leaves(gateway) -> None:
    agent = GatedAgent(["par", "tial"], reply="partial")
    agent.gate(1)  # never opened: the turn runs until it is stopped
    lines, screen, chat = await gateway(agent)
    remote = screen.remote
    assert remote is not None
    left = asyncio.Event()
    ctrl_c = CtrlC(
        busy=remote.busy,
        stop=remote.stop_turn,
        leave=left.set,
        line=lambda: remote.typed,
        write=screen.write,
    )
    lines.put_nowait("hello")
    await screen.wait_for(f"{REPLY_PREFIX}par")
    ctrl_c.pressed()
    await screen.wait_for(f"{REPLY_PREFIX}Stopped the current reply.")
    await screen.wait_for("(interrupted)")
    assert CtrlC.STOPPING in screen.text
    assert not left.is_set()
    ctrl_c.pressed()  # the prompt is back: this one leaves
    assert left.is_set()
    assert CtrlC.LEAVING in screen.text
    lines.put_nowait(None)
    async with asyncio.timeout(GUARD_SECONDS):
        await chat


async def test_a_second_ctrl_c_while_the_stop_is_on_its_way_leaves(gateway) -> None:
    agent = GatedAgent(["par", "tial"], reply="partial")
    agent.gate(1)
    lines, screen, chat = await gateway(agent)
    remote = screen.remote
    assert remote is not None
    left = asyncio.Event()
    ctrl_c = CtrlC(
        busy=remote.busy,
        stop=remote.stop_turn,
        leave=left.set,
        line=lambda: remote.typed,
        write=screen.write,
    )
    lines.put_nowait("hello")
    await screen.wait_for(f"{REPLY_PREFIX}par")
    ctrl_c.pressed()
    ctrl_c.pressed()  # quickly, for the same reply: leave
    assert left.is_set()
    await screen.wait_for("(interrupted)")
    lines.put_nowait(None)
    async with asyncio.timeout(GUARD_SECONDS):
        await chat
