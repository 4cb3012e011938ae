"""`LocalAdapter`: the `local` platform, a conversation in this terminal.

`run()` reads lines and hands each to the runner without waiting for its reply, so you can type
while the agent works and see the busy-lane behaviour (`interrupt`, `/queue`, `/stop`); replies
arrive through `send` and are printed as they come; a streamed reply is printed as it is
generated (the streaming adapter path, with no interval between edits: a terminal appends).
With `wait_for_replies` (meant for piped, non-interactive input) each line waits for its
outcome before the next is read, so a scripted `/new` cannot overtake the lines before it.
End of input, `/exit` or `/quit` leave after the replies in flight have arrived. Input and
output are injectable for tests.

A turn cut off by a newer line (`busy_input_mode: interrupt`, `/new`) is not left to vanish:
its streamed line is closed with `[cut off]` and a notice names the line that cut it off (a
`/stop` answers for itself). `stop_turn()` is `/stop` typed (the chat's Ctrl+C), and `busy()`
says whether a turn of this conversation is running.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from sessiongate.core.platform import Platform
from sessiongate.core.source import SessionSource
from sessiongate.gateway.messages import Inbox, MessageEvent, Receipt, ReceiptStatus
from sessiongate.gateway.streams import TurnWatch

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

__all__ = ["CUT_OFF_MARK", "CUT_OFF_NOTICE", "RETRY_MARK", "LocalAdapter", "StdinLines"]

# Ends a streamed line whose text the agent abandoned (its model call was retried).
RETRY_MARK = "[cut off; retrying, attempt {attempt}]"
# Ends a streamed line whose turn was cut off, and the notice for a turn cut off by a newer
# line (its text and the newer one's, shortened).
CUT_OFF_MARK = "[cut off]"
CUT_OFF_NOTICE = "(the reply to {line} was cut off by {newer})"
_STOP = "/stop"
_FOLLOW_GUARD_SECONDS = 5.0

_LEAVE = frozenset({"/exit", "/quit"})
# Outcomes that no `send` reports, so `run` prints them itself.
_SILENT = frozenset(
    {ReceiptStatus.UNAUTHORIZED, ReceiptStatus.DUPLICATE, ReceiptStatus.UNAVAILABLE}
)


@runtime_checkable
class TerminalInbox(Inbox, Protocol):
    """What the terminal needs beyond `Inbox` (`GatewayRunner` has it): to follow a line's
    turn without waiting for it, to wait until every reply has arrived, and whether the
    conversation's lane is busy."""

    async def handle_message(
        self, event: MessageEvent, *, wait: bool = True, watch: TurnWatch | None = None
    ) -> Receipt: ...

    async def wait_idle(self) -> None: ...

    def is_busy(self, session_key: str) -> bool: ...


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
        self._runner: TerminalInbox | None = None
        self._closed = False
        # Streamed replies being printed: handle -> the text printed so far; a prompt due
        # meanwhile waits for the reply's end instead of landing inside it.
        self._streamed: dict[str, str] = {}
        self._prompt_due = False
        # Every line handed to the runner, in order (a turn cut off names the next one), and
        # how many of them were typed (not sent by `stop_turn`).
        self.lines: list[str] = []
        self.typed = 0
        # The conversation's session key, once the runner named it.
        self._key: str | None = session_key
        self._following: set[asyncio.Task[None]] = set()

    async def start(self, runner: Inbox) -> None:
        if not isinstance(runner, TerminalInbox):
            raise TypeError("the local adapter needs a gateway that streams turns to it")
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
            self.typed += 1
            receipt = await self._hand(text)
            handed += 1
            # Reading buffered input never yields; let the lane start before the next line.
            await asyncio.sleep(0)
            if receipt.status in _SILENT or (
                receipt.status == ReceiptStatus.FAILED and receipt.turn_id is None
            ):
                self._write(f"({receipt.status}) {receipt.reply or ''}".rstrip() + "\n")
        await runner.wait_idle()
        if self._following:
            # Every turn has its outcome once the runner is idle: the followers are only
            # printing it. The bound is a guard, never a wait for work.
            _, left = await asyncio.wait(self._following, timeout=_FOLLOW_GUARD_SECONDS)
            for task in left:
                task.cancel()
        return handed

    def busy(self) -> bool:
        """Whether a turn of this conversation is running (or about to)."""
        return (
            self._runner is not None and self._key is not None and self._runner.is_busy(self._key)
        )

    async def stop_turn(self) -> None:
        """Stop the running turn, exactly as typing `/stop` does (its answer is printed)."""
        receipt = await self._hand(_STOP)
        if receipt.status in _SILENT:
            self._write(f"({receipt.status}) {receipt.reply or ''}".rstrip() + "\n")

    async def _hand(self, text: str) -> Receipt:
        """One line to the runner; without `wait_for_replies` its turn is followed, so a cut
        off is told."""
        assert self._runner is not None
        watch = None if self._wait else TurnWatch(max_deltas=0)
        self.lines.append(text)
        index = len(self.lines) - 1
        receipt = await self._runner.handle_message(
            MessageEvent(source=self.source, text=text, session_key=self.session_key),
            wait=self._wait,
            watch=watch,
        )
        self._key = receipt.session_key or self._key
        if watch is not None and receipt.status == ReceiptStatus.QUEUED:
            task = asyncio.ensure_future(self._follow(watch, index))
            self._following.add(task)
            task.add_done_callback(self._following.discard)
        return receipt

    async def _follow(self, watch: TurnWatch, index: int) -> None:
        """Until the turn of line `index` ends; if it was cut off, say so."""
        while watch.receipt is None:
            await watch.wait_ready()
            watch.take_nowait()  # only the end matters here: the reply comes through `send`
        receipt = watch.receipt
        if receipt.status != ReceiptStatus.INTERRUPTED:
            return
        handle = str(receipt.turn_id)
        if handle in self._streamed:
            del self._streamed[handle]
            self._write(f" {CUT_OFF_MARK}\n")
            if self._prompt_due and not self._streamed:
                self._prompt_due = False
                self._write(self._prompt or "")
        # What cut it off arrived just before this outcome: the latest line.
        newer = self.lines[-1] if len(self.lines) > index + 1 else None
        if newer is not None and newer.lower().startswith(_STOP):
            return  # `/stop` answers for itself ("Stopped the current reply.")
        self._write(
            CUT_OFF_NOTICE.format(
                line=_quoted(self.lines[index]),
                newer=_quoted(newer) if newer is not None else "the gateway",
            )
            + "\n"
        )


def _quoted(text: str, limit: int = 40) -> str:
    line = text.splitlines()[0] if text else ""
    return f'"{line[: limit - 1]}…"' if len(line) > limit else f'"{line}"'


def _stdout_write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()
