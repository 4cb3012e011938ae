"""`GET|POST /hooks/whatsapp`: the WhatsApp Cloud API webhook on the gateway's own HTTP server.

No bearer token: Meta signs its requests. `GET` is the one-time verification (Meta sends
`hub.mode=subscribe`, `hub.verify_token`, `hub.challenge`; the right token gets the challenge
back as plain text, anything else a 401, like every webhook refusal). `POST` carries messages
and delivery reports, and is refused (401) without an `X-Hub-Signature-256: sha256=...` header
before its body is read; its body is read only up to `platforms.whatsapp.max_webhook_bytes`
(413 beyond), and the adapter checks the HMAC before it parses anything. With no WhatsApp
adapter running, every request is refused the same way (which of the two it was is not told).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from sessiongate.api.schemas import ErrorOut

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["WhatsAppHook", "router"]


class WhatsAppHook(Protocol):
    max_body_bytes: int

    def verify_challenge(self, params: Mapping[str, str]) -> tuple[int, str]: ...

    def has_signature(self, headers: Mapping[str, str]) -> bool: ...

    async def receive_webhook(
        self, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, dict[str, Any]]: ...


router = APIRouter(tags=["webhooks"])

_UNSIGNED = {"error": {"code": "unauthorized", "message": "not a signed webhook request"}}


def _hook(request: Request) -> WhatsAppHook | None:
    hooks: Mapping[str, Any] = getattr(request.app.state, "hooks", {})
    found = hooks.get("whatsapp")
    return found if found is not None and hasattr(found, "verify_challenge") else None


@router.get(
    "/hooks/whatsapp",
    summary="WhatsApp webhook verification (hub.verify_token, answers hub.challenge)",
    responses={
        200: {
            "description": "The challenge, as plain text",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        },
        401: {"model": ErrorOut, "description": "Wrong verify token, or no WhatsApp adapter"},
    },
)
async def whatsapp_verify(request: Request) -> Response:
    hook = _hook(request)
    status, text = (401, "") if hook is None else hook.verify_challenge(request.query_params)
    if status != 200:
        return JSONResponse(
            {"error": {"code": "unauthorized", "message": "not a verification of this webhook"}},
            status_code=401,
        )
    return PlainTextResponse(text)


@router.post(
    "/hooks/whatsapp",
    summary="WhatsApp Cloud API webhook (verified by X-Hub-Signature-256)",
    responses={
        400: {"model": ErrorOut, "description": "Signed, but not a WhatsApp webhook (the field)"},
        401: {"model": ErrorOut, "description": "Unsigned or wrongly signed; nothing parsed"},
        413: {"model": ErrorOut, "description": "Over platforms.whatsapp.max_webhook_bytes"},
        503: {"model": ErrorOut, "description": "The gateway is stopping; Meta retries"},
    },
)
async def whatsapp_hook(request: Request) -> JSONResponse:
    hook = _hook(request)
    # The credential's presence is checked before a byte of the body is read.
    if hook is None or not hook.has_signature(request.headers):
        return JSONResponse(_UNSIGNED, status_code=401, headers={"Connection": "close"})
    limit = hook.max_body_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return _too_large(limit)
        chunks.append(chunk)
    status, payload = await hook.receive_webhook(request.headers, b"".join(chunks))
    return JSONResponse(payload, status_code=status)


def _too_large(limit: int) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": "payload_too_large",
                   "message": f"the webhook body is larger than {limit} bytes"}},
        status_code=413,
        headers={"Connection": "close"},
    )  # fmt: skip
