"""`Terminal`: a reply that arrives while the prompt is being drawn goes above the prompt,
never onto its line, driven through the terminal's own hooks (no timing)."""

from __future__ import annotations

import io
from typing import Any

from sessiongate.cli.terminal import Terminal

CLEAR = "\r\x1b[K"


class FakeReadline:
    """The parts of the readline module the terminal uses."""

    def __init__(self) -> None:
        self.hook: Any = None
        self.buffer = ""

    def set_pre_input_hook(self, hook: Any) -> None:
        self.hook = hook

    def get_line_buffer(self) -> str:
        return self.buffer


async def test_a_reply_written_while_readline_draws_the_prompt_goes_above_it():
    out = io.StringIO()
    readline = FakeReadline()
    terminal: Terminal

    def read(prompt: str) -> str:
        # readline has drawn the prompt but not yet called its pre-input hook: the moment a
        # late reply used to land on the prompt's line (`you> agent> ...`).
        out.write(prompt)
        terminal.write("agent> echo: late\n")
        readline.hook()
        readline.buffer = "typed"
        terminal.write("agent> echo: later still\n")
        return "next line"

    terminal = Terminal("you> ", readline=readline, read=read, out=out)
    assert await terminal.read_line() == "next line"
    shown = out.getvalue()
    assert "you> agent>" not in shown
    assert shown == (
        f"you> {CLEAR}agent> echo: late\nyou> {CLEAR}agent> echo: later still\nyou> typed"
    )


async def test_without_readline_the_prompt_is_drawn_before_any_reply_can_come():
    out = io.StringIO()
    terminal: Terminal

    def read(prompt: str) -> str:
        assert prompt == ""  # the terminal drew it, under its lock
        terminal.write("agent> echo: late\n")
        return "line"

    terminal = Terminal("you> ", readline=None, read=read, out=out)
    assert await terminal.read_line() == "line"
    assert out.getvalue() == f"you> {CLEAR}agent> echo: late\nyou> "


async def test_leaving_at_the_prompt_clears_it():
    out = io.StringIO()
    readline = FakeReadline()
    terminal: Terminal

    def read(prompt: str) -> str:
        out.write(prompt)
        readline.hook()
        terminal.close()  # the chat left (Ctrl+C) while the prompt waited for a line
        return "x"

    terminal = Terminal("you> ", readline=readline, read=read, out=out)
    await terminal.read_line()
    assert out.getvalue() == f"you> {CLEAR}"
