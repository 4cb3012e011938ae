"""`POST /hooks/<platform>`: platform webhooks on the gateway's own HTTP server.

These routes take no bearer token: each platform signs its requests its own way, and the
platform's adapter (`app.state.hooks[platform]`, set by `sessiongate run`) verifies that. What
its headers prove is checked before a byte of the body is read (`check_webhook_headers`, run by
api/body_gates.py), and what needs the body (Slack's HMAC) once it is in and before anything
parses it (`receive_webhook`). An unsigned or wrongly signed request is a 401 and its body is
never read or parsed; so is any request to a platform with no webhook receiver running (which
of the two it was is not told: it would say what the gateway runs). A path under `/hooks/`
that is not in `HOOKS` is a 404 at once.

A new platform's webhook is one more `HookRoute` in `HOOKS` (its path, platform name, largest
event and summary) and the two methods of `WebhookReceiver` on its adapter.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from sessiongate.api.body_gates import BodyGate, Refusal
from sessiongate.api.schemas import ErrorOut

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from starlette.datastructures import Headers
    from starlette.types import Scope

__all__ = ["HOOKS", "HookRoute", "WebhookReceiver", "hook_gates", "router"]

log = logging.getLogger(__name__)


class WebhookReceiver(Protocol):
    """What a platform adapter implements to take webhooks."""

    def check_webhook_headers(self, headers: Mapping[str, str]) -> str | None:
        """Why the request's headers alone already fail the platform's credential (missing,
        wrong, expired), or None; called before any of the body is read."""
        ...

    async def receive_webhook(
        self, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, dict[str, Any]]:
        """(status, JSON body) for one request: verified in full, then parsed and admitted."""
        ...


@dataclass(frozen=True, slots=True)
class HookRoute:
    """One webhook: where the platform posts, whose receiver takes it, its largest body."""

    path: str
    platform: str
    max_body_bytes: int
    summary: str


HOOKS = (
    # A Telegram update holds one message (4,096 characters of text or 1,024 of caption, with
    # its entities) and the one it replies to: tens of KiB at the very most.
    HookRoute(
        "/hooks/telegram",
        "telegram",
        262_144,
        "Telegram webhook (verified by X-Telegram-Bot-Api-Secret-Token)",
    ),
    # A Slack message is up to 40,000 characters, sent again inside its blocks, plus file and
    # profile metadata: a few hundred KiB in the worst case.
    HookRoute(
        "/hooks/slack/events",
        "slack",
        524_288,
        "Slack Events API and slash commands (verified by X-Slack-Signature, 5-minute window)",
    ),
    # A button press carries the message it was pressed on (the prompt's blocks) and the
    # presser: a few KiB, like the events above at most.
    HookRoute(
        "/hooks/slack/interactivity",
        "slack",
        524_288,
        "Slack interactivity: approval button presses (verified by X-Slack-Signature)",
    ),
    # A WhatsApp webhook batches a few messages or delivery reports (media comes by id, never
    # inline): a few KiB. `platforms.whatsapp.max_webhook_bytes` may lower the bound.
    HookRoute(
        "/hooks/whatsapp",
        "whatsapp",
        1_048_576,
        "WhatsApp Cloud API webhook (verified by X-Hub-Signature-256)",
    ),
)

_NOT_SIGNED = "not a signed webhook request"

_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "Signed, but the body is not the platform's event"},
    401: {"model": ErrorOut, "description": "Unsigned or wrongly signed; the body is not read"},
    413: {"model": ErrorOut, "description": "Signed, but larger than the platform's events"},
    503: {"model": ErrorOut, "description": "The gateway is stopping; the platform retries"},
}

router = APIRouter(tags=["webhooks"])


def _receiver(state: Any, platform: str) -> WebhookReceiver | None:
    hooks: Mapping[str, WebhookReceiver] = getattr(state, "hooks", {})
    return hooks.get(platform)


def _header_check(platform: str) -> Callable[[Scope, Headers], Refusal | None]:
    def check(scope: Scope, headers: Headers) -> Refusal | None:
        receiver = _receiver(scope["app"].state, platform)
        if receiver is None:
            return Refusal(401, "unauthorized", _NOT_SIGNED)
        check_headers = getattr(receiver, "check_webhook_headers", None)
        if check_headers is None:
            # Fail closed: a receiver that cannot check headers first would read unsigned bodies.
            log.error("webhook receiver has no check_webhook_headers", extra={"hook": platform})
            return Refusal(401, "unauthorized", _NOT_SIGNED)
        reason: str | None = check_headers(headers)
        if reason is not None:
            return Refusal(401, "unauthorized", reason)
        return None

    return check


def hook_gates() -> list[BodyGate]:
    """The gate of every webhook in `HOOKS` (api/body_gates.py)."""
    return [BodyGate(h.path, _header_check(h.platform), h.max_body_bytes) for h in HOOKS]


def _endpoint(path: str, platform: str) -> Callable[[Request], Awaitable[JSONResponse]]:
    async def hook(request: Request) -> JSONResponse:
        receiver = _receiver(request.app.state, platform)
        if receiver is None:
            return JSONResponse(
                {"error": {"code": "unauthorized", "message": _NOT_SIGNED}}, status_code=401
            )
        body = await request.body()
        status, payload = await receiver.receive_webhook(request.headers, body)
        return JSONResponse(payload, status_code=status)

    hook.__name__ = path.removeprefix("/hooks/").replace("/", "_") + "_hook"
    return hook


for _hook in HOOKS:
    router.add_api_route(
        _hook.path,
        _endpoint(_hook.path, _hook.platform),
        methods=["POST"],
        summary=_hook.summary,
        responses=_RESPONSES,
        response_class=JSONResponse,
    )
