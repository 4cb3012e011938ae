"""`SignalClient`: a signal-cli daemon in HTTP mode, over httpx, in the kit's terms.

signal-cli (`signal-cli -a +NUMBER daemon --http HOST:PORT`, see signal-cli-jsonrpc(5)) has no
SDK to speak of, and needs none: three endpoints.

- `GET /api/v1/check`: 200 while the daemon runs (the liveness probe);
- `GET /api/v1/events?account=`: an SSE stream of receive events; each has an id, and a client
  that reconnects with `Last-Event-ID` first gets the events after it (the daemon keeps 1,000);
- `POST /api/v1/rpc`: JSON-RPC 2.0 (`send`, `sendTyping`, `sendReaction`, `remoteDelete`,
  `getAttachment`, `getUserStatus`), with the account as a parameter (multi-account daemons
  need it; single-account ones ignore it).

A JSON-RPC error is translated once, here, into the kit's kinds (`translate`): a rate limit
(a `RATE_LIMIT_FAILURE` or `PROOF_REQUIRED_FAILURE` result, or code -5) waits `retryAfterSeconds`;
an unregistered recipient or a group the account left refuses the chat for good; refused style
ranges resend as plain text; a network failure on the daemon's side (the message never left) is
transient. An HTTP request that never reached the daemon is transient; one that timed out after
it was sent may have been delivered, so a send that ends so is *unconfirmed*, never resent.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import logging
from typing import TYPE_CHECKING, Any

import httpx

from sessiongate.adapters.kit.errors import (
    CredentialsError,
    FileRejectedError,
    FormatRejectedError,
    PermanentSendError,
    PlatformError,
    RateLimitedError,
    ReplyTargetError,
    TransientSendError,
    UnconfirmedSendError,
)
from sessiongate.adapters.signal.payloads import GROUP_PREFIX, SignalIdentity
from sessiongate.adapters.signal.sse import SseEvent, iter_events
from sessiongate.adapters.signal.styles import to_signal_text

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from sessiongate.adapters.kit.media_out import OutboundFile
    from sessiongate.adapters.kit.outbound import Target

__all__ = ["SignalClient", "quote_anchor", "translate"]

log = logging.getLogger(__name__)

# signal-cli's JSON-RPC error codes (SignalJsonRpcCommandHandler).
USER_ERROR = -1
IO_ERROR = -3
UNTRUSTED_KEY_ERROR = -4
RATE_LIMIT_ERROR = -5
INVALID_PARAMS = -32602
_PERMANENT_RESULTS = frozenset({"UNREGISTERED_FAILURE", "IDENTITY_FAILURE"})
_RATE_RESULTS = frozenset({"RATE_LIMIT_FAILURE", "PROOF_REQUIRED_FAILURE"})
_PERMANENT_WORDS = ("is not registered", "not a member", "not a group member", "not allowed")
# JSON-RPC calls in flight at once, at most: signal-cli serves them from a small thread pool,
# and httpx's connection pool costs more per request the more requests wait in it (measured by
# `sessiongate bench`, a burst of 600 replies: about 60 updates/s with 16 in flight, about 230
# with 4). The event stream holds one more connection, outside this bound.
MAX_CONCURRENT_CALLS = 4
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
_MAYBE_SENT = (httpx.TimeoutException, httpx.TransportError)


def quote_anchor(timestamp: str, author: str) -> str:
    """A `Target.reply_to` for Signal: a quote needs the message's timestamp *and* author."""
    return f"{timestamp}|{author}"


def translate(code: int, message: str, data: Any, *, sending: bool) -> PlatformError:
    """The kit's kind for a JSON-RPC error of signal-cli (see the module docstring)."""
    results = _results(data)
    kinds = {str(r.get("type")) for r in results}
    if code == RATE_LIMIT_ERROR or kinds & _RATE_RESULTS:
        waits = [r.get("retryAfterSeconds") for r in results]
        retry = max((float(w) for w in waits if isinstance(w, (int, float))), default=1.0)
        return RateLimitedError(f"signal: {message}", retry_after=retry)
    if code == INVALID_PARAMS and "account" in message.lower():
        return CredentialsError(f"signal-cli does not know this account: {message}")
    lowered = message.lower()
    if kinds & _PERMANENT_RESULTS or code == UNTRUSTED_KEY_ERROR:
        return PermanentSendError(f"signal: {message}")
    if any(word in lowered for word in _PERMANENT_WORDS):
        return PermanentSendError(f"signal: {message}")
    if "textstyle" in lowered or "invalid style" in lowered:
        return FormatRejectedError(f"signal: {message}")
    if "quote" in lowered:
        return ReplyTargetError(f"signal: {message}")
    if "attachment" in lowered:
        return FileRejectedError(f"signal: {message}")
    if code == IO_ERROR or "NETWORK_FAILURE" in kinds:
        # signal-cli could not reach Signal: nothing was delivered.
        return TransientSendError(f"signal: {message}")
    return PlatformError(f"signal error {code}: {message}")


