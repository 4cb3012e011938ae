"""The HTTP/1.1 protocol the gateway serves with: uvicorn's httptools protocol, held to the
bounds its h11 protocol keeps.

httptools (llhttp) parses a request's head in C, about a tenth faster to a streamed reply's
first byte than h11 (docs/PERFORMANCE.md). uvicorn's protocol around it keeps every header a
client sends, without limit: 200 KB of one header, or 20,000 of them, were answered 200 where
h11 answers 400, so a client could make the gateway hold a head of any size. It also answered
an HTTP/1.1 request without `Host`, which RFC 9112 §3.2 says is a 400. This class restores
both. A refused head gets uvicorn's own answer to a malformed request: 400, text, connection
closed.
"""

from __future__ import annotations

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["MAX_HEAD_BYTES", "BoundedHttpToolsProtocol"]

# h11's bound (`h11_max_incomplete_event_size`), the one the gateway answered with before.
MAX_HEAD_BYTES = 16 * 1024


class HeadRefused(Exception):
    """Raised in a parser callback: httptools turns it into the parse error uvicorn answers."""


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    _head_bytes = 0

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_bytes = 0

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)  # ": " and CRLF, as they came on the wire
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        if self.parser.get_http_version() == "1.1" and not any(
            name == b"host" for name, _ in self.headers
        ):
            raise HeadRefused("an HTTP/1.1 request without Host")
        super().on_headers_complete()

    def _count(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > MAX_HEAD_BYTES:
            raise HeadRefused(f"a request head over {MAX_HEAD_BYTES} bytes")
