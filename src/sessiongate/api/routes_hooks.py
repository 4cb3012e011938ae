"""`POST /hooks/<platform>`: platform webhooks on the gateway's own HTTP server.

These routes take no bearer token: each platform signs its requests its own way, and the
platform's adapter (`app.state.hooks[platform]`, set by `sessiongate run`) verifies that before
it parses anything. An unsigned or wrongly signed request is a 401 and its body is never parsed;
a platform with no webhook receiver running is a 404.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["WebhookReceiver", "router"]


class WebhookReceiver(Protocol):
    async def receive_webhook(
        self, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, dict[str, Any]]: ...


router = APIRouter(tags=["webhooks"])


@router.post(
    "/hooks/telegram",
    summary="Telegram webhook (verified by X-Telegram-Bot-Api-Secret-Token)",
    responses={401: {"description": "missing or wrong secret token; the body is not read"}},
)
async def telegram_hook(request: Request) -> JSONResponse:
    return await _dispatch(request, "telegram")


@router.post(
    "/hooks/slack/events",
    summary="Slack Events API and slash commands (verified by X-Slack-Signature)",
    responses={401: {"description": "missing, wrong or expired signature; the body is not parsed"}},
)
async def slack_hook(request: Request) -> JSONResponse:
    return await _dispatch(request, "slack")


async def _dispatch(request: Request, platform: str) -> JSONResponse:
    hooks: Mapping[str, WebhookReceiver] = getattr(request.app.state, "hooks", {})
    receiver = hooks.get(platform)
    if receiver is None:
        return JSONResponse(
            {"error": {"code": "not_found", "message": f"no {platform} webhook is running"}},
            status_code=404,
        )
    body = await request.body()
    status, payload = await receiver.receive_webhook(request.headers, body)
    return JSONResponse(payload, status_code=status)
