"""Outbound webhooks: the events of the outbox (`store/outbox.py`) POSTed to their receivers.

Each event is one POST of its JSON body (`{"id", "type", "created_at", "data"}`) with the
headers `X-Sessiongate-Event` (its type), `X-Sessiongate-Event-Id` (stable across retries: the
receiver's key to drop a repeat) and `X-Sessiongate-Signature: sha256=<hex>`, the HMAC-SHA256
of the exact body under the receiver's `secret`. A 2xx answer settles it; anything else (or no
answer within `webhooks.timeout_seconds`) is tried again after a doubling back-off, and after
`webhooks.max_attempts` tries the event is `dead` (the webhook dead-letter list). Delivery is
at-least-once: a crash after the receiver's answer and before the row is settled sends the
event again.

Order per session: for one receiver, an event of a session is not sent while an older one of
that session is still pending, so a receiver sees each session's events in the order they
happened (a dead event stops holding the later ones back). Events of different sessions do
not wait for each other.

On a database several instances share, one instance sends (the leader lease
`webhooks:outbound`, taken over when its holder dies); during a takeover an event may be sent
twice, which the event id lets the receiver drop.

The sender is its own task: a turn only writes the row (in its own transaction) and sets a
wake-up flag, so a slow or dead receiver never slows a turn. The table is the truth; memory
holds at most one batch (`BATCH`) at a time, so a long outage costs no memory.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
from typing import TYPE_CHECKING

import httpx

from sessiongate.gateway.leadership import Leadership
from sessiongate.gateway.store_calls import InlineCalls
from sessiongate.store.deliveries import platform_reason
from sessiongate.store.outbox import DEAD, SENT

if TYPE_CHECKING:
    from datetime import datetime

    from sessiongate.core.clock import Clock
    from sessiongate.core.config import WebhooksConfig
    from sessiongate.gateway.store_calls import StoreCalls
    from sessiongate.store.changes import Change
    from sessiongate.store.outbox import OutboxEvent, OutboxStore
    from sessiongate.store.ownership import Ownership

__all__ = ["BATCH", "SIGNATURE_HEADER", "WebhookSender", "sign"]

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Sessiongate-Signature"
EVENT_HEADER = "X-Sessiongate-Event"
EVENT_ID_HEADER = "X-Sessiongate-Event-Id"
# Pending events read per pass.
BATCH = 500
# With nothing due, the sender looks at the table again after this long anyway (a row another
# process wrote, a retry whose time came).
_IDLE_SECONDS = 5.0


def sign(secret: str, body: bytes) -> str:
    """The signature header's value for `body`: `sha256=` and the hex HMAC-SHA256."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class WebhookSender:
    def __init__(
        self,
        outbox: OutboxStore,
        config: WebhooksConfig,
        *,
        clock: Clock,
        transport: httpx.AsyncBaseTransport | None = None,
        calls: StoreCalls | None = None,
    ) -> None:
        self._outbox = outbox
        # How the store is called from the loop: inline (SQLite) or off it (PostgreSQL).
        self._calls: StoreCalls = calls or InlineCalls()
        self._config = config
        self._clock = clock
        self._secrets = {hook.url: hook.secret.get_secret_value() for hook in config.outbound}
        self._transport = transport
        # Open while `run` runs (a leader that lost and regained the lead runs again).
        self._client: httpx.AsyncClient | None = None
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.sent = 0
        self.failed = 0
        self.dead = 0
        # Set each time an event's row is settled (sent, refused, dead): for whoever waits on
        # the sender's progress (tests, tools).
        self.progress = asyncio.Event()

    def wake(self) -> None:
        """Something was written to the outbox: look at it soon. Safe from any thread."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._wake.set)

    def changes_committed(self, changes: list[Change]) -> None:
        """The store's change listener: every committed change may have written events."""
        if changes:
            self.wake()

    def _new_client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            timeout=self._config.timeout_seconds,
            transport=self._transport,
            follow_redirects=False,
        )

    async def pump(self) -> int:
        """Send every event due now, in order per receiver and session; how many were sent."""
        if self._client is None:
            async with self._new_client() as client:
                self._client = client
                try:
                    return await self._pump()
                finally:
                    self._client = None
        return await self._pump()

    async def _pump(self) -> int:
        now = self._clock.now()
        blocked: set[tuple[str, str | None]] = set()
        sent = 0
        for event in await self._calls.run(self._outbox.unsent, BATCH):
            lane = (event.target, event.session_key)
            if lane in blocked:
                continue
            if event.next_at > now:
                blocked.add(lane)
                continue
            status = await self._post(event)
            if status == SENT:
                sent += 1
            elif status != DEAD:  # a dead event holds nothing back
                blocked.add(lane)
        return sent

    async def _post(self, event: OutboxEvent) -> str:
        """POST one event and settle its row: its new status."""
        secret = self._secrets.get(event.target)
        if secret is None:
            reason = "receiver no longer configured"
            ok = False
        else:
            body = event.body.encode()
            headers = {
                "Content-Type": "application/json",
                EVENT_HEADER: event.event,
                EVENT_ID_HEADER: event.event_id,
                SIGNATURE_HEADER: sign(secret, body),
            }
            client = self._client
            assert client is not None  # `pump` opened it
            try:
                response = await client.post(event.target, content=body, headers=headers)
            except httpx.HTTPError as exc:
                ok, reason = False, platform_reason(exc)
            else:
                ok = response.is_success
                reason = f"HTTP {response.status_code}"
        try:
            return await self._settle(event, ok, reason)
        finally:
            self.progress.set()

    async def _settle(self, event: OutboxEvent, ok: bool, reason: str) -> str:
        if ok:
            await self._calls.run(self._outbox.mark_sent, event)
            self.sent += 1
            return SENT
        status = await self._calls.run(
            self._outbox.mark_failed,
            event,
            reason,
            max_attempts=self._config.max_attempts,
            backoff=self._config.retry_backoff_seconds,
            backoff_max=self._config.retry_backoff_max_seconds,
        )
        self.failed += 1
        if status == DEAD:
            self.dead += 1
            log.warning(
                "webhook event dead after its tries",
                extra={"event_id": event.event_id, "event": event.event, "reason": reason},
            )
        return status

    async def next_due(self) -> datetime | None:
        """When the oldest pending event is due (None: nothing pending)."""
        pending = await self._calls.run(self._outbox.unsent, BATCH)
        return min((e.next_at for e in pending), default=None)

    async def run_while_leading(self, ownership: Ownership | None, stop: asyncio.Event) -> None:
        """On a shared database: send only while this instance leads the lease
        `webhooks:outbound` (two senders would break each session's order), until `stop`."""
        role = Leadership(ownership, clock=self._clock).role("webhooks:outbound")
        leading = asyncio.ensure_future(role.run(lambda: self.run(stop)))
        stopping = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({leading, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (leading, stopping):
                task.cancel()
            await asyncio.gather(leading, stopping, return_exceptions=True)

    async def run(self, stop: asyncio.Event) -> None:
        """Send as events come and come due, until `stop` is set; a failing pass is logged
        and the sender goes on."""
        self._loop = asyncio.get_running_loop()
        self._client = self._new_client()
        try:
            while not stop.is_set():
                self._wake.clear()
                try:
                    await self.pump()
                    due = await self.next_due()
                except Exception:
                    log.exception("webhook pass failed")
                    due = None
                wait = _IDLE_SECONDS
                if due is not None:
                    wait = min(wait, max(0.0, (due - self._clock.now()).total_seconds()))
                stopping = asyncio.ensure_future(stop.wait())
                woken = asyncio.ensure_future(self._wake.wait())
                try:
                    await asyncio.wait(
                        {stopping, woken}, timeout=wait, return_when=asyncio.FIRST_COMPLETED
                    )
                finally:
                    stopping.cancel()
                    woken.cancel()
        finally:
            self._loop = None
            client, self._client = self._client, None
            if client is not None:
                await client.aclose()
