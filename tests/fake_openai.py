"""A local OpenAI-compatible endpoint that records every request (what the model would see).

`POST /v1/chat/completions` answers `reply_format` filled with the last message (default
`model says: <last message>`) and `usage`; the model `no-such-model`, or a last message
containing `FAIL`, gets a 400 (not retried by the SDK), so failure paths and their logging run.
Shared by the agent tests and the reliability tests (`tests/` is on the import path).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeOpenAI"]


class FakeOpenAI(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        *,
        reply_format: str = "model says: {last}",
        usage: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[dict[str, Any]] = []
        self.reply_format = reply_format
        self.usage = usage or {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
        self._thread = threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.shutdown()
        self.server_close()
        self._thread.join()

    def bodies_text(self) -> str:
        """Everything the model was sent, as one searchable text."""
        return "\n".join(json.dumps(r["body"], ensure_ascii=False) for r in self.requests)


class _Handler(BaseHTTPRequestHandler):
    server: FakeOpenAI

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(
            {"path": self.path, "authorization": self.headers.get("Authorization"), "body": body}
        )
        last = str(body["messages"][-1]["content"])
        if "FAIL" in last or body["model"] == "no-such-model":
            self._reply(400, {"error": {"message": "upstream refused", "type": "invalid_request"}})
            return
        self._reply(
            200,
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1_767_225_600,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {
                            "role": "assistant",
                            "content": self.server.reply_format.format(last=last),
                        },
                        "finish_reason": "stop",
                    }
                ],
                "usage": self.server.usage,
            },
        )

    def _reply(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # quiet test output
        return
