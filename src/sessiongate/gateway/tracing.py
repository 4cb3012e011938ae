"""OpenTelemetry spans for what the gateway does, at no cost while tracing is off.

- `inbound {platform}`: an inbound message, until it is accepted
  (`GatewayRunner.handle_message`);
- `turn`: an agent turn, from its start to its stored outcome (`TurnExecutor.run`);
- `invoke_agent {agent id}`: the agent's part of a turn, with its token usage
  (`TurnExecutor._invoke`);
- `chat {model}`: each model call of the OpenAI-compatible agent (`OpenAIAgent._call`);
- `execute_tool {name}`: each tool call (`agents/tools/_calls.py`);
- `deliver {platform}`: each send of a reply or notice to a platform (`Delivery.send`).

Attributes follow OpenTelemetry's GenAI semantic conventions where one applies
(`gen_ai.operation.name`, `gen_ai.request.model`, `gen_ai.usage.input_tokens`, …), plus
`sessiongate.session_key` (hashed with `redact_session_key` when `redact_pii` is set),
`sessiongate.session_id` and `sessiongate.turn_id`. Message text is never an attribute.

`configure(config)` turns tracing on when `tracing.enabled` is set: with the tracer provider
already installed globally (`tracing.exporter: none`, e.g. under `opentelemetry-instrument`),
or with one it makes (`otlp`, which reads the standard `OTEL_EXPORTER_OTLP_*` variables, or
`console`). While it is off, a decorated call costs one global read and goes straight through.
The `[otel]` extra installs what it needs.
"""

from __future__ import annotations

import functools
import importlib
from typing import TYPE_CHECKING, Any, TypeVar, cast

from sessiongate.core.redaction import redact_session_key
from sessiongate.errors import SessiongateError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

    from opentelemetry.trace import Tracer

    from sessiongate.core.config import GatewayConfig

__all__ = [
    "TracingError",
    "configure",
    "disable",
    "enable",
    "is_enabled",
    "key_attribute",
    "set_attributes",
    "shutdown",
    "traced",
    "traced_stream",
]

INSTRUMENTATION_NAME = "sessiongate"
_F = TypeVar("_F", bound="Callable[..., Awaitable[Any]]")
_G = TypeVar("_G", bound="Callable[..., AsyncIterator[Any]]")


class TracingError(SessiongateError):
    code = "tracing_unavailable"


class _State:
    tracer: Tracer | None = None
    redact = False
    provider: Any = None  # the SDK provider `configure` made, flushed by `shutdown`


_state = _State()


def is_enabled() -> bool:
    return _state.tracer is not None


def enable(tracer: Tracer, *, redact_pii: bool = False) -> None:
    """Trace with `tracer` from now on (tests pass one over an in-memory exporter)."""
    _state.tracer = tracer
    _state.redact = redact_pii


def disable() -> None:
    _state.tracer = None


def configure(config: GatewayConfig) -> None:
    """Set tracing up as `config.tracing` says; raises `TracingError` (naming the extra to
    install) when it is enabled and OpenTelemetry is missing."""
    settings = config.tracing
    if not settings.enabled:
        disable()
        return
    try:
        trace = importlib.import_module("opentelemetry.trace")
    except ImportError as exc:
        raise TracingError(
            "tracing.enabled needs OpenTelemetry: pip install 'sessiongate[otel]'"
        ) from exc
    if settings.exporter == "none":
        enable(trace.get_tracer(INSTRUMENTATION_NAME), redact_pii=config.redact_pii)
        return
    try:
        sdk = importlib.import_module("opentelemetry.sdk.trace")
        export = importlib.import_module("opentelemetry.sdk.trace.export")
        resources = importlib.import_module("opentelemetry.sdk.resources")
        if settings.exporter == "otlp":
            otlp = importlib.import_module("opentelemetry.exporter.otlp.proto.http.trace_exporter")
            exporter = otlp.OTLPSpanExporter()
        else:
            exporter = export.ConsoleSpanExporter()
    except ImportError as exc:
        raise TracingError(
            f"tracing.exporter {settings.exporter!r} needs the OpenTelemetry SDK and exporter: "
            "pip install 'sessiongate[otel]'"
        ) from exc
    resource = resources.Resource.create({"service.name": settings.service_name})
    provider = sdk.TracerProvider(resource=resource)
    provider.add_span_processor(export.BatchSpanProcessor(exporter))
    _state.provider = provider
    enable(provider.get_tracer(INSTRUMENTATION_NAME), redact_pii=config.redact_pii)


def shutdown() -> None:
    """Flush and stop the provider `configure` made (the spans still buffered are sent)."""
    provider, _state.provider = _state.provider, None
    disable()
    if provider is not None:
        provider.shutdown()


def key_attribute(session_key: str) -> str:
    """A session key as a span attribute: hashed under `redact_pii`."""
    return redact_session_key(session_key) if _state.redact else session_key


def set_attributes(attributes: Mapping[str, Any]) -> None:
    """Add `attributes` to the current span (no-op when tracing is off)."""
    if _state.tracer is None:
        return
    trace = importlib.import_module("opentelemetry.trace")
    trace.get_current_span().set_attributes(_clean(attributes))


def traced(
    name: str | Callable[..., str],
    start: Callable[..., Mapping[str, Any]],
    finish: Callable[..., Mapping[str, Any]] | None = None,
) -> Callable[[_F], _F]:
    """A coroutine function run in a span named `name` (or `name(*args, **kwargs)`), with
    `start(*args, **kwargs)` as attributes and `finish(result, *args, **kwargs)` added after.
    An exception (cancellation included) is recorded on the span and raised on."""

    def wrap(function: _F) -> _F:
        @functools.wraps(function)
        async def run(*args: Any, **kwargs: Any) -> Any:
            tracer = _state.tracer
            if tracer is None:
                return await function(*args, **kwargs)
            title = name(*args, **kwargs) if callable(name) else name
            attributes = _clean(start(*args, **kwargs))
            with tracer.start_as_current_span(title, attributes=attributes) as span:
                result = await function(*args, **kwargs)
                if finish is not None:
                    span.set_attributes(_clean(finish(result, *args, **kwargs)))
                return result

        return cast("_F", run)

    return wrap


def traced_stream(
    name: str | Callable[..., str],
    start: Callable[..., Mapping[str, Any]],
    each: Callable[[Any], Mapping[str, Any] | None],
) -> Callable[[_G], _G]:
    """An async generator run in a span; `each(item)` may add attributes per item yielded."""

    def wrap(function: _G) -> _G:
        @functools.wraps(function)
        async def run(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            tracer = _state.tracer
            if tracer is None:
                async for item in function(*args, **kwargs):
                    yield item
                return
            title = name(*args, **kwargs) if callable(name) else name
            attributes = _clean(start(*args, **kwargs))
            with tracer.start_as_current_span(title, attributes=attributes) as span:
                async for item in function(*args, **kwargs):
                    extra = each(item)
                    if extra:
                        span.set_attributes(_clean(extra))
                    yield item

        return cast("_G", run)

    return wrap


def _clean(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """OpenTelemetry takes str, bool, int and float values: None is left out, others shown."""
    clean: dict[str, Any] = {}
    for key, value in attributes.items():
        if value is None:
            continue
        clean[key] = value if isinstance(value, str | bool | int | float) else str(value)
    return clean
