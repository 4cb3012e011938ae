"""`DiscordClient`: REST and the gateway websocket through discord.py, in the kit's terms.

discord.py owns the gateway connection: IDENTIFY, heartbeats (a missed HEARTBEAT_ACK within
`heartbeat_timeout` closes and reconnects the socket: its liveness watchdog), RESUME after a
drop or a RECONNECT, a fresh IDENTIFY when the session is invalid, backoff between attempts, and
one live socket per client. Each raw dispatch reaches `on_dispatch(type, data)` (the SDK's
`socket_raw_receive` debug event), so the mapping works on Discord's JSON, not on cached models.

REST goes through discord.py's `HTTPClient`, which waits out a 429 itself per route bucket up to
`max_ratelimit_timeout` (30 s, its minimum); a longer penalty raises `RateLimited`, translated
here, so the kit holds the whole chat. Every SDK exception is translated once into the kit's
kinds: a request that never reached Discord is transient; a timeout after it was sent may have
posted the message, so a send that ends that way is *unconfirmed* and never resent.

The SDK's REST root and initial gateway URL are class attributes (`Route.BASE`,
`DiscordWebSocket.DEFAULT_GATEWAY`): `open` points them at `api_base_url` and at the URL that
GET /gateway/bot returns, so one process talks to one Discord (or its loopback stub).
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
from typing import TYPE_CHECKING, Any

import aiohttp
import discord
import yarl
from discord.gateway import DiscordWebSocket
from discord.http import Route, handle_message_parameters

from sessiongate.adapters.discord.payloads import ChannelInfo, DiscordIdentity, channel_info
from sessiongate.adapters.kit.errors import (
    CredentialsError,
    FileRejectedError,
    PermanentSendError,
    PlatformError,
    RateLimitedError,
    ReplyTargetError,
    TransientSendError,
    UnconfirmedSendError,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from sessiongate.adapters.kit.events import PlatformCommand
    from sessiongate.adapters.kit.media_out import OutboundFile
    from sessiongate.adapters.kit.outbound import Target

__all__ = ["MAX_COMMANDS", "SAFE_MENTIONS", "DiscordClient", "command_diff", "translate"]

log = logging.getLogger(__name__)

# No @everyone, @here or role pings from agent text; users and the replied-to user only.
SAFE_MENTIONS = discord.AllowedMentions(everyone=False, roles=False, users=True, replied_user=True)
# Discord allows 100 global application commands.
MAX_COMMANDS = 100
# Discord JSON error codes -> what they mean for a send.
_CODES: dict[int, type[PlatformError]] = {
    10003: PermanentSendError,  # unknown channel
    50001: PermanentSendError,  # missing access
    50007: PermanentSendError,  # cannot send messages to this user
    50013: PermanentSendError,  # missing permissions
    160002: PermanentSendError,  # cannot reply without permission to read history
}
# "Request entity too large" (an upload over the channel's file limit).
_TOO_LARGE = 40005
# Gateway close codes that no reconnect cures: authentication failed, invalid shard,
# sharding required, invalid API version, invalid or disallowed intents.
_FATAL_CLOSES = frozenset({4004, 4010, 4011, 4012, 4013, 4014})
_NOT_SENT = (aiohttp.ClientConnectorError,)
_MAYBE_SENT = (TimeoutError, asyncio.TimeoutError, aiohttp.ClientError, OSError)


def translate(exc: Exception, *, sending: bool) -> PlatformError:
    """The kit's kind for an SDK or transport error (see the module docstring)."""
    if isinstance(exc, discord.LoginFailure):
        return CredentialsError(f"Discord refused the bot token: {exc}")
    if isinstance(exc, discord.RateLimited):
        return RateLimitedError(f"discord: {exc}", retry_after=exc.retry_after)
    if isinstance(exc, discord.HTTPException):
        if exc.status == 401:
            return CredentialsError(f"Discord refused the bot token: {exc.text}")
        if exc.status == 429:
            retry = exc.response.headers.get("Retry-After", "1") if exc.response else "1"
            return RateLimitedError(f"discord: {exc.text}", retry_after=float(retry))
        if exc.status == 413 or exc.code == _TOO_LARGE:
            return FileRejectedError(f"discord: the file is too large: {exc.text}")
        kind = _CODES.get(int(exc.code or 0))
        if kind is not None:
            return kind(f"discord {exc.code}: {exc.text}")
        if exc.code == 50035 and "message_reference" in str(exc.text):
            return ReplyTargetError(f"discord: {exc.text}")
        if exc.status >= 500:
            return TransientSendError(f"discord: HTTP {exc.status}")
        return PlatformError(f"discord {exc.status} {exc.code}: {exc.text}")
    if isinstance(exc, _NOT_SENT):
        return TransientSendError(f"discord unreachable: {exc}")
    if isinstance(exc, _MAYBE_SENT):
        message = f"discord call ended without an answer: {type(exc).__name__}"
        return UnconfirmedSendError(message) if sending else TransientSendError(message)
    raise exc


