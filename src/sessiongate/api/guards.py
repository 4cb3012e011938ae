"""Refusals decided from a request's head alone, before anything reads its body.

Without `api.token` the API is open to whatever can reach the loopback address, and a browser
can be made to reach it from any web page. Two things keep such a page out:

- **The Host.** A page on `rebind.evil.example` whose name is made to resolve to 127.0.0.1
  (DNS rebinding) talks to the gateway as its own origin, so the browser lets it read every
  answer. It cannot change the `Host` its requests carry, though: `OpenModeGuardMiddleware`
  serves only a loopback name or address (`localhost`, `127.0.0.0/8`, `[::1]`, any port) or
  one of `api.allowed_hosts` (a reverse proxy's public name) and answers anything else with a
  421 `misdirected_request`.
- **Cross-site changes.** A form post or a `no-cors` fetch from another site needs no
  preflight, and the answer is not needed to do harm (a reset). A request that changes state
  (any method but GET, HEAD, OPTIONS) is refused with a 403 `cross_site_request` when the
  browser says it comes from another site (`Sec-Fetch-Site: cross-site` or `same-site`) or
  its `Origin` is not the gateway's own. A client that is not a browser sends neither header
  and is not affected. Platform webhooks (`/hooks/`) are not browsers' business and keep their
  own rules (api/body_gates.py), and so they are served under any `Host`: a proxy may pass
  them on under its own name, and a page gains nothing there without the platform's secret.

With a token both are unnecessary: a browser adds no bearer token on its own, and the
dashboard's cookie is SameSite=Strict with a CSRF token on every change. So the guard is only
installed on an open API, chosen once when the app is built.

`JsonBodyMiddleware` holds in both modes: a change to `/v1/...` that declares a
`Content-Type` must declare JSON, and one that carries a body must declare it (415
`unsupported_media_type`). A request with no body and no `Content-Type` (`curl -X POST`,
`DELETE`) is a request without a body; a form post with an empty body is refused, as its
`Content-Type` is a form's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from sessiongate.api.bind import is_loopback_host
from sessiongate.api.middleware import has_body, header, is_declared_json, refuse_unread

if TYPE_CHECKING:
    from collections.abc import Iterable

    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = [
    "JsonBodyMiddleware",
    "OpenModeGuardMiddleware",
    "cross_site_refusal",
    "host_refusal",
    "split_host",
]

_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_CROSS_SITE = frozenset({"cross-site", "same-site"})
# Platforms call these, not browsers; each route checks its platform's credential.
_HOOKS_PREFIX = "/hooks/"
_API_PREFIX = "/v1/"


def split_host(value: str) -> tuple[str, str | None]:
    """(`name`, `port` or None) of a `Host` value or an `api.allowed_hosts` entry, lower-case;
    an IPv6 literal keeps no brackets."""
    text = value.strip().lower()
    if text.startswith("["):
        end = text.find("]")
        if end == -1:
            return text, None
        rest = text[end + 1 :]
        return text[1:end], (rest[1:] if rest.startswith(":") else None)
    name, sep, port = text.rpartition(":")
    if not sep:
        return text, None
    return name, port


def _is_port(port: str | None) -> bool:
    # RFC 9110 allows an empty port after the colon.
    return port is None or port == "" or (port.isascii() and port.isdigit())


def host_refusal(host: str | None, allowed: Iterable[tuple[str, str | None]]) -> str | None:
    """Why an open API may not answer a request with this `Host`, or None if it may."""
    if host is None:
        # HTTP/1.0 may leave Host out; a browser never does, so no page can be behind it.
        return None
    name, port = split_host(host)
    if _is_port(port) and name:
        if is_loopback_host(name):
            return None
        for allowed_name, allowed_port in allowed:
            if name == allowed_name and (allowed_port is None or allowed_port == port):
                return None
    return (
        f"Host {host[:100]!r} is not this gateway: without api.token only loopback names "
        "(localhost, 127.0.0.1, [::1]) and api.allowed_hosts are served"
    )


def cross_site_refusal(
    site: str | None, origin: str | None, host: str, allowed_names: Iterable[str]
) -> str | None:
    """Why a state-changing request looks sent by another site, or None if it does not.

    `site` is `Sec-Fetch-Site`, `origin` the `Origin` header, `host` the request's `Host`
    (already accepted); an origin whose host is one of `allowed_names` is the gateway behind
    its reverse proxy, which may pass the gateway another `Host`.
    """
    if site is not None and site.strip().lower() in _CROSS_SITE:
        return f"a request from another site (Sec-Fetch-Site: {site.strip()[:20]}) is refused"
    if origin is None:
        return None
    parts = urlsplit(origin.strip())
    own = parts.scheme in ("http", "https") and (
        parts.netloc.lower() == host.strip().lower()
        or (parts.hostname is not None and parts.hostname in set(allowed_names))
    )
    if own:
        return None
    return f"a request from another origin ({origin.strip()[:100]}) is refused"


class OpenModeGuardMiddleware:
    """421 for a Host that is not this gateway's, 403 for a change sent by another site;
    installed only when no API token is configured (see the module docstring)."""

    def __init__(self, app: ASGIApp, *, allowed_hosts: Iterable[str], drain_budget: int) -> None:
        self.app = app
        self.allowed = [split_host(h) for h in allowed_hosts]
        self.allowed_names = frozenset(name for name, _ in self.allowed)
        self.drain_budget = drain_budget

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or scope["path"].startswith(_HOOKS_PREFIX):
            # A platform's webhook carries its own credential, whatever name a proxy gave it.
            await self.app(scope, receive, send)
            return
        host = header(scope, b"host")
        refusal = host_refusal(host, self.allowed)
        if refusal is not None:
            await self._refuse(scope, receive, send, 421, "misdirected_request", refusal)
            return
        method = scope.get("method", "GET")
        if scope["type"] == "websocket" or method not in _SAFE_METHODS:
            refusal = cross_site_refusal(
                header(scope, b"sec-fetch-site"),
                header(scope, b"origin"),
                host or "",
                self.allowed_names,
            )
            if refusal is not None:
                await self._refuse(scope, receive, send, 403, "cross_site_request", refusal)
                return
        await self.app(scope, receive, send)

    async def _refuse(
        self, scope: Scope, receive: Receive, send: Send, status: int, code: str, message: str
    ) -> None:
        await refuse_unread(
            scope, receive, send, status, code, message, drain_budget=self.drain_budget
        )


class JsonBodyMiddleware:
    """415 for a change to `/v1/...` whose body is not declared JSON (module docstring)."""

    def __init__(self, app: ASGIApp, *, drain_budget: int) -> None:
        self.app = app
        self.drain_budget = drain_budget

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["method"] in _BODY_METHODS
            and scope["path"].startswith(_API_PREFIX)
        ):
            declared = header(scope, b"content-type")
            if (declared is not None or has_body(scope)) and not (
                declared is not None and is_declared_json(scope)
            ):
                await refuse_unread(
                    scope,
                    receive,
                    send,
                    415,
                    "unsupported_media_type",
                    "send the body as JSON with Content-Type: application/json "
                    "(a request without a body needs no Content-Type)",
                    drain_budget=self.drain_budget,
                )
                return
        await self.app(scope, receive, send)
