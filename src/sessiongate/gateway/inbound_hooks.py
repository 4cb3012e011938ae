"""`InboundHooks`: a verified, parsed inbound webhook body made one system turn.

The HTTP side (api/routes_inbound.py) checks the credential and parses the body; `receive`
then takes the delivery id (`store/hook_receipts.py`: a repeat within `hooks.dedupe_hours`
runs nothing), renders the route's templates (a field the body lacks is the request's
fault), and hands the turn to the runner's intake as a system event (`event_kind`
`webhook`) with the delivery's own message id: like a scheduled job's run, it is an ordinary
queued turn in its lane that never extends the session's freshness, and a route with
`deliver_to` runs for that chat, its reply delivered there.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from sessiongate.core.inbound_hooks import TemplateError, hook_source, lookup
from sessiongate.errors import MessageIdConflictError, QueueFullError, SessionNotFoundError
from sessiongate.gateway.events import MessageEvent
from sessiongate.gateway.receipts import ReceiptStatus
from sessiongate.store.hook_receipts import HookReceiptStore
from sessiongate.store.records import to_us

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from sessiongate.core.clock import Clock
    from sessiongate.core.config import GatewayConfig
    from sessiongate.core.inbound_hooks import HookRouteSpec
    from sessiongate.gateway.feed import EventFeed
    from sessiongate.gateway.receipts import Receipt
    from sessiongate.store.session_store import SessionStore

__all__ = ["HookOutcome", "InboundHooks"]

log = logging.getLogger(__name__)

_MAX_ID_CHARS = 200


@dataclass(frozen=True, slots=True)
class HookOutcome:
    """What the HTTP side answers: `status` 202 (accepted), 200 (a duplicate), or a 4xx/5xx
    with `code` and `message`."""

    status: int
    code: str | None = None
    message: str | None = None
    turn_id: int | None = None
    session_key: str | None = None
    delivery_id: str | None = None
    duplicate: bool = False

    def body(self) -> dict[str, Any]:
        if self.code is not None:
            return {"error": {"code": self.code, "message": self.message}}
        return {
            "accepted": True,
            "duplicate": self.duplicate,
            "turn_id": self.turn_id,
            "session_key": self.session_key,
            "delivery_id": self.delivery_id,
        }


def _refused(status: int, code: str, message: str) -> HookOutcome:
    return HookOutcome(status, code, message)


class InboundHooks:
    def __init__(
        self,
        store: SessionStore,
        config: GatewayConfig,
        *,
        submit: Callable[..., Awaitable[Receipt]],
        clock: Clock,
        feed: EventFeed | None = None,
    ) -> None:
        self.receipts = HookReceiptStore(store, clock=clock)
        self._routes = {route.name: route for route in config.hooks.routes}
        self._keep = timedelta(hours=config.hooks.dedupe_hours)
        self._submit = submit
        self._feed = feed

    def route(self, name: str) -> HookRouteSpec | None:
        return self._routes.get(name)

    def purge(self) -> int:
        """Forget delivery ids older than `hooks.dedupe_hours` (housekeeping)."""
        return self.receipts.purge(self._keep)

    async def receive(self, name: str, body: Any, header_id: str | None) -> HookOutcome:
        """One verified delivery's parsed `body`; `header_id` the route's id header's value."""
        spec = self._routes.get(name)
        if spec is None:
            return _refused(404, "not_found", f"no inbound webhook {name!r}")
        delivery_id = header_id
        if delivery_id is None and spec.id_path() is not None:
            try:
                delivery_id = _text_id(body, spec)
            except TemplateError:
                delivery_id = None
        if delivery_id is not None:
            delivery_id = delivery_id.strip()
            if not delivery_id or len(delivery_id) > _MAX_ID_CHARS or not delivery_id.isprintable():
                return _refused(
                    400, "bad_request", f"the delivery id is empty, unprintable or longer than "
                    f"{_MAX_ID_CHARS} characters",
                )  # fmt: skip
        try:
            key, text = spec.render(body)
        except TemplateError as exc:
            return _refused(400, "bad_request", str(exc))
        tail = None
        if delivery_id is not None:
            ours, taken = self.receipts.take(name, delivery_id)
            if not ours:
                return HookOutcome(
                    200,
                    turn_id=taken.turn_id,
                    session_key=taken.session_key,
                    delivery_id=delivery_id,
                    duplicate=True,
                )
            tail = f"{delivery_id}:{to_us(taken.received_at)}"
        outcome = await self._hand_off(spec, key, text, body, delivery_id, tail)
        if delivery_id is not None:
            if outcome.code is None:
                self.receipts.accepted(
                    name, delivery_id, turn_id=outcome.turn_id, session_key=outcome.session_key
                )
            else:
                self.receipts.give_back(name, delivery_id)
        return outcome

    async def _hand_off(
        self,
        spec: HookRouteSpec,
        key: str | None,
        text: str,
        body: Any,
        delivery_id: str | None,
        tail: str | None,
    ) -> HookOutcome:
        # The message id is the take's (or, with no delivery id, the body's digest and a
        # random part): the runner's own duplicate check is the second fence (a take a crash
        # cut short, store/hook_receipts.py).
        if tail is None:
            digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
            tail = f"{digest[:32]}:{uuid.uuid4().hex}"
        event = MessageEvent(
            source=hook_source(spec, key),
            text=text,
            message_id=f"hook:{spec.name}:{tail}",
            internal=True,
            event_kind="webhook",
        )
        try:
            receipt = await self._submit(event, wait=False)
        except SessionNotFoundError as exc:
            return _refused(404, "not_found", str(exc))
        except QueueFullError:
            return _refused(429, "queue_full", "the lane's queue is full; retry later")
        except MessageIdConflictError:
            return _refused(
                409, "delivery_id_conflict", "this delivery id came with a different body"
            )
        status = receipt.status
        if status in (ReceiptStatus.QUEUED, ReceiptStatus.DUPLICATE, ReceiptStatus.REPLIED):
            duplicate = status == ReceiptStatus.DUPLICATE
            if not duplicate:
                log.info(
                    "inbound webhook accepted",
                    extra={"hook": spec.name, "turn_id": receipt.turn_id},
                )
                if self._feed is not None:
                    self._feed.publish(
                        "hook.accepted",
                        {
                            "session_key": receipt.session_key,
                            "hook": spec.name,
                            "turn_id": receipt.turn_id,
                            "delivery_id": delivery_id,
                        },
                    )
            return HookOutcome(
                200 if duplicate else 202,
                turn_id=receipt.turn_id,
                session_key=receipt.session_key,
                delivery_id=delivery_id,
                duplicate=duplicate,
            )
        if status == ReceiptStatus.QUEUE_FULL:
            return _refused(429, "queue_full", "the lane's queue is full; retry later")
        if status == ReceiptStatus.UNAVAILABLE:
            return _refused(503, "unavailable", "the gateway is stopping or its store refused")
        if status == ReceiptStatus.ARCHIVED:
            return _refused(409, "session_archived", "the route's session is archived")
        return _refused(503, "not_accepted", f"the turn was not accepted: {status}")


def _text_id(body: Any, spec: HookRouteSpec) -> str | None:
    path = spec.id_path()
    if path is None:
        return None
    value = lookup(body, path)
    if isinstance(value, str | int) and not isinstance(value, bool):
        return str(value)
    return None
