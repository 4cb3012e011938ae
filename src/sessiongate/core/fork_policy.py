"""Which lane's conversation may be copied into which (a pure rule, no I/O).

A lane is read either by one person (a DM, a per-user lane in a group or a thread) or by
everyone in its chat (a shared lane). A fork copies the parent's transcript into the child, so
everyone who reads the child reads what the parent holds. The rule: a lane may be forked into
another only when the child's readers could already read the parent, that is

- the parent is shared (what a chat's shared lane holds, everyone in the chat has seen), or
- both lanes belong to the same one person.

A shared child is never forked from one person's private lane: on Slack with the defaults
(per-user channel lanes, shared threads) a thread forked from its first poster's lane would show
everyone in the thread what an operator or the bot said to that person alone. Such a child
starts isolated instead, with only the thread's parent message (which the platform shows to
everyone) as context. The store's `fork_session` applies the rule to every fork (thread forks
of every platform, `sessions_spawn`, operator forks), so no path can skip it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sessiongate.core.keys import KeyParts

__all__ = ["lane_owner", "may_fork"]


def lane_owner(parts: KeyParts) -> str | None:
    """The one person who reads the lane `parts` names, or None when several people share it.

    A DM belongs to its chat (or, with no chat id, its participant); elsewhere a lane keyed on
    a participant belongs to that participant, and one without is shared. A DM with no
    identifier at all is the platform's shared sink, so it counts as shared."""
    if parts.chat_type == "dm":
        return parts.chat_id or parts.participant_id or None
    return parts.participant_id or None


def may_fork(parent: KeyParts | None, child: KeyParts | None) -> bool:
    """Whether `parent`'s conversation may be copied into `child` (see the module docstring).

    Unknown parts (a legacy key imported without its components) fail closed: the child
    starts isolated rather than risk showing one person's lane to others."""
    if parent is None or child is None:
        return False
    if parent.platform != child.platform:
        return False
    owner = lane_owner(parent)
    if owner is None:
        return True
    return lane_owner(child) == owner
