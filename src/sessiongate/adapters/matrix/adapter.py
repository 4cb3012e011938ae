"""`MatrixAdapter`: Matrix on the kit, by the client-server API's `/sync` long poll.

The `since` token is Matrix's offset: a sync from it answers everything after it. It moves to
a batch's `next_batch` (and is written to the store, so a restart resumes there) only after the
kit's `admit_batch` took every event of the batch (each event id claimed before any await, the
message durably accepted by the gateway). A crash at any point, or a hand-off the gateway
refuses, leaves `since` where it was: the homeserver answers the same events again, and the
claims and the gateway's inbound dedup turn each redelivery into no second turn.

The first start (no stored `since`) syncs once with no wait before receiving: it learns the
rooms (their state, `m.direct`) and answers pending invites, but the history it carries is not
answered (only what arrives from then on is). A sync that hangs past the watchdog's deadline
has its session closed and rebuilt; errors back off with jitter; a refused access token stops
the receiver with an error.

Invites: from a user `allow_from` admits (or a direct invite under `dm_policy` open or
pairing), the bot joins; others are ignored (logged). Encrypted rooms: this adapter does not
decrypt (no end-to-end encryption support), so it never sits deaf in one. An invite into an
encrypted room is joined only to tell the inviter so, then left; an encrypted event in a room
it is in is logged and answered once (per room and process) with a notice naming the inviter.

Slightly over the ~400-line budget: the sync loop, the gap fill of a limited timeline, the
invites and the encryption notices all act on one sync answer before its `since` may move, and
their order is the contract.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from sessiongate.adapters.kit.access import Access, decide_access
from sessiongate.adapters.kit.adapter import KitAdapter
from sessiongate.adapters.kit.bursts import MAX_HOLD_WINDOWS
from sessiongate.adapters.kit.errors import CredentialsError, PermanentSendError, PlatformError
from sessiongate.adapters.kit.events import PlatformEvent, gateway_commands
from sessiongate.adapters.kit.outbound import Target
from sessiongate.adapters.kit.settings import KitSettings
from sessiongate.adapters.kit.watchdog import StalledError, Watchdog
from sessiongate.adapters.matrix.client import MatrixClient
from sessiongate.adapters.matrix.payloads import (
    ENCRYPTED,
    MalformedEventError,
    MatrixIdentity,
    RoomDirectory,
    parse_event,
)
from sessiongate.adapters.matrix.rendering import MATRIX_RENDERING
from sessiongate.core.platform import Platform
from sessiongate.core.source import ChatType, SessionSource
from sessiongate.errors import LeaseLostError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sessiongate.adapters.kit.events import PlatformCommand
    from sessiongate.adapters.kit.media_out import OutboundFile
    from sessiongate.adapters.kit.timing import Sleep
    from sessiongate.core.clock import Clock
    from sessiongate.core.config import MatrixConfig

__all__ = ["ENCRYPTED_NOTICE", "MatrixAdapter"]

log = logging.getLogger(__name__)

ENCRYPTED_NOTICE = (
    "{who}this room is end-to-end encrypted, and this bot cannot read encrypted messages: "
    "it would not see anything said here. Please talk to it in an unencrypted room or "
    "direct chat."
)
# Finished claims are kept this long: a `since` token older than this is not expected back.
_CLAIM_HORIZON_SECONDS = 48 * 3600.0
# The gap a limited timeline leaves is fetched in pages of this many events, up to the cap.
_BACKFILL_PAGE = 100
_MAX_BACKFILL = 1000
# Event ids of the bot's own recent messages, so a reply to one is addressed to the bot.
_RECENT_OWN = 2000


class MatrixAdapter(KitAdapter):
    platform = Platform.MATRIX
    edit_interval: ClassVar[float] = 1.0
    # A typing notice is sent with a 6 s timeout (client.py) and refreshed before it lapses.
    typing_interval: ClassVar[float] = 4.5
    # Synapse's default `max_upload_size`.
    upload_limit_mb: ClassVar[float] = 50.0
    watchdog: Watchdog
    # One sync loop per account in this process (two would split the events between them).
    _syncing_users: ClassVar[set[str]] = set()

    def __init__(
        self,
        config: MatrixConfig,
        *,
        clock: Clock | None = None,
        sleep: Sleep | None = None,
        tick: Sleep | None = None,
        client: MatrixClient | None = None,
    ) -> None:
        if config.access_token is None:
            raise CredentialsError("platforms.matrix.access_token is not set")
        self.config = config
        self.client = client or MatrixClient(
            config.homeserver,
            config.access_token.get_secret_value(),
            sync_timeout_ms=int(config.sync_timeout_seconds * 1000),
        )
        super().__init__(
            KitSettings.from_config(config),
            sender=_Recording(self.client, self),
            rendering=MATRIX_RENDERING,
            clock=clock,
            sleep=sleep,
            tick=tick,
        )
        self.me: MatrixIdentity | None = None
        self.since: str | None = None
        self.rooms = RoomDirectory()
        self.watchdog = Watchdog(stall_seconds=config.sync_stall_seconds)
        self.own_events: OrderedDict[str, None] = OrderedDict()
        self._commands = frozenset(c.name for c in gateway_commands())
        self._warned_encrypted: set[str] = set()
        self._syncing = False

    # ------------------------------------------------------------------ the platform's part

    async def connect(self) -> None:
        self.me = await self.client.open()
        wanted = self.config.user_id
        if wanted and wanted != self.me.user_id:
            await self.client.close()
            raise CredentialsError(
                f"platforms.matrix.access_token belongs to {self.me.user_id}, not to "
                f"platforms.matrix.user_id {wanted}"
            )
        if self.me.user_id in self._syncing_users:
            await self.client.close()
            raise PlatformError(f"{self.me.user_id} is already syncing in this process")
        self._syncing_users.add(self.me.user_id)
        self._syncing = True
        log.info("matrix connected", extra={"user_id": self.me.user_id})
        try:
            state = self._state()
            state.prune_events(older_than_seconds=_CLAIM_HORIZON_SECONDS)
            self.since = state.get_cursor(str(self.platform), self.me.user_id)
            if self.since is None:
                await self._first_sync()
        except BaseException:
            # A start that fails leaves nothing open (the kit does not disconnect it).
            await self.disconnect()
            raise

    async def _first_sync(self) -> None:
        """Learn the rooms and take the pending invites; the history is not answered."""
        sync = await self.client.sync(None, timeout_ms=0)
        self.rooms.apply_sync(sync)
        await self._take_invites(sync)
        for room in self.rooms.rooms.values():
            if room.encrypted:
                log.warning(
                    "matrix room is encrypted; this adapter cannot read it",
                    extra={"chat_id": room.room_id},
                )
        self._advance(str(sync["next_batch"]))

    async def disconnect(self) -> None:
        if self._syncing and self.me is not None:
            self._syncing_users.discard(self.me.user_id)
            self._syncing = False
        await self.client.close()

    def target_for(self, source: SessionSource) -> Target:
        return Target(chat_id=source.chat_id, thread_id=source.thread_id)

    async def register_commands(self, commands: Sequence[PlatformCommand]) -> None:
        """Matrix has no command registry: `/name` and `!name` are read from the text."""
        self._commands = frozenset(c.name for c in commands)

    def singular_connection(self) -> str | None:
        return "matrix:sync"

    async def send(self, source: SessionSource, text: str, *, turn_id: int | None) -> str | None:
        try:
            return await super().send(source, text, turn_id=turn_id)
        finally:
            # The kit stopped refreshing the typing notice; the homeserver would show it for
            # up to its timeout after the reply.
            await self.client.stop_typing(source.chat_id)

    async def download(self, mxc: str) -> bytes:
        """The bytes of an attachment reference's `mxc://` file."""
        return await self.client.download(mxc)

    # ------------------------------------------------------------------ the sync loop

    async def run_receiver(self) -> None:
        assert self.me is not None
        expected = self.client.sync_timeout_ms / 1000.0
        # Another instance may have led the sync since this one connected: resume where the
        # last accepted batch ended, not from this instance's own start.
        stored = self._state().get_cursor(str(self.platform), self.me.user_id)
        if stored is not None:
            self.since = stored
        while True:
            # The `since` a sync sends confirms what came before it: only the leader may.
            await self.check_lead()
            try:
                sync = await self.watchdog.guard(
                    self.client.sync(self.since), expected_seconds=expected
                )
            except StalledError:
                self.counters.stalls += 1
                self.receiving = False
                log.warning("matrix sync stalled; rebuilding its connection")
                self.counters.reconnects += 1
                await self.client.rebuild_sync()
                continue
            except CredentialsError:
                self.receiving = False
                log.exception("the homeserver refused the access token; receiver stopped")
                return
            except PlatformError as exc:
                self.receiving = False
                delay = self.watchdog.failed()
                log.warning(
                    "matrix sync failed; backing off",
                    extra={"error": str(exc), "delay": round(delay, 2),
                           "failures": self.watchdog.failures},
                )  # fmt: skip
                await self.sleep(delay)
                continue
            if not self.leads():
                raise LeaseLostError("the sync answered after the lead may have moved")
            self.receiving = True
            try:
                await self._fill_gaps(sync)
                await self._take(sync)
            except Exception:
                # The store refused (a full disk) or a bug: `since` stays, the events come
                # again; the receiver must not die of it.
                log.exception("matrix events not admitted; retrying")
                await self.sleep(self.watchdog.failed())

    async def _take(self, sync: dict[str, Any]) -> None:
        sync, parsed = await self._rest_of_split(sync)
        await self._take_invites(sync)
        self._report(parsed)
        admitted = await self.admit_batch(parsed.events)
        if len(admitted) == len(parsed.events):
            self._advance(str(sync["next_batch"]))
        # Otherwise `since` stays: the next sync brings the batch again, and the events the
        # gateway took are duplicates by their claims.

    def _advance(self, next_batch: str) -> None:
        assert self.me is not None
        self._state().set_cursor(str(self.platform), self.me.user_id, next_batch)
        self.since = next_batch

    async def _rest_of_split(self, sync: dict[str, Any]) -> tuple[dict[str, Any], _Parsed]:
        """A paste a client split arrives as parts a moment apart, and the long poll often
        answers with the first alone. When the last event looks like such a part, wait the
        merge window and sync again from the same `since` (a superset of this answer)."""
        self.rooms.apply_sync(sync)
        parsed = self._parse(sync)
        window = self.settings.merge.window
        for _ in range(MAX_HOLD_WINDOWS):
            events = parsed.events
            if window <= 0 or not events or not self._looks_split(events[-1]):
                break
            await self.hold(window)
            try:
                more = await self.client.sync(self.since, timeout_ms=0)
            except PlatformError as exc:
                log.info("matrix sync for the rest of a split message failed",
                         extra={"error": str(exc)})  # fmt: skip
                break
            await self._fill_gaps(more)
            self.rooms.apply_sync(more)
            again = self._parse(more)
            if len(again.events) <= len(events):
                break
            sync, parsed = more, again
        return sync, parsed

    async def _fill_gaps(self, sync: dict[str, Any]) -> None:
        """A room whose timeline came `limited` (more events since `since` than the filter's
        limit) gets the events in between from `/messages`, oldest first, before the ones the
        sync carried: skipping them would drop messages nobody answered. At most
        `_MAX_BACKFILL` events per room and sync; beyond that the rest is logged as skipped."""
        rooms = sync.get("rooms")
        joined = rooms.get("join") if isinstance(rooms, dict) else None
        if self.since is None or not isinstance(joined, dict):
            return
        for room_id, section in joined.items():
            timeline = section.get("timeline") if isinstance(section, dict) else None
            if not isinstance(timeline, dict) or timeline.get("limited") is not True:
                continue
            token = timeline.get("prev_batch")
            events = timeline.get("events")
            if not isinstance(token, str) or not isinstance(events, list):
                continue
            missed: list[Any] = []
            while len(missed) < _MAX_BACKFILL:
                page = await self.client.messages_before(
                    str(room_id), token, self.since, limit=_BACKFILL_PAGE
                )
                chunk = page.get("chunk")
                if not isinstance(chunk, list) or not chunk:
                    break
                missed.extend(chunk)
                end = page.get("end")
                if not isinstance(end, str) or end == token:
                    break
                token = end
            else:
                log.warning("matrix room had more missed events than are fetched; the oldest "
                            "are skipped", extra={"chat_id": room_id})  # fmt: skip
            known = {e.get("event_id") for e in events if isinstance(e, dict)}
            older = [e for e in reversed(missed) if isinstance(e, dict)
                     and e.get("event_id") not in known]  # fmt: skip
            timeline["events"] = [*older, *events]
            log.info("matrix timeline gap filled",
                     extra={"chat_id": room_id, "events": len(older)})  # fmt: skip

    def _parse(self, sync: dict[str, Any]) -> _Parsed:
        assert self.me is not None
        parsed = _Parsed()
        rooms = sync.get("rooms")
        joined = rooms.get("join") if isinstance(rooms, dict) else None
        for room_id, section in (joined if isinstance(joined, dict) else {}).items():
            room = self.rooms.room(str(room_id))
            timeline = section.get("timeline", {}) if isinstance(section, dict) else {}
            raw_events = timeline.get("events", []) if isinstance(timeline, dict) else []
            for raw in raw_events if isinstance(raw_events, list) else []:
                try:
                    event = parse_event(room, raw, self.me, commands=self._commands,
                                        bot_events=self.own_events)  # fmt: skip
                except MalformedEventError as exc:
                    # Skipped, so one odd event cannot stall the room behind it for ever.
                    raw_id = raw.get("event_id") if isinstance(raw, dict) else None
                    event_id = str(raw_id or f"malformed:{room.room_id}:{len(parsed.events)}")
                    parsed.malformed.append((room.room_id, event_id, exc))
                    event = PlatformEvent(event_id=event_id, source=None, kind="malformed")
                if event.kind == ENCRYPTED:
                    parsed.encrypted.add(room.room_id)
                parsed.events.append(event)
        return parsed

    def _report(self, parsed: _Parsed) -> None:
        for room_id, event_id, exc in parsed.malformed:
            log.warning(
                "matrix event not understood; skipped",
                extra={"chat_id": room_id, "field": exc.field, "reason": exc.reason,
                       "event_id": event_id},
            )  # fmt: skip
        for room_id in sorted(parsed.encrypted):
            self._warn_encrypted(room_id)

    # ------------------------------------------------------------------ invites, encryption

    async def _take_invites(self, sync: dict[str, Any]) -> None:
        assert self.me is not None
        rooms = sync.get("rooms")
        invites = rooms.get("invite") if isinstance(rooms, dict) else None
        for room_id in invites if isinstance(invites, dict) else {}:
            room = self.rooms.room(str(room_id))
            inviter = room.inviter
            if inviter is None or not self._may_invite(room.room_id, inviter, room.is_direct):
                log.info("matrix invite ignored (inviter not allowed)",
                         extra={"chat_id": room.room_id, "user_id": inviter})  # fmt: skip
                continue
            try:
                await self.client.join(room.room_id)
            except PermanentSendError as exc:
                log.warning("matrix invite could not be joined",
                            extra={"chat_id": room.room_id, "error": str(exc)})  # fmt: skip
                continue
            log.info("matrix invite joined", extra={"chat_id": room.room_id})
            if room.encrypted:
                await self._tell_encrypted(room.room_id, inviter)
                await self._leave(room.room_id)

    def _may_invite(self, room_id: str, inviter: str, direct: bool) -> bool:
        source = SessionSource(
            platform=self.platform,
            chat_id=room_id,
            chat_type=ChatType.DM if direct else ChatType.GROUP,
            user_id=inviter,
        )
        return decide_access(source, self.settings.access, paired=False) is not Access.DENY

    def _warn_encrypted(self, room_id: str) -> None:
        if room_id in self._warned_encrypted:
            return
        self._warned_encrypted.add(room_id)
        log.warning(
            "encrypted message in a matrix room; this adapter cannot decrypt it",
            extra={"chat_id": room_id},
        )
        self.spawn(self._tell_encrypted(room_id, self.rooms.room(room_id).inviter))

    async def _tell_encrypted(self, room_id: str, inviter: str | None) -> None:
        text = ENCRYPTED_NOTICE.format(who=f"{inviter}: " if inviter else "")
        try:
            await self.outbox.deliver(Target(chat_id=room_id), text)
        except PlatformError as exc:
            log.warning("encrypted-room notice not delivered",
                        extra={"chat_id": room_id, "error": str(exc)})  # fmt: skip

    async def _leave(self, room_id: str) -> None:
        try:
            await self.client.leave(room_id)
        except PlatformError as exc:
            log.warning("matrix room not left", extra={"chat_id": room_id, "error": str(exc)})

    def remember_own(self, event_id: str) -> None:
        self.own_events[event_id] = None
        while len(self.own_events) > _RECENT_OWN:
            self.own_events.popitem(last=False)


@dataclass(slots=True)
class _Parsed:
    """One sync answer's timeline events in order, and what to report about it."""

    events: list[PlatformEvent] = field(default_factory=list)
    malformed: list[tuple[str, str, MalformedEventError]] = field(default_factory=list)
    encrypted: set[str] = field(default_factory=set)


class _Recording:
    """The client as the kit's sender, remembering the event ids the bot posts."""

    def __init__(self, client: MatrixClient, adapter: MatrixAdapter) -> None:
        self._client = client
        self._adapter = adapter

    async def send_text(self, target: Target, text: str, *, markup: bool) -> str:
        event_id = await self._client.send_text(target, text, markup=markup)
        self._adapter.remember_own(event_id)
        return event_id

    async def edit_text(self, target: Target, message_id: str, text: str, *, markup: bool) -> None:
        await self._client.edit_text(target, message_id, text, markup=markup)

    async def delete_message(self, target: Target, message_id: str) -> None:
        await self._client.delete_message(target, message_id)

    async def send_typing(self, target: Target) -> None:
        await self._client.send_typing(target)

    async def send_file(self, target: Target, file: OutboundFile) -> str:
        event_id = await self._client.send_file(target, file)
        self._adapter.remember_own(event_id)
        return event_id
