"""`SlackAdapter`: Slack on the kit, by Socket Mode or by the HTTP Events API.

Socket Mode (`mode: socket`, the default): slack-sdk's `SocketModeClient` keeps one websocket
(the URL from apps.connections.open with the `xapp-` token). Each envelope is mapped, handed to
the kit's `admit` (the claim of `(channel, ts)`, then the durable hand-off to the gateway) and
only then acknowledged, within Slack's 3 seconds: a crash before the ack makes Slack deliver
it again, and the claim turns the redelivery into no second turn. A hand-off that takes longer
than `ACK_DEADLINE_SECONDS` is acknowledged anyway and finishes in the adapter's task group (a
late ack would only bring a retry, which the claim drops). The SDK reconnects a dropped or
stale socket itself; on top of that a watchdog rebuilds the client when it has not been
connected for `socket_stall_seconds` ("connected but deaf"), with backoff and jitter.

Events API (`mode: events`): `POST /hooks/slack/events` on the gateway's own HTTP server hands
each request to `receive_webhook`, which checks the `X-Slack-Signature` HMAC and refuses a
`X-Slack-Request-Timestamp` more than 5 minutes off before it parses anything (401). Then it
answers `url_verification`, and admits `event_callback`s and slash commands the same way,
answering 200 within the deadline; Slack's retries (`X-Slack-Retry-Num`) of an event it has
are answered 200 at once, by the claim. `POST /hooks/slack/interactivity` comes to the same
method, checked the same way.

Approval prompts (`send_approval`) are Block Kit with Approve and Deny buttons; a press (a
`block_actions` interaction, by either way) is admitted as the presser's `/approve <id>`, and
once the approval is settled the prompt shows the outcome instead of the buttons
(`settle_approval`, chat.update).
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import parse_qsl

from slack_sdk.signature import Clock as SlackClock, SignatureVerifier

from sessiongate.adapters.kit.adapter import COMMAND_REFUSAL, HandoffError, KitAdapter
from sessiongate.adapters.kit.approval_buttons import PostedPrompt, PostedPrompts
from sessiongate.adapters.kit.errors import CredentialsError, PlatformError
from sessiongate.adapters.kit.events import Admission, PlatformEvent, gateway_commands
from sessiongate.adapters.kit.fields import PayloadError, loads_json
from sessiongate.adapters.kit.outbound import Rendering, Target
from sessiongate.adapters.kit.settings import KitSettings
from sessiongate.adapters.kit.splitting import SLACK_LIMIT
from sessiongate.adapters.kit.watchdog import Watchdog
from sessiongate.adapters.slack.client import SlackClient
from sessiongate.adapters.slack.mrkdwn import to_mrkdwn, to_plain
from sessiongate.adapters.slack.payloads import (
    SlackIdentity,
    approval_blocks,
    parse_block_actions,
    parse_envelope,
    parse_slash_command,
)
from sessiongate.core.platform import Platform

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from slack_sdk.socket_mode.aiohttp import SocketModeClient
    from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
    from slack_sdk.socket_mode.request import SocketModeRequest

    from sessiongate.adapters.kit.events import PlatformCommand
    from sessiongate.adapters.kit.timing import Sleep
    from sessiongate.core.clock import Clock
    from sessiongate.core.config import SlackConfig
    from sessiongate.core.source import SessionSource

__all__ = ["ACK_DEADLINE_SECONDS", "SLACK_RENDERING", "SlackAdapter"]

log = logging.getLogger(__name__)

SLACK_RENDERING = Rendering(limit=SLACK_LIMIT, measure=len, render=to_mrkdwn, plain=to_plain)
# Slack wants an answer within 3 seconds; what is not settled by then is acknowledged anyway.
ACK_DEADLINE_SECONDS = 2.5
# Slack's replay window: a request signed longer ago than this (or ahead of it) is refused.
SIGNATURE_WINDOW_SECONDS = 300
# ASCII digits only (`str.isdigit` takes `²`, which `int` refuses); `v0=` and an HMAC-SHA256.
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
_SIGNATURE = re.compile(r"v0=[0-9a-fA-F]{64}")
# A slash command's form has about a dozen fields.
_MAX_FORM_FIELDS = 100
# Finished claims are kept this long: Slack retries an event for about an hour at most.
_CLAIM_HORIZON_SECONDS = 24 * 3600.0


class _EpochClock(SlackClock):
    """The signature check's clock, the injected one (slack-sdk wants epoch seconds)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock

    def now(self) -> float:
        return self._clock.now().timestamp()


