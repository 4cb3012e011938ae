"""The HTTP/1.1 protocol the gateway serves with: uvicorn's httptools protocol, held to the
bounds its h11 protocol keeps.

httptools (llhttp) parses a request's head in C, about a tenth faster to a streamed reply's
first byte than h11 (docs/PERFORMANCE.md). uvicorn's protocol around it keeps every header a
client sends, without limit: 200 KB of one header, or 20,000 of them, were answered 200 where
h11 answers 400, so a client could make the gateway hold a head of any size. It also answered
an HTTP/1.1 request without `Host`, which RFC 9112 §3.2 says is a 400. And a head that failed
to parse behind pipelined requests still being answered had its 400 written at once, closing
the connection under their responses: a message committed and replied to reached its client
as nothing but that 400. This class restores all three to h11's behaviour. A refused head
gets uvicorn's own answer to a malformed request: 400, text, connection closed.
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
    # Between a message's first byte and the end of its headers: a parse error then belongs
    # to a request no cycle owns yet, and the requests before it can still be answered.
    _in_head = False
    _refusal: str | None = None

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_bytes = 0
        self._in_head = True

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
        self._in_head = False
        super().on_headers_complete()

    def send_400_response(self, msg: str) -> None:
        # `cycle` is None until a connection's first head is complete.
        if self._in_head and not getattr(self.cycle, "response_complete", True):
            self._refusal = msg  # answered once the responses before it are complete
            self.flow.pause_reading()
            return
        super().send_400_response(msg)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # The latest cycle is the last one queued: once it is complete, every one is.
        if self._refusal is not None and self.cycle.response_complete:
            refusal, self._refusal = self._refusal, None
            self.send_400_response(refusal)

    def _count(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > MAX_HEAD_BYTES:
            raise HeadRefused(f"a request head over {MAX_HEAD_BYTES} bytes")
