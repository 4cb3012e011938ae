"""The loopback adapter: records sends, can hold or refuse them, and feeds the runner."""

from __future__ import annotations

import asyncio

import pytest

from sessiongate import GatewayConfig, SessionStore
from sessiongate.adapters.loopback import LoopbackAdapter, SentMessage
from sessiongate.agents import build_agent_factory
from sessiongate.gateway import GatewayRunner


async def test_send_records_in_order():
    adapter = LoopbackAdapter("slack")
    one, two = adapter.source("c1"), adapter.source("c2")
    await adapter.send(one, "a", turn_id=1)
    await adapter.send(two, "b", turn_id=None)
    assert adapter.sent == [SentMessage(one, "a", 1), SentMessage(two, "b", None)]
    assert adapter.texts("c2") == ["b"]
    assert str(one.platform) == "slack"


async def test_held_and_refused_sends():
    adapter = LoopbackAdapter()
    adapter.hold_sends = asyncio.Event()
    pending = asyncio.ensure_future(adapter.send(adapter.source(), "x", turn_id=1))
    await asyncio.sleep(0)
    assert not pending.done()
    adapter.hold_sends.set()
    await pending
    adapter.fail_sends = 1
    with pytest.raises(ConnectionError):
        await adapter.send(adapter.source(), "y", turn_id=2)
    assert adapter.texts() == ["x"]
    assert adapter.send_attempts == 2


async def test_receive_needs_a_runner():
    with pytest.raises(RuntimeError, match="not been started"):
        await LoopbackAdapter().receive("hi")


async def test_the_runner_starts_and_stops_its_adapters(tmp_path, clock):
    config = GatewayConfig()
    adapter = LoopbackAdapter()
    with SessionStore(tmp_path / "sessions", config, clock=clock) as store:
        runner = GatewayRunner(
            store,
            config,
            home=tmp_path,
            clock=clock,
            adapters=[adapter],
            agent_factory=build_agent_factory(config),
        )
        await runner.start()
        assert adapter.started
        assert adapter.runner is runner
        receipt = await adapter.receive("hi", chat_id="c", user_name="Ann")
        assert receipt.reply == "echo: hi"  # the default agent
        await runner.stop()
        assert adapter.stopped


def test_two_adapters_for_one_platform_are_refused(tmp_path):
    config = GatewayConfig()
    with (
        SessionStore(tmp_path / "sessions", config) as store,
        pytest.raises(ValueError, match="two adapters"),
    ):
        GatewayRunner(
            store,
            config,
            home=tmp_path,
            adapters=[LoopbackAdapter(), LoopbackAdapter()],
            agent_factory=build_agent_factory(config),
        )
