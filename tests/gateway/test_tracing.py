"""OpenTelemetry spans: a real turn with a model call, a tool call and a platform delivery,
recorded by the SDK's in-memory exporter, and `tracing.*` configuration."""

from __future__ import annotations

import sys

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from fake_openai import Call, Calls, FakeOpenAI, Reply
from sessiongate import GatewayConfig, SessionStore
from sessiongate.adapters.loopback import LoopbackAdapter
from sessiongate.agents import build_agent_factory
from sessiongate.gateway import GatewayRunner, tracing

USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}


@pytest.fixture
def exporter():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter, provider
    tracing.disable()
    provider.shutdown()


async def _one_turn(tmp_path, clock, *, redact_pii: bool) -> LoopbackAdapter:
    with FakeOpenAI() as server:
        server.script(
            Calls([Call("lookup_order", '{"order_id": "A-1"}', id="call_1")], usage=USAGE),
            Reply("Shipped.", usage=USAGE),
        )
        config = GatewayConfig(
            redact_pii=redact_pii,
            agent={
                "openai": {
                    "base_url": server.base_url,
                    "model": "fake-model",
                    "max_retries": 0,
                    "tools": ["sample_tools:lookup_order"],
                }
            },
        )
        adapter = LoopbackAdapter("telegram")
        with SessionStore(tmp_path / "sessions", config, clock=clock) as store:
            runner = GatewayRunner(
                store,
                config,
                home=tmp_path,
                clock=clock,
                agent_factory=build_agent_factory(config),
                adapters=[adapter],
            )
            await runner.start()
            try:
                receipt = await adapter.receive("where is A-1?", chat_id="4242", message_id="m1")
            finally:
                await runner.stop()
        assert receipt.reply == "Shipped."
    return adapter


async def test_a_turn_is_traced_end_to_end(exporter, tmp_path, clock):
    memory, provider = exporter
    tracing.enable(provider.get_tracer("test"))
    await _one_turn(tmp_path, clock, redact_pii=False)
    spans = {span.name: span for span in memory.get_finished_spans()}
    assert set(spans) >= {
        "inbound telegram",
        "turn",
        "invoke_agent main",
        "chat fake-model",
        "execute_tool lookup_order",
        "deliver telegram",
    }

    inbound = spans["inbound telegram"].attributes
    assert inbound["messaging.message.id"] == "m1"
    assert inbound["sessiongate.session_key"] == "agent:main:telegram:dm:4242"

    turn = spans["turn"]
    assert turn.attributes["sessiongate.turn.outcome"] == "replied"
    assert turn.attributes["sessiongate.turn_id"] == inbound["sessiongate.turn_id"]

    agent = spans["invoke_agent main"]
    assert agent.parent.span_id == turn.context.span_id
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert agent.attributes["gen_ai.usage.input_tokens"] == 22  # both model calls
    assert agent.attributes["gen_ai.usage.output_tokens"] == 14

    chats = [s for s in memory.get_finished_spans() if s.name == "chat fake-model"]
    assert len(chats) == 2
    for chat in chats:
        assert chat.parent.span_id == agent.context.span_id
        assert chat.attributes["gen_ai.request.model"] == "fake-model"
        assert chat.attributes["gen_ai.usage.input_tokens"] == 11

    tool = spans["execute_tool lookup_order"]
    assert tool.parent.span_id == agent.context.span_id
    assert tool.attributes["gen_ai.tool.call.id"] == "call_1"
    assert "error.type" not in tool.attributes

    assert spans["deliver telegram"].attributes["sessiongate.delivered"] is True
    # No message text is ever an attribute.
    for span in memory.get_finished_spans():
        for value in span.attributes.values():
            assert "where is A-1" not in str(value)
            assert "Shipped." not in str(value)


async def test_redact_pii_hashes_the_session_key(exporter, tmp_path, clock):
    memory, provider = exporter
    tracing.enable(provider.get_tracer("test"), redact_pii=True)
    await _one_turn(tmp_path, clock, redact_pii=True)
    for span in memory.get_finished_spans():
        for value in span.attributes.values():
            assert "4242" not in str(value), span.name
    keys = {s.attributes.get("sessiongate.session_key") for s in memory.get_finished_spans()}
    assert any(str(key).startswith("agent:main:telegram:dm:") for key in keys if key)


async def test_nothing_is_recorded_while_tracing_is_off(exporter, tmp_path, clock):
    memory, _ = exporter
    tracing.disable()
    await _one_turn(tmp_path, clock, redact_pii=False)
    assert memory.get_finished_spans() == ()


def test_configure_follows_the_settings(monkeypatch):
    tracing.configure(GatewayConfig())
    assert not tracing.is_enabled()
    tracing.configure(GatewayConfig(tracing={"enabled": True, "exporter": "none"}))
    assert tracing.is_enabled()
    tracing.configure(GatewayConfig(tracing={"enabled": True, "exporter": "console"}))
    assert tracing.is_enabled()
    tracing.shutdown()
    assert not tracing.is_enabled()
    # Without OpenTelemetry installed: one clear error naming the extra.
    monkeypatch.setitem(sys.modules, "opentelemetry.trace", None)
    with pytest.raises(tracing.TracingError, match=r"sessiongate\[otel\]"):
        tracing.configure(GatewayConfig(tracing={"enabled": True}))
    assert not tracing.is_enabled()


def test_a_bad_exporter_name_is_refused():
    with pytest.raises(ValueError, match="exporter"):
        GatewayConfig(tracing={"enabled": True, "exporter": "zipkin"})
