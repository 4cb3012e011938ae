"""`MatrixClient`: the client-server API through mautrix, in the kit's terms.

mautrix's `ClientAPI` over its `HTTPAPI` (aiohttp) is pointed at any homeserver URL (a
homeserver, the loopback stub, a real Synapse in the tests). `/sync` goes through the same
`HTTPAPI.request` path on a session of its own, so a long poll never waits behind sends and a
wedged one can be closed and rebuilt alone.

Every SDK error is translated here, once, into the kit's kinds (`kit/errors.py`): 429
`M_LIMIT_EXCEEDED` waits its `retry_after_ms`; an unknown or missing token is a credentials
error; 403 refuses the room for good; 413 `M_TOO_LARGE` refuses a file; a 400 about the
relation (a thread root or replied-to event the server will not take) drops the anchor; a 5xx
answered and posted nothing; a connection that failed before the request was written is
transient; a timeout or a dropped connection after it was written may have delivered the event,
so a send that ends that way is *unconfirmed*. (Sends are PUTs with a transaction id the
homeserver deduplicates, but only for the same access token and device: the kit's rule of never
resending an unconfirmed reply still holds.)
"""

from __future__ import annotations

import html
import json
import logging
import re
import time
from json import JSONDecodeError
from typing import TYPE_CHECKING, Any, cast

import aiohttp
from aiohttp import ClientConnectorError, ClientTimeout
from mautrix.api import HTTPAPI, Method, Path
from mautrix.client import ClientAPI
from mautrix.errors import (
    MatrixConnectionError,
    MatrixInvalidToken,
    MatrixRequestError,
    MLimitExceeded,
    make_request_error,
)

from sessiongate.adapters.kit.errors import (
    CredentialsError,
    FileRejectedError,
    PermanentSendError,
    PlatformError,
    RateLimitedError,
    ReplyTargetError,
    TransientSendError,
    UnconfirmedSendError,
)
from sessiongate.adapters.matrix.payloads import MatrixIdentity

if TYPE_CHECKING:
    from mautrix.types import RoomID
    from mautrix.util.logging import TraceLogger
    from yarl import URL

    from sessiongate.adapters.kit.media_out import OutboundFile
    from sessiongate.adapters.kit.outbound import Target

__all__ = [
    "HTML_FORMAT",
    "SYNC_FILTER",
    "TIMELINE_LIMIT",
    "MatrixClient",
    "html_to_body",
    "translate",
]

log = logging.getLogger(__name__)

HTML_FORMAT = "org.matrix.custom.html"
# A long poll's read timeout: the sync's own timeout plus this.
_SYNC_SLACK = 10.0
# How long a typing notice lasts on the homeserver: a little over the kit's refresh interval,
# so it never flickers off between refreshes and ends soon after the last one.
TYPING_TIMEOUT_MS = 6000
# What a sync carries: no presence, typing or receipts (never read), and room timelines of up
# to 100 events; a room with more since the last sync is "limited", and the adapter fetches
# the gap with `/messages` so nothing between two syncs is skipped.
TIMELINE_LIMIT = 100
SYNC_FILTER = json.dumps(
    {
        "presence": {"not_types": ["*"]},
        "room": {
            "timeline": {"limit": TIMELINE_LIMIT},
            "ephemeral": {"not_types": ["*"]},
        },
    },
    separators=(",", ":"),
)
# Words of a 400 that are about the reply or thread anchor, not the message.
_ANCHOR_WORDS = ("relation", "reply", "replied", "thread", "parent")
_TAG = re.compile(r"<[^>]+>")
_BREAK = re.compile(r"<br\s*/?>|</p>|</blockquote>|</pre>|</li>", re.IGNORECASE)


class _RateLimited(MLimitExceeded):
    """429 with the `retry_after_ms` mautrix's own error class drops."""

    def __init__(self, http_status: int, message: str, retry_after: float) -> None:
        super().__init__(http_status, message)
        self.retry_after = retry_after


