"""`SlackClient`: the Web API through slack-sdk's `AsyncWebClient`, in the kit's terms.

Every SDK exception is translated here, once, into the kit's kinds (`kit/errors.py`), by one
table of Slack error codes plus the transport rule: a request that never reached Slack (the
connection could not be made) is transient and may be retried; a timeout or a dropped
connection after the request was written may have posted the message, so a send that ends that
way is *unconfirmed* and never resent. The SDK's own retry handlers are switched off for that
reason (its connection-error retry would resend a post that may have arrived).

The client talks to `base_url` (default https://slack.com/api/, or the loopback stub in tests),
the SDK's own override. One aiohttp session is kept for all calls.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from typing import TYPE_CHECKING, Any, TypeVar

import aiohttp
from slack_sdk.errors import SlackApiError, SlackRequestError
from slack_sdk.web.async_client import AsyncWebClient

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
from sessiongate.adapters.slack.mrkdwn import to_blocks
from sessiongate.adapters.slack.payloads import SlackIdentity

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from slack_sdk.web.async_slack_response import AsyncSlackResponse

    from sessiongate.adapters.kit.events import PlatformCommand
    from sessiongate.adapters.kit.media_out import OutboundFile
    from sessiongate.adapters.kit.outbound import Target

__all__ = ["TYPING_STATUS", "SlackClient", "slash_commands", "translate"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

TYPING_STATUS = "is typing..."
# Slack error codes -> what they mean for a call.
_ERRORS: dict[str, type[PlatformError]] = {
    "invalid_auth": CredentialsError,
    "not_authed": CredentialsError,
    "account_inactive": CredentialsError,
    "token_revoked": CredentialsError,
    "token_expired": CredentialsError,
    "invalid_blocks": FormatRejectedError,
    "invalid_blocks_format": FormatRejectedError,
    "cannot_reply_to_message": ReplyTargetError,
    "channel_not_found": PermanentSendError,
    "not_in_channel": PermanentSendError,
    "is_archived": PermanentSendError,
    "restricted_action": PermanentSendError,
    "cannot_dm_bot": PermanentSendError,
    "user_disabled": PermanentSendError,
    "service_unavailable": TransientSendError,
}
# Upload refusals that concern the file, not the chat (files.uploadV2 needs `files:write`).
_FILE_ERRORS = frozenset({"file_too_large", "file_size_exceeded", "invalid_file_type",
                          "missing_scope", "file_uploads_disabled"})  # fmt: skip
# Slack's own words: "some aspect of the operation may have succeeded".
_MAYBE_DONE = frozenset({"internal_error", "fatal_error", "request_timeout"})
_NOT_SENT = (aiohttp.ClientConnectorError,)
_MAYBE_SENT = (TimeoutError, asyncio.TimeoutError, aiohttp.ClientError)


def translate(exc: Exception, *, sending: bool) -> PlatformError:
    """The kit's kind for an SDK or transport error (see the module docstring)."""
    if isinstance(exc, SlackApiError):
        response = exc.response
        code = str(response.get("error") or "") if isinstance(response.data, dict) else ""
        status = int(response.status_code or 0)
        if status == 429 or code == "ratelimited":
            retry_after = float(response.headers.get("Retry-After", "1") or 1)
            return RateLimitedError(f"slack: {code or 'ratelimited'}", retry_after=retry_after)
        kind = _ERRORS.get(code)
        if kind is CredentialsError:
            return CredentialsError(f"Slack refused the token: {code}")
        if kind is not None:
            return kind(f"slack: {code}")
        if code in _MAYBE_DONE:
            return (UnconfirmedSendError if sending else TransientSendError)(f"slack: {code}")
        if status >= 500:
            return TransientSendError(f"slack: HTTP {status}")
        return PlatformError(f"slack: {code or f'HTTP {status}'}")
    if isinstance(exc, _NOT_SENT):
        return TransientSendError(f"slack unreachable: {exc}")
    if isinstance(exc, _MAYBE_SENT):
        message = f"slack call ended without an answer: {type(exc).__name__}"
        return UnconfirmedSendError(message) if sending else TransientSendError(message)
    raise exc


def slash_commands(
    commands: Sequence[PlatformCommand], *, prefix: str = "sg-"
) -> list[dict[str, Any]]:
    """The app manifest's `features.slash_commands` for the gateway's commands (`/sg-new`:
    Slack reserves some bare names, such as /status)."""
    return [
        {"command": f"/{prefix}{c.name}", "description": c.description[:100] or c.name}
        for c in commands
        if c.name.replace("_", "").isalnum()
    ]


