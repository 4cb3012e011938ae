"""The built-in session tools: an agent working with the sessions of its gateway.

Off unless named in `agent.openai.tools`. What they may see is `session_tools.visibility`:
`tree` (default) the calling session and the sessions it forked or spawned, `agent` every
session of its agent namespace, `all` everything. A session outside that is answered exactly like
one that does not exist, so a tool never confirms that someone else's conversation is there.

Incognito sessions are outside every visibility: their keys look like forks of the person's
ordinary session (`<key>:%f<hex>`), but no tool lists, reads, searches or sends to them, and an
incognito session's tools never send into another session, so nothing of one is copied into a
persistent transcript (a tool result is stored with the calling turn).

`sessions_spawn` forks a sub-agent session by the spec's automatic parent fork policy: the
parent's active branch, or an isolated start when that branch is larger than the child model's
usable input capacity (`session_tools.context_windows`, else the 100K cap); the task runs as
the child's first turn and its reply comes back as the tool's result. The child is a fork key
of the caller's lane, so it has the caller's readers and `core.fork_policy` allows the copy
(the store's `fork_session` applies that rule to every fork).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sessiongate.agents.tools.base import Tool, ToolContext, make_tool
from sessiongate.core.keys import FORK_TAG
from sessiongate.core.platform import Platform
from sessiongate.core.source import SessionSource
from sessiongate.gateway.messages import MessageEvent

if TYPE_CHECKING:
    from sessiongate.core.entry import SessionEntry
    from sessiongate.gateway.agent import AgentHost

__all__ = [
    "BUILTIN_TOOLS",
    "FORK_CAP_TOKENS",
    "is_visible",
    "sessions_history",
    "sessions_list",
    "sessions_search",
    "sessions_send",
    "sessions_spawn",
]

# The spec's fixed cap for an automatic fork when the child model's capacity is unknown.
FORK_CAP_TOKENS = 100_000
# A message's text in `sessions_history` and a hit's snippet are cut at this length: the
# result goes back into the calling model's context.
_TEXT_CHARS = 2_000
# `sessions_spawn` waits this long for its sub-agent unless `agent.openai.tool_timeouts` says.
_SPAWN_TIMEOUT = 600.0
# System-origin turns: never parsed as slash commands, never interrupting a running turn.
_SYSTEM_EVENT = "system"


def is_visible(session_key: str, *, caller: str, visibility: str) -> bool:
    """Whether the session tools of `caller`'s turn may see `session_key`."""
    if visibility == "all":
        return True
    if visibility == "agent":
        return _namespace(session_key) == _namespace(caller)
    return session_key == caller or session_key.startswith(f"{caller}:{FORK_TAG}")


def _namespace(session_key: str) -> str:
    return ":".join(session_key.split(":", 2)[:2])


class _NotVisibleError(LookupError):
    def __init__(self, session_key: str) -> None:
        super().__init__(f"no session {session_key!r} that this conversation may see")


def _host(context: ToolContext) -> AgentHost:
    if context.host is None:
        raise RuntimeError("the session tools work only inside a running gateway")
    return context.host


def _may_see(context: ToolContext, host: AgentHost, session_key: str) -> bool:
    """`is_visible`, and never an incognito session (held in memory only, by design)."""
    visibility = context.settings.visibility
    return is_visible(
        session_key, caller=context.session_key, visibility=visibility
    ) and not host.store.is_incognito(session_key)


def _entry(context: ToolContext, session_key: str) -> SessionEntry:
    host = _host(context)
    if not _may_see(context, host, session_key):
        raise _NotVisibleError(session_key)
    entry = host.store.get_session(session_key)
    if entry is None:
        raise _NotVisibleError(session_key)
    return entry


def _row(entry: SessionEntry) -> dict[str, Any]:
    return {
        "session_key": entry.session_key,
        "session_id": entry.session_id,
        "display_name": entry.display_name,
        "label": entry.label,
        "platform": None if entry.platform is None else str(entry.platform),
        "chat_type": str(entry.chat_type),
        "updated_at": entry.updated_at.isoformat(),
        "parent_session_key": entry.parent_session_key,
    }


async def sessions_list(context: ToolContext, limit: int = 20) -> list[dict[str, Any]]:
    """List the sessions this conversation may see, most recently active first.

    Args:
        limit: the most sessions to return (1 to 200)
    """
    host = _host(context)
    entries = [
        entry for entry in host.store.list_sessions() if _may_see(context, host, entry.session_key)
    ]
    return [_row(entry) for entry in entries[: max(1, min(limit, 200))]]