class _HTTPAPI(HTTPAPI):
    """mautrix's HTTP layer, keeping the 429's `retry_after_ms` (and the `Retry-After`
    header) on the error it raises."""

    async def _send(
        self,
        method: Method,
        url: URL,
        content: Any,
        query_params: dict[str, str],
        headers: dict[str, str],
    ) -> tuple[Any, aiohttp.ClientResponse]:
        request = self.session.request(
            str(method), url, data=content, params=query_params, headers=headers
        )
        async with request as response:
            if 200 <= response.status < 300:
                return await response.json(), response
            text = await response.text()
            try:
                data = json.loads(text)
            except JSONDecodeError:
                data = {}
            data = data if isinstance(data, dict) else {}
            errcode, message = data.get("errcode"), data.get("error")
            if response.status == 429 or errcode == "M_LIMIT_EXCEEDED":
                wait_ms = data.get("retry_after_ms")
                header = response.headers.get("Retry-After", "")
                seconds = (
                    float(wait_ms) / 1000.0
                    if isinstance(wait_ms, int | float)
                    else float(header)
                    if header.isdigit()
                    else 1.0
                )
                raise _RateLimited(response.status, str(message or text), seconds)
            raise make_request_error(
                http_status=response.status,
                text=text,
                errcode=errcode if isinstance(errcode, str) else None,
                message=message if isinstance(message, str) else None,
            )


def translate(exc: Exception, *, sending: bool, editing: bool = False) -> PlatformError:
    """The kit's kind for an SDK error (see the module docstring)."""
    if isinstance(exc, _RateLimited):
        return RateLimitedError(str(exc), retry_after=exc.retry_after)
    if isinstance(exc, MatrixRequestError):
        status, errcode, message = exc.http_status, exc.errcode or "", str(exc)
        if isinstance(exc, MatrixInvalidToken) or status == 401:
            return CredentialsError(f"the homeserver refused the access token: {message}")
        if status == 413 or errcode == "M_TOO_LARGE":
            return FileRejectedError(message)
        if status == 403 or (status == 404 and not editing):
            return PermanentSendError(message)
        if status == 400 and any(word in message.lower() for word in _ANCHOR_WORDS):
            return ReplyTargetError(message)
        if status >= 500:
            return TransientSendError(message)
        return PlatformError(message)
    cause = exc.__cause__ if isinstance(exc, MatrixConnectionError) else exc
    if isinstance(cause, ClientConnectorError):
        # Refused or unreachable: the request never left.
        return TransientSendError(str(exc))
    if isinstance(cause, aiohttp.ClientError | TimeoutError):
        # Written, maybe delivered: for a send that is "unconfirmed", for a read "try again".
        return UnconfirmedSendError(str(exc)) if sending else TransientSendError(str(exc))
    return PlatformError(str(exc))


def html_to_body(rendered: str) -> str:
    """The plain `body` beside an HTML `formatted_body`: the same text without tags."""
    text = _BREAK.sub(lambda m: "\n" if m.group().lower().startswith("<br") else m.group() + "\n",
                      rendered)  # fmt: skip
    return html.unescape(_TAG.sub("", text)).strip("\n")


def _relation(target: Target) -> dict[str, Any] | None:
    if target.thread_id:
        # A thread message for clients without threads falls back to a reply to the root.
        return {
            "rel_type": "m.thread",
            "event_id": target.thread_id,
            "is_falling_back": target.reply_to is None,
            "m.in_reply_to": {"event_id": target.reply_to or target.thread_id},
        }
    if target.reply_to:
        return {"m.in_reply_to": {"event_id": target.reply_to}}
    return None


def message_content(text: str, *, markup: bool, msgtype: str = "m.text") -> dict[str, Any]:
    """An `m.room.message` content: HTML in `formatted_body` with a plain `body`."""
    if not markup:
        return {"msgtype": msgtype, "body": text}
    return {
        "msgtype": msgtype,
        "body": html_to_body(text),
        "format": HTML_FORMAT,
        "formatted_body": text,
    }


