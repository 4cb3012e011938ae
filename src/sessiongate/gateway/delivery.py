"""Delivery: sending replies and notices through the adapter of the message's platform.

A reply is committed (journal `replied`) before it is sent and journalled `delivered` after;
a crash in between sends it again at the next start (at-least-once, `turn_id` included so a
platform can drop the repeat). A platform without an adapter (the HTTP `api` channel) delivers
through the receipt and the transcript, so its replies are journalled delivered at once.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sessiongate.core.source import SessionSource
    from sessiongate.gateway.adapter import PlatformAdapter
    from sessiongate.store.lanes import LaneStore

__all__ = ["DELIVERY_TIMEOUT_SECONDS", "Delivery"]

log = logging.getLogger(__name__)

# An adapter that hangs must not hold a lane (and so the next turn) for ever; the reply stays
# journalled `replied` and is sent again at the next start.
DELIVERY_TIMEOUT_SECONDS = 60.0


class Delivery:
    def __init__(self, adapters: Sequence[PlatformAdapter], lane_store: LaneStore) -> None:
        self._adapters = {str(a.platform): a for a in adapters}
        if len(self._adapters) != len(adapters):
            raise ValueError("two adapters for one platform")
        self._lane_store = lane_store
        self.failures = 0

    @property
    def adapters(self) -> list[PlatformAdapter]:
        return list(self._adapters.values())

    def adapter_for(self, platform: str) -> PlatformAdapter | None:
        return self._adapters.get(str(platform))

    async def send(self, source: SessionSource, text: str, *, turn_id: int | None) -> bool:
        """Send a notice or command answer; True when sent (or there is no adapter to use)."""
        adapter = self.adapter_for(source.platform)
        if adapter is None:
            return True
        try:
            async with asyncio.timeout(DELIVERY_TIMEOUT_SECONDS):
                await adapter.send(source, text, turn_id=turn_id)
        except Exception:
            self.failures += 1
            log.exception(
                "delivery failed",
                extra={
                    "platform": str(source.platform),
                    "chat_id": source.chat_id,
                    "turn_id": turn_id,
                },
            )
            return False
        return True

    async def deliver_reply(
        self, session_key: str, turn_id: int, source: SessionSource, text: str
    ) -> bool:
        """Send a committed reply and journal it delivered; a failure leaves it `replied`."""
        if not await self.send(source, text, turn_id=turn_id):
            return False
        self._lane_store.mark_delivered(turn_id)
        log.info("turn delivered", extra={"session_key": session_key, "turn_id": turn_id})
        return True