class SlackClient:
    def __init__(
        self,
        bot_token: str,
        *,
        base_url: str,
        timeout: float = 20.0,
        app_config_token: str | None = None,
        app_id: str | None = None,
    ) -> None:
        self._token = bot_token
        self.base_url = base_url
        self._timeout = timeout
        self._config_token = app_config_token
        self._app_id = app_id
        self._session: aiohttp.ClientSession | None = None
        self.web = self._build(None)

    def _build(self, session: aiohttp.ClientSession | None) -> AsyncWebClient:
        return AsyncWebClient(
            token=self._token,
            base_url=self.base_url,
            # Whole seconds for the SDK; `_call` holds every call to the exact bound.
            timeout=max(1, math.ceil(self._timeout)),
            session=session,
            retry_handlers=[],
        )

    async def _call(
        self, call: Callable[[], Awaitable[AsyncSlackResponse]], *, sending: bool = True
    ) -> AsyncSlackResponse:
        try:
            async with asyncio.timeout(self._timeout):
                return await call()
        except Exception as exc:
            raise translate(exc, sending=sending) from exc

    async def open(self) -> SlackIdentity:
        """auth.test: who the bot is; `CredentialsError` when the token is refused."""
        if self._session is None:
            self._session = aiohttp.ClientSession()
            self.web = self._build(self._session)
        answer = await self._call(self.web.auth_test, sending=False)
        return SlackIdentity(
            user_id=str(answer["user_id"]),
            bot_id=str(answer.get("bot_id") or ""),
            team_id=str(answer.get("team_id") or ""),
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def channel_info(self, channel: str) -> dict[str, Any]:
        answer = await self._call(
            lambda: self.web.conversations_info(channel=channel), sending=False
        )
        info: dict[str, Any] = dict(answer.get("channel") or {})
        return info

    async def open_socket_url(self, app_token: str) -> str:
        """apps.connections.open: the Socket Mode websocket URL."""
        answer = await self._call(
            lambda: self.web.apps_connections_open(app_token=app_token), sending=False
        )
        return str(answer["url"])

    async def set_commands(self, commands: Sequence[PlatformCommand]) -> None:
        """Write the gateway's commands into the app manifest (needs `app_config_token` and
        `app_id`; without them this logs and does nothing: Slack has no bot-token API for it)."""
        if not (self._config_token and self._app_id):
            log.info(
                "slack slash commands are not registered automatically (no app_config_token); "
                "see docs/ADAPTERS.md",
                extra={"commands": len(commands)},
            )
            return
        token, app_id = self._config_token, self._app_id
        exported = await self._call(
            lambda: self.web.apps_manifest_export(app_id=app_id, token=token), sending=False
        )
        manifest: dict[str, Any] = dict(exported.get("manifest") or {})
        features = dict(manifest.get("features") or {})
        wanted = slash_commands(commands)
        if features.get("slash_commands") == wanted:
            return  # already as wanted: no write
        features["slash_commands"] = wanted
        manifest["features"] = features
        await self._call(
            lambda: self.web.apps_manifest_update(
                app_id=app_id, manifest=json.dumps(manifest), token=token
            ),
            sending=False,
        )

    # ------------------------------------------------------------------ PlatformSender

    @staticmethod
    def _content(text: str, markup: bool) -> dict[str, Any]:
        if markup:
            # `text` is the notification fallback; the blocks carry the formatted reply.
            return {"text": text, "blocks": to_blocks(text)}
        return {"text": text, "mrkdwn": False}

    async def send_text(self, target: Target, text: str, *, markup: bool) -> str:
        content = self._content(text, markup)
        thread = target.thread_id
        try:
            answer = await self._call(
                lambda: self.web.chat_postMessage(
                    channel=target.chat_id, thread_ts=thread, **content
                )
            )
        except ReplyTargetError:
            if thread is None:
                raise
            # A root Slack cannot thread under (H #98285): post in the channel, never lose it.
            log.warning(
                "slack refused the thread; posting in the channel",
                extra={"chat_id": target.chat_id},
            )
            answer = await self._call(
                lambda: self.web.chat_postMessage(channel=target.chat_id, **content)
            )
        return str(answer["ts"])

    async def send_blocks(self, target: Target, text: str, blocks: list[dict[str, Any]]) -> str:
        """chat.postMessage with Block Kit `blocks` (`text` is the notification fallback)."""
        answer = await self._call(
            lambda: self.web.chat_postMessage(
                channel=target.chat_id, thread_ts=target.thread_id, text=text, blocks=blocks
            )
        )
        return str(answer["ts"])

    async def update_blocks(
        self, target: Target, message_id: str, text: str, blocks: list[dict[str, Any]]
    ) -> None:
        """chat.update of a message's text and blocks."""
        await self._call(
            lambda: self.web.chat_update(
                channel=target.chat_id, ts=message_id, text=text, blocks=blocks
            )
        )

    async def send_file(self, target: Target, file: OutboundFile) -> str:
        """files.uploadV2 (an upload URL, the bytes, then the share) into the chat and
        thread; the file's id stands for the message id."""
        try:
            answer = await self._call(
                lambda: self.web.files_upload_v2(
                    channel=target.chat_id,
                    thread_ts=target.thread_id,
                    file=file.data,
                    filename=file.name,
                    title=file.name,
                )
            )
        except SlackRequestError as exc:  # the upload URL refused the bytes
            raise FileRejectedError(f"slack: upload refused: {exc}") from exc
        except PlatformError as exc:
            if str(exc).removeprefix("slack: ") in _FILE_ERRORS:
                raise FileRejectedError(str(exc)) from exc
            raise
        uploaded = answer.get("file") or {}
        return str(uploaded.get("id") or "")

    async def edit_text(self, target: Target, message_id: str, text: str, *, markup: bool) -> None:
        content = self._content(text, markup)
        if not markup:
            content["blocks"] = []  # an edit to plain text drops the old blocks
            content.pop("mrkdwn")
        await self._call(
            lambda: self.web.chat_update(channel=target.chat_id, ts=message_id, **content)
        )

    async def delete_message(self, target: Target, message_id: str) -> None:
        await self._call(lambda: self.web.chat_delete(channel=target.chat_id, ts=message_id))

    async def send_typing(self, target: Target) -> None:
        # Slack has no typing call for bots outside threads; in a thread, the assistant status
        # line shows it (cleared by Slack when the bot replies).
        thread = target.thread_id
        if thread is None:
            return
        await self._call(
            lambda: self.web.assistant_threads_setStatus(
                channel_id=target.chat_id, thread_ts=thread, status=TYPING_STATUS
            ),
            sending=False,
        )
