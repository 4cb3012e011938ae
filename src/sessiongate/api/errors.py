"""Every failure of the HTTP API becomes `{"error": {"code", "message"}}` with one status.

`SessiongateError`s are mapped by `ERROR_STATUS`, searched along the exception's MRO so a
subclass inherits its parent's status unless it has its own row (the way starlette looks up
exception handlers). Request problems found by the framework (malformed JSON, wrong types, no
such route) get their own codes. Anything else is a bug: a 500 with a generic message, and the
traceback goes to the log, never to the client.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, get_args

from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request

from sessiongate.errors import (
    AgentTurnError,
    ApprovalNotFoundError,
    ConflictError,
    EntryNotFoundError,
    ForeignStoreError,
    ForkTooLargeError,
    InvalidEntryError,
    InvalidSessionIdError,
    InvalidSessionKeyError,
    JobNotFoundError,
    NotTakenOverError,
    QueueFullError,
    SessionArchivedError,
    SessionBusyError,
    SessiongateError,
    SessionNotFoundError,
    StaleWriteError,
    StoreCorruptError,
    StoreUnavailableError,
    UnauthorizedError,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from fastapi import FastAPI
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "ERROR_STATUS",
    "ApiError",
    "CatchAllMiddleware",
    "error_response",
    "install_error_handlers",
    "status_for",
]

log = logging.getLogger(__name__)

# Searched along the MRO: the most specific class listed wins. The bare base class is left out
# on purpose: an error nobody gave a status to is a bug, so it surfaces as a 500.
ERROR_STATUS: dict[type[BaseException], int] = {
    InvalidSessionKeyError: 400,
    InvalidSessionIdError: 400,
    InvalidEntryError: 400,
    # An import source that is not what it claims (no route imports today; a future one would
    # be answering bad input).
    ForeignStoreError: 400,
    UnauthorizedError: 403,
    SessionNotFoundError: 404,
    EntryNotFoundError: 404,
    JobNotFoundError: 404,
    ApprovalNotFoundError: 404,
    SessionArchivedError: 409,
    SessionBusyError: 409,
    NotTakenOverError: 409,
    StaleWriteError: 409,
    ConflictError: 409,
    # The request is well formed but asks for more than the child model can hold.
    ForkTooLargeError: 422,
    QueueFullError: 429,
    # The disk or the database is the problem, not the request; retrying later may work.
    StoreUnavailableError: 503,
    StoreCorruptError: 503,
    # The model server failed or refused (a summary for a compaction); not the request.
    AgentTurnError: 503,
}

# Codes for statuses the framework raises itself (unknown route, wrong method, ...).
_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "too_many_requests",
}


class ApiError(Exception):
    """An HTTP-level refusal raised by the API itself (auth, limits), with its wire code."""

    def __init__(
        self, status: int, code: str, message: str, *, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers

    def __repr__(self) -> str:
        return f"ApiError({self.status}, {self.code!r}, {self.message!r})"


def status_for(exc: BaseException) -> int | None:
    """The status of the most specific class of `exc` in `ERROR_STATUS`, or None."""
    for cls in type(exc).__mro__:
        status = ERROR_STATUS.get(cls)
        if status is not None:
            return status
    return None


def error_response(
    status: int,
    code: str,
    message: str,
    *,
    details: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body: dict[str, Any] = {"code": code, "message": message}
    if details:
        body["details"] = details
    return JSONResponse({"error": body}, status_code=status, headers=headers)


async def _sessiongate_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, SessiongateError)
    status = status_for(exc)
    if status is None:
        return _internal_error(request, exc)
    return error_response(status, exc.code, exc.message)


async def _api_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.code, exc.message, headers=exc.headers)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    if isinstance(exc.body, (bytes, bytearray)):
        # FastAPI leaves the body as bytes when it is not declared JSON.
        return error_response(
            415,
            "unsupported_media_type",
            "send the body as JSON with Content-Type: application/json",
        )
    if any(e.get("type") == "json_invalid" for e in errors):
        return error_response(400, "invalid_json", "the request body is not valid JSON")
    fields = _body_fields(request)
    # The offending input is not echoed back: it may be large or hold a secret.
    details = [
        {
            "loc": [str(part) for part in e.get("loc", ())],
            "msg": _problem(e, fields),
            "type": str(e.get("type", "")),
        }
        for e in errors
    ]
    first = details[0] if details else {"loc": [], "msg": "invalid request"}
    where = _field_name(first["loc"])
    message = f"{where}: {first['msg']}" if where else str(first["msg"])
    return error_response(422, "invalid_request", message, details=details)


# Where the field sits is told by its name alone: the body is implied, and a query or path
# parameter has a name of its own.
_LOCATIONS = ("body", "query", "path", "header", "cookie")
_NOT_AN_OBJECT = ("model_attributes_type", "model_type", "dict_type")
_TOO_SHORT = ("too_short", "string_too_short")


def _field_name(loc: Sequence[str]) -> str:
    parts = loc[1:] if loc and loc[0] in _LOCATIONS else loc
    return ".".join(parts)


def _problem(error: Any, fields: list[str]) -> str:
    """What is wrong with one field and what it allows, in words a client can act on."""
    kind = str(error.get("type", ""))
    loc = tuple(error.get("loc", ()))
    msg = str(error.get("msg", ""))
    if kind == "missing":
        return "required"
    if kind == "extra_forbidden":
        allowed = f"; the fields are {', '.join(fields)}" if fields and len(loc) == 2 else ""
        return f"not a field of this request{allowed}"
    if kind in _NOT_AN_OBJECT and loc == ("body",):
        return "the body must be a JSON object"
    if kind in _TOO_SHORT:
        least = (error.get("ctx") or {}).get("min_length")
        # pydantic counts "items" even for text ("at least 1 item after validation").
        return "must not be empty" if least in (None, 1) else f"must be at least {least} long"
    # A rule across fields (a model validator) words its own message.
    return msg.removeprefix("Value error, ")


def _body_fields(request: Request) -> list[str]:
    """The field names of the route's body model, to say what an unknown field could be."""
    route = request.scope.get("route")
    info = getattr(getattr(route, "body_field", None), "field_info", None)
    annotation = getattr(info, "annotation", None)
    for candidate in (annotation, *get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return list(candidate.model_fields)
    return []


async def _http_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    # FastAPI turns only a syntax error of the body into a validation error; a body that
    # nests deeper than the parser's stack comes as a bare 400 "error parsing the body" whose
    # cause says so. It is a body that is not valid JSON. (One that is not UTF-8 never gets
    # this far: BodyLimitMiddleware refuses it.)
    if exc.status_code == 400 and isinstance(exc.__cause__, RecursionError):
        return error_response(
            400, "invalid_json", "the request body is not valid JSON: it is nested too deeply"
        )
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    headers = dict(exc.headers) if exc.headers else None
    return error_response(exc.status_code, code, str(exc.detail), headers=headers)


def _internal_error(request: Request, exc: BaseException) -> JSONResponse:
    log.error(
        "unhandled error in the HTTP API",
        exc_info=exc,
        extra={"method": request.method, "path": request.url.path},
    )
    return error_response(500, "internal_error", "internal server error; see the gateway log")


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(SessiongateError, _sessiongate_error)
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)


class CatchAllMiddleware:
    """Turns an exception no handler knows into the generic 500 and logs it once.

    Starlette's own last-resort handler re-raises after answering, so the server logs a second,
    unstructured traceback; this one answers and stops the exception here. If the response had
    already started there is nothing valid left to send, so the error is logged and re-raised.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:
            if started:
                log.error("error after the response started", exc_info=exc)
                raise
            response = _internal_error(Request(scope), exc)
            await response(scope, receive, send)
