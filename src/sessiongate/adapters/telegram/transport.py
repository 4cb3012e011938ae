"""`AiohttpRequest`: python-telegram-bot's HTTP transport (`telegram.request.BaseRequest`,
the SDK's own extension point) on aiohttp instead of httpx.

The SDK keeps everything else: its `Bot`, its parameter encoding, its answer parsing and its
error mapping. Only the HTTP exchange changes, and it is most of the Telegram adapter's CPU:
on the loopback stub an httpx request cost about 510 µs of client CPU, an aiohttp one about
110 µs (both with 4 keep-alive connections). One `ClientSession` per transport, with a
keep-alive pool of `connection_pool_size`.

Failures become the SDK's kinds, with the aiohttp error as the cause, so `client.translate`
can tell a request that never left (the connection could not be made) from one that may
have been delivered (a timeout or a broken connection after the request was written).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import aiohttp
from telegram._utils.defaultvalue import DefaultValue
from telegram.error import NetworkError, TimedOut
from telegram.request import BaseRequest

if TYPE_CHECKING:
    from telegram._utils.types import ODVInput
    from telegram.request import RequestData

__all__ = ["NOT_SENT", "AiohttpRequest"]

log = logging.getLogger(__name__)

# aiohttp errors raised before any byte of the request left: safe to send again.
NOT_SENT: tuple[type[BaseException], ...] = (
    aiohttp.ClientConnectorError,
    aiohttp.ConnectionTimeoutError,
)


HTTP_OK = 200


class AiohttpRequest(BaseRequest):
    def __init__(
        self,
        *,
        connection_pool_size: int = 1,
        read_timeout: float = 5.0,
        connect_timeout: float = 5.0,
    ) -> None:
        self._pool_size = connection_pool_size
        self._read_timeout = read_timeout
        self._connect_timeout = connect_timeout
        self._session: aiohttp.ClientSession | None = None

    @property
    def read_timeout(self) -> float:
        return self._read_timeout

    async def initialize(self) -> None:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self._pool_size),
                headers={"User-Agent": self.USER_AGENT},
            )

    async def shutdown(self) -> None:
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        write_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        connect_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        pool_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        session = self._session
        if session is None or session.closed:
            raise RuntimeError("this AiohttpRequest is not initialized")
        read = _seconds(read_timeout, self._read_timeout)
        connect = _seconds(connect_timeout, self._connect_timeout)
        # aiohttp has no write timeout of its own: a write that hangs ends at the read timeout.
        # The pool wait is the caller's (a semaphore as large as the pool), never aiohttp's.
        del write_timeout, pool_timeout
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect, sock_read=read)
        body: aiohttp.FormData | dict[str, str] | None = None
        if request_data is not None:
            body = _form(request_data) if request_data.contains_files else None
            if body is None:
                body = request_data.json_parameters
        try:
            async with session.request(method, url, data=body, timeout=timeout) as answer:
                content = await answer.read()
                # The request line, as httpx logs it (the client's token filter redacts the URL).
                # A long poll runs all the time: its answers are debug, unless refused.
                polled = url.endswith("/getUpdates") and answer.status == HTTP_OK
                level = logging.DEBUG if polled else logging.INFO
                log.log(level, "HTTP Request: %s %s %s", method, url, answer.status)
                return answer.status, content
        except NOT_SENT as exc:
            raise NetworkError(f"aiohttp.{type(exc).__name__}: {exc}") from exc
        except TimeoutError as exc:
            raise TimedOut from exc
        except aiohttp.ClientError as exc:
            raise NetworkError(f"aiohttp.{type(exc).__name__}: {exc}") from exc


def _seconds(value: ODVInput[float], default: float) -> float:
    if isinstance(value, DefaultValue) or value is None:
        return default
    return float(value)


def _form(request_data: RequestData) -> aiohttp.FormData:
    form = aiohttp.FormData()
    for name, value in request_data.json_parameters.items():
        form.add_field(name, value)
    for name, part in request_data.multipart_data.items():
        filename, content, *mimetype = part
        form.add_field(
            name, content, filename=filename, content_type=mimetype[0] if mimetype else None
        )
    return form
