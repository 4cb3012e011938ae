"""A local OpenAI-compatible endpoint (Starlette on uvicorn, 127.0.0.1, an ephemeral port).

`POST /v1/chat/completions` records every request (what the model would see) and answers the
next scripted response, or by default `reply_format` filled with the last message (`model says:
<last message>`), streamed as server-sent chunks when the request asks for `stream`. The model
`no-such-model`, or a last message containing `FAIL`, gets a 400 (not retried), so failure paths
run without a script. Shared by the agent tests and the reliability tests (`tests/` is on the
import path).

Scripts, one per request in order (`fake.script(Reply("hi"), Calls(...), Status(429))`):
`Reply` (text chunks), `Calls` (tool-call deltas split across chunks, parallel calls
interleaved), `Status` (an HTTP error), `NoChoices` (a 200 without choices), `Broken` (a stream
cut off mid-way), `Stall` (no answer for a while).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from starlette.requests import Request

__all__ = [
    "Broken",
    "Call",
    "Calls",
    "FakeOpenAI",
    "NoChoices",
    "Reply",
    "Stall",
    "Status",
]

_CREATED = 1_767_225_600


@dataclass(frozen=True)
class Reply:
    """Text in the given chunks (a string is split into words), then `finish_reason`."""

    text: str | list[str]
    finish_reason: str = "stop"
    usage: dict[str, Any] | None = None


@dataclass(frozen=True)
class Call:
    name: str
    arguments: str = "{}"
    id: str | None = None


@dataclass(frozen=True)
class Calls:
    """Tool calls whose arguments arrive in `pieces` deltas each, the calls interleaved."""

    calls: list[Call]
    text: str = ""
    pieces: int = 3
    usage: dict[str, Any] | None = None


@dataclass(frozen=True)
class Status:
    status: int
    message: str = "upstream error"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class NoChoices:
    """A 200 whose body (or every streamed chunk) has no choices."""


@dataclass(frozen=True)
class Broken:
    """Some text chunks, then the stream ends badly: `abort` drops the connection mid-body,
    `truncate` ends it cleanly but before any `finish_reason` or `[DONE]`, `garbage` sends a
    chunk that is not JSON."""

    text: list[str]
    how: str = "abort"


@dataclass(frozen=True)
class Stall:
    """No answer for `seconds` (then the default reply), so a client timeout runs out."""

    seconds: float


Script = Reply | Calls | Status | NoChoices | Broken | Stall


class FakeOpenAI:
    def __init__(
        self,
        *,
        reply_format: str = "model says: {last}",
        usage: dict[str, Any] | None = None,
    ) -> None:
        self.requests: list[dict[str, Any]] = []
        self.reply_format = reply_format
        self.usage = usage or {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
        self._scripts: deque[Script] = deque()
        self._lock = threading.Lock()
        # Set on exit, so a stalled answer ends at once instead of holding up the shutdown.
        self._stopping: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None
        app = Starlette(routes=[Route("/v1/chat/completions", self._complete, methods=["POST"])])
        config = uvicorn.Config(
            app, log_level="critical", lifespan="off", ws="none", timeout_graceful_shutdown=1
        )
        self._server = uvicorn.Server(config)
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", 0))
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._socket.getsockname()[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:  # waits for a real server to listen, moves no clock
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the fake OpenAI server did not start")
            time.sleep(0.005)
        return self

    def __exit__(self, *_: object) -> None:
        if self._stopping is not None:
            loop, event = self._stopping
            loop.call_soon_threadsafe(event.set)
        self._server.should_exit = True
        self._thread.join(10)
        self._socket.close()

    def script(self, *responses: Script) -> None:
        """Answer the next requests with `responses`, in order; then the default reply."""
        with self._lock:
            self._scripts.extend(responses)

    def clear_script(self) -> None:
        """Forget the responses not yet used (a turn that failed before reaching them)."""
        with self._lock:
            self._scripts.clear()

    def bodies_text(self) -> str:
        """Everything the model was sent, as one searchable text."""
        return "\n".join(json.dumps(r["body"], ensure_ascii=False) for r in self.requests)

    # ------------------------------------------------------------------ the endpoint

    async def _complete(self, request: Request) -> Response:
        body = json.loads(await request.body())
        with self._lock:
            self.requests.append(
                {
                    "path": request.url.path,
                    "authorization": request.headers.get("authorization"),
                    "body": body,
                }
            )
            script = self._scripts.popleft() if self._scripts else None
        stream = bool(body.get("stream"))
        if isinstance(script, Stall):
            with self._lock:
                if self._stopping is None:
                    self._stopping = (asyncio.get_running_loop(), asyncio.Event())
                stopping = self._stopping[1]
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), script.seconds)
            script = None
        if isinstance(script, Status):
            error = {"error": {"message": script.message, "type": "fake", "code": None}}
            return JSONResponse(error, status_code=script.status, headers=script.headers)
        if script is None:
            last = str(body["messages"][-1].get("content"))
            if "FAIL" in last or body["model"] == "no-such-model":
                error = {"error": {"message": "upstream refused", "type": "invalid_request"}}
                return JSONResponse(error, status_code=400)
            script = Reply(self.reply_format.format(last=last))
        if not stream:
            return JSONResponse(self._whole(body, script))
        return StreamingResponse(self._chunks(body, script), media_type="text/event-stream")

    def _whole(self, body: dict[str, Any], script: Script) -> dict[str, Any]:
        if isinstance(script, NoChoices):
            return {**_envelope(body, "chat.completion"), "choices": [], "usage": self.usage}
        if not isinstance(script, Reply):
            raise AssertionError(f"{type(script).__name__} is scripted for streams only")
        text = script.text if isinstance(script.text, str) else "".join(script.text)
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": script.finish_reason,
        }
        return {
            **_envelope(body, "chat.completion"),
            "choices": [choice],
            "usage": script.usage or self.usage,
        }

    async def _chunks(self, body: dict[str, Any], script: Script) -> AsyncIterator[str]:
        def event(choices: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> str:
            chunk = {**_envelope(body, "chat.completion.chunk"), "choices": choices}
            if usage is not None:
                chunk["usage"] = usage
            return f"data: {json.dumps(chunk)}\n\n"

        def delta(payload: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {"index": 0, "delta": payload, "finish_reason": finish}

        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        usage = self.usage
        if isinstance(script, NoChoices):
            yield event([], usage)
        elif isinstance(script, Broken):
            yield event([delta({"role": "assistant", "content": ""})])
            for piece in script.text:
                yield event([delta({"content": piece})])
            if script.how == "abort":
                # An exception inside the body makes uvicorn drop the connection without the
                # closing chunk: the client sees an incomplete body.
                raise ConnectionAbortedError("the fake stream breaks here")
            if script.how == "garbage":
                yield 'data: {"choices": [{"index": 0, "delta": {"content": "x"\n\n'
            return
        elif isinstance(script, Reply):
            usage = script.usage or usage
            pieces = _words(script.text) if isinstance(script.text, str) else script.text
            yield event([delta({"role": "assistant", "content": ""})])
            for piece in pieces:
                yield event([delta({"content": piece})])
            yield event([delta({}, script.finish_reason)])
        elif isinstance(script, Calls):
            usage = script.usage or usage
            yield event([delta({"role": "assistant", "content": script.text or None})])
            for part in range(script.pieces):
                for index, call in enumerate(script.calls):
                    args = call.arguments
                    size = -(-len(args) // script.pieces) if args else 0
                    fragment = args[part * size : (part + 1) * size]
                    tool: dict[str, Any] = {"index": index, "function": {"arguments": fragment}}
                    if part == 0:
                        tool["id"] = call.id or f"call_{len(self.requests)}_{index}"
                        tool["type"] = "function"
                        tool["function"]["name"] = call.name
                    yield event([delta({"tool_calls": [tool]})])
            yield event([delta({}, "tool_calls")])
        if include_usage and not isinstance(script, NoChoices):
            yield event([], usage)
        yield "data: [DONE]\n\n"


def _envelope(body: dict[str, Any], kind: str) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": kind, "created": _CREATED, "model": body["model"]}


def _words(text: str) -> list[str]:
    """`text` in pieces that join back to it exactly (each word keeps its trailing space)."""
    pieces = [f"{word} " for word in text.split(" ")]
    pieces[-1] = pieces[-1][:-1]
    return [piece for piece in pieces if piece] or [""]