def command_diff(
    existing: Sequence[dict[str, Any]], wanted: Sequence[PlatformCommand]
) -> tuple[list[dict[str, str]], list[tuple[str, dict[str, str]]], list[str]]:
    """(to create, (id, to edit), ids to delete): a safe sync that keeps unchanged ids."""
    by_name = {str(c["name"]): c for c in existing}
    creates: list[dict[str, str]] = []
    edits: list[tuple[str, dict[str, str]]] = []
    names = set()
    for command in list(wanted)[:MAX_COMMANDS]:
        body = {"name": command.name, "description": (command.description or command.name)[:100]}
        names.add(command.name)
        current = by_name.get(command.name)
        if current is None:
            creates.append(body)
        elif current.get("description") != body["description"]:
            edits.append((str(current["id"]), body))
    deletes = [str(c["id"]) for name, c in by_name.items() if name not in names]
    return creates, edits, deletes


class DiscordClient:
    def __init__(
        self,
        token: str,
        *,
        api_base_url: str,
        read_timeout: float = 20.0,
        heartbeat_timeout: float = 60.0,
    ) -> None:
        self._token = token
        self.api_base_url = api_base_url.rstrip("/")
        self._read_timeout = read_timeout
        self._heartbeat_timeout = heartbeat_timeout
        self.on_dispatch: Callable[[str, dict[str, Any]], None] | None = None
        self.on_activity: Callable[[], None] | None = None
        self.bot = self._build()
        self.me: DiscordIdentity | None = None
        self._channels: dict[str, ChannelInfo] = {}

    def _build(self) -> discord.Client:
        intents = discord.Intents(
            guilds=True, guild_messages=True, dm_messages=True, message_content=True
        )
        client = discord.Client(
            intents=intents,
            enable_debug_events=True,
            heartbeat_timeout=self._heartbeat_timeout,
            max_ratelimit_timeout=30.0,
            chunk_guilds_at_startup=False,
            guild_ready_timeout=0.1,
            allowed_mentions=SAFE_MENTIONS,
        )

        async def on_socket_raw_receive(raw: str) -> None:
            self._received(raw)

        client.on_socket_raw_receive = on_socket_raw_receive  # type: ignore[attr-defined]
        return client

    def _received(self, raw: str) -> None:
        if self.on_activity is not None:
            self.on_activity()
        if self.on_dispatch is None:
            return
        message = json.loads(raw)
        if message.get("op") == 0 and isinstance(message.get("d"), dict):
            self.on_dispatch(str(message.get("t")), message["d"])

    async def _call(self, call: Callable[[], Awaitable[Any]], *, sending: bool = True) -> Any:
        try:
            async with asyncio.timeout(self._read_timeout):
                return await call()
        except Exception as exc:
            raise translate(exc, sending=sending) from exc

    async def open(self) -> DiscordIdentity:
        """Log in (GET /users/@me, the application): who the bot is; `CredentialsError` when
        the token is refused. Then learn the gateway URL (GET /gateway/bot)."""
        Route.BASE = self.api_base_url
        await self._call(lambda: self.bot.login(self._token), sending=False)
        user = self.bot.user
        assert user is not None
        _shards, url, _limit = await self._call(self.bot.http.get_bot_gateway, sending=False)
        DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(url)
        self.me = DiscordIdentity(
            user_id=str(user.id), application_id=str(self.bot.application_id or "")
        )
        return self.me

    async def run_gateway(self) -> None:
        """The gateway connection until closed (discord.py reconnects and resumes); raises
        `CredentialsError` for a close Discord means for good (bad token, missing intent)."""
        try:
            await self.bot.connect(reconnect=True)
        except discord.PrivilegedIntentsRequired as exc:
            raise CredentialsError(
                "Discord refused the Message Content intent: enable it for the bot in the "
                "Developer Portal (Bot > Privileged Gateway Intents)"
            ) from exc
        except discord.ConnectionClosed as exc:
            if exc.code in _FATAL_CLOSES:
                raise CredentialsError(f"Discord closed the gateway: {exc}") from exc
            raise

    async def reset_gateway(self) -> None:
        """Close a socket discord.py's loop left behind after an error, before the next one."""
        # discord.py types `ws` as always set; it is None until the first connect.
        ws: DiscordWebSocket | None = self.bot.ws
        if ws is not None and ws.open:
            await ws.close(code=1000)

    async def close(self) -> None:
        await self.bot.close()

    async def force_reconnect(self) -> None:
        """Close the socket with a resumable code: discord.py opens a new one and RESUMEs."""
        ws: DiscordWebSocket | None = self.bot.ws
        if ws is not None:
            await ws.close(code=4000)

    async def channel(self, channel_id: str) -> ChannelInfo | None:
        """The channel's type and parent: the SDK's cache, else GET /channels/{id} (cached)."""
        known = self._channels.get(channel_id)
        if known is not None:
            return known
        cached = self.bot.get_channel(int(channel_id))
        if cached is not None and not isinstance(cached, discord.abc.PrivateChannel):
            info = ChannelInfo(
                id=channel_id,
                type=int(cached.type.value),
                guild_id=str(cached.guild.id),
                parent_id=str(getattr(cached, "parent_id", None) or "") or None,
                name=getattr(cached, "name", None),
            )
        else:
            try:
                data = await self._call(
                    lambda: self.bot.http.get_channel(int(channel_id)), sending=False
                )
            except PlatformError as exc:
                log.warning("discord channel lookup failed", extra={"chat_id": channel_id,
                                                                    "error": str(exc)})  # fmt: skip
                return None
            info = channel_info(data)
        self._channels[channel_id] = info
        return info

    async def sync_commands(self, commands: Sequence[PlatformCommand]) -> tuple[int, int, int]:
        """Application commands synced by diff: (created, edited, deleted); ids kept."""
        app = self.me.application_id if self.me else ""
        if not app:
            raise PlatformError("the application id is unknown; commands not synced")
        http = self.bot.http
        existing = await self._call(lambda: http.get_global_commands(app), sending=False)
        creates, edits, deletes = command_diff(existing, commands)
        for body in creates:
            await self._call(lambda b=body: http.upsert_global_command(app, b), sending=False)  # type: ignore[misc]
        for command_id, body in edits:
            await self._call(
                lambda c=command_id, b=body: http.edit_global_command(app, c, b),  # type: ignore[misc]
                sending=False,
            )
        for command_id in deletes:
            await self._call(
                lambda c=command_id: http.delete_global_command(app, c),  # type: ignore[misc]
                sending=False,
            )
        return len(creates), len(edits), len(deletes)

    async def acknowledge_interaction(self, interaction_id: str, token: str, text: str) -> None:
        """Answer a slash command within Discord's 3 seconds (ephemeral, only its user sees)."""
        route = Route(
            "POST",
            "/interactions/{interaction_id}/{interaction_token}/callback",
            interaction_id=interaction_id,
            interaction_token=token,
        )
        payload = {"type": 4, "data": {"content": text, "flags": 64}}
        await self._call(lambda: self.bot.http.request(route, json=payload), sending=False)

    async def acknowledge_press(self, interaction_id: str, token: str) -> None:
        """Answer a button press within Discord's 3 seconds, changing nothing on screen
        (DEFERRED_UPDATE_MESSAGE): the gateway's answer is posted in the channel."""
        route = Route(
            "POST",
            "/interactions/{interaction_id}/{interaction_token}/callback",
            interaction_id=interaction_id,
            interaction_token=token,
        )
        await self._call(lambda: self.bot.http.request(route, json={"type": 6}), sending=False)

    async def send_components(
        self,
        target: Target,
        text: str,
        components: Sequence[dict[str, Any]],
        *,
        message_id: str | None = None,
    ) -> str:
        """A message with buttons under it (or, with `message_id`, that message edited to
        `text` and these, maybe no, buttons): `components` (action rows of buttons, Discord's
        JSON) become discord.py's own `ui.Button`s, which check labels and custom ids. The
        view is not kept by discord.py: a press reaches `on_dispatch` like any interaction."""
        view = discord.ui.View(timeout=None)
        for row, action_row in enumerate(components):
            for button in action_row["components"]:
                view.add_item(
                    discord.ui.Button(
                        style=discord.ButtonStyle(int(button["style"])),
                        label=str(button["label"]),
                        custom_id=str(button["custom_id"]),
                        row=row,
                    )
                )
        channel_id = int(target.chat_id)

        async def post() -> Any:
            with handle_message_parameters(
                content=text, view=view, allowed_mentions=SAFE_MENTIONS
            ) as params:
                if message_id is not None:
                    return await self.bot.http.edit_message(
                        channel_id, int(message_id), params=params
                    )
                return await self.bot.http.send_message(channel_id, params=params)

        message = await self._call(post)
        view.stop()
        return str(message["id"])

    # ------------------------------------------------------------------ PlatformSender

    def _messageable(self, target: Target) -> discord.PartialMessageable:
        return self.bot.get_partial_messageable(int(target.chat_id))

    async def send_text(self, target: Target, text: str, *, markup: bool) -> str:
        channel = self._messageable(target)
        reference = (
            discord.MessageReference(
                message_id=int(target.reply_to), channel_id=int(target.chat_id)
            )
            if target.reply_to
            else None
        )
        message = await self._call(
            lambda: channel.send(
                text,
                allowed_mentions=SAFE_MENTIONS,
                reference=reference,  # type: ignore[arg-type]
            )
        )
        return str(message.id)

    async def send_file(self, target: Target, file: OutboundFile) -> str:
        channel = self._messageable(target)
        reference = (
            discord.MessageReference(
                message_id=int(target.reply_to), channel_id=int(target.chat_id)
            )
            if target.reply_to
            else None
        )
        message = await self._call(
            # A fresh `File` per try: a retried upload must not read a consumed stream.
            lambda: channel.send(
                file=discord.File(io.BytesIO(file.data), filename=file.name),
                allowed_mentions=SAFE_MENTIONS,
                reference=reference,  # type: ignore[arg-type]
            )
        )
        return str(message.id)

    async def edit_text(self, target: Target, message_id: str, text: str, *, markup: bool) -> None:
        partial = self._messageable(target).get_partial_message(int(message_id))
        await self._call(lambda: partial.edit(content=text, allowed_mentions=SAFE_MENTIONS))

    async def delete_message(self, target: Target, message_id: str) -> None:
        partial = self._messageable(target).get_partial_message(int(message_id))
        await self._call(partial.delete)

    async def send_typing(self, target: Target) -> None:
        await self._call(lambda: self.bot.http.send_typing(int(target.chat_id)), sending=False)
