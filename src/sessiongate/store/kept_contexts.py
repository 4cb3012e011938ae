"""`KeptContexts`: the model context of recently active sessions, kept between their turns.

Every turn needs its session's model context, and reading and building it from the whole
active path costs in proportion to the transcript: at a few hundred entries it was the
largest part of a short turn. Entries never change once written (a rewind or a branch
switch moves the leaf, a compaction or reset appends), so the active path up to a given
entry is always the same, and a context kept at that entry stays true for as long as the
entry is still on the path at its depth. The next read then asks only for the entries below
it (`Tx.session_context_tail`), one short statement, and plain messages extend the kept
context; anything else (a tool call, a compaction, a model change) rebuilds it from the kept
events and the new ones, still without reading the path again.

What a caller gets is a copy: the messages list and each message are its own to change.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sessiongate.core.transcript import ModelContext, build_model_context

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["INLINE_CONTEXT_ENTRIES", "Kept", "KeptContexts", "context_copy", "extended"]

# Transcripts up to this many entries on the active path build their context on the loop
# (under a millisecond; `tree.short_model_context`), and only those are kept; longer ones
# build on a worker thread.
INLINE_CONTEXT_ENTRIES = 400

# What is kept at once, least recently read going first. Memory goes with entries, not
# sessions: each session holds at most `INLINE_CONTEXT_ENTRIES`, as events and as messages,
# and the budget of entries is what 64 sessions at that length would hold. Most conversations
# are far shorter, so a gateway with a thousand chats in play keeps them all instead of
# reading every context afresh.
KEPT_ENTRIES = 64 * INLINE_CONTEXT_ENTRIES
KEPT_SESSIONS = 4096


@dataclass(slots=True)
class Kept:
    """A session's context as of the entry `leaf_id` at `depth` on its active path."""

    leaf_id: int
    depth: int
    events: list[dict[str, Any]]
    context: ModelContext


class KeptContexts:
    """A bounded map of session id to its kept context (the store's, not thread-safe: it is
    used on the event loop's store calls only)."""

    def __init__(self, sessions: int = KEPT_SESSIONS, entries: int = KEPT_ENTRIES) -> None:
        self._sessions = sessions
        self._entries = entries
        self._held = 0  # entries of every kept session's events
        self._kept: collections.OrderedDict[str, Kept] = collections.OrderedDict()

    def __len__(self) -> int:
        return len(self._kept)

    @property
    def entries(self) -> int:
        return self._held

    def get(self, session_id: str) -> Kept | None:
        return self._kept.get(session_id)

    def put(self, session_id: str, kept: Kept) -> None:
        self.drop(session_id)
        self._kept[session_id] = kept
        self._held += len(kept.events)
        while len(self._kept) > self._sessions or self._held > self._entries:
            _, gone = self._kept.popitem(last=False)
            self._held -= len(gone.events)

    def drop(self, session_id: str) -> None:
        gone = self._kept.pop(session_id, None)
        if gone is not None:
            self._held -= len(gone.events)

    def clear(self) -> None:
        """A conversation was deleted: what was kept of it goes at once, not when evicted."""
        self._kept.clear()
        self._held = 0


def _plain(event: dict[str, Any]) -> bool:
    """A message that adds itself to the context's end and changes nothing before it."""
    return (
        event.get("type") == "message"
        and event.get("role") in ("user", "assistant")
        and not event.get("tool_calls")
    )


def extended(kept: Kept, tail: Sequence[dict[str, Any]]) -> ModelContext:
    """The context of `kept.events + tail`, built from `kept.context` when it can be."""
    if not tail:
        return kept.context
    if all(_plain(event) for event in tail):
        more = build_model_context(tail, owned=True).messages
        base = kept.context
        return ModelContext(
            messages=[*base.messages, *more],
            model=base.model,
            provider=base.provider,
            thinking_level=base.thinking_level,
            boundary_entry_id=base.boundary_entry_id,
        )
    return build_model_context([*kept.events, *tail], owned=True)


def context_copy(context: ModelContext) -> ModelContext:
    """A copy whose list and messages the caller may change without touching what is kept."""
    return ModelContext(
        messages=[dict(message) for message in context.messages],
        model=context.model,
        provider=context.provider,
        thinking_level=context.thinking_level,
        boundary_entry_id=context.boundary_entry_id,
    )
