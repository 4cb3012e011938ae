"""Media out: files an agent's reply names, uploaded through the platform's own call.

A reply attaches a file with a line of its own, `MEDIA: /path/to/file` (a `file://` URL
works too; a relative path is taken in the first of `media_dirs`). The line is taken out of
the text, the text is sent as usual, then each file through the platform's upload call
(Telegram `sendPhoto` for an image up to 10 MB, else `sendDocument`; Discord a message with
the file; Slack `files.uploadV2`), in the reply's chat and thread.

Only files inside one of `platforms.<name>.media_dirs` are sent (after resolving links): an
agent must not be able to post any file of the gateway's host to a chat. With no folder
configured, no file is sent. A file that is outside them, missing, larger than the platform's
upload limit (`max_upload_mb`), or that the platform refuses, is answered with one clear line
of text in its place, so the reply never silently loses it. A `MEDIA:` line that names an
http(s) URL stays in the text as a link.
"""

from __future__ import annotations

import mimetypes
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

__all__ = ["IMAGE_TYPES", "OutboundFile", "locate", "not_sent_notice", "split_media"]

_MEDIA_LINE = re.compile(r"^[ \t]*MEDIA:[ \t]*(\S.*?)[ \t]*$")
_BLANK_RUNS = re.compile(r"\n{3,}")
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


@dataclass(frozen=True, slots=True)
class OutboundFile:
    name: str
    data: bytes
    mime_type: str

    @property
    def is_image(self) -> bool:
        return self.mime_type in IMAGE_TYPES

    @property
    def size(self) -> int:
        return len(self.data)


def split_media(text: str) -> tuple[str, list[str]]:
    """(the text without its `MEDIA:` lines, the file references they named)."""
    kept: list[str] = []
    refs: list[str] = []
    for line in text.split("\n"):
        found = _MEDIA_LINE.match(line)
        if found is None or found.group(1).lower().startswith(("http://", "https://")):
            kept.append(line)
        else:
            refs.append(found.group(1))
    if not refs:
        return text, []
    return _BLANK_RUNS.sub("\n\n", "\n".join(kept)).strip(), refs


def file_name(ref: str) -> str:
    return Path(unquote(urlparse(ref).path) if ref.startswith("file://") else ref).name or ref


def locate(ref: str, roots: tuple[Path, ...]) -> Path | str:
    """The file `ref` names, or why it cannot be sent."""
    if not roots:
        return "sending files is not enabled here"
    raw = unquote(urlparse(ref).path) if ref.startswith("file://") else ref
    path = Path(raw).expanduser()
    if not path.is_absolute():
        path = roots[0] / path
    resolved = path.resolve()
    if not any(resolved.is_relative_to(root) for root in roots):
        return "it is not in a folder the bot may send files from"
    if not resolved.is_file():
        return "it does not exist"
    return resolved


def mime_type_of(path: Path) -> str:
    return mimetypes.guess_type(path.name)[0] or "application/octet-stream"


def not_sent_notice(name: str, reason: str) -> str:
    return f"(The file {name} could not be sent: {reason}.)"
