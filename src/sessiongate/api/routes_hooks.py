"""`POST /hooks/<platform>`: platform webhooks on the gateway's own HTTP server.

These routes take no bearer token: each platform signs its requests its own way, and the
platform's adapter (`app.state.hooks[platform]`, set by `sessiongate run`) verifies that before
it parses anything. An unsigned or wrongly signed request is a 401 and its body is never
parsed; so is any request to a platform with no webhook receiver running (which of the two it
was is not told: it would say what the gateway runs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from sessiongate.api.schemas import ErrorOut

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["WebhookReceiver", "router"]


class WebhookReceiver(Protocol):
    async def receive_webhook(
        self, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, dict[str, Any]]: ...


router = APIRouter(tags=["webhooks"])


_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "Signed, but the body is not the platform's event"},
    401: {"model": ErrorOut, "description": "Unsigned or wrongly signed; the body is not read"},
    503: {"model": ErrorOut, "description": "The gateway is stopping; the platform retries"},
}


@router.post(
    "/hooks/telegram",
    summary="Telegram webhook (verified by X-Telegram-Bot-Api-Secret-Token)",
    responses=_RESPONSES,
)
async def telegram_hook(request: Request) -> JSONResponse:
    return await _dispatch(request, "telegram")


@router.post(
    "/hooks/slack/events",
    summary="Slack Events API and slash commands (verified by X-Slack-Signature, 5-minute window)",
    responses=_RESPONSES,
)
async def slack_hook(request: Request) -> JSONResponse:
    return await _dispatch(request, "slack")


async def _dispatch(request: Request, platform: str) -> JSONResponse:
    hooks: Mapping[str, WebhookReceiver] = getattr(request.app.state, "hooks", {})
    receiver = hooks.get(platform)
    if receiver is None:
        return JSONResponse(
            {"error": {"code": "unauthorized", "message": "not a signed webhook request"}},
            status_code=401,
        )
    body = await request.body()
    status, payload = await receiver.receive_webhook(request.headers, body)
    return JSONResponse(payload, status_code=status)
