"""`TelegramAdapter`: Telegram on the kit, by long polling or by webhook.

Polling: `getUpdates` with `offset` = the last update accepted + 1. The offset is what tells
Telegram an update is done, and it is only sent after the kit's `admit` returned for every
update before it (the event claimed, the message durably accepted by the gateway): a crash at
any point makes Telegram deliver the unfinished updates again, and the claims and the gateway's
inbound dedup turn each redelivery into no second turn. A hand-off the gateway refuses (it is
stopping) leaves the offset where it was. A poll that hangs past the watchdog's deadline has its
client closed and rebuilt; errors back off with jitter (a 409 from a second poller waits at
least 15 s, never a hot loop); a refused token stops the receiver with an error.

Webhook: `POST /hooks/telegram` on the gateway's own HTTP server hands each update to
`receive_webhook`, which checks `X-Telegram-Bot-Api-Secret-Token` against `webhook_secret` in
constant time before it looks at the body; anything else is 401 and its body is never parsed.
The update is claimed and accepted before the 200, so Telegram's retry of an update that got
no answer finds it done.

With several instances on one database, polling is a singular connection ("telegram:polling"):
it runs on the instance leading that lease, which confirms it before each `getUpdates` (the
call that confirms the offset), and drops a batch that arrives after its lead may have moved
(it woke from a pause): the successor is given those updates again.
"""

from __future__ import annotations

import hmac
import logging
from typing import TYPE_CHECKING, Any, ClassVar

from sessiongate.adapters.kit.adapter import HandoffError, KitAdapter
from sessiongate.adapters.kit.bursts import MAX_HOLD_WINDOWS
from sessiongate.adapters.kit.errors import CredentialsError, PlatformError
from sessiongate.adapters.kit.events import PlatformEvent
from sessiongate.adapters.kit.fields import PayloadError, loads_json
from sessiongate.adapters.kit.formatting import to_plain_text, to_telegram_html
from sessiongate.adapters.kit.outbound import Rendering, Target
from sessiongate.adapters.kit.settings import KitSettings
from sessiongate.adapters.kit.splitting import TELEGRAM_LIMIT, utf16_len
from sessiongate.adapters.kit.watchdog import StalledError, Watchdog
from sessiongate.adapters.telegram.client import PollConflictError, TelegramClient
from sessiongate.adapters.telegram.payloads import BotIdentity, approval_keyboard, parse_update
from sessiongate.core.platform import Platform
from sessiongate.errors import LeaseLostError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from sessiongate.adapters.kit.events import PlatformCommand
    from sessiongate.adapters.kit.timing import Sleep
    from sessiongate.core.clock import Clock
    from sessiongate.core.config import TelegramConfig
    from sessiongate.core.source import SessionSource

__all__ = ["SECRET_HEADER", "TELEGRAM_RENDERING", "TelegramAdapter"]

log = logging.getLogger(__name__)

SECRET_HEADER = "x-telegram-bot-api-secret-token"
TELEGRAM_RENDERING = Rendering(
    limit=TELEGRAM_LIMIT, measure=utf16_len, render=to_telegram_html, plain=to_plain_text
)
# Telegram answers a second poller with 409 until the first stops; its own guidance is to wait.
_CONFLICT_WAIT_SECONDS = 15.0
# Finished claims are kept this long: Telegram keeps undelivered updates for 24 hours.
_CLAIM_HORIZON_SECONDS = 48 * 3600.0


