"""`create_app`: the HTTP API over one runner and one store.

The app does not own the runner or the store: whoever builds it (`sessiongate run`, a test)
starts them before serving and stops them after the server has shut down, in that order.

Routes (all JSON; session keys percent-encoded in paths):

    POST   /v1/messages                         an inbound message on the api platform
    GET    /v1/sessions                         list rows, pinned first
    GET    /v1/sessions/{key}                   one row
    PATCH  /v1/sessions/{key}                   pin, archive, unread, label
    DELETE /v1/sessions/{key}                   delete (archive blob first)
    GET    /v1/sessions/{key}/transcript        ?branch=active|all
    GET    /v1/sessions/{key}/context           the next turn's model context
    POST   /v1/sessions/{key}/reset|rewind|fork|compact
    GET    /v1/sessions/{key}/branches          branch tips
    POST   /v1/sessions/{key}/branches/switch
    GET|POST|DELETE /v1/sessions/{key}/takeover  an operator answers instead of the agent
    POST   /v1/sessions/{key}/reply             the operator's reply in a session taken over
    GET    /v1/search                           ?q=&limit=
    GET    /v1/events                           the live feed (server-sent events)
    POST   /hooks/telegram                      platform webhook (signed by the platform)
    POST   /hooks/slack/events                  Slack Events API (signed by Slack)
    POST   /hooks/slack/interactivity           Slack button presses (signed by Slack)
    GET    /hooks/whatsapp                      WhatsApp webhook verification (verify token)
    POST   /hooks/whatsapp                      WhatsApp Cloud API webhook (signed by Meta)
    POST   /hooks/in/{name}                     inbound webhook (`hooks.routes`; HMAC or bearer)
    GET    /v1/ops                              running turns, queues, undelivered replies, health
    POST   /v1/ops/deliveries/{turn_id}/retry   send an undelivered reply again now
    POST   /v1/erasure                          forget one person everywhere (right to erasure)
    GET    /ui/...                              the operator dashboard (ui package)
    GET    /                                    a redirect to /ui/
    GET    /healthz                             liveness (no token needed)
    GET    /metrics                             Prometheus text format
    GET    /v1/instances                        the gateway instances sharing the database
    GET    /openapi.json, /docs, /redoc         the API's description, browsable offline
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Depends, FastAPI, Request, Response
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles

import sessiongate
from sessiongate import ui
from sessiongate.api import (
    routes_approvals,
    routes_deliveries,
    routes_erasure,
    routes_events,
    routes_hooks,
    routes_inbound,
    routes_jobs,
    routes_messages,
    routes_ops,
    routes_sessions,
    routes_takeover,
    routes_tree,
    routes_turns,
    routes_whatsapp,
)
from sessiongate.api.auth import require_operator
from sessiongate.api.auth_limits import FailureLimiter
from sessiongate.api.body_gates import BodyGateMiddleware
from sessiongate.api.docs import install_docs
from sessiongate.api.errors import CatchAllMiddleware, install_error_handlers
from sessiongate.api.guards import JsonBodyMiddleware, OpenModeGuardMiddleware
from sessiongate.api.metrics import CONTENT_TYPE_LATEST, ApiMetrics, LeaderCollector
from sessiongate.api.middleware import (
    BearerAuthMiddleware,
    BodyLimitMiddleware,
    RequestCounterMiddleware,
    SessionKeyPathMiddleware,
    UiHeadersMiddleware,
)
from sessiongate.api.responses import errors
from sessiongate.api.routes_hooks import hook_gates
from sessiongate.api.routes_inbound import inbound_gates
from sessiongate.api.schemas import HealthOut
from sessiongate.api.ui_gates import dashboard_gates
from sessiongate.api.uploads import UploadGate

if TYPE_CHECKING:
    from sessiongate.core.config import GatewayConfig
    from sessiongate.gateway.leadership import Leadership
    from sessiongate.gateway.runner import GatewayRunner
    from sessiongate.store.session_store import SessionStore

__all__ = ["create_app"]

_DESCRIPTION = """\
The sessiongate gateway: send messages to the agent, and inspect and manage its
conversations.

When `api.token` is configured, every route except `/healthz` needs
`Authorization: Bearer <token>`, this description and its pages included; a request without it
is a 401 before its body is read. Errors are `{"error": {"code", "message"}}` with a 4xx
status for any bad input; malformed JSON is a 400 `invalid_json`, a field of the wrong type or
out of range a 422 `invalid_request` (with `details`). Session keys go into paths
percent-encoded (`agent%3Amain%3Aapi%3Adm%3Aalice`).

