"""`Outbox`: one reply out to a platform, whatever the platform answers.

The reply (Markdown) is split at the platform's limit, rendered to its markup, and each chunk
sent in order through the chat's rate-limit slot. What the platform answers decides the next
step (`errors.py`): a 429 waits `retry_after` for that chat and tries again (bounded by
`max_rate_wait`); refused markup is sent again as plain text; a vanished reply target is sent
again without it; a request that provably never left is retried with backoff; a permanent
refusal and an unconfirmed send propagate to the adapter, which settles them without a resend.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol, TypeVar

from sessiongate.adapters.kit.backoff import Backoff
from sessiongate.adapters.kit.errors import (
    FormatRejectedError,
    RateLimitedError,
    ReplyTargetError,
    TransientSendError,
)
from sessiongate.adapters.kit.formatting import defuse_mass_mentions
from sessiongate.adapters.kit.splitting import split_text

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from sessiongate.adapters.kit.media_out import OutboundFile
    from sessiongate.adapters.kit.ratelimit import ChatRateLimiter
    from sessiongate.adapters.kit.timing import Sleep

__all__ = ["Outbox", "PlatformSender", "Rendering", "Target"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Target:
    """Where a message goes: the raw chat id (never the key form), thread, reply anchor."""

    chat_id: str
    thread_id: str | None = None
    reply_to: str | None = None


class PlatformSender(Protocol):
    """The few calls the kit makes; a platform's `client.py` implements them over its SDK and
    raises only the kit's errors. `markup` False means: send `text` as plain text."""

    async def send_text(self, target: Target, text: str, *, markup: bool) -> str:
        """Post a message; returns its platform id."""
        ...

    async def edit_text(
        self, target: Target, message_id: str, text: str, *, markup: bool
    ) -> None: ...

    async def delete_message(self, target: Target, message_id: str) -> None: ...

    async def send_typing(self, target: Target) -> None: ...

    async def send_file(self, target: Target, file: OutboundFile) -> str:
        """Upload a file through the platform's own call; returns the message id. A file the
        platform refuses (too large, its type) raises `FileRejectedError`."""
        ...


@dataclass(frozen=True, slots=True)
class Rendering:
    """How a platform measures and marks up text."""

    limit: int
    measure: Callable[[str], int]
    render: Callable[[str], str]
    plain: Callable[[str], str]


class Outbox:
    def __init__(
        self,
        sender: PlatformSender,
        rendering: Rendering,
        limiter: ChatRateLimiter,
        *,
        sleep: Sleep,
        backoff: Backoff | None = None,
        max_rate_wait: float = 120.0,
        reply_all: bool = False,
    ) -> None:
        self.sender = sender
        self.rendering = rendering
        self.limiter = limiter
        self._sleep = sleep
        self._backoff = backoff or Backoff(base=0.5, cap=8.0, max_attempts=4)
        self._max_rate_wait = max_rate_wait
        self.reply_all = reply_all
        self.plain_resends = 0
        self.rate_limited = 0
        self.retries = 0

    def chunks(self, markdown: str) -> list[str]:
        r = self.rendering
        return split_text(defuse_mass_mentions(markdown), r.limit, measure=r.measure)

    async def deliver(self, target: Target, markdown: str) -> list[str]:
        """Send every chunk in order; the platform ids of the messages posted."""
        ids: list[str] = []
        for index, chunk in enumerate(self.chunks(markdown)):
            ids.append(await self.send_chunk(self.chunk_target(target, index), chunk))
        return ids

    def chunk_target(self, target: Target, index: int) -> Target:
        """Where chunk `index` of a reply goes: under `reply_to_mode: first` only the first
        chunk quotes the message it answers, under `all` every chunk does."""
        if index == 0 or self.reply_all or target.reply_to is None:
            return target
        return replace(target, reply_to=None)

    async def send_chunk(self, target: Target, chunk: str) -> str:
        async def post(where: Target, text: str, markup: bool) -> str:
            return await self.sender.send_text(where, text, markup=markup)

        return await self._call(target, chunk, "send", post)

    async def send_file(self, target: Target, file: OutboundFile) -> str:
        """One upload through the chat's slot, with the same waits and retries as text."""

        async def upload(where: Target, _text: str, _markup: bool) -> str:
            return await self.sender.send_file(where, file)

        return await self._call(target, "", "send", upload)

    async def edit_chunk(self, target: Target, message_id: str, chunk: str) -> None:
        async def edit(where: Target, text: str, markup: bool) -> None:
            await self.sender.edit_text(where, message_id, text, markup=markup)

        await self._call(target, chunk, "edit", edit)

    async def _call(
        self,
        target: Target,
        chunk: str,
        kind: str,
        call: Callable[[Target, str, bool], Awaitable[_T]],
    ) -> _T:
        markup = True
        waited = 0.0
        attempt = 0
        while True:
            text = self.rendering.render(chunk) if markup else self.rendering.plain(chunk)
            async with self.limiter.slot(target.chat_id, kind):
                try:
                    return await call(target, text, markup)
                except RateLimitedError as exc:
                    self.rate_limited += 1
                    waited += exc.retry_after
                    self.limiter.penalise(target.chat_id, exc.retry_after)
                    if waited > self._max_rate_wait:
                        raise
                    log.info(
                        "rate limited; waiting",
                        extra={"chat_id": target.chat_id, "retry_after": exc.retry_after},
                    )
                except FormatRejectedError:
                    if not markup:
                        raise
                    self.plain_resends += 1
                    log.info(
                        "markup refused; resending as plain text",
                        extra={"chat_id": target.chat_id},
                    )
                    markup = False
                except ReplyTargetError:
                    if target.reply_to is None:
                        raise
                    target = replace(target, reply_to=None)
                except TransientSendError:
                    attempt += 1
                    if attempt >= self._backoff.max_attempts:
                        raise
                    self.retries += 1
                    delay = self._backoff.delay(attempt)
                    log.info(
                        "send failed before it left; retrying",
                        extra={"chat_id": target.chat_id, "attempt": attempt, "delay": delay},
                    )
                    await self._sleep(delay)
