"""`Terminal`: the line editor of `sessiongate chat`, with history, and output that never
tears the line being typed.

Lines are read by `input()` (GNU readline when Python has it: arrow keys, Ctrl+R, history)
in a daemon thread, so the event loop runs while you type and a blocked read cannot keep the
process alive after Ctrl+C. A reply can arrive while the prompt is on screen (you may type
while the agent works, to `/stop` or `/queue`): `write` then clears the prompt line, prints
the reply, and shows the prompt again with what you had typed so far. A reply being streamed
(a write that does not end its line) takes the prompt off the screen until its line ends.
The terminal's modes are restored on `close`, since a process leaving during a readline call
would otherwise leave the terminal without echo.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

__all__ = ["HISTORY_LINES", "Terminal"]

# Enough to find last week's lines again; the file stays a few hundred kilobytes at most.
HISTORY_LINES = 1000
_CLEAR_LINE = "\r\x1b[K"
_NOT_GIVEN: Any = object()


def _readline() -> Any | None:
    """The readline module, or None where Python was built without it."""
    try:
        import readline
    except ImportError:
        return None
    return readline


class Terminal:
    def __init__(
        self,
        prompt: str,
        *,
        history: Path | None = None,
        readline: Any | None = _NOT_GIVEN,
        read: Callable[[str], str] = input,
        out: TextIO | None = None,
    ) -> None:
        self.prompt = prompt
        self._history = history
        # Injectable for tests: the readline module (None: without one), `input`, stdout.
        self._readline = _readline() if readline is _NOT_GIVEN else readline
        self._read = read
        self._out = out
        self._queue: asyncio.Queue[str | None] | None = None
        # True while `input()` shows the prompt and waits: a write must redraw it.
        self._prompting = False
        # True from the call of `input()` until readline says its prompt is on screen: a
        # write meanwhile waits (in `_pending`) for the prompt, which it then clears and
        # redraws below itself; written at once, it would land on the prompt's line.
        self._entering = False
        self._pending = ""
        # True once `close` ran: a prompt readline draws after it is cleared at once.
        self._closed = False
        # True while a streamed line is on screen: the prompt waits for its end.
        self._partial = False
        # What that streamed line shows so far, to draw it again without a prompt.
        self._line = ""
        self._lock = threading.Condition()
        self._wanted = threading.Semaphore(0)
        self._modes: list[Any] | None = None
        with contextlib.suppress(ImportError, OSError):
            import termios

            self._modes = termios.tcgetattr(sys.stdin.fileno())
        if self._readline is not None and history is not None:
            with contextlib.suppress(OSError):
                self._readline.read_history_file(history)
            self._readline.set_history_length(HISTORY_LINES)

    async def read_line(self) -> str | None:
        """The next line typed, or None at end of input (Ctrl+D)."""
        if self._queue is None:
            self._queue = asyncio.Queue()
            loop = asyncio.get_running_loop()
            queue = self._queue
            threading.Thread(
                target=self._pump, args=(loop, queue), name="sessiongate-chat", daemon=True
            ).start()
        # One line per call: no prompt is shown before the caller is ready for the next line.
        self._wanted.release()
        return await self._queue.get()

    def _pump(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[str | None]) -> None:
        if self._readline is not None:
            # Called once the prompt is on screen: from then on a write must redraw it.
            self._readline.set_pre_input_hook(self._prompt_shown)
        while True:
            self._wanted.acquire()
            with self._lock:
                while self._partial:
                    self._lock.wait()
            try:
                if self._readline is None:
                    # No line editing to keep in step with: the prompt is drawn here, under
                    # the lock, so no write can come between it and the flag.
                    with self._lock:
                        if not self._closed:
                            self._stdout().write(self.prompt)
                            self._stdout().flush()
                            self._prompting = True
                    line: str | None = self._read("")
                else:
                    with self._lock:
                        self._entering = True
                    line = self._read(self.prompt)
            except EOFError:
                line = None
            finally:
                with self._lock:
                    self._prompting = self._entering = False
                    pending, self._pending = self._pending, ""
                    if pending:
                        self._emit(pending)
            loop.call_soon_threadsafe(queue.put_nowait, line)
            if line is None:
                return

    def _prompt_shown(self) -> None:
        with self._lock:
            self._entering = False
            if self._closed:
                # The chat left while readline drew the prompt: take it off the screen.
                self._stdout().write(_CLEAR_LINE)
                self._stdout().flush()
                return
            self._prompting = True
            pending, self._pending = self._pending, ""
            if pending:
                # Written while readline drew the prompt: now above it, the prompt redrawn.
                self._emit(pending)
                return
            if self._partial and self._readline is not None:
                # A streamed reply began between the wait for its end and the prompt being
                # drawn, so the prompt landed inside the reply's line: draw the line again
                # without it. The prompt comes back when the line ends.
                self._stdout().write(_CLEAR_LINE + self._line)
                self._stdout().flush()

    def write(self, text: str) -> None:
        """Print `text` above the prompt, which is shown again with the line being typed; a
        text that does not end its line (a streamed reply) keeps the prompt off the screen
        until a later write ends the line."""
        if not text:
            return
        with self._lock:
            if self._entering:
                self._pending += text
                return
            self._emit(text)

    def _emit(self, text: str) -> None:
        """`write`, the lock held."""
        ends = text.endswith("\n")
        prompt = ""
        if self._prompting and ends:
            typed = self._readline.get_line_buffer() if self._readline is not None else ""
            prompt = f"{self.prompt}{typed}"
        if self._prompting and not self._partial:
            text = _CLEAR_LINE + text
        self._stdout().write(text + prompt)
        self._stdout().flush()
        tail = text.rpartition("\n")[2].removeprefix(_CLEAR_LINE)
        self._line = "" if ends else (self._line + tail if "\n" not in text else tail)
        self._partial = not ends
        if ends:
            self._lock.notify_all()

    def _stdout(self) -> TextIO:
        return self._out if self._out is not None else sys.stdout

    def close(self) -> None:
        """Save the history (owner-only: it holds what you typed) and restore the terminal;
        a prompt left on screen (the chat left while it waited for a line) is cleared."""
        with self._lock:
            self._closed = True
            pending, self._pending = self._pending, ""
            if self._prompting or pending:
                # A write held back while readline drew the prompt (the chat left meanwhile)
                # is shown now, and no prompt after it.
                self._stdout().write(_CLEAR_LINE + pending)
                self._stdout().flush()
            self._prompting = False
        if self._readline is not None and self._history is not None:
            with contextlib.suppress(OSError):
                self._history.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                self._readline.write_history_file(self._history)
                os.chmod(self._history, 0o600)
        if self._modes is not None:
            import termios

            with contextlib.suppress(OSError, termios.error):
                termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, self._modes)
