"""`TelegramClient`: the Bot API through python-telegram-bot, in the kit's terms.

Every SDK exception is translated here, once, into the kit's kinds (`kit/errors.py`), by one
table of Bot API descriptions plus the transport rule: a request that provably never left (a
connect error, a pool or connect timeout) is transient and may be retried; a timeout or a
broken connection after the request was written may have delivered the message, so a send that
ends that way is *unconfirmed* and never resent.

The client talks to `base_url` (default https://api.telegram.org, or a self-hosted Bot API
server, or the loopback stub in tests): the SDK's own `base_url` override, not a patched
transport. Long polls use their own connection (the SDK's `get_updates_request`), so a wedged
poll never blocks sends; `rebuild_poller` closes the old client before building the new one,
so one token never has two live pollers.

The hot calls (getUpdates, sendMessage) go through the SDK's own request path (`Bot._post`:
its defaults, its parameter encoding, its HTTP client and its error mapping) but skip its
object model: the updates come back as the Bot API's JSON, which the mapping reads anyway
(building `Update` objects only to turn them back into dicts cost more than the mapping),
and a send reads only the new message's id from the answer. The SDK's HTTP transport is
`transport.AiohttpRequest` (its `BaseRequest` on aiohttp), not its default on httpx.
"""

from __future__ import annotations

import asyncio
import logging
import os
import warnings
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

# The SDK is migrating time periods from int to timedelta and warns on every int it builds
# (every 429 it parses): opting in to timedelta, which `_retry_after` reads, keeps it quiet.
os.environ.setdefault("PTB_TIMEDELTA", "true")

from telegram import Bot, BotCommand, InputFile, Message
from telegram.constants import ChatAction, ParseMode
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Conflict,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)
from telegram.warnings import PTBDeprecationWarning

from sessiongate.adapters.kit.errors import (
    CredentialsError,
    FileRejectedError,
    FormatRejectedError,
    PermanentSendError,
    PlatformError,
    RateLimitedError,
    ReplyTargetError,
    TransientSendError,
    UnconfirmedSendError,
)
from sessiongate.adapters.telegram.payloads import GENERAL_TOPIC, BotIdentity
from sessiongate.adapters.telegram.transport import NOT_SENT, AiohttpRequest, log as transport_log

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from sessiongate.adapters.kit.events import PlatformCommand
    from sessiongate.adapters.kit.media_out import OutboundFile
    from sessiongate.adapters.kit.outbound import Target