class TelegramAdapter(KitAdapter):
    platform = Platform.TELEGRAM
    edit_interval: ClassVar[float] = 1.0
    watchdog: Watchdog
    # sendChatAction shows "typing..." for 5 seconds.
    typing_interval: ClassVar[float] = 4.5
    # One poller per token in this process (Telegram allows one; a second gets 409s).
    _polling_tokens: ClassVar[set[str]] = set()

    def __init__(
        self,
        config: TelegramConfig,
        *,
        clock: Clock | None = None,
        sleep: Sleep | None = None,
        tick: Sleep | None = None,
        client: TelegramClient | None = None,
    ) -> None:
        if config.token is None:
            raise CredentialsError("platforms.telegram.token is not set")
        self.config = config
        self._token = config.token.get_secret_value()
        self.client = client or TelegramClient(
            self._token, base_url=config.base_url, poll_timeout=config.poll_timeout_seconds
        )
        super().__init__(
            KitSettings.from_config(config),
            sender=self.client,
            rendering=TELEGRAM_RENDERING,
            clock=clock,
            sleep=sleep,
            tick=tick,
        )
        self.me: BotIdentity | None = None
        self.offset: int | None = None
        self.watchdog = Watchdog(stall_seconds=config.poll_stall_seconds)
        self._polling = False

    # ------------------------------------------------------------------ the platform's part

    async def connect(self) -> None:
        if self.config.mode == "webhook" and self.config.webhook_secret is None:
            raise CredentialsError(
                "platforms.telegram.mode is webhook but webhook_secret is not set; "
                "an unsigned webhook would accept anyone's updates"
            )
        self.me = await self.client.open()
        log.info("telegram connected", extra={"bot": self.me.username, "mode": self.config.mode})
        self._state().prune_events(older_than_seconds=_CLAIM_HORIZON_SECONDS)
        if self.config.mode == "webhook":
            if self.config.webhook_url and self.config.webhook_secret is not None:
                await self.client.set_webhook(
                    self.config.webhook_url,
                    secret=self.config.webhook_secret.get_secret_value(),
                    drop_pending_updates=self.config.drop_pending_updates,
                )
            return
        if self._token in self._polling_tokens:
            raise PlatformError("this bot token is already polling in this process")
        # A webhook left registered makes getUpdates fail with 409.
        await self.client.delete_webhook(drop_pending_updates=self.config.drop_pending_updates)
        self._polling_tokens.add(self._token)
        self._polling = True

    async def disconnect(self) -> None:
        if self._polling:
            self._polling_tokens.discard(self._token)
            self._polling = False
        await self.client.close()

    def target_for(self, source: SessionSource) -> Target:
        return Target(chat_id=source.chat_id, thread_id=source.thread_id)

    async def send_approval(self, source: SessionSource, text: str, approval_id: str) -> None:
        """An approval prompt with Approve and Deny buttons under it (a press arrives as the
        command, `/approve <id>`, from the person who pressed)."""
        await self.client.send_text(
            self.target_for(source), text, markup=False, reply_markup=approval_keyboard(approval_id)
        )

    async def register_commands(self, commands: Sequence[PlatformCommand]) -> None:
        await self.client.set_commands(commands)

    def singular_connection(self) -> str | None:
        return "telegram:polling" if self.config.mode == "polling" else None

    async def resolve_media(self, file_id: str) -> str:
        """The download URL of an attachment reference's file (getFile)."""
        return await self.client.file_url(file_id)

    # ------------------------------------------------------------------ polling

    async def run_receiver(self) -> None:
        if self.config.mode == "webhook":
            self.receiving = True
            return
        assert self.me is not None
        while True:
            # The offset sent confirms the updates before it: only the leader may say so.
            await self.check_lead()
            try:
                updates = await self.watchdog.guard(
                    self.client.get_updates(self.offset),
                    expected_seconds=float(self.config.poll_timeout_seconds),
                )
            except StalledError:
                self.counters.stalls += 1
                self.receiving = False
                log.warning("telegram poll stalled; rebuilding the client")
                await self._rebuild()
                continue
            except CredentialsError:
                self.receiving = False
                log.exception("telegram refused the token while polling; receiver stopped")
                return
            except PlatformError as exc:
                self.receiving = False
                delay = self.watchdog.failed()
                if isinstance(exc, PollConflictError):
                    delay = max(delay, _CONFLICT_WAIT_SECONDS)
                log.warning(
                    "telegram poll failed; backing off",
                    extra={
                        "error": str(exc),
                        "delay": round(delay, 2),
                        "failures": self.watchdog.failures,
                        "degraded": self.watchdog.degraded,
                    },
                )
                await self.sleep(delay)
                continue
            if not self.leads():
                raise LeaseLostError("the poll answered after the lead may have moved")
            self.receiving = True
            try:
                await self._admit_batch(updates)
            except Exception:
                # The store refused (a full disk) or a bug: the updates not taken stay
                # unconfirmed and come again; the receiver must not die of it.
                log.exception("telegram updates not admitted; retrying")
                await self.sleep(self.watchdog.failed())

    async def _admit_batch(self, updates: list[dict[str, Any]]) -> None:
        updates = await self._rest_of_split(updates)
        events = self._parse(updates)
        admitted = await self.admit_batch(events)
        await self._answer_presses(updates[: len(admitted)])
        # The offset moves past what the gateway took, and Telegram learns it at the next
        # getUpdates; an update it did not take comes again.
        if admitted:
            self.offset = int(updates[len(admitted) - 1]["update_id"]) + 1

    async def _answer_presses(self, updates: list[dict[str, Any]]) -> None:
        """Answer the button presses among admitted updates (best effort: an unanswered one
        only keeps its spinner a few seconds longer)."""
        for update in updates:
            query = update.get("callback_query")
            if isinstance(query, dict) and query.get("id") is not None:
                try:
                    await self.client.answer_callback(str(query["id"]))
                except PlatformError as exc:
                    log.info("telegram button press not answered", extra={"error": str(exc)})

    async def _rest_of_split(self, updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A paste the Telegram app split arrives as parts a moment apart, and the long poll
        often answers with the first alone. When the last update looks like such a part, wait
        the merge window and ask again from the same offset (so nothing is confirmed): the
        answer holds these updates and the parts sent since, and the kit merges them."""
        window = self.settings.merge.window
        for _ in range(MAX_HOLD_WINDOWS):
            if window <= 0 or not updates or not self._looks_split(self._parse(updates[-1:])[0]):
                break
            await self.hold(window)
            try:
                more = await self.client.get_updates(self.offset, poll_seconds=0)
            except PlatformError as exc:
                log.info("telegram poll for the rest of a split message failed", extra={
                    "error": str(exc)})  # fmt: skip
                break
            known = {int(u["update_id"]) for u in updates}
            fresh = [u for u in more if int(u["update_id"]) not in known]
            if not fresh:
                break
            updates = [*updates, *fresh]
        return updates

    def _parse(self, updates: list[dict[str, Any]]) -> list[PlatformEvent]:
        assert self.me is not None
        events = []
        for update in updates:
            try:
                events.append(parse_update(update, self.me))
            except PayloadError as exc:
                # A shape this mapping does not know: logged and skipped, so one odd update
                # cannot stall the chat behind it for ever.
                log.warning(
                    "telegram update not understood; skipped",
                    extra={"field": exc.field, "problem": exc.problem},
                )
                events.append(PlatformEvent(event_id=str(update.get("update_id")), source=None))
        return events

    async def _rebuild(self) -> None:
        self.counters.reconnects += 1
        try:
            await self.client.rebuild_poller()
        except PlatformError as exc:
            log.warning("telegram client rebuild failed", extra={"error": str(exc)})
            await self.sleep(self.watchdog.failed())

    # ------------------------------------------------------------------ webhook

    def verify_webhook(self, headers: Mapping[str, str]) -> bool:
        secret = self.config.webhook_secret
        given = headers.get(SECRET_HEADER)
        if self.config.mode != "webhook" or secret is None or given is None:
            return False
        return hmac.compare_digest(given.encode(), secret.get_secret_value().encode())

    def check_webhook_headers(self, headers: Mapping[str, str]) -> str | None:
        """Why a webhook POST is refused before its body is read, or None: the secret token
        is the whole credential, and it is a header."""
        if not self.verify_webhook(headers):
            return "missing or wrong X-Telegram-Bot-Api-Secret-Token"
        return None

    async def receive_webhook(
        self, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, dict[str, Any]]:
        """(status, JSON body) for one webhook POST; the body is parsed only once verified."""
        refusal = self.check_webhook_headers(headers)
        if refusal is not None:
            return 401, _error("unauthorized", refusal)
        assert self.me is not None
        try:
            update = loads_json(body)
            event = parse_update(update, self.me)
        except PayloadError as exc:
            # Signed, so Telegram's own (or the secret leaked): say which field, start nothing.
            log.warning(
                "telegram webhook update refused",
                extra={"field": exc.field, "problem": exc.problem},
            )
            return 400, _error("invalid_update", f"the body is not a Telegram update: {exc}")
        try:
            await self.admit(event)
        except HandoffError:
            return 503, _error("unavailable", "the gateway is stopping; retry later")
        if isinstance(update, dict):
            await self._answer_presses([update])
        return 200, {"ok": True}


def _error(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}
