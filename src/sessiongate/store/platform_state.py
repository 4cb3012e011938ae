"""`PlatformState`: what platform adapters keep in the store, one transaction per call.

- Event claims (DESIGN decision 13): an adapter claims a platform event id before it awaits
  anything for the event, and advances its offset or cursor only after the claim (and the
  hand-off it guards) committed. A second delivery of the id is a duplicate, also when it
  arrives concurrently; a claim left behind by a process that died is taken over.
- Pairing: one live code per unknown DM sender, capped per platform, expiring; an approval
  (from `sessiongate pairing approve`, another process) admits the sender from then on.
- Threads the bot has spoken in, and what was sent per turn (sent, unconfirmed, refused).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from sessiongate.store.records import PairingRow, from_us, to_us

if TYPE_CHECKING:
    from datetime import datetime

    from sessiongate.core.clock import Clock
    from sessiongate.store.session_store import SessionStore

__all__ = ["PairingRequest", "PairingResult", "PlatformState", "SendRecord"]

# Unambiguous when read aloud or typed from a phone: no 0/O, 1/I/L.
_CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
_CODE_LENGTH = 8


@dataclass(frozen=True, slots=True)
class PairingRequest:
    platform: str
    user_id: str
    code: str
    chat_id: str
    user_name: str | None
    created_at: datetime
    expires_at: datetime
    approved_at: datetime | None

    @property
    def approved(self) -> bool:
        return self.approved_at is not None


@dataclass(frozen=True, slots=True)
class PairingResult:
    """What a pairing request led to: `code` to tell the sender when `new`, else nothing.

    `approved`: the sender is already admitted. `capped`: too many requests are pending, so no
    code was made (the sender is told nothing and may try again later).
    """

    code: str | None
    new: bool
    approved: bool = False
    capped: bool = False


@dataclass(frozen=True, slots=True)
class SendRecord:
    state: str  # sending | sent | unconfirmed | refused
    detail: str | None


def _request(row: PairingRow) -> PairingRequest:
    return PairingRequest(
        platform=row.platform,
        user_id=row.user_id,
        code=row.code,
        chat_id=row.chat_id,
        user_name=row.user_name,
        created_at=from_us(row.created_at),
        expires_at=from_us(row.expires_at),
        approved_at=None if row.approved_at is None else from_us(row.approved_at),
    )


class PlatformState:
    def __init__(self, store: SessionStore, *, clock: Clock | None = None) -> None:
        self._db = store.database
        self._clock: Clock = clock or store.clock

    # ------------------------------------------------------------------ event claims

    def claim_event(self, platform: str, event_id: str, *, owner: str) -> bool:
        """Claim one platform event (one transaction); False when it is a duplicate."""
        return bool(self.claim_events(platform, [event_id], owner=owner))

    def claim_events(self, platform: str, event_ids: list[str], *, owner: str) -> set[str]:
        """Claim a batch in one transaction; the ids this owner now holds (an id twice in the
        batch is claimed once)."""
        now_us = to_us(self._clock.now())
        with self._db.transaction() as conn:
            return {
                event_id
                for event_id in dict.fromkeys(event_ids)
                if conn.claim_platform_event(platform, event_id, owner, now_us)
            }

    def finish_events(self, platform: str, event_ids: list[str]) -> None:
        """The events were handed off (or deliberately dropped): never process them again."""
        if not event_ids:
            return
        with self._db.transaction() as conn:
            conn.finish_platform_events(platform, event_ids)

    def release_event(self, platform: str, event_id: str, *, owner: str) -> None:
        """Hand-off failed before the gateway accepted it: a redelivery may claim it again."""
        with self._db.transaction() as conn:
            conn.release_platform_event(platform, event_id, owner)

    def prune_events(self, *, older_than_seconds: float) -> int:
        """Forget finished claims older than the platform's redelivery horizon."""
        cutoff = self._clock.now() - timedelta(seconds=older_than_seconds)
        with self._db.transaction() as conn:
            return conn.prune_platform_events(to_us(cutoff))

    def load_cursor(self, platform: str, name: str) -> str | None:
        """Where a platform's stream was read up to (a resumable event id), if saved."""
        with self._db.read() as conn:
            return conn.get_meta(_cursor_key(platform, name))

    def save_cursor(self, platform: str, name: str, value: str) -> None:
        """Record how far a stream was read: only past events whose claims committed, so a
        restart resumes after them and never skips one (decision 13)."""
        with self._db.transaction() as conn:
            conn.set_meta(_cursor_key(platform, name), value)

    # ------------------------------------------------------------------ pairing

    def request_pairing(
        self,
        platform: str,
        *,
        user_id: str,
        chat_id: str,
        user_name: str | None,
        ttl_seconds: float,
        max_pending: int,
    ) -> PairingResult:
        """One code per sender: a live request is not renewed (so a sender who writes ten
        times gets one code, once); an expired one is replaced by a new code."""
        now = self._clock.now()
        now_us = to_us(now)
        with self._db.transaction() as conn:
            found = conn.get_pairing(platform, user_id)
            if found is not None and found.approved_at is not None:
                return PairingResult(code=None, new=False, approved=True)
            if found is not None and found.expires_at > now_us:
                return PairingResult(code=found.code, new=False)
            if conn.count_pending_pairing(platform, now_us) >= max_pending:
                return PairingResult(code=None, new=False, capped=True)
            code = "".join(secrets.choice(_CODE_ALPHABET) for _ in range(_CODE_LENGTH))
            conn.upsert_pairing(
                PairingRow(
                    platform=platform,
                    user_id=user_id,
                    code=code,
                    chat_id=chat_id,
                    user_name=user_name,
                    created_at=now_us,
                    expires_at=to_us(now + timedelta(seconds=ttl_seconds)),
                    approved_at=None,
                ),
            )
            return PairingResult(code=code, new=True)

    def is_paired(self, platform: str, user_id: str) -> bool:
        with self._db.read() as conn:
            found = conn.get_pairing(platform, user_id)
        return found is not None and found.approved_at is not None

    def approve_pairing(self, code: str) -> PairingRequest | None:
        """Approve the live request with `code` (case-insensitive); None if none is live."""
        with self._db.transaction() as conn:
            found = conn.approve_pairing(code.strip().upper(), to_us(self._clock.now()))
        if found is None:
            return None
        return _request(found)

    def list_pairing(self) -> list[PairingRequest]:
        with self._db.read() as conn:
            return [_request(row) for row in conn.list_pairing()]

    # ------------------------------------------------------------------ threads and sends

    def mark_thread(self, platform: str, chat_id: str, thread_id: str) -> None:
        with self._db.transaction() as conn:
            conn.mark_thread(platform, chat_id, thread_id, to_us(self._clock.now()))

    def has_thread(self, platform: str, chat_id: str, thread_id: str) -> bool:
        with self._db.read() as conn:
            return conn.has_thread(platform, chat_id, thread_id)

    def record_send(
        self, platform: str, turn_id: int, state: str, detail: str | None = None
    ) -> None:
        with self._db.transaction() as conn:
            conn.record_send(platform, turn_id, state, detail, to_us(self._clock.now()))

    def begin_send(self, platform: str, turn_id: int) -> SendRecord | None:
        """Record a turn's send as `sending` (one transaction) and return None, or return what
        an earlier attempt recorded (and record nothing)."""
        with self._db.transaction() as conn:
            found = conn.begin_send(platform, turn_id, to_us(self._clock.now()))
        return None if found is None else SendRecord(*found)

    def get_send(self, platform: str, turn_id: int) -> SendRecord | None:
        with self._db.read() as conn:
            found = conn.get_send(platform, turn_id)
        return None if found is None else SendRecord(*found)


def _cursor_key(platform: str, name: str) -> str:
    return f"platform_cursor:{platform}:{name}"
