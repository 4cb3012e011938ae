"""Inbound media as attachment references, with a size cap and a clear answer when over it.

The gateway stores references (`<platform>://file/<id>?name=&size=&type=`), never bytes: the
agent side resolves one when it needs the content (Telegram: `getFile`), so a large upload costs
nothing until used. A file over `max_bytes` (Telegram's public Bot API serves at most 20 MB) is
answered with `too_large_notice` instead of starting a turn.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, urlencode

__all__ = ["Attachment", "too_large_notice"]


@dataclass(frozen=True, slots=True)
class Attachment:
    platform: str
    file_id: str
    kind: str  # photo, document, voice, audio, video, sticker
    size: int | None = None
    name: str | None = None
    mime_type: str | None = None

    def reference(self) -> str:
        query = {
            k: str(v)
            for k, v in (("name", self.name), ("size", self.size), ("type", self.mime_type))
            if v is not None
        }
        tail = f"?{urlencode(query)}" if query else ""
        return f"{self.platform}://file/{quote(self.file_id, safe='')}{tail}"

    def is_too_large(self, max_bytes: int) -> bool:
        return self.size is not None and self.size > max_bytes


def too_large_notice(attachment: Attachment, max_bytes: int) -> str:
    what = attachment.name or attachment.kind
    size_mb = (attachment.size or 0) / 1_048_576
    return (
        f"That {what} is too large for me to take ({size_mb:.1f} MB; the limit is "
        f"{max_bytes / 1_048_576:.0f} MB). Please send a smaller file or a link."
    )
