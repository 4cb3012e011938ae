"""A fake OpenAI-compatible model server for the benchmark, in a process of its own, that
measures its own time.

`POST /v1/chat/completions` answers by rule, streamed when the request asks for `stream`
(with a usage chunk), else as one JSON body:

- the last message is a tool result → the text `done`;
- the last user message is `call <tool>` and the request offers that tool → one call of it
  with `{"order_id": "1001"}`;
- anything else → the text `ok`.

`GET /stats` says how many completions it answered and the seconds it spent on them, from
reading the request to writing its last byte (the model's own time, the figure the agent
kinds section takes off a turn's). Run as `python -m sessiongate_bench.model_server`: prints
`PORT <n>`, serves on 127.0.0.1 until its standard input ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from starlette.requests import Request
    from starlette.responses import Response

__all__ = ["ModelStats", "answer_for", "main"]

_CREATED = 1_767_225_600
_USAGE = {"prompt_tokens": 20, "completion_tokens": 4, "total_tokens": 24}


class ModelStats:
    """What the server answered, and its own time doing it."""

    def __init__(self) -> None:
        self.requests = 0
        self.seconds = 0.0

    def add(self, seconds: float) -> None:
        self.requests += 1
        self.seconds += seconds


def answer_for(body: dict[str, Any]) -> tuple[str, str | None]:
    """(`text`, None) for a reply, or (``, tool name) for one tool call, by the rules above."""
    messages = body.get("messages") or [{}]
    last = messages[-1]
    if last.get("role") == "tool":
        return "done", None
    offered = {str((tool.get("function") or {}).get("name")) for tool in body.get("tools") or []}
    words = str(last.get("content") or "").split()
    if len(words) == 2 and words[0] == "call" and words[1] in offered:
        return "", words[1]
    return "ok", None


def _envelope(body: dict[str, Any], kind: str) -> dict[str, Any]:
    return {"id": "chatcmpl-bench", "object": kind, "created": _CREATED, "model": body["model"]}


def _call(tool: str, index: int) -> dict[str, Any]:
    return {
        "index": 0,
        "id": f"call_{index}",
        "type": "function",
        "function": {"name": tool, "arguments": '{"order_id": "1001"}'},
    }


def build_app(stats: ModelStats) -> Any:
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    async def complete(request: Request) -> Response:
        started = time.perf_counter()
        body = json.loads(await request.body())
        text, tool = answer_for(body)
        index = stats.requests
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": text or None}
            if tool is not None:
                call = _call(tool, index)
                del call["index"]
                message["tool_calls"] = [call]
            choice = {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if tool else "stop",
            }
            whole = {**_envelope(body, "chat.completion"), "choices": [choice], "usage": _USAGE}
            response = JSONResponse(whole)
            stats.add(time.perf_counter() - started)
            return response
        return StreamingResponse(
            _chunks(body, text, tool, index, started), media_type="text/event-stream"
        )

    async def _chunks(
        body: dict[str, Any], text: str, tool: str | None, index: int, started: float
    ) -> AsyncIterator[str]:
        def event(choices: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> str:
            chunk = {**_envelope(body, "chat.completion.chunk"), "choices": choices}
            if usage is not None:
                chunk["usage"] = usage
            return f"data: {json.dumps(chunk)}\n\n"

        try:
            role = {"role": "assistant", "content": "" if tool is None else None}
            yield event([{"index": 0, "delta": role, "finish_reason": None}])
            if tool is not None:
                delta: dict[str, Any] = {"tool_calls": [_call(tool, index)]}
                yield event([{"index": 0, "delta": delta, "finish_reason": None}])
            else:
                yield event([{"index": 0, "delta": {"content": text}, "finish_reason": None}])
            finish = "tool_calls" if tool else "stop"
            yield event([{"index": 0, "delta": {}, "finish_reason": finish}])
            if (body.get("stream_options") or {}).get("include_usage"):
                yield event([], _USAGE)
            yield "data: [DONE]\n\n"
        finally:
            stats.add(time.perf_counter() - started)

    async def report(request: Request) -> Response:
        return JSONResponse({"requests": stats.requests, "seconds": stats.seconds})

    return Starlette(
        routes=[
            Route("/v1/chat/completions", complete, methods=["POST"]),
            Route("/stats", report, methods=["GET"]),
        ]
    )


async def _serve() -> None:
    import uvicorn

    config = uvicorn.Config(
        build_app(ModelStats()),
        host="127.0.0.1",
        port=0,
        log_level="critical",
        lifespan="off",
        ws="none",
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:  # uvicorn sets a flag, no event
        if serving.done():
            await serving
            raise RuntimeError("the model server did not start")
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    print(f"PORT {port}", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    server.should_exit = True
    await serving


def main() -> int:
    asyncio.run(_serve())
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        raise SystemExit(main())
