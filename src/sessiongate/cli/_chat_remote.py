"""`sessiongate chat --url`: the conversation as a client of a running gateway's HTTP API.

Each line goes to `POST /v1/messages` with `"stream": true` (and the bearer token); the reply
is printed as its `delta` events arrive, read with the rule of docs/API.md: a `retry` voids
the text since the last message, so the abandoned line is marked and the new attempt starts on
a line of its own (a terminal cannot take printed text back). A gateway that cannot be reached,
or whose connection breaks mid-reply, ends the chat with one line, never a traceback.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import httpx

from sessiongate.adapters.local import RETRY_MARK
from sessiongate.cli._common import fail

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

__all__ = ["RemoteChat", "ReplyPrinter"]

# A hang guard for a gateway that never answers (between two events: a streamed reply may take
# longer in all); the turn itself has agent.gateway_timeout. Connecting is bounded much tighter.
CLIENT_TIMEOUT = httpx.Timeout(3600.0, connect=10.0)
LEAVE = frozenset({"/quit", "/exit"})


class ReplyPrinter:
    """Prints one reply from its events, as they come."""

    def __init__(self, write: Callable[[str], object], prefix: str) -> None:
        self._write = write
        self._prefix = prefix
        # The text on the reply line being printed (None: no line open), and the last
        # finished line's text.
        self._line: str | None = None
        self._last: str | None = None
        self.ended = False

    def feed(self, name: str, data: dict[str, Any]) -> None:
        if name == "delta":
            if self._line is None:
                self._write(self._prefix)
                self._line = ""
            self._write(data["text"])
            self._line += data["text"]
        elif name == "retry":
            if self._line is not None:
                self._write(f" {RETRY_MARK.format(attempt=data.get('attempt'))}\n")
                self._line = None
        elif name == "message" and data.get("role") == "assistant":
            self._close()  # the next message of the turn (after a tool call) on its own line
        elif name == "done":
            self._done(str(data.get("status")), data.get("reply"))
        elif name == "error":
            self._close()
            self._write(f"({data.get('code')}) {data.get('message') or ''}".rstrip() + "\n")
            self.ended = True

    def cut_off(self) -> None:
        """The reply stopped coming (the connection broke): end its line."""
        self._close()

    def _close(self) -> None:
        if self._line is not None:
            self._write("\n")
            self._last, self._line = self._line, None

    def _done(self, status: str, reply: str | None) -> None:
        self._close()
        self.ended = True
        if status in ("replied", "command"):
            # Printed already when the deltas made it; whole when they did not (a command,
            # or deltas a slow terminal missed).
            if reply and reply != self._last:
                self._write(f"{self._prefix}{reply}\n")
        else:
            self._write(f"({status}) {reply or ''}".rstrip() + "\n")


class RemoteChat:
    """Each line to the gateway at `url`, its reply streamed before the next line is read.

    `busy()` says whether a reply is on its way; `stop_turn()` sends `/stop` beside it (the
    chat's Ctrl+C), whose answer is printed; `typed` counts the lines sent.
    """

    def __init__(
        self,
        url: str,
        token: str | None,
        source: dict[str, str],
        read_line: Callable[[], Awaitable[str | None]],
        write: Callable[[str], object],
        *,
        prefix: str,
    ) -> None:
        self._url = url
        self._source = source
        self._read_line = read_line
        self._write = write
        self._prefix = prefix
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._client: httpx.AsyncClient | None = None
        self._sending = False
        self.typed = 0

    def busy(self) -> bool:
        return self._sending

    async def run(self) -> None:
        try:
            client = httpx.AsyncClient(
                base_url=self._url.rstrip("/"), headers=self._headers, timeout=CLIENT_TIMEOUT
            )
        except httpx.InvalidURL as exc:
            fail(f"--url {self._url!r} is not a URL: {exc}")
        async with client:
            self._client = client
            while (line := await self._read_line()) is not None:
                text = line.strip()
                if not text:
                    continue
                if text.lower() in LEAVE:
                    return
                self.typed += 1
                self._sending = True
                try:
                    body = {**self._source, "text": text, "stream": True}
                    await _send(client, self._url, body, self._write, self._prefix)
                finally:
                    self._sending = False

    async def stop_turn(self) -> None:
        """`/stop` for this conversation, as if typed; its answer (or why not) is printed."""
        if self._client is None:
            return
        try:
            response = await self._client.post(
                "/v1/messages", json={**self._source, "text": "/stop"}
            )
        except httpx.HTTPError as exc:
            self._write(f"(the stop did not reach the gateway: {_why(exc)})\n")
            return
        if response.status_code == 200:
            reply = response.json().get("reply")
            if reply:
                self._write(f"{self._prefix}{reply}\n")
        else:
            _refused(response, self._write)


async def _send(
    client: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    write: Callable[[str], object],
    prefix: str,
) -> None:
    printer = ReplyPrinter(write, prefix)
    try:
        async with client.stream("POST", "/v1/messages", json=body) as response:
            kind = response.headers.get("content-type", "")
            if response.status_code == 200 and kind.startswith("text/event-stream"):
                async for name, data in _events(response):
                    printer.feed(name, data)
            else:
                await response.aread()
                _refused(response, write)
                return
    except (
        httpx.ConnectError,
        httpx.ConnectTimeout,
        httpx.UnsupportedProtocol,
        httpx.InvalidURL,
    ) as exc:
        fail(f"cannot reach the gateway at {url}: {_why(exc)}")
    except httpx.TimeoutException as exc:
        fail(f"the gateway at {url} did not answer in time ({_why(exc)})")
    except httpx.HTTPError as exc:
        printer.cut_off()
        fail(
            f"the connection to the gateway at {url} broke mid-reply ({_why(exc)}); the turn "
            "goes on there"
        )
    if not printer.ended:
        printer.cut_off()
        fail(f"the gateway at {url} ended the reply before it was done; the turn goes on there")


def _refused(response: httpx.Response, write: Callable[[str], object]) -> None:
    """A message the gateway refused before accepting it (a JSON error), or not its answer."""
    if response.status_code == 401:
        fail("the gateway refused the token (give --token or $SESSIONGATE_API__TOKEN)")
    try:
        data = response.json()
    except ValueError:  # not the gateway's JSON (a proxy's error page)
        data = {}
    error = (data.get("error") if isinstance(data, dict) else None) or {}
    write(f"({error.get('code', response.status_code)}) {error.get('message', '')}".rstrip() + "\n")


async def _events(response: httpx.Response) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """The (event, data) pairs of a server-sent-events body, as they arrive."""
    name, data = "message", list[str]()
    async for line in response.aiter_lines():
        if not line:
            if data:
                yield name, json.loads("\n".join(data))
            name, data = "message", []
        elif line.startswith("event:"):
            name = line[len("event:") :].strip()
        elif line.startswith("data:"):
            data.append(line[len("data:") :].removeprefix(" "))


def _why(exc: Exception) -> str:
    return str(exc) or type(exc).__name__
