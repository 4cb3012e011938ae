"""A `SessionEntry` as the API's session row (derived booleans and `next_reset_at` added), and
the model context a next turn would get as the API shows it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sessiongate.api.schemas import BranchOut, ContextOut, SessionRow
from sessiongate.core.bindings import DEFAULT_AGENT, agent_of_key
from sessiongate.core.context import build_session_context, build_session_context_prompt
from sessiongate.gateway.prompts import SystemPrompts, compose_system_prompt

if TYPE_CHECKING:
    from datetime import datetime

    from sessiongate.core.config import GatewayConfig
    from sessiongate.core.entry import SessionEntry
    from sessiongate.core.transcript import ModelContext
    from sessiongate.store.session_store import SessionStore

__all__ = ["branch_view", "context_view", "next_reset_of", "session_row"]


def next_reset_of(entry: SessionEntry, store: SessionStore) -> datetime | None:
    """When the reset policy next makes this lane stale; None for `mode: none`."""
    try:
        return store.next_reset_at(entry)
    except ValueError:
        # An unknown timezone is reported by `sessiongate doctor`; the row still lists.
        return None


def session_row(
    entry: SessionEntry, store: SessionStore, *, config: GatewayConfig | None = None
) -> SessionRow:
    """The row; with `config`, also its preview (message count, last message: one store read)
    and the model that will answer."""
    extra: dict[str, Any] = {}
    if config is not None:
        preview = store.preview(entry.session_id) or {}
        extra["message_count"] = preview.get("message_count")
        extra["last_message"] = preview.get("last_message")
        agent_id = agent_of_key(entry.session_key) or DEFAULT_AGENT
        try:
            kind: str | None = config.agent_spec(agent_id).kind
        except KeyError:
            kind = None
        extra["agent_kind"] = kind
        extra["model"] = entry.model_override or config.model_of(entry.session_key)
    return SessionRow(
        **extra,
        session_key=entry.session_key,
        session_id=entry.session_id,
        agent=agent_of_key(entry.session_key),
        created_at=entry.created_at,
        updated_at=entry.updated_at,
        display_name=entry.display_name,
        platform=str(entry.platform) if entry.platform is not None else None,
        chat_type=str(entry.chat_type),
        label=entry.label,
        input_tokens=entry.input_tokens,
        output_tokens=entry.output_tokens,
        cache_read_tokens=entry.cache_read_tokens,
        cache_write_tokens=entry.cache_write_tokens,
        total_tokens=entry.total_tokens,
        context_tokens=entry.context_tokens,
        last_prompt_tokens=entry.last_prompt_tokens,
        estimated_cost_usd=entry.estimated_cost_usd,
        cost_status=entry.cost_status,
        compaction_count=entry.compaction_count,
        archived=entry.archived,
        pinned=entry.pinned,
        unread=entry.unread,
        archived_at=entry.archived_at,
        pinned_at=entry.pinned_at,
        last_read_at=entry.last_read_at,
        marked_unread_at=entry.marked_unread_at,
        last_activity_at=entry.last_activity_at,
        session_started_at=entry.session_started_at,
        last_interaction_at=entry.last_interaction_at,
        next_reset_at=next_reset_of(entry, store),
        suspended=entry.suspended,
        resume_pending=entry.resume_pending,
        parent_session_key=entry.parent_session_key,
        forked_from_parent=entry.forked_from_parent,
        incognito=entry.incognito,
        was_auto_reset=entry.was_auto_reset,
        auto_reset_reason=entry.auto_reset_reason,
        thinking_level=entry.thinking_level,
        verbose_level=entry.verbose_level,
        reasoning_level=entry.reasoning_level,
        elevated_level=entry.elevated_level,
        send_policy=entry.send_policy,
        provider_override=entry.provider_override,
        model_override=entry.model_override,
        memory_flush_at=entry.memory_flush_at,
        memory_flush_compaction_count=entry.memory_flush_compaction_count,
        subject=entry.subject,
    )


def context_view(
    entry: SessionEntry,
    context: ModelContext,
    store: SessionStore,
    *,
    prompts: SystemPrompts | None = None,
) -> ContextOut:
    """What the next turn from the session's last sender would get (with the agent's
    instructions before the session context block when `prompts` is given)."""
    prompt = None
    if entry.origin is not None:
        prompt = build_session_context_prompt(
            build_session_context(entry.origin, store.config, entry)
        )
        if prompts is not None:
            instructions = prompts.instructions_for(entry.session_key, entry.origin)
            prompt = compose_system_prompt(instructions, prompt)
    return ContextOut(
        session_key=entry.session_key,
        session_id=entry.session_id,
        system_prompt=prompt,
        messages=context.messages,
        # As a turn resolves them: the last change entry, else the lane's override.
        model=context.model or entry.model_override,
        provider=context.provider or entry.provider_override,
        thinking_level=context.thinking_level or entry.thinking_level,
        boundary_entry_id=context.boundary_entry_id,
    )


def branch_view(tip: dict[str, Any]) -> BranchOut:
    """One tip of `SessionStore.list_branches` as the API shows it."""
    return BranchOut(
        leaf_entry_id=tip["leaf_entry_id"],
        headline=tip.get("headline") or "",
        message_count=tip.get("message_count") or 0,
        updated_at=tip.get("updated_at"),
        active=bool(tip.get("active")),
    )
