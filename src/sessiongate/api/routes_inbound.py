"""`POST /hooks/in/<name>`: inbound webhooks (`hooks.routes`), each run as a system turn.

No API token: each route has a credential of its own, checked the way the platform webhooks'
are (api/body_gates.py). A route with a `bearer` is refused (401) on its `Authorization`
header alone, its body unread. A route with a `secret` needs the body for its HMAC-SHA256:
the gate refuses a request whose signature header is missing or malformed before a byte is
read; the body is then read within the route's `max_body_bytes` (413 beyond), and the
signature compared in constant time (401) before anything parses it. Then: bad JSON is a
400, a template field the body lacks a 400 naming it, a delivery id taken before a 200 with
`duplicate: true` (nothing runs), and a new delivery a 202 with the turn's id
(gateway/inbound_hooks.py). A name that no route has is a 404 at once (body_gates.py).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Path, Request
from fastapi.responses import JSONResponse

from sessiongate.adapters.kit.fields import PayloadError, loads_json
from sessiongate.api.body_gates import BodyGate, Refusal
from sessiongate.api.schemas import ErrorOut

if TYPE_CHECKING:
    from collections.abc import Callable

    from starlette.datastructures import Headers
    from starlette.types import Scope

    from sessiongate.core.config import GatewayConfig
    from sessiongate.core.inbound_hooks import HookRouteSpec

__all__ = ["PREFIX", "inbound_gates", "router"]

PREFIX = "/hooks/in/"
_SIGNATURE = re.compile(r"(?:sha256=)?([0-9a-fA-F]{64})")
_NOT_SIGNED = "not a signed request of this webhook"

router = APIRouter(tags=["webhooks"])


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def _signature(spec: HookRouteSpec, headers: Headers) -> bytes | None:
    found = _SIGNATURE.fullmatch(headers.get(spec.signature_header, "").strip())
    return None if found is None else bytes.fromhex(found.group(1))


def _header_check(spec: HookRouteSpec) -> Callable[[Scope, Headers], Refusal | None]:
    def check(scope: Scope, headers: Headers) -> Refusal | None:
        if spec.bearer is not None:
            scheme, _, token = headers.get("authorization", "").partition(" ")
            expected = spec.bearer.get_secret_value().encode()
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                token.strip().encode(), expected
            ):
                return Refusal(401, "unauthorized", _NOT_SIGNED)
            return None
        if _signature(spec, headers) is None:
            return Refusal(401, "unauthorized", _NOT_SIGNED)
        return None

    return check


def inbound_gates(config: GatewayConfig) -> list[BodyGate]:
    """The gate of every configured route (api/body_gates.py)."""
    return [
        BodyGate(f"{PREFIX}{spec.name}", _header_check(spec), spec.max_body_bytes)
        for spec in config.hooks.routes
    ]


_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "A delivery id taken before: `duplicate: true`, nothing runs"},
    202: {"description": "Accepted: the turn is queued (`turn_id`)"},
    400: {"model": ErrorOut, "description": "Not JSON, or a template field the body lacks"},
    401: {"model": ErrorOut, "description": "A wrong or missing credential; no body is parsed"},
    404: {"model": ErrorOut, "description": "No route of that name; the body is not read"},
    409: {"model": ErrorOut, "description": "A delivery id reused with a different body"},
    413: {"model": ErrorOut, "description": "Larger than the route's `max_body_bytes`"},
    422: {"model": ErrorOut, "description": "A malformed route name (`invalid_request`)"},
    429: {"model": ErrorOut, "description": "The lane's queue is full; retry later"},
    503: {"model": ErrorOut, "description": "The gateway is stopping; retry later"},
}


@router.post(
    PREFIX + "{name}",
    summary="Inbound webhook: a signed JSON body runs one system turn (`hooks.routes`)",
    responses=_RESPONSES,
    response_class=JSONResponse,
    status_code=202,
)
async def inbound_hook(
    request: Request,
    name: str = Path(description="The route's `name` in `hooks.routes`"),
) -> JSONResponse:
    runner = request.app.state.runner
    hooks = runner.inbound_hooks
    spec = hooks.route(name)
    if spec is None:
        return _error(404, "not_found", f"no inbound webhook {name[:100]!r}")
    body = await request.body()
    if spec.secret is not None:
        signature = _signature(spec, request.headers)
        key = spec.secret.get_secret_value().encode()
        digest = hmac.new(key, body, hashlib.sha256).digest()
        if signature is None or not hmac.compare_digest(signature, digest):
            return _error(401, "unauthorized", _NOT_SIGNED)
    try:
        payload = loads_json(body)
    except (PayloadError, ValueError, UnicodeDecodeError):
        return _error(400, "bad_request", "the body is not JSON")
    header_id = request.headers.get(spec.id_header)
    outcome = await hooks.receive(name, payload, header_id)
    return JSONResponse(outcome.body(), status_code=outcome.status)
