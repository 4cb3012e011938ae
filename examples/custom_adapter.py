"""Writing an adapter: a platform of your own, here a line protocol over TCP.

    python examples/custom_adapter.py          # serves on 127.0.0.1:7878 until Ctrl+C
    # in another terminal:  nc 127.0.0.1 7878  then type  {"user": "alice", "text": "hi"}

An adapter is one object with `start`, `stop`, `send` and `chat_id_key` (the
`PlatformAdapter` protocol). Inbound, it turns each platform message into a `MessageEvent`
and awaits the runner's `handle_message`, which stores it durably before it returns; outbound,
the runner calls `send` for every reply. A platform of your own is registered once by name.
The platforms that ship (Telegram, Slack, …) are built the same way on the adapter kit
(docs/ADAPTERS.md), which adds deduplication, backoff, splitting, rate limits and typing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from sessiongate import GatewayConfig, SessionSource, SessionStore
from sessiongate.agents import build_agent_factory
from sessiongate.core.platform import register_platform
from sessiongate.gateway import GatewayRunner, MessageEvent

LINECHAT = register_platform("linechat", pii_safe=True)


class LineChatAdapter:
    """Each TCP connection is one user; a line is a JSON object `{"user": ..., "text": ...}`."""

    platform = LINECHAT
    pii_safe = True

    def __init__(self, host: str = "127.0.0.1", port: int = 7878) -> None:
        self.host, self.port = host, port
        self.server: asyncio.Server | None = None
        self._writers: dict[str, asyncio.StreamWriter] = {}
        self._runner: Any = None

    async def start(self, runner: Any) -> None:
        self._runner = runner
        self.server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
            self.server = None

    async def send(self, source: SessionSource, text: str, *, turn_id: int | None) -> None:
        writer = self._writers.get(source.chat_id)
        if writer is None:
            raise ConnectionError(f"{source.chat_id} is not connected")  # retried later
        writer.write(json.dumps({"text": text, "turn_id": turn_id}).encode() + b"\n")
        await writer.drain()

    def chat_id_key(self, chat_id: str) -> str:
        return chat_id

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        user = None
        try:
            while line := await reader.readline():
                try:
                    message = json.loads(line)
                    user, text = str(message["user"]), str(message["text"])
                except (ValueError, KeyError, TypeError):
                    writer.write(b'{"error": "send {\\"user\\": ..., \\"text\\": ...}"}\n')
                    continue
                self._writers[user] = writer
                event = MessageEvent(
                    source=SessionSource(platform=LINECHAT, chat_id=user, user_id=user),
                    text=text,
                )
                # Returns once the message is stored; the reply comes through `send`.
                await self._runner.handle_message(event, wait=False)
        finally:
            if user is not None and self._writers.get(user) is writer:
                del self._writers[user]
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


async def serve(
    home: Path, adapter: LineChatAdapter, ready: asyncio.Event, stop: asyncio.Event
) -> None:
    config = GatewayConfig()
    with SessionStore(home / "sessions", config) as store:
        runner = GatewayRunner(
            store, config, home=home, agent_factory=build_agent_factory(config), adapters=[adapter]
        )
        await runner.start()
        ready.set()
        try:
            await stop.wait()
        finally:
            await runner.stop()


def main() -> None:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 7878
    adapter = LineChatAdapter(port=port)

    async def run() -> None:
        ready, stop = asyncio.Event(), asyncio.Event()
        with tempfile.TemporaryDirectory() as tmp:
            task = asyncio.create_task(serve(Path(tmp), adapter, ready, stop))
            await ready.wait()
            print(f"linechat on {adapter.host}:{adapter.port}; Ctrl+C stops", flush=True)
            await task

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())


if __name__ == "__main__":
    main()
