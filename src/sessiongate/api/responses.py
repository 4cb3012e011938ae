"""The documented error responses of a route, for the OpenAPI description."""

from __future__ import annotations

from typing import Any

from sessiongate.api.schemas import ErrorOut

__all__ = ["errors"]

_DESCRIPTIONS = {
    400: "Bad input: malformed JSON (`invalid_json`), a malformed session key, a bad entry",
    401: "A bearer token is configured and the request lacks it or has another one",
    403: "The sender is not allowed on this platform",
    404: "No such session or transcript entry",
    409: "A turn is running on the session, or an expected value no longer holds",
    413: "The body is over `api.max_body_bytes` or the text over `api.max_message_chars`",
    415: "The body is not declared as JSON (`Content-Type: application/json`)",
    422: "A field has the wrong type or is out of range (`invalid_request`, with `details`)",
    429: "The lane's queue is full",
    501: "This gateway's runner has no compaction (`not_implemented`)",
    503: "The store is closed, the disk refused the write, or the gateway is shutting down",
}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """`responses=` for a route: each status with the error body and what it means.

    422 and 503 are listed for every route: FastAPI documents a validation failure for any
    route with parameters (with its own body, which this replaces by ours), and the store can
    refuse anywhere.
    """
    return {
        status: {"model": ErrorOut, "description": _DESCRIPTIONS[status]}
        for status in sorted({*statuses, 422, 503})
    }
