"""An agent backed by any OpenAI-compatible chat-completions endpoint.

Needs the optional `openai` package (`pip install 'sessiongate[openai]'`); it is imported when an
agent is built, never when this module is, so the gateway runs without it on the echo agent.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

from sessiongate.agents.base import TurnRequest, TurnResult, Usage

if TYPE_CHECKING:
    from types import ModuleType

    from openai import AsyncOpenAI
    from openai.types.chat import ChatCompletion

    from sessiongate.core.config import OpenAIAgentConfig

__all__ = ["INSTALL_HINT", "SUMMARY_INSTRUCTION", "OpenAIAgent", "import_openai"]

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


def import_openai() -> ModuleType:
    """The `openai` module, or an `ImportError` naming the extra to install."""
    try:
        return importlib.import_module("openai")
    except ImportError as exc:
        raise ImportError(
            f"the OpenAI-compatible agent needs the openai package: {INSTALL_HINT}"
        ) from exc


class OpenAIAgent:
    """One agent per session key, each with its own client (and connection pool)."""

    def __init__(self, config: OpenAIAgentConfig) -> None:
        openai = import_openai()
        self.config = config
        api_key = (
            config.api_key.get_secret_value()
            if config.api_key is not None
            else os.environ.get("OPENAI_API_KEY") or _NO_API_KEY
        )
        self._client: AsyncOpenAI = openai.AsyncOpenAI(
            base_url=config.base_url, api_key=api_key, timeout=config.timeout_seconds
        )

    async def run_turn(self, request: TurnRequest) -> TurnResult:
        messages: list[dict[str, Any]] = []
        if request.system_prompt:
            messages.append({"role": "system", "content": request.system_prompt})
        if request.resume_note:
            messages.append({"role": "system", "content": request.resume_note})
        messages.extend(_to_api_message(message) for message in request.messages)
        completion = await self._complete(messages, model=request.model)
        return TurnResult(text=_reply_text(completion), usage=_usage(completion))

    async def summarize(self, messages: list[dict[str, Any]]) -> str:
        # The transcript goes in as text: replayed as chat turns it could end on a tool call,
        # which servers reject, and the model would answer it instead of summarizing.
        transcript = "\n".join(
            f"{message.get('role', 'user')}: {_plain_text(message.get('content'))}"
            for message in messages
        )
        completion = await self._complete(
            [
                {"role": "system", "content": SUMMARY_INSTRUCTION},
                {"role": "user", "content": transcript},
            ],
            model=None,
        )
        return _reply_text(completion).strip()

    async def aclose(self) -> None:
        await self._client.close()

    async def _complete(
        self, messages: list[dict[str, Any]], *, model: str | None
    ) -> ChatCompletion:
        return await self._client.chat.completions.create(
            model=model or self.config.model,
            # The SDK's TypedDict union for messages; ours are validated chat dicts.
            messages=messages,  # type: ignore[arg-type]
        )


def _to_api_message(message: dict[str, Any]) -> dict[str, Any]:
    out = {name: message[name] for name in _API_FIELDS if message.get(name) is not None}
    # Only an assistant message that calls tools may go without content.
    if "content" not in out and not (out.get("role") == "assistant" and out.get("tool_calls")):
        out["content"] = ""
    return out


def _reply_text(completion: ChatCompletion) -> str:
    if not completion.choices:
        return ""
    return completion.choices[0].message.content or ""


def _usage(completion: ChatCompletion) -> Usage:
    usage = completion.usage
    if usage is None:
        return Usage()
    details = usage.prompt_tokens_details
    return Usage(
        input_tokens=usage.prompt_tokens,
        output_tokens=usage.completion_tokens,
        cache_read_tokens=(getattr(details, "cached_tokens", None) or 0),
        cache_write_tokens=(getattr(details, "cache_write_tokens", None) or 0),
    )


def _plain_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [part.get("text", "") for part in content if isinstance(part, dict)]
        return " ".join(part for part in parts if isinstance(part, str) and part)
    return ""
