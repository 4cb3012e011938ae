"""Who may talk to the agent on a platform: fail closed, by one pure rule.

- `allow_from` lists user ids and chat ids (text; `"*"` admits everyone). A user on it is
  admitted anywhere; a chat on it admits everyone in that chat (a group allow list).
- DMs from senders not on it follow `dm_policy`: `allowlist` drops them, `open` admits them,
  `pairing` (the default) answers the first message with one code an operator approves with
  `sessiongate pairing approve CODE`; approved senders are admitted in DMs only (a group does not
  inherit DM pairing, checklist 15).
- Groups and channels not on the list are never admitted: with nothing configured, nobody is.
- A sender the platform admitted by role (`role_authorized`: Discord's `allow_roles`) is
  admitted where the role holds (guild chats; the mapping never sets it in DMs).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Literal

from sessiongate.core.source import ChatType, SessionSource

__all__ = ["Access", "AccessPolicy", "DmPolicy", "decide_access"]

DmPolicy = Literal["allowlist", "pairing", "open"]


class Access(enum.StrEnum):
    ADMIT = "admit"
    PAIR = "pair"  # an unknown DM sender under `pairing`: answer with a code
    DENY = "deny"


@dataclass(frozen=True, slots=True)
class AccessPolicy:
    allow_from: frozenset[str] = frozenset()
    dm_policy: DmPolicy = "pairing"

    @classmethod
    def build(cls, allow_from: list[str] | None, dm_policy: DmPolicy) -> AccessPolicy:
        return cls(frozenset(str(a).strip() for a in allow_from or () if str(a).strip()), dm_policy)


def decide_access(source: SessionSource, policy: AccessPolicy, *, paired: bool) -> Access:
    allowed = policy.allow_from
    if "*" in allowed or source.role_authorized:
        return Access.ADMIT
    users = {u for u in (source.user_id, source.user_id_alt) if u}
    if users & allowed:
        return Access.ADMIT
    if source.chat_type is not ChatType.DM:
        chats = {c for c in (source.chat_id, source.parent_chat_id) if c}
        return Access.ADMIT if chats & allowed else Access.DENY
    if policy.dm_policy == "open" or paired:
        return Access.ADMIT
    if policy.dm_policy == "pairing" and users:
        return Access.PAIR
    return Access.DENY
