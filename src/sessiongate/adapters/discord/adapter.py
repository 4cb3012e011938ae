"""`DiscordAdapter`: Discord on the kit, over discord.py's gateway connection.

Each MESSAGE_CREATE / MESSAGE_UPDATE / MESSAGE_DELETE / INTERACTION_CREATE dispatch is mapped
(`payloads.py`; the channel's type and parent come from the SDK's cache or one GET
/channels/{id}) and handed to the kit's `admit` in the adapter's task group. A RESUME replays
what the socket missed; the claim on the message snowflake makes a replay, a zombie second
socket or a redelivery after a restart no second turn.

discord.py reconnects (RESUME, else a fresh IDENTIFY) with its own backoff, and its heartbeat
is the liveness probe: no HEARTBEAT_ACK within `heartbeat_timeout` closes and reopens the
socket. On top of that the watchdog closes a socket that has delivered nothing at all for
`gateway_stall_seconds` (connected but deaf), so discord.py opens a new one.

Application commands are synced by diff at start (create, edit and delete only what changed,
ids kept); a slash command is answered at once (ephemeral "Running /cmd...", within Discord's
3 seconds) and runs as the gateway command, whose reply is posted in the channel. An approval
prompt carries Approve and Deny buttons (components); a press is acknowledged at once (nothing
changes on screen; a press by someone not allowed here is told so, to them alone) and runs as
`/approve <id>` or `/deny <id>` from the presser. Replies never ping @everyone, @here or roles
(`allowed_mentions`).
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any, ClassVar

from sessiongate.adapters.discord.client import DiscordClient
from sessiongate.adapters.discord.payloads import (
    DiscordIdentity,
    PayloadError,
    approval_buttons,
    parse_interaction,
    parse_message,
)
from sessiongate.adapters.kit.adapter import COMMAND_REFUSAL, HandoffError, KitAdapter
from sessiongate.adapters.kit.approval_buttons import PostedPrompt, PostedPrompts
from sessiongate.adapters.kit.errors import CredentialsError, PlatformError
from sessiongate.adapters.kit.events import Admission, gateway_commands
from sessiongate.adapters.kit.formatting import to_plain_text
from sessiongate.adapters.kit.outbound import Rendering, Target
from sessiongate.adapters.kit.settings import KitSettings
from sessiongate.adapters.kit.splitting import DISCORD_LIMIT
from sessiongate.adapters.kit.watchdog import Watchdog
from sessiongate.core.platform import Platform

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Sequence

    from sessiongate.adapters.kit.events import PlatformCommand
    from sessiongate.adapters.kit.timing import Sleep
    from sessiongate.core.clock import Clock
    from sessiongate.core.config import DiscordConfig
    from sessiongate.core.source import SessionSource

__all__ = ["DISCORD_RENDERING", "DiscordAdapter", "to_discord_markdown"]

log = logging.getLogger(__name__)

_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
_HANDLED = frozenset({"MESSAGE_CREATE", "MESSAGE_UPDATE", "MESSAGE_DELETE", "INTERACTION_CREATE"})
# Finished claims are kept this long (a RESUME replays at most a few minutes).
_CLAIM_HORIZON_SECONDS = 24 * 3600.0


def to_discord_markdown(markdown: str) -> str:
    """Discord renders Markdown itself; tables (which it does not) become code blocks."""
    out: list[str] = []
    table: list[str] = []
    for line in [*markdown.split("\n"), None]:
        if line is not None and _TABLE_ROW.match(line):
            table.append(line)
            continue
        if table:
            out.append("```\n" + "\n".join(table) + "\n```")
            table = []
        if line is not None:
            out.append(line)
    return "\n".join(out)


DISCORD_RENDERING = Rendering(
    limit=DISCORD_LIMIT, measure=len, render=to_discord_markdown, plain=to_plain_text
)


class DiscordAdapter(KitAdapter):
    platform = Platform.DISCORD
    # Discord allows 5 message edits per 5 seconds per channel.
    edit_interval: ClassVar[float] = 1.0
    watchdog: Watchdog
    # A typing call shows "typing..." for 10 seconds.
    typing_interval: ClassVar[float] = 8.0
    # One gateway connection per bot token in this process (a second socket delivers every
    # message again: the zombie-socket double answers of H #18187).
    _gateway_tokens: ClassVar[set[str]] = set()

    def __init__(
        self,
        config: DiscordConfig,
        *,
        clock: Clock | None = None,
        sleep: Sleep | None = None,
        tick: Sleep | None = None,
        client: DiscordClient | None = None,
    ) -> None:
        if config.token is None:
            raise CredentialsError("platforms.discord.token is not set")
        self.config = config
        self._token = config.token.get_secret_value()
        self._holds_token = False
        self.client = client or DiscordClient(self._token, api_base_url=config.api_base_url)
        super().__init__(
            KitSettings.from_config(config),
            sender=self.client,
            rendering=DISCORD_RENDERING,
            clock=clock,
            sleep=sleep,
            tick=tick,
        )
        self.client.on_dispatch = self._on_dispatch
        self.client.on_activity = self._on_activity
        self.me: DiscordIdentity | None = None
        self.commands = frozenset(c.name for c in gateway_commands())
        self.allow_roles = frozenset(config.allow_roles)
        self.watchdog = Watchdog(stall_seconds=config.gateway_stall_seconds)
        self.synced: tuple[int, int, int] | None = None
        # When the gateway last delivered anything (an event or a heartbeat ack), by the clock.
        self._last_activity = self.clock.monotonic()
        self._watcher: asyncio.Task[None] | None = None
        self.prompts = PostedPrompts()

    # ------------------------------------------------------------------ the platform's part

    async def connect(self) -> None:
        token = self._token
        if token in self._gateway_tokens:
            raise PlatformError("this Discord bot token already has a gateway in this process")
        self.me = await self.client.open()
        self._gateway_tokens.add(token)
        self._holds_token = True
        log.info("discord connected", extra={"user_id": self.me.user_id})
        self._state().prune_events(older_than_seconds=_CLAIM_HORIZON_SECONDS)

    async def disconnect(self) -> None:
        if self._holds_token:
            self._gateway_tokens.discard(self._token)
            self._holds_token = False
        await self.client.close()

    def target_for(self, source: SessionSource) -> Target:
        # In a thread the thread is the channel to post in (its own id is the chat id).
        return Target(chat_id=source.chat_id)

    async def send_approval(self, source: SessionSource, text: str, approval_id: str) -> None:
        """An approval prompt with Approve and Deny buttons under it (a press arrives as the
        command, `/approve <id>`, from the person who pressed)."""
        target = self.target_for(source)
        message_id = await self.client.send_components(target, text, approval_buttons(approval_id))
        self.prompts.add(approval_id, PostedPrompt(target, message_id, text))

    async def settle_approval(self, source: SessionSource, approval_id: str, outcome: str) -> None:
        """The prompt's buttons give way to the outcome (the message edited)."""
        prompt = self.prompts.pop(approval_id)
        if prompt is None:
            return
        await self.client.send_components(
            prompt.target, f"{prompt.text}\n{outcome}", [], message_id=prompt.message_id
        )

    async def register_commands(self, commands: Sequence[PlatformCommand]) -> None:
        if self.config.command_sync == "off":
            return
        self.synced = await self.client.sync_commands(commands)
        log.info("discord application commands synced", extra={"changes": self.synced})

    def singular_connection(self) -> str | None:
        return "discord:gateway"

    async def close_receiver(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            self._watcher = None
        await self.client.reset_gateway()

    async def run_receiver(self) -> None:
        self._watcher = self.spawn(self._watch())
        while True:
            try:
                await self.client.run_gateway()
                return  # closed by stop()
            except CredentialsError:
                self.receiving = False
                log.exception("discord refused the connection for good; receiver stopped")
                return
            except Exception:
                # Anything discord.py's own loop does not handle (a payload its parser cannot
                # read): the socket is closed first, so one token never has two.
                self.receiving = False
                self.counters.reconnects += 1
                delay = self.watchdog.failed()
                log.exception(
                    "discord gateway failed; reconnecting",
                    extra={"delay": round(delay, 2), "degraded": self.watchdog.degraded},
                )
                await self.client.reset_gateway()
                await self.sleep(delay)

    async def _watch(self) -> None:
        """Close a socket that delivered nothing for `gateway_stall_seconds`."""
        while True:
            await self.tick(self.watchdog.stall_seconds)
            silent = self.clock.monotonic() - self._last_activity
            if silent < self.watchdog.stall_seconds:
                continue
            self.receiving = False
            self.counters.stalls += 1
            self.counters.reconnects += 1
            log.warning("discord gateway silent; reconnecting", extra={"silent_seconds": silent})
            self._last_activity = self.clock.monotonic()
            await self.client.force_reconnect()

    def _on_activity(self) -> None:
        self._last_activity = self.clock.monotonic()
        self.watchdog.beat()
        self.receiving = True

    # ------------------------------------------------------------------ inbound

    def _on_dispatch(self, kind: str, data: dict[str, Any]) -> None:
        if kind not in _HANDLED or self._stopped or not self.leads():
            return
        try:
            self.spawn(self._handle(kind, data))
        except RuntimeError:
            log.debug("discord dispatch after stop ignored", extra={"kind": kind})

    async def _handle(self, kind: str, data: dict[str, Any]) -> None:
        assert self.me is not None
        try:
            guild = data.get("guild_id")
            channel_id = str(data.get("channel_id") or "")
            channel = await self.client.channel(channel_id) if guild and channel_id else None
            if kind == "INTERACTION_CREATE":
                event = parse_interaction(data, self.me, channel, allow_roles=self.allow_roles)
            else:
                event = parse_message(
                    kind,
                    data,
                    self.me,
                    channel,
                    allow_roles=self.allow_roles,
                    commands=self.commands,
                )
        except PayloadError as exc:
            log.warning(
                "discord dispatch not understood; skipped",
                extra={"kind": kind, "field": exc.field, "problem": exc.problem},
            )
            return
        except (KeyError, TypeError, ValueError):
            # The channel lookup's own shape (channel_info) is not the dispatch's.
            log.exception("discord channel not understood; skipped", extra={"kind": kind})
            return
        try:
            admission = await self.admit(event)
        except HandoffError:
            log.warning("discord event not accepted (stopping); a RESUME replays it")
            return
        if kind == "INTERACTION_CREATE" and admission.status in ("accepted", "dropped"):
            await self._answer_interaction(data, event.kind, admission)

    async def _answer_interaction(
        self, data: dict[str, Any], kind: str, admission: Admission
    ) -> None:
        """Answer an interaction: a command with "Running /cmd..." or the refusal, a button
        press with nothing on screen (the refusal, to its presser alone, when they may not
        use the bot here)."""
        accepted = admission.status == "accepted"
        name = (data.get("data") or {}).get("name", "")
        text = f"Running /{name}..." if accepted else COMMAND_REFUSAL
        try:
            if kind == "component" and admission.reason != "not_allowed":
                await self.client.acknowledge_press(str(data["id"]), str(data["token"]))
            else:
                await self.client.acknowledge_interaction(str(data["id"]), str(data["token"]), text)
        except PlatformError as exc:
            log.warning("discord interaction not acknowledged", extra={"error": str(exc)})