__all__ = ["MAX_COMMANDS", "PollConflictError", "TelegramClient"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

# The most updates one getUpdates may answer (the Bot API's own maximum).
_UPDATES_PER_POLL = 100
# A long poll's read timeout: the poll's own timeout plus this.
_POLL_SLACK = 10.0
# The Bot API accepts at most 100 commands per scope (BOT_COMMANDS_TOO_MUCH beyond).
MAX_COMMANDS = 100
# Requests in flight at once. Telegram itself accepts about 30 messages a second per bot, which
# 4 parallel requests carry at up to ~130 ms per round trip. More gave nothing on the loopback
# stub and cost CPU: on httpx, whose pool is scanned (each socket asked whether it is
# readable) for every request, 16 connections took about 30 % more CPU per update than 4; on
# aiohttp, 16 still took about 8 % more (`sessiongate bench`, docs/PERFORMANCE.md).
_POOL_SIZE = 4

# Bot API descriptions (lower-cased substrings) -> what they mean for a send.
_BAD_REQUESTS: tuple[tuple[str, type[PlatformError]], ...] = (
    ("can't parse entities", FormatRejectedError),
    ("can't find end of the entity", FormatRejectedError),
    ("unsupported start tag", FormatRejectedError),
    ("message to be replied not found", ReplyTargetError),
    ("replied message not found", ReplyTargetError),
    ("chat not found", PermanentSendError),
    ("have no rights to send", PermanentSendError),
    ("not enough rights", PermanentSendError),
    ("topic_closed", PermanentSendError),
    ("message thread not found", PermanentSendError),
)
_NOT_SENT = NOT_SENT
# sendPhoto takes images up to 10 MB; a larger one goes as a document (up to 50 MB).
_PHOTO_LIMIT_BYTES = 10 * 1_048_576
# An upload Telegram refuses for the file itself (413, or its size or type).
_FILE_REFUSALS = ("file too large", "file is too big", "request entity too large",
                  "photo_invalid_dimensions", "wrong file")  # fmt: skip


class _TokenFilter(logging.Filter):
    """Bot tokens out of log lines: the token is part of every Bot API URL, which the HTTP
    client logs at INFO ("HTTP Request: POST .../bot<token>/sendMessage")."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if self.tokens:
            text = record.getMessage()
            redacted = text
            for token in self.tokens:
                redacted = redacted.replace(token, "<token>")
            if redacted != text:
                record.msg, record.args = redacted, ()
        return True


_TOKENS = _TokenFilter()
for _name in ("telegram", transport_log.name):
    logging.getLogger(_name).addFilter(_TOKENS)


class PollConflictError(PlatformError):
    """409: another poller (or a webhook) holds this token; wait, do not hot-loop."""

    code = "telegram_conflict"


def _retry_after(exc: RetryAfter) -> float:
    with warnings.catch_warnings():
        # The SDK's int-to-timedelta migration warns on read; either type means seconds.
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value: Any = exc.retry_after
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def translate(exc: TelegramError, *, sending: bool) -> PlatformError:
    """The kit's kind for an SDK error (see the module docstring)."""
    message = str(exc)
    if isinstance(exc, RetryAfter):
        return RateLimitedError(message, retry_after=_retry_after(exc))
    if isinstance(exc, InvalidToken):
        # The SDK's message quotes the token whole ("The token `…` was rejected"): never
        # passed on.
        return CredentialsError(
            "Telegram refused the bot token (platforms.telegram.token): the Bot API "
            "answered Unauthorized"
        )
    if isinstance(exc, Forbidden | ChatMigrated):
        return PermanentSendError(message)
    if isinstance(exc, Conflict):
        return PollConflictError(message)
    if any(needle in message.lower() for needle in _FILE_REFUSALS):
        return FileRejectedError(message)
    if isinstance(exc, BadRequest):
        lowered = message.lower()
        for needle, kind in _BAD_REQUESTS:
            if needle in lowered:
                return kind(message)
        return PlatformError(message)
    cause = exc.__cause__
    if isinstance(exc, NetworkError) and (
        isinstance(cause, _NOT_SENT) or "pool timeout" in message.lower()
    ):
        return TransientSendError(message)
    if isinstance(exc, TimedOut) or (isinstance(exc, NetworkError) and cause is not None):
        # Written, maybe delivered: for a send that is "unconfirmed", for a read "try again".
        return UnconfirmedSendError(message) if sending else TransientSendError(message)
    # An HTTP error status from the Bot API (5xx): it answered, and posted nothing.
    return TransientSendError(message)


class _Bot(Bot):
    """The SDK's `Bot`, plus calls that answer the Bot API's JSON as it came."""

    async def call_json(self, endpoint: str, data: dict[str, Any], **timeouts: float) -> Any:
        return await self._post(endpoint, data, **timeouts)  # type: ignore[arg-type]


class TelegramClient:
    def __init__(
        self, token: str, *, base_url: str, poll_timeout: int = 30, read_timeout: float = 20.0
    ) -> None:
        self._token = token
        _TOKENS.tokens.add(token)
        self._base_url = base_url.rstrip("/")
        self._poll_timeout = poll_timeout
        # How long a send waits for Telegram's answer before it counts as unconfirmed.
        self._read_timeout = read_timeout
        self.bot = self._build()
        self._slots = asyncio.Semaphore(_POOL_SIZE)

    def _build(self) -> _Bot:
        return _Bot(
            self._token,
            base_url=f"{self._base_url}/bot",
            base_file_url=f"{self._base_url}/file/bot",
            request=AiohttpRequest(
                connection_pool_size=_POOL_SIZE, read_timeout=self._read_timeout
            ),
            get_updates_request=AiohttpRequest(connection_pool_size=1, read_timeout=_POLL_SLACK),
        )

    async def _call(self, call: Callable[[], Awaitable[_T]], *, sending: bool = True) -> _T:
        try:
            # Requests wait here rather than in the HTTP pool's queue, which httpcore scans
            # on every completion: with hundreds of chats replying at once that scan was
            # most of the time spent (measured in `sessiongate bench`).
            async with self._slots:
                return await call()
        except TelegramError as exc:
            raise translate(exc, sending=sending) from exc

    async def open(self) -> BotIdentity:
        """Initialise the SDK client (its getMe): who the bot is; `CredentialsError` when the
        token is refused."""
        await self._call(self.bot.initialize, sending=False)
        me = self.bot.bot
        return BotIdentity(id=str(me.id), username=me.username or "")

    async def close(self) -> None:
        await self.bot.shutdown()

    async def rebuild_poller(self) -> None:
        """Close the client (its long poll with it) and build a fresh one."""
        old = self.bot
        await old.shutdown()
        self.bot = self._build()
        await self._call(self.bot.initialize, sending=False)

    # ------------------------------------------------------------------ receiving

    async def get_updates(
        self, offset: int | None, *, poll_seconds: float | None = None
    ) -> list[dict[str, Any]]:
        # Not through `_call`'s slots: the long poll has its own connection and must never
        # wait behind sends.
        wait = self._poll_timeout if poll_seconds is None else poll_seconds
        data: dict[str, Any] = {"timeout": wait, "limit": _UPDATES_PER_POLL}
        if offset is not None:
            data["offset"] = offset
        try:
            updates = await self.bot.call_json(
                "getUpdates", data, read_timeout=float(wait) + _POLL_SLACK
            )
        except TelegramError as exc:
            raise translate(exc, sending=False) from exc
        return list(updates)

    async def delete_webhook(self, *, drop_pending_updates: bool) -> None:
        await self._call(
            lambda: self.bot.delete_webhook(drop_pending_updates=drop_pending_updates),
            sending=False,
        )

    async def set_webhook(self, url: str, *, secret: str, drop_pending_updates: bool) -> None:
        await self._call(
            lambda: self.bot.set_webhook(
                url, secret_token=secret, drop_pending_updates=drop_pending_updates
            ),
            sending=False,
        )

    async def set_commands(self, commands: Sequence[PlatformCommand]) -> None:
        # Telegram command names: 1-32 of a-z, 0-9 and _.
        valid = [
            BotCommand(c.name, c.description[:256] or c.name)
            for c in commands
            if c.name.replace("_", "").isalnum() and c.name.islower() and len(c.name) <= 32
        ][:MAX_COMMANDS]
        await self._call(lambda: self.bot.set_my_commands(valid), sending=False)

    async def file_url(self, file_id: str) -> str:
        """getFile: where the file of an attachment reference can be downloaded."""
        found = await self._call(lambda: self.bot.get_file(file_id), sending=False)
        return str(found.file_path)

    # ------------------------------------------------------------------ PlatformSender

    @staticmethod
    def _thread(target: Target) -> int | None:
        if target.thread_id is None or target.thread_id == GENERAL_TOPIC:
            return None
        return int(target.thread_id)

    async def send_text(
        self,
        target: Target,
        text: str,
        *,
        markup: bool,
        reply_markup: dict[str, Any] | None = None,
    ) -> str:
        data: dict[str, Any] = {"chat_id": target.chat_id, "text": text}
        if markup:
            data["parse_mode"] = ParseMode.HTML
        if reply_markup is not None:
            data["reply_markup"] = reply_markup
        thread = self._thread(target)
        if thread is not None:
            data["message_thread_id"] = thread
        if target.reply_to:
            data["reply_parameters"] = {"message_id": int(target.reply_to)}
        message = await self._call(lambda: self.bot.call_json("sendMessage", data))
        return str(message["message_id"])

    async def answer_callback(self, callback_id: str) -> None:
        """Stop the pressed button's spinner (Telegram waits for it up to a few seconds)."""
        await self._call(
            lambda: self.bot.call_json("answerCallbackQuery", {"callback_query_id": callback_id}),
            sending=False,
        )

    async def send_file(self, target: Target, file: OutboundFile) -> str:
        """sendPhoto for an image Telegram takes as a photo, else sendDocument."""
        as_photo = file.is_image and file.size <= _PHOTO_LIMIT_BYTES

        def upload() -> Awaitable[Message]:
            common: dict[str, Any] = {
                "chat_id": target.chat_id,
                "message_thread_id": self._thread(target),
                "reply_to_message_id": int(target.reply_to) if target.reply_to else None,
            }
            data = InputFile(file.data, filename=file.name)
            if as_photo:
                return self.bot.send_photo(photo=data, **common)
            return self.bot.send_document(document=data, **common)

        message = await self._call(upload)
        return str(message.message_id)

    async def edit_text(self, target: Target, message_id: str, text: str, *, markup: bool) -> None:
        try:
            await self._call(
                lambda: self.bot.edit_message_text(
                    text,
                    chat_id=target.chat_id,
                    message_id=int(message_id),
                    parse_mode=ParseMode.HTML if markup else None,
                )
            )
        except PlatformError as exc:
            # The same text again is a success for an edit that only has to end up right.
            if "message is not modified" not in str(exc).lower():
                raise

    async def delete_message(self, target: Target, message_id: str) -> None:
        await self._call(
            lambda: self.bot.delete_message(chat_id=target.chat_id, message_id=int(message_id))
        )

    async def send_typing(self, target: Target) -> None:
        # Typing keeps the General topic's id: without it the indicator is invisible there.
        thread = int(target.thread_id) if target.thread_id is not None else None
        await self._call(
            lambda: self.bot.send_chat_action(
                chat_id=target.chat_id, action=ChatAction.TYPING, message_thread_id=thread
            ),
            sending=False,
        )
