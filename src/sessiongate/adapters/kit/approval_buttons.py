"""Approve and Deny buttons under an approval prompt (`gateway/approvals.py`), alike on every
platform that has buttons.

Each button carries `<verb>:<approval id>` (Telegram's callback data, Slack's action id,
Discord's custom id), and a press is read as that command typed by the person who pressed it
(`/approve <id>`). Who may decide, and that two presses (or two devices) make one decision,
stay the gateway's: the press is no more than the command.
"""

from __future__ import annotations

import re

__all__ = ["APPROVAL_BUTTONS", "button_value", "pressed_command"]

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
