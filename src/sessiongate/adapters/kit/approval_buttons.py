"""Approve and Deny buttons under an approval prompt (`gateway/approvals.py`), alike on every
platform that has buttons.

Each button carries `<verb>:<approval id>` (Telegram's callback data, Slack's action id,
Discord's custom id), and a press is read as that command typed by the person who pressed it
(`/approve <id>`). Who may decide, and that two presses (or two devices) make one decision,
stay the gateway's: the press is no more than the command.

Once the approval is settled the gateway tells the adapter (`settle_approval`), which shows
the outcome in place of the buttons; `PostedPrompts` remembers, in this process, where each
prompt went (after a restart a prompt keeps its buttons, and a press is answered "already
approved").
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sessiongate.adapters.kit.outbound import Target

__all__ = ["APPROVAL_BUTTONS", "PostedPrompt", "PostedPrompts", "button_value", "pressed_command"]

# (label, verb), in the order they are shown.
APPROVAL_BUTTONS = (("Approve", "approve"), ("Deny", "deny"))
_VALUE = re.compile(r"(approve|deny):([0-9a-f]{1,64})")


def button_value(verb: str, approval_id: str) -> str:
    """What a button carries: `approve:<id>` or `deny:<id>`."""
    return f"{verb}:{approval_id}"


def pressed_command(value: str | None) -> str | None:
    """The command a button's value stands for (`/deny ab12`), or None for any other value."""
    match = _VALUE.fullmatch(value or "")
    return None if match is None else f"/{match.group(1)} {match.group(2)}"


@dataclass(frozen=True, slots=True)
class PostedPrompt:
    """Where an approval prompt went, and what it said."""

    target: Target
    message_id: str
    text: str


class PostedPrompts:
    """The approval prompts this process posted, by approval id: the newest `limit` only."""

    def __init__(self, limit: int = 1000) -> None:
        self._limit = limit
        self._prompts: OrderedDict[str, PostedPrompt] = OrderedDict()

    def add(self, approval_id: str, prompt: PostedPrompt) -> None:
        self._prompts[approval_id] = prompt
        while len(self._prompts) > self._limit:
            self._prompts.popitem(last=False)

    def pop(self, approval_id: str) -> PostedPrompt | None:
        return self._prompts.pop(approval_id, None)
