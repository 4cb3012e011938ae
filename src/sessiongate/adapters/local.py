"""`LocalAdapter`: the `local` platform, a conversation in this terminal.

`run()` reads lines and hands each to the runner without waiting for its reply, so you can type
while the agent works and see the busy-lane behaviour (`interrupt`, `/queue`, `/stop`); replies
arrive through `send` and are printed as they come; a streamed reply is printed as it is
generated (the streaming adapter path, with no interval between edits: a terminal appends).
With `wait_for_replies` (meant for piped, non-interactive input) each line waits for its
outcome before the next is read, so a scripted `/new` cannot overtake the lines before it.
End of input, `/exit` or `/quit` leave after the replies in flight have arrived. Input and
output are injectable for tests.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import TYPE_CHECKING

from sessiongate.core.platform import Platform
from sessiongate.core.source import SessionSource
from sessiongate.gateway.events import MessageEvent
from sessiongate.gateway.receipts import ReceiptStatus

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from sessiongate.gateway.runner import GatewayRunner

__all__ = ["RETRY_MARK", "LocalAdapter", "StdinLines"]

# Ends a streamed line whose text the agent abandoned (its model call was retried).
RETRY_MARK = "[cut off; retrying, attempt {attempt}]"

_LEAVE = frozenset({"/exit", "/quit"})
# Outcomes that no `send` reports, so `run` prints them itself.
_SILENT = frozenset(
    {ReceiptStatus.UNAUTHORIZED, ReceiptStatus.DUPLICATE, ReceiptStatus.UNAVAILABLE}
)


class StdinLines:
    """Lines of standard input read by a daemon thread: a blocked read must not keep the
    process alive after Ctrl+C, which a thread of the default executor would."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[str | None] | None = None

    async def __call__(self) -> str | None:
        if self._queue is None:
            self._queue = asyncio.Queue()
            loop = asyncio.get_running_loop()
            queue = self._queue

            def pump() -> None:
                for line in sys.stdin:
                    loop.call_soon_threadsafe(queue.put_nowait, line.rstrip("\n"))
                loop.call_soon_threadsafe(queue.put_nowait, None)

            threading.Thread(target=pump, name="sessiongate-stdin", daemon=True).start()
        return await self._queue.get()


class LocalAdapter:
    platform = Platform.LOCAL
    pii_safe = True
    # A terminal shows each delta as it comes: printing appends, it costs no platform call.
    min_edit_interval = 0.0

    def __init__(
        self,
        *,
        user_id: str = "local",
        user_name: str | None = None,
        chat_id: str | None = None,
        read_line: Callable[[], Awaitable[str | None]] | None = None,
        write: Callable[[str], object] | None = None,
        prompt: str | None = None,
        reply_prefix: str = "agent> ",
        wait_for_replies: bool = False,
        session_key: str | None = None,
    ) -> None:
        self.source = SessionSource(
            platform=Platform.LOCAL,
            chat_id=chat_id or user_id,
            user_id=user_id,
            user_name=user_name or user_id,
        )
        self._read_line = read_line or StdinLines()
        self._write = write or _stdout_write
        self._prompt = prompt
        self._reply_prefix = reply_prefix
        self._wait = wait_for_replies
        # Set for an incognito conversation: every line is addressed to that lane.
        self.session_key = session_key
        self._runner: GatewayRunner | None = None
        self._closed = False
        # Streamed replies being printed: handle -> the text printed so far; a prompt due
        # meanwhile waits for the reply's end instead of landing inside it.
        self._streamed: dict[str, str] = {}
        self._prompt_due = False

    async def start(self, runner: GatewayRunner) -> None:
        self._runner = runner

    async def stop(self) -> None:
        self._closed = True

    async def send(self, source: SessionSource, text: str, *, turn_id: int | None) -> None:
        self._write(f"{self._reply_prefix}{text}\n")

    async def start_stream(self, source: SessionSource, text: str, *, turn_id: int) -> str:
        handle = str(turn_id)
        self._streamed[handle] = text
        self._write(f"{self._reply_prefix}{text}")
        return handle

    async def edit_stream(self, source: SessionSource, handle: str, text: str) -> None:
        self._print_more(handle, text)

    async def restart_stream(self, source: SessionSource, handle: str, *, attempt: int) -> None:
        # Printed text cannot be taken back: the abandoned attempt is marked and the new one
        # starts on a line of its own.
        self._write(f" {RETRY_MARK.format(attempt=attempt)}\n{self._reply_prefix}")
        self._streamed[handle] = ""

    async def finish_stream(
        self, source: SessionSource, handle: str, text: str, *, turn_id: int
    ) -> None:
        self._print_more(handle, text)
        self._write("\n")
        del self._streamed[handle]
        if self._prompt_due and not self._streamed:
            self._prompt_due = False
            self._write(self._prompt or "")

    def _print_more(self, handle: str, text: str) -> None:
        shown = self._streamed[handle]
        if text.startswith(shown):
            if len(text) > len(shown):
                self._write(text[len(shown) :])
        else:  # a new message of the turn (after a tool call): on a line of its own
            self._write(f"\n{self._reply_prefix}{text}")
        self._streamed[handle] = text

    def chat_id_key(self, chat_id: str) -> str:
        return chat_id

    async def run(self) -> int:
        """The interactive loop; returns how many messages were handed to the runner."""
        if self._runner is None:
            raise RuntimeError("start the runner with this adapter first")
        runner = self._runner
        handed = 0
        while not self._closed:
            if self._prompt and self._streamed:
                self._prompt_due = True
            elif self._prompt:
                self._write(self._prompt)
            line = await self._read_line()
            if line is None:
                break
            text = line.strip()
            if not text:
                continue
            if text.lower() in _LEAVE:
                break
            receipt = await runner.handle_message(
                MessageEvent(source=self.source, text=text, session_key=self.session_key),
                wait=self._wait,
            )
            handed += 1
            # Reading buffered input never yields; let the lane start before the next line.
            await asyncio.sleep(0)
            if receipt.status in _SILENT or (
                receipt.status == ReceiptStatus.FAILED and receipt.turn_id is None
            ):
                self._write(f"({receipt.status}) {receipt.reply or ''}".rstrip() + "\n")
        await runner.wait_idle()
        return handed


def _stdout_write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()
