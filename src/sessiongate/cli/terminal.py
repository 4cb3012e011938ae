"""`Terminal`: the line editor of `sessiongate chat`, with history, and output that never
tears the line being typed.

Lines are read by `input()` (GNU readline when Python has it: arrow keys, Ctrl+R, history)
in a daemon thread, so the event loop runs while you type and a blocked read cannot keep the
process alive after Ctrl+C. A reply can arrive while the prompt is on screen (you may type
while the agent works, to `/stop` or `/queue`): `write` then clears the prompt line, prints
the reply, and shows the prompt again with what you had typed so far. The terminal's modes
are restored on `close`, since a process leaving during a readline call would otherwise
leave the terminal without echo.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["HISTORY_LINES", "Terminal"]

# Enough to find last week's lines again; the file stays a few hundred kilobytes at most.
HISTORY_LINES = 1000
_CLEAR_LINE = "\r\x1b[K"


def _readline() -> Any | None:
    """The readline module, or None where Python was built without it."""
    try:
        import readline
    except ImportError:
        return None
    return readline


class Terminal:
    def __init__(self, prompt: str, *, history: Path | None = None) -> None:
        self.prompt = prompt
        self._history = history
        self._readline = _readline()
        self._queue: asyncio.Queue[str | None] | None = None
        # True while `input()` shows the prompt and waits: a write must redraw it.
        self._prompting = False
        self._lock = threading.Lock()
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
            if self._readline is None:
                self._prompt_shown()
            try:
                line: str | None = input(self.prompt)
            except EOFError:
                line = None
            finally:
                with self._lock:
                    self._prompting = False
            loop.call_soon_threadsafe(queue.put_nowait, line)
            if line is None:
                return

    def _prompt_shown(self) -> None:
        with self._lock:
            self._prompting = True

    def write(self, text: str) -> None:
        """Print `text` above the prompt, which is shown again with the line being typed."""
        with self._lock:
            if not self._prompting:
                sys.stdout.write(text)
            else:
                typed = self._readline.get_line_buffer() if self._readline is not None else ""
                sys.stdout.write(f"{_CLEAR_LINE}{text}{self.prompt}{typed}")
            sys.stdout.flush()

    def close(self) -> None:
        """Save the history (owner-only: it holds what you typed) and restore the terminal."""
        if self._readline is not None and self._history is not None:
            with contextlib.suppress(OSError):
                self._history.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                self._readline.write_history_file(self._history)
                os.chmod(self._history, 0o600)
        if self._modes is not None:
            import termios

            with contextlib.suppress(OSError, termios.error):
                termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, self._modes)
