"""The operator dashboard, served under `/ui` by the gateway's own HTTP app.

The pages are static HTML and ES modules (`static/app.js`, and a module per page family:
`jobs.js`, `deliveries.js`, `approvals.js`) shipped in the package; they
call the same JSON routes as every other client, authenticated by a session cookie instead of a
bearer token, so no rule of the API is written twice. Nothing is fetched from outside the
gateway: the dashboard works offline, and the Content-Security-Policy forbids any other origin.
"""

from __future__ import annotations

from sessiongate.ui.routes import root_router, router
from sessiongate.ui.sessions import CSRF_HEADER, SESSION_COOKIE, UiSession, UiSessions

__all__ = ["CSRF_HEADER", "SESSION_COOKIE", "UiSession", "UiSessions", "root_router", "router"]
