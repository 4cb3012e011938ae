"""The adapter kit: what every platform adapter needs, written once (docs/ADAPTERS.md).

A platform package (`adapters/<platform>/`: `payloads.py` pure mapping, `client.py` over the
SDK, `adapter.py` joining them) subclasses `KitAdapter` and maps its events to
`PlatformEvent`; claims, gating, access and pairing, splitting, formatting, rate limits,
typing, streamed edits and failure handling come from here.
"""

from __future__ import annotations

from sessiongate.adapters.kit.access import Access, AccessPolicy, decide_access
from sessiongate.adapters.kit.adapter import HandoffError, KitAdapter
from sessiongate.adapters.kit.backoff import Backoff
from sessiongate.adapters.kit.errors import (
    CredentialsError,
    FormatRejectedError,
    PermanentSendError,
    PlatformError,
    RateLimitedError,
    ReplyTargetError,
    TransientSendError,
    UnconfirmedSendError,
)
from sessiongate.adapters.kit.events import (
    AdapterStatistics,
    Admission,
    PlatformCommand,
    PlatformEvent,
    gateway_commands,
)
from sessiongate.adapters.kit.fields import PayloadError, loads_json
from sessiongate.adapters.kit.formatting import (
    defuse_mass_mentions,
    to_plain_text,
    to_telegram_html,
)
from sessiongate.adapters.kit.gating import (
    GatePolicy,
    GateReason,
    MessageFacts,
    compile_patterns,
    decide_gate,
    passes,
)
from sessiongate.adapters.kit.media import Attachment, too_large_notice
from sessiongate.adapters.kit.outbound import Outbox, PlatformSender, Rendering, Target
from sessiongate.adapters.kit.ratelimit import ChatRateLimiter
from sessiongate.adapters.kit.settings import KitSettings
from sessiongate.adapters.kit.splitting import (
    DISCORD_LIMIT,
    SLACK_LIMIT,
    TELEGRAM_LIMIT,
    split_text,
    utf16_len,
)
from sessiongate.adapters.kit.streaming import EditStream
from sessiongate.adapters.kit.timing import ClockSleep, Sleep
from sessiongate.adapters.kit.typing_indicator import TypingIndicators
from sessiongate.adapters.kit.watchdog import Watchdog

__all__ = [
    "DISCORD_LIMIT",
    "SLACK_LIMIT",
    "TELEGRAM_LIMIT",
    "Access",
    "AccessPolicy",
    "AdapterStatistics",
    "Admission",
    "Attachment",
    "Backoff",
    "ChatRateLimiter",
    "ClockSleep",
    "CredentialsError",
    "EditStream",
    "FormatRejectedError",
    "GatePolicy",
    "GateReason",
    "HandoffError",
    "KitAdapter",
    "KitSettings",
    "MessageFacts",
    "Outbox",
    "PayloadError",
    "PermanentSendError",
    "PlatformCommand",
    "PlatformError",
    "PlatformEvent",
    "PlatformSender",
    "RateLimitedError",
    "Rendering",
    "ReplyTargetError",
    "Sleep",
    "Target",
    "TransientSendError",
    "TypingIndicators",
    "UnconfirmedSendError",
    "Watchdog",
    "compile_patterns",
    "decide_access",
    "decide_gate",
    "defuse_mass_mentions",
    "gateway_commands",
    "loads_json",
    "passes",
    "split_text",
    "to_plain_text",
    "to_telegram_html",
    "too_large_notice",
    "utf16_len",
]
