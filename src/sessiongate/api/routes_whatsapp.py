"""`GET /hooks/whatsapp`: the WhatsApp Cloud API webhook's one-time verification.

No bearer token: Meta sends `hub.mode=subscribe`, `hub.verify_token` and `hub.challenge`; the
right token gets the challenge back as plain text, anything else a 401, like every webhook
refusal (with no WhatsApp adapter running too: which of the two it was is not told). The
`POST` that carries messages and delivery reports is one of the webhooks of
api/routes_hooks.py: refused (401) without an `X-Hub-Signature-256` header before its body is
read, then bounded by `platforms.whatsapp.max_webhook_bytes` (413) and verified by its HMAC
before anything is parsed.
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
    def verify_challenge(self, params: Mapping[str, str]) -> tuple[int, str]: ...


router = APIRouter(tags=["webhooks"])


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
