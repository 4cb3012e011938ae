"""Tools for the agent tests, loaded by import path (`sample_tools:lookup_order`) as a user's
own module would be (`tests/` is on the import path)."""

from __future__ import annotations

import asyncio
import threading
from typing import Literal

from sessiongate.agents.tools import ToolContext, tool

# Set by `wait_for_peer` calls: two of them finish only when both run at once.
PEERS = threading.Barrier(2, timeout=10)


def lookup_order(order_id: str, include_items: bool = False) -> dict[str, object]:
    """Look an order up by its id.

    Args:
        order_id: the id printed on the receipt
        include_items: whether to list the order's items too
    """
    order: dict[str, object] = {"order_id": order_id, "status": "shipped"}
    if include_items:
        order["items"] = ["book"]
    return order


async def convert(amount: float, unit: Literal["cm", "in"] = "cm") -> str:
    """Convert a length."""
    return f"{amount * (2.54 if unit == 'in' else 1 / 2.54):.2f}"


@tool(name="whoami", timeout_seconds=3)
async def caller_of(context: ToolContext) -> str:
    """Say which session calls."""
    return context.session_key


async def explode(reason: str) -> str:
    """Always fails."""
    raise ValueError(f"cannot do that: {reason}")


async def hang() -> str:
    """Never returns."""
    await asyncio.Event().wait()
    return "never"


def unserialisable() -> object:
    """Returns something that is not JSON."""
    return object()


def wait_for_peer(name: str) -> str:
    """Returns once another call of it runs at the same time (a plain function: a thread)."""
    PEERS.wait()
    return f"{name} met its peer"


def not_fillable(*values: int) -> int:
    return sum(values)


NOT_A_FUNCTION = 42


async def stored_roles(context: ToolContext) -> list[str]:
    """The roles of the calling session's stored messages, as the tool runs (what is durable
    mid-turn)."""
    assert context.host is not None
    return [m["role"] for m in context.host.store.load_transcript(context.session_id)]


# Every path `delete_file` was called with, in order (the approval tests count the runs).
DELETED: list[str] = []


def delete_file(path: str) -> str:
    """Delete a file (recorded only).

    Args:
        path: the file to delete
    """
    DELETED.append(path)
    return f"deleted {path}"
