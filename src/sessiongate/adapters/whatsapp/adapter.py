"""`WhatsAppAdapter`: the WhatsApp Cloud API on the kit, by webhook.

Meta calls the gateway: `GET /hooks/whatsapp` once, to verify the endpoint (`hub.mode`,
`hub.verify_token` compared in constant time with `verify_token`, answered with
`hub.challenge`), then `POST /hooks/whatsapp` for every batch of messages and delivery
reports, signed `X-Hub-Signature-256: sha256=<HMAC-SHA256 of the body with app_secret>`. The
route refuses a POST without that header before it reads the body; `receive_webhook` checks the
HMAC before it parses anything (401: nothing is parsed, nothing starts). A signed body that is
not a Cloud API webhook is a 400 naming the field (`payloads.PayloadError`).

Then, in this order: the aliases the body reveals (a BSUID and the number it belongs to) are
learned by the store, so both spellings route to one lane; delivery reports (sent, delivered,
read, failed) are recorded (`statuses`, counters, a warning for each failure; a failure of a
reply this process sent marks its turn's send record `refused`), never turned into turns;
each message is noted for the 24-hour window and the typing indicator; and the batch goes to
the kit's `admit_batch`: one transaction claims every message id before the first await
(decision 13), so Meta's redelivery of a batch (it retries until it gets a 200, for days) is
acknowledged without a second turn. The 200 goes out once the messages are durably accepted;
a gateway that is stopping answers 503 and Meta delivers the batch again.

Outbound: WhatsApp cannot edit or delete a sent message, so replies are never streamed (the
adapter is not a `StreamingAdapter`); a reply is the final text, split at 4,096 characters,
with WhatsApp's markers. A reply to a user whose last message is more than 24 hours old fails
before any request (`window.py`) with `ServiceWindowClosedError`: the reason is logged, the
delivery stays undelivered (listed, retried by the gateway, so it arrives once the user writes
again), and, when `window_template` is configured, that approved template is sent once to
invite the user back. A refusal of the same kind from Meta (131047) is recorded as refused.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections import Counter, OrderedDict
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

from pywa.utils import webhook_updates_validator

from sessiongate.adapters.kit.access import AccessPolicy
from sessiongate.adapters.kit.adapter import HandoffError, KitAdapter
from sessiongate.adapters.kit.errors import CredentialsError, PlatformError
from sessiongate.adapters.kit.outbound import Rendering, Target
from sessiongate.adapters.kit.settings import KitSettings
from sessiongate.adapters.whatsapp.client import ServiceWindowClosedError, WhatsAppClient
from sessiongate.adapters.whatsapp.markup import WHATSAPP_LIMIT, to_plain, to_whatsapp
from sessiongate.adapters.whatsapp.payloads import (
    PayloadError,
    StatusUpdate,
    WhatsAppIdentity,
    parse_webhook,
)
from sessiongate.adapters.whatsapp.window import ServiceWindow, WindowClosed
from sessiongate.core.identity import normalize_whatsapp_identifier
from sessiongate.core.platform import Platform
from sessiongate.core.source import ChatType, SessionSource

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from datetime import datetime

    from sessiongate.adapters.kit.events import PlatformCommand, PlatformEvent
    from sessiongate.adapters.kit.timing import Sleep
    from sessiongate.core.clock import Clock
    from sessiongate.core.config import WhatsAppConfig

__all__ = ["SIGNATURE_HEADER", "WHATSAPP_RENDERING", "WhatsAppAdapter"]

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "x-hub-signature-256"
WHATSAPP_RENDERING = Rendering(
    limit=WHATSAPP_LIMIT, measure=len, render=to_whatsapp, plain=to_plain
)
# Finished claims are kept this long: Meta retries an unanswered webhook for up to 7 days.
_CLAIM_HORIZON_SECONDS = 8 * 24 * 3600.0
# Delivery reports remembered (by message id), newest kept.
_MAX_STATUSES = 10_000
# A later report never moves a message back: `read` stays read when `delivered` comes late.
_STATUS_RANK = {"sent": 1, "delivered": 2, "read": 3, "played": 4, "failed": 5, "deleted": 5}


class WhatsAppAdapter(KitAdapter):
    platform = Platform.WHATSAPP
    # "typing..." shows for up to 25 seconds or until the reply.
    typing_interval: ClassVar[float] = 20.0
    # Meta answers a send with an id and posts nothing it cannot deliver; 100 MB documents.
    upload_limit_mb: ClassVar[float] = 100.0
    # No edits on WhatsApp: not a `StreamingAdapter` (a protocol method set to None opts out),
    # so the gateway sends the final text only.
    start_stream = None  # type: ignore[assignment]  # opting out of the streaming protocol
    edit_stream = None  # type: ignore[assignment]  # as above
    finish_stream = None  # type: ignore[assignment]  # as above

    def __init__(
        self,
        config: WhatsAppConfig,
        *,
        clock: Clock | None = None,
        sleep: Sleep | None = None,
        tick: Sleep | None = None,
        client: WhatsAppClient | None = None,
    ) -> None:
        missing = [
            key
            for key in ("token", "phone_number_id", "app_secret", "verify_token")
            if getattr(config, key) is None
        ]
        if missing:
            raise CredentialsError(
                f"platforms.whatsapp needs {', '.join(missing)}: the Graph API token and phone "
                "number id to send, the app secret to verify webhooks, the verify token to "
                "register them"
            )
        assert config.token is not None
        assert config.phone_number_id is not None
        assert config.app_secret is not None
        assert config.verify_token is not None
        self.config = config
        self._app_secret = config.app_secret.get_secret_value()
        self._verify_token = config.verify_token.get_secret_value()
        self.client = client or WhatsAppClient(
            config.token.get_secret_value(),
            phone_number_id=config.phone_number_id,
            base_url=config.base_url,
            api_version=config.api_version,
        )
        settings = KitSettings.from_config(config)
        # Numbers in any spelling (`+1 555 123 4567`) match the digits the payloads carry.
        allowed = [normalize_whatsapp_identifier(a) or a for a in config.allow_from or ()]
        settings = replace(settings, access=AccessPolicy.build(allowed, config.dm_policy))
        super().__init__(
            settings,
            sender=self.client,
            rendering=WHATSAPP_RENDERING,
            clock=clock,
            sleep=sleep,
            tick=tick,
        )
        self.me = WhatsAppIdentity(config.phone_number_id)
        self.window = ServiceWindow(clock=self.clock, last_seen=self._last_seen)
        self.statuses: OrderedDict[str, StatusUpdate] = OrderedDict()
        self.status_counts: Counter[str] = Counter()
        self._turn_of: OrderedDict[str, int] = OrderedDict()
        self.window_refusals = 0
        self.templates_sent = 0
        # BSUID -> the phone number it was seen with (learned as an alias in the store).
        self._numbers: dict[str, str] = {}
        # Chats sent the window template since they last wrote (one invitation, not one per
        # retry of the undelivered reply).
        self._invited: set[str] = set()

    # ------------------------------------------------------------------ the platform's part

    async def connect(self) -> None:
        display = await self.client.open()
        self.me = WhatsAppIdentity(self.me.phone_number_id, display)
        log.info("whatsapp connected", extra={"phone_number_id": self.me.phone_number_id})
        self._state().prune_events(older_than_seconds=_CLAIM_HORIZON_SECONDS)

    async def run_receiver(self) -> None:
        # Meta posts to the gateway's route: nothing to run.
        self.receiving = True

    async def disconnect(self) -> None:
        await self.client.close()

    def target_for(self, source: SessionSource) -> Target:
        return Target(chat_id=source.chat_id)

    async def register_commands(self, commands: Sequence[PlatformCommand]) -> None:
        await self.client.set_commands(commands)

    async def download_media(self, media_id: str) -> tuple[bytes, str]:
        """(bytes, MIME type) of an inbound attachment (`whatsapp://file/<media_id>`), within
        `max_media_mb`; `MediaTooLargeError` over it."""
        return await self.client.download(media_id, max_bytes=self.settings.max_media_bytes)

    # ------------------------------------------------------------------ webhook

    @property
    def max_body_bytes(self) -> int:
        return self.config.max_webhook_bytes

    def verify_challenge(self, params: Mapping[str, str]) -> tuple[int, str]:
        """The GET verification: (200, the challenge) for the right token, else (401, ...)."""
        given = params.get("hub.verify_token", "")
        if params.get("hub.mode") != "subscribe" or not hmac.compare_digest(
            given.encode(), self._verify_token.encode()
        ):
            log.warning("whatsapp webhook verification refused (wrong verify token or mode)")
            return 401, "unauthorized"
        return 200, params.get("hub.challenge", "")

    def has_signature(self, headers: Mapping[str, str]) -> bool:
        """The header is there and shaped like one (checked before the body is read)."""
        return headers.get(SIGNATURE_HEADER, "").startswith("sha256=")

    def check_webhook_headers(self, headers: Mapping[str, str]) -> str | None:
        """Why a POST's headers already fail (no `X-Hub-Signature-256`), before its body."""
        return None if self.has_signature(headers) else "missing X-Hub-Signature-256"

    def verify_webhook(self, headers: Mapping[str, str], body: bytes) -> bool:
        given = headers.get(SIGNATURE_HEADER)
        if not given or not given.startswith("sha256="):
            return False
        return webhook_updates_validator(self._app_secret, body, given)

    async def receive_webhook(
        self, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, dict[str, Any]]:
        """(status, JSON body) for one webhook POST; parsed only once verified."""
        if len(body) > self.max_body_bytes:
            return 413, _error(
                "payload_too_large", f"the webhook body is larger than {self.max_body_bytes} bytes"
            )
        if not self.verify_webhook(headers, body):
            return 401, _error("unauthorized", "missing or wrong X-Hub-Signature-256")
        if self._stopped or self.runner is None:
            return 503, _error("unavailable", "the gateway is stopping; retry later")
        try:
            batch = parse_webhook(json.loads(body), self.me)
        except PayloadError as exc:
            return 400, _error("invalid_webhook", f"not a WhatsApp webhook: {exc}")
        except ValueError:
            return 400, _error("invalid_json", "the body is not JSON")
        self._learn_aliases(batch.aliases)
        for status in batch.statuses:
            self._record_status(status)
        events = [self._with_number(e) for e in batch.events]
        for event in events:
            if event.source is not None and event.message_id is not None:
                self.window.saw(event.source.chat_id, event.sent_at)
                self._invited.discard(event.source.chat_id)
                self.client.note_inbound(event.source.chat_id, event.message_id)
        if not events:
            return 200, {"ok": True}
        try:
            admitted = await self.admit_batch(events)
        except HandoffError:
            admitted = []
        if len(admitted) < len(events):
            return 503, _error("unavailable", "the gateway is stopping; retry later")
        return 200, {"ok": True}

    def _learn_aliases(self, pairs: list[tuple[str, str]]) -> None:
        for bsuid, number in pairs:
            if self._numbers.get(bsuid) == number:
                continue
            self._runner().store.learn_identity_alias(str(self.platform), bsuid, number)
            self._numbers[bsuid] = number

    def _with_number(self, event: PlatformEvent) -> PlatformEvent:
        """A sender known only by their BSUID (their number hidden) gets the number learned
        earlier as `user_id_alt`, so `allow_from` and pairing by number still recognise them."""
        source = event.source
        if source is None or source.user_id is None or source.user_id_alt is not None:
            return event
        if source.user_id.isdigit():
            return event
        number = self._numbers.get(source.user_id)
        if number is None:
            found = self._runner().store.resolve_identity(str(self.platform), source.user_id)
            number = found if found != source.user_id else None
        if number is None:
            return event
        return replace(event, source=replace(source, user_id_alt=number))

    def _record_status(self, status: StatusUpdate) -> None:
        self.status_counts[status.status] += 1
        known = self.statuses.get(status.message_id)
        if known is None or _STATUS_RANK[status.status] >= _STATUS_RANK[known.status]:
            self.statuses[status.message_id] = status
            self.statuses.move_to_end(status.message_id)
        while len(self.statuses) > _MAX_STATUSES:
            self.statuses.popitem(last=False)
        if status.status == "failed":
            turn_id = self._turn_of.get(status.message_id)
            log.warning(
                "whatsapp reports a message not delivered",
                extra={"message_id": status.message_id, "error": status.error, "turn_id": turn_id},
            )
            if turn_id is not None:
                # Accepted by the Graph API, then not delivered: the turn's send record says so.
                self._state().record_send(
                    str(self.platform),
                    turn_id,
                    "refused",
                    f"WhatsApp reported {status.message_id} failed: {status.error or 'no reason'}",
                )
        else:
            log.debug(
                "whatsapp delivery report",
                extra={"message_id": status.message_id, "status": status.status},
            )

    # ------------------------------------------------------------------ outbound

    async def send(self, source: SessionSource, text: str, *, turn_id: int | None) -> str | None:
        if source.chat_type is ChatType.DM and source.chat_id != "home":
            closed = self.window.check(source.chat_id)
            if closed is not None:
                await self._outside_window(closed, turn_id)
                raise ServiceWindowClosedError(closed.reason)
        message_id = await super().send(source, text, turn_id=turn_id)
        if turn_id is not None:
            # Which turn each message id carries, so a later `failed` report reaches its record.
            record = self._state().get_send(str(self.platform), turn_id)
            if record is not None and record.state == "sent" and record.detail:
                for message_id in record.detail.split(","):
                    self._turn_of[message_id] = turn_id
                while len(self._turn_of) > _MAX_STATUSES:
                    self._turn_of.popitem(last=False)
        return message_id

    async def _outside_window(self, closed: WindowClosed, turn_id: int | None) -> None:
        self.window_refusals += 1
        log.warning(
            "whatsapp reply not sent: %s",
            closed.reason,
            extra={"chat_id": closed.chat_id, "turn_id": turn_id},
        )
        name = self.config.window_template
        if name is None or closed.chat_id in self._invited:
            return
        try:
            await self.client.send_template(
                closed.chat_id, name, self.config.window_template_language
            )
        except PlatformError as exc:
            log.warning(
                "whatsapp window template not sent",
                extra={"chat_id": closed.chat_id, "template": name, "error": str(exc)},
            )
            return
        self._invited.add(closed.chat_id)
        self.templates_sent += 1
        log.info(
            "whatsapp window template sent", extra={"chat_id": closed.chat_id, "template": name}
        )

    def _last_seen(self, chat_id: str) -> datetime | None:
        """After a restart: the DM's session's last interaction (an inbound message)."""
        if self.runner is None:
            return None
        source = SessionSource(platform=Platform.WHATSAPP, chat_id=chat_id, chat_type=ChatType.DM)
        _key, entry = self.runner.store.resolve_route(source)
        return None if entry is None else entry.last_interaction_at


def _error(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}
