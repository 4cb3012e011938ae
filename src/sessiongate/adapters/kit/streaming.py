"""`EditStream`: a reply that grows in one message, edited in place.

The first text posts one message; later text edits that same message, at most once per
`min_interval` per chat (Telegram: 1 s), skipping, never queueing, an edit that would come too
soon or while the chat is rate limited (the next one carries the newer text). `finish` edits
the message one last time to the formatted final text in place (waiting out a rate limit,
bounded), and a final text longer than the limit keeps the message as chunk 1 and posts the
rest after it. If the final edit fails, the final is posted fresh and the preview deleted: the
chat never keeps both a preview and a final post.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from sessiongate.adapters.kit.errors import PlatformError, RateLimitedError

if TYPE_CHECKING:
    from sessiongate.adapters.kit.outbound import Outbox, Target

__all__ = ["EditStream"]

log = logging.getLogger(__name__)


class EditStream:
    def __init__(self, outbox: Outbox, target: Target) -> None:
        self._outbox = outbox
        self._target = target
        self.message_id: str | None = None
        self._shown: str | None = None
        self.edits = 0
        self.finished = False

    async def update(self, text: str) -> None:
        """The reply so far (Markdown); posts or edits when the chat allows it now."""
        if self.finished or not text.strip() or text == self._shown:
            return
        # The preview holds what fits in one message; the rest waits for `finish`.
        preview = self._outbox.chunks(text)[0]
        limiter = self._outbox.limiter
        kind = "send" if self.message_id is None else "edit"
        if limiter.ready_in(self._target.chat_id, kind) > 0:
            return
        try:
            if self.message_id is None:
                self.message_id = await self._outbox.send_chunk(self._target, preview)
            else:
                # Previews go plain: half-written Markdown (an open `**`) is not valid markup.
                async with limiter.slot(self._target.chat_id, "edit"):
                    await self._outbox.sender.edit_text(
                        self._target,
                        self.message_id,
                        self._outbox.rendering.plain(preview),
                        markup=False,
                    )
                self.edits += 1
        except RateLimitedError as exc:
            limiter.penalise(self._target.chat_id, exc.retry_after)
            return
        self._shown = text

    async def finish(self, text: str) -> list[str]:
        """Settle the reply; the ids of the messages that hold it."""
        self.finished = True
        chunks = self._outbox.chunks(text)
        if self.message_id is None:
            return await self._outbox.deliver(self._target, text)
        ids = [self.message_id]
        try:
            await self._outbox.edit_chunk(self._target, self.message_id, chunks[0])
        except PlatformError:
            log.warning(
                "final edit failed; posting the reply fresh",
                extra={"chat_id": self._target.chat_id, "message_id": self.message_id},
            )
            stale = self.message_id
            ids = await self._outbox.deliver(self._target, text)
            try:
                await self._outbox.sender.delete_message(self._target, stale)
            except PlatformError:
                log.warning("stale preview could not be deleted", extra={"message_id": stale})
            return ids
        for index, chunk in enumerate(chunks[1:], start=1):
            where = self._outbox.chunk_target(self._target, index)
            ids.append(await self._outbox.send_chunk(where, chunk))
        return ids