def _results(data: Any) -> list[dict[str, Any]]:
    response = data.get("response") if isinstance(data, dict) else None
    results = response.get("results") if isinstance(response, dict) else None
    return [r for r in results if isinstance(r, dict)] if isinstance(results, list) else []


class SignalClient:
    def __init__(
        self,
        url: str,
        account: str,
        *,
        timeout: float = 20.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.account = account
        self._timeout = timeout
        self._transport = transport
        self._http = self._build()
        self._ids = itertools.count(1)
        self._calls = asyncio.Semaphore(MAX_CONCURRENT_CALLS)
        self.me: SignalIdentity | None = None

    def _build(self) -> httpx.AsyncClient:
        room = MAX_CONCURRENT_CALLS + 2  # the calls, the event stream and a probe
        return httpx.AsyncClient(
            base_url=self.url,
            timeout=self._timeout,
            transport=self._transport,
            trust_env=False,
            limits=httpx.Limits(max_connections=room, max_keepalive_connections=room),
        )

    # ------------------------------------------------------------------ the daemon

    async def check(self) -> bool:
        """The liveness probe: does the daemon answer `/api/v1/check` with 200?"""
        try:
            response = await self._http.get("/api/v1/check")
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    async def open(self) -> SignalIdentity:
        """Reach the daemon (`PlatformError` when it does not answer) and learn the account's
        UUID (`CredentialsError` when the daemon does not know the account)."""
        if not await self.check():
            raise PlatformError(f"the signal-cli daemon at {self.url} does not answer")
        uuid: str | None = None
        try:
            found = await self.rpc("getUserStatus", {"recipient": [self.account]}, sending=False)
        except CredentialsError:
            raise
        except PlatformError as exc:
            # Without it, the bot is recognised by its number only.
            log.warning("signal account UUID unknown", extra={"error": str(exc)})
        else:
            for status in found if isinstance(found, list) else ():
                if isinstance(status, dict) and status.get("number") == self.account:
                    uuid = str(status.get("uuid") or "") or None
        self.me = SignalIdentity(number=self.account, uuid=uuid)
        return self.me

    @contextlib.asynccontextmanager
    async def events(self, last_event_id: str | None) -> AsyncIterator[AsyncIterator[SseEvent]]:
        """The event stream, resumed after `last_event_id`; `PlatformError` when the daemon
        refuses it. The stream has no read timeout: the receiver's watchdog bounds silence."""
        headers = {"Accept": "text/event-stream"}
        if last_event_id:
            headers["Last-Event-ID"] = last_event_id
        timeout = httpx.Timeout(self._timeout, read=None)
        request = self._http.build_request(
            "GET", "/api/v1/events", params={"account": self.account}, headers=headers,
            timeout=timeout,
        )  # fmt: skip
        try:
            response = await self._http.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise PlatformError(f"signal-cli event stream not opened: {exc!r}") from exc
        try:
            if response.status_code != 200:
                await response.aread()
                raise PlatformError(
                    f"signal-cli refused the event stream: HTTP {response.status_code}"
                )
            yield _guarded(iter_events(response.aiter_lines()))
        finally:
            await response.aclose()

    async def rpc(self, method: str, params: dict[str, Any], *, sending: bool = True) -> Any:
        body = {
            "jsonrpc": "2.0",
            "id": next(self._ids),
            "method": method,
            "params": {**params, "account": self.account},
        }
        try:
            async with self._calls:
                response = await self._http.post("/api/v1/rpc", json=body)
        except _NOT_SENT as exc:
            raise TransientSendError(f"signal-cli unreachable: {exc!r}") from exc
        except _MAYBE_SENT as exc:
            message = f"signal-cli call ended without an answer: {type(exc).__name__}"
            if sending:
                raise UnconfirmedSendError(message) from exc
            raise TransientSendError(message) from exc
        try:
            answer = response.json()
        except ValueError:
            answer = None
        if isinstance(answer, dict) and isinstance(answer.get("error"), dict):
            error = answer["error"]
            code = error.get("code")
            raise translate(
                code if isinstance(code, int) else 0,
                str(error.get("message", "")),
                error.get("data"),
                sending=sending,
            )
        if response.status_code >= 500:
            raise TransientSendError(f"signal-cli answered HTTP {response.status_code}")
        if response.status_code != 200 or not isinstance(answer, dict):
            raise PlatformError(f"signal-cli answered HTTP {response.status_code} to {method}")
        return answer.get("result")

    async def close(self) -> None:
        await self._http.aclose()

    async def rebuild(self) -> None:
        """A fresh connection pool (after a stall: the old sockets may be dead)."""
        old, self._http = self._http, self._build()
        await old.aclose()

    # ------------------------------------------------------------------ PlatformSender

    async def send_text(self, target: Target, text: str, *, markup: bool) -> str:
        params = _address(target)
        if markup:
            plain, styles = to_signal_text(text)
            params.update(message=plain, textStyle=[s.wire() for s in styles])
        else:
            params["message"] = text
        params.update(_quote(target))
        result = await self.rpc("send", params)
        return _timestamp(result)

    async def send_file(self, target: Target, file: OutboundFile) -> str:
        encoded = base64.b64encode(file.data).decode("ascii")
        uri = f"data:{file.mime_type};filename={file.name};base64,{encoded}"
        params = {**_address(target), "attachments": [uri], **_quote(target)}
        return _timestamp(await self.rpc("send", params))

    async def edit_text(self, target: Target, message_id: str, text: str, *, markup: bool) -> None:
        raise PlatformError("the Signal adapter does not edit messages (final text only)")

    async def delete_message(self, target: Target, message_id: str) -> None:
        params = {**_address(target), "targetTimestamp": int(message_id)}
        await self.rpc("remoteDelete", params, sending=False)

    async def send_typing(self, target: Target) -> None:
        await self.rpc("sendTyping", _address(target), sending=False)

    async def send_reaction(self, target: Target, emoji: str, *, author: str, at: str) -> None:
        params = {**_address(target), "emoji": emoji, "targetAuthor": author,
                  "targetTimestamp": int(at)}  # fmt: skip
        await self.rpc("sendReaction", params, sending=False)

    async def fetch_attachment(self, attachment_id: str) -> bytes:
        """An inbound attachment's bytes (getAttachment answers them base64-encoded)."""
        result = await self.rpc("getAttachment", {"id": attachment_id}, sending=False)
        data = result.get("data") if isinstance(result, dict) else result
        if not isinstance(data, str):
            raise PlatformError("signal-cli answered getAttachment without data")
        return base64.b64decode(data)


async def _guarded(events: AsyncIterator[SseEvent]) -> AsyncIterator[SseEvent]:
    """The stream's events, a broken connection raised as the kit's `PlatformError`."""
    try:
        async for event in events:
            yield event
    except httpx.HTTPError as exc:
        raise PlatformError(f"signal-cli event stream broke: {exc!r}") from exc


def _address(target: Target) -> dict[str, Any]:
    if target.chat_id.startswith(GROUP_PREFIX):
        return {"groupId": target.chat_id.removeprefix(GROUP_PREFIX)}
    return {"recipient": [target.chat_id]}


def _quote(target: Target) -> dict[str, Any]:
    if not target.reply_to or "|" not in target.reply_to:
        return {}
    timestamp, _, author = target.reply_to.partition("|")
    return {"quoteTimestamp": int(timestamp), "quoteAuthor": author}


def _timestamp(result: Any) -> str:
    """A sent message's id: its timestamp (what quotes, reactions and deletes name)."""
    if isinstance(result, dict) and isinstance(result.get("timestamp"), int):
        return str(result["timestamp"])
    raise UnconfirmedSendError("signal-cli answered the send without a timestamp")
