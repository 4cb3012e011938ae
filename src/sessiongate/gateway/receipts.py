"""The waiters of inbound messages: who gets a message's `Receipt` once its turn ends."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

# `Receipt` and `ReceiptStatus` live in `messages.py`; importable from here as before.
from sessiongate.gateway.messages import Receipt, ReceiptStatus

if TYPE_CHECKING:
    from sessiongate.gateway.streams import TurnWatch, WatchEvent

__all__ = ["Receipt", "ReceiptStatus", "Waiters"]


class Waiters:
    """Futures of callers waiting for the turn that consumes an inbox row.

    Merged follow-ups share one row, so several callers can wait on one row; all of them get
    the same outcome. A caller that gave up (its future is cancelled) is skipped. Watchers
    (`watch`) follow the row's turn as it streams and end with the same receipt.
    """

    def __init__(self) -> None:
        self._by_row: dict[int, tuple[str, str | None, list[asyncio.Future[Receipt]]]] = {}
        self._watches: dict[int, tuple[str, list[TurnWatch]]] = {}

    def watch(self, inbox_id: int, session_key: str, watch: TurnWatch) -> None:
        """Let `watch` follow the turn of row `inbox_id` (call it before any await after the
        row was accepted, so it sees the turn from its start)."""
        self._watches.setdefault(inbox_id, (session_key, []))[1].append(watch)

    def publish(self, inbox_id: int, event: WatchEvent) -> None:
        """A delta, a retry or a persisted message of the row's turn, for its watchers."""
        watched = self._watches.get(inbox_id)
        if watched is not None:
            for watch in watched[1]:
                watch.push(event)

    def is_watched(self, inbox_id: int) -> bool:
        return inbox_id in self._watches

    def add(
        self, inbox_id: int, session_key: str, session_id: str | None
    ) -> asyncio.Future[Receipt]:
        future: asyncio.Future[Receipt] = asyncio.get_running_loop().create_future()
        entry = self._by_row.setdefault(inbox_id, (session_key, session_id, []))
        entry[2].append(future)
        return future

    def resolve(
        self,
        inbox_id: int,
        status: ReceiptStatus,
        *,
        reply: str | None = None,
        turn_id: int | None = None,
        session_id: str | None = None,
    ) -> None:
        entry = self._by_row.pop(inbox_id, None)
        watched = self._watches.pop(inbox_id, None)
        if entry is None and watched is None:
            return
        key, known_id, futures = entry or (watched[0] if watched else "", None, [])
        receipt = Receipt(key, session_id or known_id, status, reply, turn_id)
        for future in futures:
            if not future.done():
                future.set_result(receipt)
        for watch in watched[1] if watched else ():
            watch.finish(receipt)

    def resolve_all(self, status: ReceiptStatus) -> None:
        """Answer every waiter with `status` (at shutdown: their rows wait for the restart)."""
        for inbox_id in list(self._by_row) + list(self._watches):
            self.resolve(inbox_id, status)

    def rows(self) -> dict[int, str]:
        """The inbox rows someone waits on or watches, with their lanes' keys."""
        keys = {inbox_id: watched[0] for inbox_id, watched in self._watches.items()}
        keys.update((inbox_id, entry[0]) for inbox_id, entry in self._by_row.items())
        return keys

    def __len__(self) -> int:
        return sum(len(entry[2]) for entry in self._by_row.values())
