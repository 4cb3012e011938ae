"""An agent backed by any OpenAI-compatible chat-completions endpoint: streamed, with tools.

A turn is a loop of streamed model calls (`_stream.py`). Text deltas go out as they arrive;
each assistant message is yielded once it is complete (never a half one); its tool calls run
(`tools/_calls.py`, in parallel, each under a timeout) and their results go back to the model,
until it answers without tools or `max_tool_iterations` calls have been made (the turn then
ends with `tool_loop_limit`). A call that fails in a way that may pass (429, 5xx, timeout,
broken or empty stream) is retried with backoff through the injected `sleep`, then reported
as `agent_unavailable`; a rejected key or unknown model is `agent_misconfigured`, with the
setting to fix in the log's one warning line (`_upstream.py`).

Needs the optional `openai` package (`pip install 'sessiongate[openai]'`); it is imported when an
agent is built, never when this module is, so the gateway runs without it on the echo agent.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import logging
import os
from typing import TYPE_CHECKING, Any

from sessiongate.agents._stream import Completion, stream_completion
from sessiongate.agents._upstream import NOTICES, Failure, backoff_delay, classify
from sessiongate.agents.base import TurnRequest, TurnResult, Usage
from sessiongate.agents.tools import ToolContext, load_tools
from sessiongate.agents.tools._calls import (
    ToolLimits,
    repair_tool_calls,
    run_calls_with_approvals,
)
from sessiongate.core.turn_events import (
    MessageCompleted,
    StreamRetry,
    TextDelta,
    ToolResult,
    TurnEnd,
    TurnEvent,
    UsageReport,
)
from sessiongate.errors import AgentTurnError
from sessiongate.gateway.tracing import traced_stream

if TYPE_CHECKING:
    import ssl
    from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
    from types import ModuleType

    from openai import AsyncOpenAI

    from sessiongate.agents.tools import Tool, Toolset
    from sessiongate.core.config import OpenAIAgentConfig

__all__ = [
    "INSTALL_HINT",
    "LOOP_LIMIT_NOTICE",
    "SUMMARY_INSTRUCTION",
    "OpenAIAgent",
    "collect_turn",
    "import_openai",
]

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'sessiongate[openai]'"

# The SDK refuses to build a client without a key, but local servers (llama.cpp, vLLM, Ollama)
# ignore it; this placeholder is sent when neither the config nor OPENAI_API_KEY gives one.
_NO_API_KEY = "sessiongate-no-key"

# Fields of a stored message that the chat-completions API understands; the rest
# (`timestamp`, `message_id`, `metadata`) is ours and some servers reject unknown fields.
_API_FIELDS = ("role", "content", "name", "tool_calls", "tool_call_id")

SUMMARY_INSTRUCTION = (
    "Summarize the conversation below for your own later use. Keep facts, decisions, names, "
    "open questions and anything the user asked you to remember. Reply with the summary only."
)
_NO_END_NOTICE = "Sorry, something went wrong while answering. Please try again."
LOOP_LIMIT_NOTICE = (
    "I stopped after {count} steps with tools without reaching an answer. Tell me if I should "
    "go on."
)


def import_openai() -> ModuleType:
    """The `openai` module, or an `ImportError` naming the extra to install."""
    try:
        return importlib.import_module("openai")
    except ImportError as exc:
        raise ImportError(
            f"the OpenAI-compatible agent needs the openai package: {INSTALL_HINT}"
        ) from exc


def _call_attributes(event: object) -> dict[str, Any] | None:
    """What a model call's span learns from its events: the usage, or why it failed."""
    if isinstance(event, Completion):
        usage = event.usage
        return {
            "gen_ai.response.finish_reasons": event.finish_reason,
            "gen_ai.usage.input_tokens": None if usage is None else usage.input_tokens,
            "gen_ai.usage.output_tokens": None if usage is None else usage.output_tokens,
        }
    if isinstance(event, Failure):
        return {"error.type": str(event.kind)}
    return None


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One TLS context for every agent's HTTP client. Building one reads the CA bundle (tens
    of milliseconds, paid by each new session's agent otherwise); a context is not bound to an
    event loop, so the clients, each its own, can share it."""
    import httpx

    return httpx.create_ssl_context()


class OpenAIAgent:
    """One agent per session key, each with its own client (and connection pool).

    `tools` defaults to those `config.tools` names; `toolsets` add tools asked for at each
    turn (an MCP server's, which may come and go); `sleep` is what the retry backoff waits
    with (tests pass one that records the delays and returns at once).
    """

    def __init__(
        self,
        config: OpenAIAgentConfig,
        *,
        tools: Sequence[Tool] | None = None,
        toolsets: Sequence[Toolset] = (),
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._openai = import_openai()
        self.config = config
        self._tools = {
            made.name: made for made in (load_tools(config.tools) if tools is None else tools)
        }
        self._toolsets = list(toolsets)
        self._sleep = sleep
        self._limits = ToolLimits(
            timeout_seconds=config.tool_timeout_seconds,
            per_tool=config.tool_timeouts,
            max_result_chars=config.max_tool_result_chars,
            parallel=config.parallel_tool_calls,
        )
        api_key = (
            config.api_key.get_secret_value()
            if config.api_key is not None
            else os.environ.get("OPENAI_API_KEY") or _NO_API_KEY
        )
        # The SDK's own retries are off: ours back off through `sleep` and classify failures.
        self._client: AsyncOpenAI = self._openai.AsyncOpenAI(
            base_url=config.base_url,
            api_key=api_key,
            timeout=config.timeout_seconds,
            max_retries=0,
            http_client=self._openai.DefaultAsyncHttpxClient(verify=_tls_context()),
        )

    async def stream_turn(self, request: TurnRequest) -> AsyncIterator[TurnEvent]:
        """The turn's events, ending with exactly one `TurnEnd`."""
        model = request.model or self.config.model
        messages = _prompt(request)
        context = ToolContext(
            session_key=request.session_key,
            session_id=request.session_id,
            turn_id=request.turn_id,
            model=model,
            settings=self.config.session_tools,
            host=request.host,
        )
        body: dict[str, Any] = {"model": model, "messages": messages}
        tools = self._turn_tools()
        if tools:
            body["tools"] = [made.spec() for made in tools.values()]
            body["parallel_tool_calls"] = self.config.parallel_tool_calls
        if request.awaiting is not None:
            # A resumed turn whose calls were waiting for approval when the gateway stopped:
            # they are taken up again (the same approvals) before the model is asked anything.
            awaiting = request.awaiting
            last = messages[-1] if messages else None
            if (
                last is not None
                and last.get("role") == "assistant"
                and not last.get("tool_calls")
                and last.get("content") == awaiting.get("content")
            ):
                messages.pop()  # the model context kept its text without the open calls
            messages.append(_to_api_message(awaiting))
            for result in await run_calls_with_approvals(
                awaiting.get("tool_calls") or [],
                self._tools,
                context,
                self._limits,
                request.approvals,
            ):
                yield result
                messages.append(
                    {"role": "tool", "tool_call_id": result.tool_call_id, "content": result.content}
                )
        cap = self.config.max_tool_iterations
        for _ in range(cap):
            completion: Completion | None = None
            async for event in self._call(body):
                if isinstance(event, Failure):
                    yield _failed(event)
                    return
                if isinstance(event, Completion):
                    completion = event
                else:
                    yield event
            assert completion is not None  # `_call` ends with a completion or a failure
            if completion.usage is not None:
                yield completion.usage
            message = completion.message
            if message.get("tool_calls"):
                # Stored and sent back as the model meant them, but valid: a bad call is
                # answered by its own error result, never by failing the turn.
                message = {**message, "tool_calls": repair_tool_calls(message["tool_calls"])}
            yield MessageCompleted(message)
            messages.append(_to_api_message(message))
            calls = message.get("tool_calls")
            if not calls:
                yield TurnEnd(text=message.get("content") or "")
                return
            for result in await run_calls_with_approvals(
                calls, tools, context, self._limits, request.approvals
            ):
                yield result
                messages.append(
                    {"role": "tool", "tool_call_id": result.tool_call_id, "content": result.content}
                )
        log.warning(
            "tool loop limit reached",
            extra={"session_key": request.session_key, "turn_id": request.turn_id, "calls": cap},
        )
        yield TurnEnd(
            text=LOOP_LIMIT_NOTICE.format(count=cap),
            error="tool_loop_limit",
            detail=f"the model still called tools after {cap} model calls "
            "(agent.openai.max_tool_iterations)",
        )

    def _turn_tools(self) -> dict[str, Tool]:
        """The tools of this turn: the fixed ones, then each toolset's as they are now (a
        name already taken keeps its first tool)."""
        if not self._toolsets:
            return self._tools
        tools = dict(self._tools)
        for toolset in self._toolsets:
            for made in toolset.tools():
                tools.setdefault(made.name, made)
        return tools

    async def run_turn(self, request: TurnRequest) -> TurnResult:
        return await collect_turn(self.stream_turn(request))

    async def summarize(self, messages: list[dict[str, Any]]) -> str:
        # The transcript goes in as text: replayed as chat turns it could end on a tool call,
        # which servers reject, and the model would answer it instead of summarizing.
        transcript = "\n".join(
            f"{message.get('role', 'user')}: {_plain_text(message.get('content'))}"
            for message in messages
        )
        body = {
            "model": self.config.model,
            "messages": [
                {"role": "system", "content": SUMMARY_INSTRUCTION},
                {"role": "user", "content": transcript},
            ],
        }
        async for event in self._call(body):
            if isinstance(event, Failure):
                end = _failed(event)
                raise AgentTurnError(end.detail or "", code=end.error or "", notice=end.text)
            if isinstance(event, Completion):
                return str(event.message.get("content") or "").strip()
        raise AssertionError("unreachable: `_call` ends with a completion or a failure")

    async def aclose(self) -> None:
        await self._client.close()

    @traced_stream(
        lambda self, body: f"chat {body['model']}",
        start=lambda self, body: {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": body["model"],
            "server.address": self.config.base_url,
        },
        each=_call_attributes,
    )
    async def _call(
        self, body: dict[str, Any]
    ) -> AsyncIterator[TextDelta | StreamRetry | Completion | Failure]:
        """One model call with its retries: deltas, then a `Completion` or the `Failure` that
        ended the attempts (logged once, as a warning). Each retry is announced with a
        `StreamRetry` before its backoff, so whoever shows the deltas of the failed attempt
        drops them at once instead of showing the text twice."""
        attempt = 0
        while True:
            try:
                async for event in stream_completion(self._client, body):
                    yield event
                return
            except Exception as exc:
                failure = classify(exc, openai=self._openai)
                if failure is None:
                    raise
            if not failure.retryable or attempt >= self.config.max_retries:
                self._log_failure(failure, attempts=attempt + 1, model=str(body["model"]))
                yield failure
                return
            attempt += 1
            delay = backoff_delay(
                attempt,
                first=self.config.retry_backoff_seconds,
                cap=self.config.retry_backoff_max_seconds,
                retry_after=failure.retry_after,
            )
            log.info(
                "model call failed; retrying",
                extra={"attempt": attempt, "delay": delay, "detail": failure.detail},
            )
            yield StreamRetry(attempt=attempt + 1, reason=str(failure.kind))
            await self._sleep(delay)

    def _log_failure(self, failure: Failure, *, attempts: int, model: str) -> None:
        what = (
            f"agent misconfigured: check {failure.setting}"
            if failure.setting
            else f"model call failed ({failure.kind})"
        )
        log.warning(
            what,
            extra={
                "error": str(failure.kind),
                "status": failure.status,
                "setting": failure.setting,
                "detail": failure.detail,
                "attempts": attempts,
                "model": model,
                "base_url": self.config.base_url,
            },
        )


async def collect_turn(events: AsyncIterator[TurnEvent]) -> TurnResult:
    """A streamed turn as one `TurnResult` (the form of `Agent.run_turn`).

    The messages before the final reply (tool calls, tool results) come back in `messages`;
    a turn that ended with an error raises `AgentTurnError` carrying them.
    """
    messages: list[dict[str, Any]] = []
    usage = UsageReport()
    end: TurnEnd | None = None
    async for event in events:
        if isinstance(event, MessageCompleted):
            messages.append(event.message)
        elif isinstance(event, ToolResult):
            messages.append(tool_message(event))
        elif isinstance(event, UsageReport):
            usage = UsageReport(
                input_tokens=usage.input_tokens + event.input_tokens,
                output_tokens=usage.output_tokens + event.output_tokens,
                cache_read_tokens=usage.cache_read_tokens + event.cache_read_tokens,
                cache_write_tokens=usage.cache_write_tokens + event.cache_write_tokens,
            )
        elif isinstance(event, TurnEnd):
            end = event
    if end is None:
        raise AgentTurnError("the turn ended without a TurnEnd", notice=_NO_END_NOTICE)
    if end.error is not None:
        raise AgentTurnError(
            end.detail or end.error, code=end.error, notice=end.text, messages=messages
        )
    # The final reply is stored by the gateway from `text`, so it leaves `messages`.
    if messages and messages[-1].get("role") == "assistant" and not messages[-1].get("tool_calls"):
        messages.pop()
    return TurnResult(
        text=end.text,
        usage=Usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
        ),
        messages=messages,
    )


