"""The `platform` family: what platform adapters keep (`store/platform_state.py` states the
rules). SQLite: `sqlite/platform_state.py`; PostgreSQL: `postgres/platform_state.py`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from sessiongate.store.records import PairingRow

__all__ = ["PlatformStateTx"]


class PlatformStateTx(Protocol):
    """Event claims, pairing requests, threads the bot has spoken in, sends per turn, and
    receiver cursors. Times are integer microseconds; a send is (state, detail)."""

    def claim_platform_event(self, platform: str, event_id: str, owner: str, now: int) -> bool:
        """True when `owner` now holds the claim of the event (new, or taken over from a
        dead owner); False when another live owner holds it or it is done."""
        ...

    def finish_platform_events(self, platform: str, event_ids: list[str]) -> None:
        """Mark these events done (never claimed again)."""
        ...

    def release_platform_event(self, platform: str, event_id: str, owner: str) -> None:
        """Give back `owner`'s claim of an event not done, so a redelivery is handled."""
        ...

    def prune_platform_events(self, before: int) -> int:
        """Forget done events claimed before `before`; how many."""
        ...

    def get_pairing(self, platform: str, user_id: str) -> PairingRow | None:
        """The sender's pairing request, live, expired or approved; None when none."""
        ...

    def upsert_pairing(self, row: PairingRow) -> None:
        """Write the sender's pairing request, replacing any earlier one."""
        ...

    def count_pending_pairing(self, platform: str, now: int) -> int:
        """How many requests on `platform` are neither approved nor expired at `now`."""
        ...

    def approve_pairing(self, code: str, now: int) -> PairingRow | None:
        """Approve the live request holding `code` and return it as it was before; None when
        there is no such request (or it expired)."""
        ...

    def list_pairing(self) -> list[PairingRow]:
        """Every pairing request, by platform, then oldest first."""
        ...

    def mark_thread(self, platform: str, chat_id: str, thread_id: str, now: int) -> None:
        """Remember that the bot spoke in this thread (once; later calls change nothing)."""
        ...

    def has_thread(self, platform: str, chat_id: str, thread_id: str) -> bool:
        """Whether the bot spoke in this thread."""
        ...

    def record_send(
        self, platform: str, turn_id: int, state: str, detail: str | None, now: int
    ) -> None:
        """Set the send of the turn's reply to (state, detail), whatever it was."""
        ...

    def begin_send(self, platform: str, turn_id: int, now: int) -> tuple[str, str | None] | None:
        """Record `sending` for a turn not seen before (None); else what was recorded for it."""
        ...

    def get_send(self, platform: str, turn_id: int) -> tuple[str, str | None] | None:
        """The send recorded for the turn's reply; None when none."""
        ...

    def get_cursor(self, platform: str, account: str) -> str | None:
        """The receiver's cursor (where polling resumes) for the account; None when none."""
        ...

    def set_cursor(self, platform: str, account: str, cursor: str, now: int) -> None:
        """Set the receiver's cursor for the account."""
        ...