async def sessions_history(
    context: ToolContext, session_key: str, limit: int = 20
) -> dict[str, Any]:
    """Read the latest messages of a session (its active branch), oldest first.

    Args:
        session_key: the session's key, as sessions_list gives it
        limit: the most messages to return
    """
    entry = _entry(context, session_key)
    count = max(1, min(limit, context.settings.history_limit))
    messages = _host(context).store.load_transcript(entry.session_id, limit=count)
    return {
        "session_key": session_key,
        "messages": [
            {
                "role": message.get("role"),
                "content": _text(message.get("content")),
                **(
                    {"tool_calls": [c["function"]["name"] for c in message["tool_calls"]]}
                    if message.get("tool_calls")
                    else {}
                ),
                "timestamp": message.get("timestamp"),
            }
            for message in messages
        ],
    }


async def sessions_search(
    context: ToolContext, query: str, limit: int = 10
) -> list[dict[str, Any]]:
    """Search the messages of the sessions this conversation may see.

    Args:
        query: words to look for
        limit: the most hits to return (1 to 50)
    """
    if not query.strip():
        raise ValueError("the query is empty")
    host = _host(context)
    visibility = context.settings.visibility
    wanted = max(1, min(limit, 50))
    caller = context.session_key
    # The visible set is part of the query, so others' better-ranked hits never crowd out the
    # caller's own; the check after it is a second guard, never the filter.
    hits, _ = host.store.search_detailed(
        query,
        limit=wanted,
        key_prefix=f"{_namespace(caller)}:" if visibility == "agent" else None,
        tree_of=caller if visibility == "tree" else None,
    )
    return [
        {**hit, "snippet": _text(hit.get("snippet"))}
        for hit in hits
        if _may_see(context, host, hit["session_key"])
    ]


async def sessions_send(context: ToolContext, session_key: str, text: str) -> dict[str, Any]:
    """Send a message into another session; its agent answers it there, as a turn of its own.

    Args:
        session_key: the receiving session's key
        text: the message
    """
    if session_key == context.session_key:
        raise ValueError("this is the calling session: answer in your reply instead")
    if not text.strip():
        raise ValueError("the text is empty")
    if _host(context).store.is_incognito(context.session_key):
        raise ValueError("an incognito session cannot send into another session")
    entry = _entry(context, session_key)
    source = entry.origin or _api_source(session_key, entry)
    event = MessageEvent(
        source=source,
        text=text,
        session_key=session_key,
        internal=True,
        event_kind=_SYSTEM_EVENT,
    )
    # Never waits: the receiver may be busy, or (through its own tools) waiting on us.
    receipt = await _host(context).handle_message(event, wait=False)
    return {"session_key": receipt.session_key, "status": str(receipt.status)}


async def sessions_spawn(context: ToolContext, task: str) -> dict[str, Any]:
    """Hand a task to a sub-agent in a new session forked from this conversation, and get its
    answer. The sub-agent sees this conversation (unless it is too large for its model) and the
    task, and has the same tools.

    Args:
        task: what the sub-agent should do, said in full
    """
    if not task.strip():
        raise ValueError("the task is empty")
    host = _host(context)
    settings = context.settings
    depth = context.session_key.count(f":{FORK_TAG}")
    if depth >= settings.max_spawn_depth:
        raise ValueError(
            f"this session is {depth} spawns deep, the most allowed "
            f"(session_tools.max_spawn_depth = {settings.max_spawn_depth})"
        )
    capacity = settings.context_windows.get(context.model, FORK_CAP_TOKENS)
    child, _ = host.store.fork_session(context.session_key, automatic=True, max_tokens=capacity)
    # An api source: the child's reply comes back here, never out on the parent's platform.
    event = MessageEvent(
        source=_api_source(child.session_key, child),
        text=task,
        session_key=child.session_key,
        internal=True,
        event_kind=_SYSTEM_EVENT,
    )
    receipt = await host.handle_message(event, wait=True)
    return {
        "session_key": child.session_key,
        "session_id": child.session_id,
        "isolated_context": bool(child.extra.get("fork_isolated")),
        "status": str(receipt.status),
        "reply": receipt.reply,
    }


def _api_source(session_key: str, entry: SessionEntry) -> SessionSource:
    return SessionSource(platform=Platform.API, chat_id=session_key, chat_type=entry.chat_type)


def _text(content: object) -> str:
    if isinstance(content, list):
        content = " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    text = content if isinstance(content, str) else ""
    return text if len(text) <= _TEXT_CHARS else f"{text[:_TEXT_CHARS]}[...]"


BUILTIN_TOOLS: dict[str, Tool] = {
    made.name: made
    for made in (
        make_tool(sessions_list),
        make_tool(sessions_history),
        make_tool(sessions_search),
        make_tool(sessions_send),
        make_tool(sessions_spawn, timeout_seconds=_SPAWN_TIMEOUT),
    )
}