class SlackAdapter(KitAdapter):
    platform = Platform.SLACK
    edit_interval: ClassVar[float] = 1.0
    watchdog: Watchdog
    # The assistant status line stays until the bot replies; refreshed now and then in case
    # Slack cleared it.
    typing_interval: ClassVar[float] = 30.0
    # One Socket Mode connection per app token in this process (a second would receive every
    # envelope too: two turns per message).
    _socket_tokens: ClassVar[set[str]] = set()

    def __init__(
        self,
        config: SlackConfig,
        *,
        clock: Clock | None = None,
        sleep: Sleep | None = None,
        tick: Sleep | None = None,
        client: SlackClient | None = None,
        ping_interval: float = 5.0,
    ) -> None:
        if config.bot_token is None:
            raise CredentialsError("platforms.slack.bot_token is not set")
        self.config = config
        self.client = client or SlackClient(
            config.bot_token.get_secret_value(),
            base_url=config.base_url,
            app_config_token=(
                config.app_config_token.get_secret_value() if config.app_config_token else None
            ),
            app_id=config.app_id,
        )
        super().__init__(
            KitSettings.from_config(config),
            sender=self.client,
            rendering=SLACK_RENDERING,
            clock=clock,
            sleep=sleep,
            tick=tick,
        )
        self.me: SlackIdentity | None = None
        self.commands = frozenset(c.name for c in gateway_commands())
        self.watchdog = Watchdog(stall_seconds=config.socket_stall_seconds)
        self.socket: SocketModeClient | None = None
        self._socket_url: str | None = None
        self._ping_interval = ping_interval
        self._verifier = (
            SignatureVerifier(config.signing_secret.get_secret_value(), _EpochClock(self.clock))
            if config.signing_secret is not None
            else None
        )
        self.retries_seen = 0
        self._holds_token = False
        self.prompts = PostedPrompts()

    # ------------------------------------------------------------------ the platform's part

    async def connect(self) -> None:
        if self.config.mode == "events" and self._verifier is None:
            raise CredentialsError(
                "platforms.slack.mode is events but signing_secret is not set; "
                "unsigned events would accept anyone's requests"
            )
        if self.config.mode == "socket" and self.config.app_token is None:
            raise CredentialsError("platforms.slack.mode is socket but app_token is not set")
        self.me = await self.client.open()
        if self.config.mode == "socket":
            assert self.config.app_token is not None
            if self.config.app_token.get_secret_value() in self._socket_tokens:
                raise PlatformError("this Slack app token already has a socket in this process")
            # Verifies the app token now: a refused one fails the start, not a retry loop.
            self._socket_url = await self.client.open_socket_url(
                self.config.app_token.get_secret_value()
            )
        if self.config.mode == "socket":
            assert self.config.app_token is not None
            self._socket_tokens.add(self.config.app_token.get_secret_value())
            self._holds_token = True
        log.info("slack connected", extra={"team": self.me.team_id, "mode": self.config.mode})
        self._state().prune_events(older_than_seconds=_CLAIM_HORIZON_SECONDS)

    async def disconnect(self) -> None:
        if self._holds_token and self.config.app_token is not None:
            self._socket_tokens.discard(self.config.app_token.get_secret_value())
            self._holds_token = False
        await self._close_socket()
        await self.client.close()

    def target_for(self, source: SessionSource) -> Target:
        return Target(chat_id=source.chat_id, thread_id=source.thread_id)

    async def send_approval(self, source: SessionSource, text: str, approval_id: str) -> None:
        """An approval prompt in Block Kit with Approve and Deny buttons (a press arrives as
        the command, `/approve <id>`, from the person who pressed)."""
        target = self.target_for(source)
        ts = await self.client.send_blocks(target, text, approval_blocks(text, approval_id))
        self.prompts.add(approval_id, PostedPrompt(target, ts, text))

    async def settle_approval(self, source: SessionSource, approval_id: str, outcome: str) -> None:
        """The prompt's buttons give way to the outcome (chat.update)."""
        prompt = self.prompts.pop(approval_id)
        if prompt is None:
            return
        await self.client.update_blocks(
            prompt.target,
            prompt.message_id,
            f"{prompt.text}\n{outcome}",
            approval_blocks(prompt.text, approval_id, outcome=outcome),
        )

    async def register_commands(self, commands: Sequence[PlatformCommand]) -> None:
        await self.client.set_commands(commands)

    def singular_connection(self) -> str | None:
        return "slack:socket" if self.config.mode == "socket" else None

    async def close_receiver(self) -> None:
        await self._close_socket()

    # ------------------------------------------------------------------ Socket Mode

    async def run_receiver(self) -> None:
        if self.config.mode == "events":
            self.receiving = True
            return
        await self._open_socket()
        while True:
            await self.tick(self.watchdog.stall_seconds)
            socket = self.socket
            if socket is not None and await socket.is_connected():
                self.watchdog.beat()
                self.receiving = True
                continue
            self.receiving = False
            self.counters.stalls += 1
            log.warning("slack socket not connected; rebuilding it")
            try:
                await self._rebuild()
            except CredentialsError:
                log.exception("slack refused the app token; receiver stopped")
                return
            except PlatformError as exc:
                delay = self.watchdog.failed()
                log.warning(
                    "slack socket rebuild failed; backing off",
                    extra={
                        "error": str(exc),
                        "delay": round(delay, 2),
                        "degraded": self.watchdog.degraded,
                    },
                )
                await self.sleep(delay)

    async def _open_socket(self) -> None:
        from slack_sdk.socket_mode.aiohttp import SocketModeClient

        assert self.config.app_token is not None
        socket = SocketModeClient(
            self.config.app_token.get_secret_value(),
            web_client=self.client.web,
            auto_reconnect_enabled=True,
            ping_interval=self._ping_interval,
        )
        socket.socket_mode_request_listeners.append(self._on_request)
        socket.wss_uri = self._socket_url  # verified in connect(); the SDK re-issues on drops
        self._socket_url = None
        self.socket = socket
        await socket.connect()  # type: ignore[no-untyped-call]
        self.receiving = True
        self.watchdog.beat()

    async def _close_socket(self) -> None:
        socket, self.socket = self.socket, None
        if socket is not None:
            await socket.close()  # type: ignore[no-untyped-call]

    async def _rebuild(self) -> None:
        """Close the old socket first (one connection per app token), then a fresh one."""
        self.counters.reconnects += 1
        await self._close_socket()
        assert self.config.app_token is not None
        self._socket_url = await self.client.open_socket_url(
            self.config.app_token.get_secret_value()
        )
        await self._open_socket()

    async def _on_request(
        self, socket: AsyncBaseSocketModeClient, request: SocketModeRequest
    ) -> None:
        from slack_sdk.socket_mode.response import SocketModeResponse

        self.watchdog.beat()
        if not self.leads():
            # Woken after the lead moved: unacknowledged, Slack gives it to the leader's socket.
            return
        if request.retry_attempt:
            self.retries_seen += 1
        try:
            event = self._map(request.type, request.payload)
        except PayloadError as exc:
            log.warning(
                "slack envelope not understood; acknowledged and skipped",
                extra={"field": exc.field, "problem": exc.problem},
            )
            event = None
        payload = None
        if event is not None:
            try:
                admission = await self._admit_within_deadline(event)
            except HandoffError:
                return  # not acknowledged: Slack delivers it again
            payload = _command_ack(event, admission)
        await socket.send_socket_mode_response(
            SocketModeResponse(envelope_id=request.envelope_id, payload=payload)
        )

    def _map(self, kind: str, payload: Mapping[str, Any]) -> PlatformEvent | None:
        assert self.me is not None
        if kind == "events_api":
            return parse_envelope(payload, self.me, commands=self.commands)
        if kind == "slash_commands":
            return parse_slash_command(
                {str(k): str(v) for k, v in payload.items()}, self.me, commands=self.commands
            )
        if kind == "interactive" and payload.get("type") == "block_actions":
            return parse_block_actions(payload, self.me)
        return None  # other interactivity and the rest: acknowledged, not handled

    async def _admit_within_deadline(self, event: PlatformEvent) -> Admission | None:
        """`admit`, waited for at most ACK_DEADLINE_SECONDS (then it finishes on its own, and
        this returns None)."""
        if self._stopped:
            raise HandoffError("the adapter is stopped")
        settled: asyncio.Future[Admission] = asyncio.get_running_loop().create_future()

        async def run() -> None:
            try:
                settled.set_result(await self.admit(event))
            except BaseException as exc:
                if not settled.done():
                    settled.set_exception(exc)
                if not isinstance(exc, Exception):
                    raise

        self.spawn(run())
        try:
            async with asyncio.timeout(ACK_DEADLINE_SECONDS):
                return await asyncio.shield(settled)
        except TimeoutError:
            log.warning("slack event still being accepted at the ack deadline; acknowledged")
            settled.add_done_callback(lambda f: f.cancelled() or f.exception())
            return None

    # ------------------------------------------------------------------ Events API

    def verify_webhook(self, headers: Mapping[str, str], body: bytes) -> bool:
        if self.config.mode != "events" or self._verifier is None:
            return False
        try:
            return self._verifier.is_valid_request(body, dict(headers.items()))
        except ValueError:  # a timestamp that is not a number
            return False

    def check_webhook_headers(self, headers: Mapping[str, str]) -> str | None:
        """Why an Events API POST is refused before its body is read, or None: the signature
        and a timestamp within Slack's 5-minute window must be there (the signature itself is
        an HMAC over the body, checked by `receive_webhook` once the body is in)."""
        if self.config.mode != "events" or self._verifier is None:
            return "not a signed webhook request"
        timestamp = headers.get("x-slack-request-timestamp")
        signature = headers.get("x-slack-signature")
        if timestamp is None or signature is None:
            return "missing X-Slack-Request-Timestamp or X-Slack-Signature"
        if _TIMESTAMP.fullmatch(timestamp) is None or (
            abs(self._verifier.clock.now() - int(timestamp)) > SIGNATURE_WINDOW_SECONDS
        ):
            return "X-Slack-Request-Timestamp is not within 5 minutes of now"
        if _SIGNATURE.fullmatch(signature) is None:
            return "X-Slack-Signature is not a v0 signature"
        return None

    async def receive_webhook(
        self, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, dict[str, Any]]:
        """(status, JSON body) for one Events API POST; parsed only once verified."""
        if self.check_webhook_headers(headers) is not None or not self.verify_webhook(
            headers, body
        ):
            return 401, _error(
                "unauthorized", "missing, wrong or expired X-Slack-Signature (5-minute window)"
            )
        if headers.get("x-slack-retry-num") is not None:
            self.retries_seen += 1
        try:
            if headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
                try:
                    form = dict(parse_qsl(body.decode(), max_num_fields=_MAX_FORM_FIELDS))
                except ValueError as exc:
                    raise PayloadError("body", "not a form") from exc
                if "payload" in form:  # interactivity: a button press, or else acknowledged
                    interaction = loads_json(form["payload"])
                    if not isinstance(interaction, dict):
                        raise PayloadError("payload", "expected an object")
                    event: PlatformEvent | None = self._map("interactive", interaction)
                else:
                    event = self._map("slash_commands", form)
            else:
                payload = loads_json(body)
                if not isinstance(payload, dict):
                    raise PayloadError("body", "expected an object")
                if payload.get("type") == "url_verification":
                    return 200, {"challenge": str(payload.get("challenge", ""))}
                if payload.get("type") != "event_callback":
                    return 200, {}
                event = self._map("events_api", payload)
        except PayloadError as exc:
            # Signed, so Slack's own (or the secret leaked): say which field, start nothing.
            log.warning(
                "slack webhook event refused", extra={"field": exc.field, "problem": exc.problem}
            )
            return 400, _error("invalid_event", f"the body is not a Slack event: {exc}")
        if event is None:
            return 200, {}
        try:
            admission = await self._admit_within_deadline(event)
        except HandoffError:
            return 503, _error("unavailable", "the gateway is stopping; retry later")
        return 200, _command_ack(event, admission) or {}


def _command_ack(event: PlatformEvent, admission: Admission | None) -> dict[str, Any] | None:
    """What a slash command's user alone is told in the acknowledgement (Slack shows it as
    an ephemeral message): that it runs, or that they may not use it. None for events."""
    if event.kind != "slash_command" or admission is None:
        return None
    if admission.status == "accepted":
        command = event.text.split(" ", 1)[0]
        return {"response_type": "ephemeral", "text": f"Running {command}..."}
    if admission.reason == "not_allowed":
        return {"response_type": "ephemeral", "text": COMMAND_REFUSAL}
    return None


def _error(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}