A change under `/v1/` with a body must declare it JSON (`Content-Type: application/json`),
or it is a 415. Ten wrong tokens within a minute from one address make every further attempt
from it a 429 with `Retry-After`. Without a token, only loopback `Host`s (and
`api.allowed_hosts`) are served (421 otherwise), and a change sent by another site
(`Sec-Fetch-Site`, `Origin`) is a 403.
"""


def _health_router() -> APIRouter:
    router = APIRouter(tags=["health"])

    @router.get(
        "/healthz",
        response_model=HealthOut,
        responses={503: {"model": HealthOut, "description": "The store is closed"}},
        summary="Liveness: the process answers and the store is open",
    )
    async def healthz(request: Request) -> Response:
        store: SessionStore = request.app.state.store
        is_open = not store.closed
        body = HealthOut(
            status="ok" if is_open else "unavailable",
            store="open" if is_open else "closed",
            version=sessiongate.__version__,
        )
        return JSONResponse(body.model_dump(), status_code=200 if is_open else 503)

    @router.get(
        "/metrics",
        dependencies=[Depends(require_operator)],
        response_class=Response,
        responses={
            200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "Prometheus text"},
            **errors(401),
        },
        summary="Prometheus metrics",
    )
    async def metrics(request: Request) -> Response:
        api_metrics: ApiMetrics = request.app.state.metrics
        return Response(api_metrics.render(), media_type=CONTENT_TYPE_LATEST)

    @router.get(
        "/v1/instances",
        dependencies=[Depends(require_operator)],
        responses=errors(401),
        summary="The gateway instances sharing this database, their heartbeats and lanes",
    )
    async def instances(request: Request) -> dict[str, Any]:
        runner: GatewayRunner = request.app.state.runner
        listed = await asyncio.to_thread(runner.presence.instances, lanes=runner.statistics().lanes)
        leadership: Leadership | None = request.app.state.leadership
        if leadership is not None and leadership.ownership is None:
            # One instance on its own database leads what it runs; the database has no leases.
            for row in listed:
                row["leader_of"] = [n for n, leads in leadership.leading().items() if leads]
        return {"instances": listed}

    return router


def create_app(
    runner: GatewayRunner,
    store: SessionStore,
    config: GatewayConfig,
    *,
    leadership: Leadership | None = None,
) -> FastAPI:
    """The FastAPI app serving `runner` and `store` with `config` (token, body limits);
    `leadership` adds which singular connections this instance leads to the metrics."""
    app = FastAPI(
        title="sessiongate",
        version=sessiongate.__version__,
        description=_DESCRIPTION,
        # FastAPI's own pages load their scripts from a CDN; api/docs.py serves them offline.
        docs_url=None,
        redoc_url=None,
    )
    app.state.runner = runner
    app.state.store = store
    app.state.config = config
    app.state.metrics = ApiMetrics(runner.statistics, adapters=lambda: runner.adapters)
    app.state.leadership = leadership
    if leadership is not None:
        app.state.metrics.registry.register(LeaderCollector(leadership.leading))
    # Platform webhook receivers by platform name; `sessiongate run` fills it.
    app.state.hooks = {}
    # Bodies being read; the server closes it when it starts to stop (api/server.py).
    app.state.uploads = uploads = UploadGate(config.api.body_timeout_seconds)
    install_error_handlers(app)
    install_docs(app)
    app.include_router(_health_router())
    app.include_router(routes_messages.router)
    app.include_router(routes_sessions.router)
    app.include_router(routes_tree.router)
    app.include_router(routes_turns.router)
    app.include_router(routes_approvals.router)
    app.include_router(routes_takeover.router)
    app.include_router(routes_events.router)
    app.include_router(routes_hooks.router)
    app.include_router(routes_inbound.router)
    app.include_router(routes_whatsapp.router)
    app.include_router(routes_ops.router)
    app.include_router(routes_deliveries.router)
    app.include_router(routes_deliveries.webhook_router)
    app.include_router(routes_erasure.router)
    app.include_router(routes_jobs.router)
    app.state.ui_sessions = ui.UiSessions(store.clock)
    app.include_router(ui.router)
    app.include_router(ui.root_router)
    app.mount("/ui/static", StaticFiles(directory=ui.routes.static_dir()), name="ui-static")

    # Added last = outermost: the token is checked before anything reads the body, the body
    # limit runs before anything parses it, and the catch-all sits outside the routes so
    # nothing unexpected escapes as a bare 500.
    # Routes with a credential of their own check its headers before their body is read,
    # and take a body limit of their own (api/body_gates.py).
    limit = config.api.max_body_bytes
    app.state.auth_failures = failures = FailureLimiter(store.clock)
    gates = [
        *hook_gates(),
        *inbound_gates(config),
        *dashboard_gates(app.state.ui_sessions, failures),
    ]
    app.add_middleware(UiHeadersMiddleware, headers=ui.routes.SECURITY_HEADERS)
    app.add_middleware(CatchAllMiddleware)
    app.add_middleware(SessionKeyPathMiddleware)
    app.add_middleware(
        BodyLimitMiddleware,
        max_body_bytes=limit,
        uploads=uploads,
        path_limits={gate.path: gate.max_body_bytes for gate in gates},
    )
    app.add_middleware(BodyGateMiddleware, gates=gates)
    app.add_middleware(JsonBodyMiddleware, drain_budget=limit)
    app.add_middleware(
        BearerAuthMiddleware,
        token=config.api.token,
        max_body_bytes=limit,
        ui_sessions=app.state.ui_sessions,
        failures=failures,
    )
    if config.api.token is None:
        # An open API answers only its own Host and its own pages (api/guards.py).
        app.add_middleware(
            OpenModeGuardMiddleware, allowed_hosts=config.api.allowed_hosts, drain_budget=limit
        )
    app.add_middleware(RequestCounterMiddleware, counter=app.state.metrics.http_requests)
    return app
