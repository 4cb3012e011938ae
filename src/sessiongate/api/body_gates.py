"""Routes whose credential travels in the headers: checked before a byte of the body is read.

The bearer token is checked that way for the whole API (api/middleware.py). The routes it
leaves open carry a credential of their own, and each gets the same treatment here: a
`BodyGate` names a route, the check of its headers (`HeaderCheck`) and the largest body it
takes. `BodyGateMiddleware` runs the check first and answers a refusal at once, the body
unread (a stalled or oversized unsigned post is a 401 at once, never a 408 or a 413); the body
limit then applies to what the route reads (`BodyLimitMiddleware`'s `path_limits`). A path
under `/hooks/` that no gate names is a 404 at once.

The gates:

- each platform webhook (`HOOKS` in api/routes_hooks.py): the running receiver's
  `check_webhook_headers` (Telegram's secret token compared; Slack's timestamp within five
  minutes and a signature present, whose HMAC over the body the receiver checks once the body
  is in); no receiver running is a 401, as a wrong signature is. The body limit is the
  platform's largest event;
- the dashboard's sign-in and sign-out forms: posted from the gateway's own page (and, for
  sign-out, by a signed-in browser), at most 8 KiB, and sign-in attempts within the client's
  failure budget (api/auth_limits.py).

To add a webhook, add a `HookRoute` to `HOOKS` and give the adapter the two methods of
`WebhookReceiver`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

from starlette.datastructures import Headers

from sessiongate.api.middleware import refuse_unread

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["BodyGate", "BodyGateMiddleware", "HeaderCheck", "Refusal"]

# How much of a refused request's body is read and dropped to keep its connection: a
# refused platform request or form is small; anything larger closes the connection instead.
REFUSED_DRAIN_BYTES = 65_536
_CLOSED_PREFIXES = ("/hooks/",)


@dataclass(frozen=True, slots=True)
class Refusal:
    """An answer given instead of reading the body: `{"error": {code, message}}`."""

    status: int
    code: str
    message: str
    headers: dict[str, str] | None = None


# The check of one request's headers (the scope gives them, the client and the app): a
# refusal, or None to let the body be read.
HeaderCheck: TypeAlias = "Callable[[Scope, Headers], Refusal | None]"


@dataclass(frozen=True, slots=True)
class BodyGate:
    """`path` (exact) takes a body only after `check` passed, and at most `max_body_bytes`."""

    path: str
    check: HeaderCheck
    max_body_bytes: int
    methods: frozenset[str] = frozenset({"POST"})


class BodyGateMiddleware:
    """Runs the gate of a request's path before anything reads the body (module docstring)."""

    def __init__(self, app: ASGIApp, *, gates: Iterable[BodyGate]) -> None:
        self.app = app
        self.gates = {gate.path: gate for gate in gates}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        gate = self.gates.get(path)
        refusal = None
        if gate is None:
            if path.startswith(_CLOSED_PREFIXES):
                refusal = Refusal(404, "not_found", f"no webhook at {path[:100]}")
        elif scope["method"] in gate.methods:
            refusal = gate.check(scope, Headers(scope=scope))
        if refusal is None:
            await self.app(scope, receive, send)
            return
        await refuse_unread(
            scope,
            receive,
            send,
            refusal.status,
            refusal.code,
            refusal.message,
            drain_budget=REFUSED_DRAIN_BYTES,
            headers=refusal.headers,
        )
