"""Conversation-tree operations at the sizes of issue 4: listing 1,000 branch tips (each ending
a run of tool calls, so its headline is 21 entries up), building the model context of a
10,000-entry transcript, forking a 5,000-message prefix.

Runs in the harness process against a throwaway store; each figure is the median of several
runs, next to the issue's budget.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessiongate import GatewayConfig, Platform, SessionSource, SessionStore

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["FULL_SIZES", "QUICK_SIZES", "TREE_BUDGETS_MS", "run_tree_section"]

TREE_BUDGETS_MS = {"branches": 50.0, "context": 20.0, "fork": 100.0}


def _median_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def _turn(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}, {"role": "assistant", "content": "ok " + text}]


def _tool_turn(text: str, calls: int = 10) -> list[dict[str, Any]]:
    # A tip that ends a run of tool calls: its headline is 2 * `calls` + 1 entries up.
    messages: list[dict[str, Any]] = [{"role": "user", "content": text}]
    for n in range(calls):
        call_id = f"{text}-{n}"
        messages += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": call_id, "function": {"name": "f", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": call_id, "content": "result " * 30},
        ]
    return messages


# The sizes of issue 4 (the budgets are for these), and the quick run's.
FULL_SIZES = {"tips": 1_000, "entries": 10_000, "fork_prefix": 5_000}
QUICK_SIZES = {"tips": 200, "entries": 2_000, "fork_prefix": 1_000}


def run_tree_section(*, quick: bool) -> dict[str, Any]:
    sizes = QUICK_SIZES if quick else FULL_SIZES
    tips, entries, prefix = sizes["tips"], sizes["entries"], sizes["fork_prefix"]
    with tempfile.TemporaryDirectory(prefix="sg-tree-") as folder:
        store = SessionStore(Path(folder), GatewayConfig(mirror_sessions_json=False))
        try:
            branchy = store.get_or_create_session(SessionSource(platform=Platform.API, chat_id="b"))
            store.append_messages(branchy.session_id, _turn("root"))
            for i in range(tips - 1):
                store.append_messages(branchy.session_id, _tool_turn(f"variant {i}"))
                store.rewind_session(branchy.session_id, 1)
            listed = len(store.list_branches(branchy.session_id))
            branches_ms = _median_ms(lambda: store.list_branches(branchy.session_id), 10)

            long = store.get_or_create_session(SessionSource(platform=Platform.API, chat_id="l"))
            for i in range(entries // 2):
                store.append_messages(long.session_id, _turn(f"question {i} " + "w" * 60))
            context_ms = _median_ms(lambda: store.model_context(long.session_id), 10)

            source = store.get_or_create_session(SessionSource(platform=Platform.API, chat_id="f"))
            for i in range(prefix // 2):
                store.append_messages(source.session_id, _turn(f"q{i}"))
            fork_ms = _median_ms(
                lambda: store.fork_session(source.session_key, max_tokens=10**9), 5
            )
        finally:
            store.close()
    return {
        "status": "ok",
        "sizes": dict(sizes),
        "branches": {"tips_listed": listed, "median_ms": branches_ms},
        "context": {"entries": entries, "median_ms": context_ms},
        "fork": {"messages": prefix, "median_ms": fork_ms},
        "budgets_ms": TREE_BUDGETS_MS,
    }