class MatrixClient:
    def __init__(
        self,
        homeserver: str,
        access_token: str,
        *,
        user_id: str = "",
        read_timeout: float = 20.0,
        sync_timeout_ms: int = 30_000,
    ) -> None:
        self._homeserver = homeserver.rstrip("/")
        self._token = access_token
        self._read_timeout = read_timeout
        self.sync_timeout_ms = sync_timeout_ms
        self.user_id = user_id
        self.api: ClientAPI | None = None
        self._sync_api: _HTTPAPI | None = None
        # room -> until when the homeserver shows the bot typing there (monotonic seconds).
        self._typing: dict[str, float] = {}

    def _http(self, read_timeout: float) -> _HTTPAPI:
        session = aiohttp.ClientSession(
            timeout=ClientTimeout(total=None, connect=10.0, sock_read=read_timeout)
        )
        # No retries inside mautrix (it sleeps on its own clock): the kit decides.
        return _HTTPAPI(
            self._homeserver, self._token, client_session=session, default_retry_count=0,
            log=cast("TraceLogger", logging.getLogger("sessiongate.adapters.matrix.http")),
        )  # fmt: skip

    def _client(self) -> ClientAPI:
        if self.api is None:
            raise RuntimeError("the Matrix client is not open")
        return self.api

    async def open(self) -> MatrixIdentity:
        """whoami: who the access token belongs to; `CredentialsError` when it is refused."""
        self.api = ClientAPI(api=self._http(self._read_timeout))
        self._sync_api = self._http(self.sync_timeout_ms / 1000.0 + _SYNC_SLACK)
        try:
            who = await self.api.whoami()
        except (MatrixRequestError, MatrixConnectionError) as exc:
            await self.close()
            raise translate(exc, sending=False) from exc
        self.user_id = str(who.user_id)
        self.api.mxid = who.user_id
        display = None
        try:
            profile = await self.api.api.request(
                Method.GET, Path.v3.profile[who.user_id].displayname
            )
            name = profile.get("displayname") if isinstance(profile, dict) else None
            display = name if isinstance(name, str) and name else None
        except (MatrixRequestError, MatrixConnectionError):
            log.info("matrix display name not readable; mentions by user id only")
        return MatrixIdentity(user_id=self.user_id, display_name=display)

    async def close(self) -> None:
        for api in (self.api.api if self.api is not None else None, self._sync_api):
            if api is not None and not api.session.closed:
                await api.session.close()

    async def rebuild_sync(self) -> None:
        """Close the sync session (its long poll with it) and open a fresh one."""
        if self._sync_api is not None:
            await self._sync_api.session.close()
        self._sync_api = self._http(self.sync_timeout_ms / 1000.0 + _SYNC_SLACK)

    # ------------------------------------------------------------------ receiving

    async def sync(self, since: str | None, *, timeout_ms: int | None = None) -> dict[str, Any]:
        """One `/sync`: the JSON as the homeserver sent it."""
        if self._sync_api is None:
            raise RuntimeError("the Matrix client is not open")
        wait = self.sync_timeout_ms if timeout_ms is None else timeout_ms
        query = {"timeout": str(wait), "filter": SYNC_FILTER}
        if since:
            query["since"] = since
        try:
            answer = await self._sync_api.request(Method.GET, Path.v3.sync, query_params=query)
        except (MatrixRequestError, MatrixConnectionError) as exc:
            raise translate(exc, sending=False) from exc
        if not isinstance(answer, dict) or not isinstance(answer.get("next_batch"), str):
            raise TransientSendError("the homeserver's /sync answer has no next_batch")
        return answer

    async def messages_before(
        self, room_id: str, from_token: str, to_token: str, *, limit: int
    ) -> dict[str, Any]:
        """`/rooms/{room}/messages` backwards from `from_token` to `to_token` (a sync's
        `prev_batch` back to the previous `since`): the events a limited timeline left out."""
        query = {"dir": "b", "from": from_token, "to": to_token, "limit": str(limit)}
        try:
            answer = await self._client().api.request(
                Method.GET, Path.v3.rooms[_room(room_id)].messages, query_params=query
            )
        except (MatrixRequestError, MatrixConnectionError) as exc:
            raise translate(exc, sending=False) from exc
        return answer if isinstance(answer, dict) else {}

    async def join(self, room_id: str) -> None:
        try:
            await self._client().join_room_by_id(_room(room_id))
        except (MatrixRequestError, MatrixConnectionError) as exc:
            raise translate(exc, sending=False) from exc

    async def leave(self, room_id: str) -> None:
        try:
            await self._client().leave_room(_room(room_id))
        except (MatrixRequestError, MatrixConnectionError) as exc:
            raise translate(exc, sending=False) from exc

    async def download(self, mxc: str) -> bytes:
        """The bytes of an `mxc://` file (the authenticated media API where the server has
        it)."""
        try:
            return await self._client().download_media(mxc)  # type: ignore[arg-type]
        except aiohttp.ClientResponseError as exc:
            # The media repository answered with an error status (gone, forbidden, too large).
            raise PlatformError(f"the homeserver refused the download: {exc.status}") from exc
        except (MatrixRequestError, MatrixConnectionError, aiohttp.ClientError) as exc:
            raise translate(exc, sending=False) from exc

    # ------------------------------------------------------------------ PlatformSender

    async def _send_event(self, room_id: str, content: dict[str, Any], *, editing: bool) -> str:
        try:
            event_id = await self._client().send_message_event(
                _room(room_id),
                "m.room.message",  # type: ignore[arg-type]
                content,  # type: ignore[arg-type]
            )
        except (MatrixRequestError, MatrixConnectionError) as exc:
            raise translate(exc, sending=True, editing=editing) from exc
        return str(event_id)

    async def send_text(self, target: Target, text: str, *, markup: bool) -> str:
        content = message_content(text, markup=markup)
        # No pings but those the text names on purpose (none: the kit defuses mass mentions).
        content["m.mentions"] = {}
        relation = _relation(target)
        if relation is not None:
            content["m.relates_to"] = relation
        return await self._send_event(target.chat_id, content, editing=False)

    async def edit_text(self, target: Target, message_id: str, text: str, *, markup: bool) -> None:
        new = message_content(text, markup=markup)
        # What clients without edits show: the new text marked with "* ".
        fallback = {key: f"* {value}" if key in ("body", "formatted_body") else value
                    for key, value in new.items()}  # fmt: skip
        content = {
            **fallback,
            "m.new_content": new,
            "m.relates_to": {"rel_type": "m.replace", "event_id": message_id},
            "m.mentions": {},
        }
        await self._send_event(target.chat_id, content, editing=True)

    async def delete_message(self, target: Target, message_id: str) -> None:
        try:
            await self._client().redact(_room(target.chat_id), message_id)  # type: ignore[arg-type]
        except (MatrixRequestError, MatrixConnectionError) as exc:
            raise translate(exc, sending=False, editing=True) from exc

    async def send_typing(self, target: Target) -> None:
        try:
            await self._client().set_typing(_room(target.chat_id), timeout=TYPING_TIMEOUT_MS)
        except (MatrixRequestError, MatrixConnectionError) as exc:
            raise translate(exc, sending=False) from exc
        self._typing[target.chat_id] = time.monotonic() + TYPING_TIMEOUT_MS / 1000.0

    async def stop_typing(self, room_id: str) -> None:
        """Take a typing notice down at once (a homeserver keeps it for its timeout, also after
        the reply); nothing to do when none was sent within the timeout."""
        until = self._typing.pop(room_id, None)
        if until is None or until <= time.monotonic():
            return
        try:
            await self._client().set_typing(_room(room_id), timeout=0)
        except (MatrixRequestError, MatrixConnectionError, RuntimeError) as exc:
            # RuntimeError: the session closed meanwhile (the adapter is stopping).
            log.debug("typing notice not taken down", extra={"chat_id": room_id,
                                                             "error": str(exc)})  # fmt: skip

    async def send_file(self, target: Target, file: OutboundFile) -> str:
        client = self._client()
        try:
            mxc = await client.upload_media(file.data, mime_type=file.mime_type,
                                            filename=file.name)  # fmt: skip
        except (MatrixRequestError, MatrixConnectionError) as exc:
            raise translate(exc, sending=True) from exc
        content: dict[str, Any] = {
            "msgtype": "m.image" if file.is_image else "m.file",
            "body": file.name,
            "filename": file.name,
            "url": str(mxc),
            "info": {"size": file.size, "mimetype": file.mime_type},
            "m.mentions": {},
        }
        relation = _relation(target)
        if relation is not None:
            content["m.relates_to"] = relation
        return await self._send_event(target.chat_id, content, editing=False)


def _room(room_id: str) -> RoomID:
    return cast("RoomID", room_id)