def tool_message(result: ToolResult) -> dict[str, Any]:
    """A tool result as the stored `tool` message (the tool's name kept in metadata)."""
    return {
        "role": "tool",
        "tool_call_id": result.tool_call_id,
        "content": result.content,
        "metadata": {"tool_name": result.name, **({"is_error": True} if result.is_error else {})},
    }


def _failed(failure: Failure) -> TurnEnd:
    return TurnEnd(
        text=NOTICES[failure.kind],
        error=str(failure.kind),
        detail=failure.detail,
        metadata={"status": failure.status, "setting": failure.setting},
    )


def _prompt(request: TurnRequest) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if request.system_prompt:
        messages.append({"role": "system", "content": request.system_prompt})
    if request.resume_note:
        messages.append({"role": "system", "content": request.resume_note})
    messages.extend(_to_api_message(message) for message in request.messages)
    return messages


def _to_api_message(message: dict[str, Any]) -> dict[str, Any]:
    out = {name: message[name] for name in _API_FIELDS if message.get(name) is not None}
    # Only an assistant message that calls tools may go without content.
    if "content" not in out and not (out.get("role") == "assistant" and out.get("tool_calls")):
        out["content"] = ""
    return out


def _plain_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [part.get("text", "") for part in content if isinstance(part, dict)]
        return " ".join(part for part in parts if isinstance(part, str) and part)
    return ""
