"""What a platform call can end in, as the kit understands it.

A platform package translates its SDK's exceptions into these (`raise … from exc`), once, in
its `client.py`; everything above reasons only about these kinds:

PlatformError
├── CredentialsError       the token is refused (401): start fails fast, no retry loop
├── RateLimitedError       429: wait `retry_after` seconds for this chat, then try again
├── FormatRejectedError    the markup was refused ("can't parse entities"): resend as plain
├── ReplyTargetError       the message replied to is gone: resend without the anchor
├── FileRejectedError      the platform refused a file (too large, its type): a text notice
├── PermanentSendError     the chat refuses the bot for good (blocked, removed): never retried
├── TransientSendError     the request provably never left (connect/pool timeout): retried
└── UnconfirmedSendError   it may have been delivered (timeout after sending): never resent
"""

from __future__ import annotations

from sessiongate.errors import SessiongateError

__all__ = [
    "CredentialsError",
    "FileRejectedError",
    "FormatRejectedError",
    "PermanentSendError",
    "PlatformError",
    "RateLimitedError",
    "ReplyTargetError",
    "TransientSendError",
    "UnconfirmedSendError",
]


class PlatformError(SessiongateError):
    code = "platform_error"


class CredentialsError(PlatformError):
    code = "platform_credentials"


class RateLimitedError(PlatformError):
    code = "platform_rate_limited"
    retry_after: float

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message, retry_after=float(retry_after))


class FormatRejectedError(PlatformError):
    code = "platform_format_rejected"


class ReplyTargetError(PlatformError):
    code = "platform_reply_target"


class FileRejectedError(PlatformError):
    code = "platform_file_rejected"


class PermanentSendError(PlatformError):
    code = "platform_refused"


class TransientSendError(PlatformError):
    code = "platform_transient"


class UnconfirmedSendError(PlatformError):
    code = "platform_unconfirmed"
