"""The browsable API reference, `/docs` (Swagger UI) and `/redoc`, served without a CDN.

FastAPI's own pages load Swagger UI and ReDoc from a CDN, so on a machine without internet
they are blank. Here the pages load the bundles shipped by the `fastapi-offline` package
(Swagger UI, its CSS, ReDoc and a favicon, under its `static/` folder), mounted at
`/docs/assets`. The pages, their assets and `/openapi.json` need the token like every other
route (api/auth.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import Request  # noqa: TC002  # FastAPI reads the handlers' annotations
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse  # noqa: TC002
from fastapi.staticfiles import StaticFiles

if TYPE_CHECKING:
    from fastapi import FastAPI

__all__ = ["ASSETS_PATH", "DOCS_PATH", "OAUTH2_REDIRECT_PATH", "REDOC_PATH", "install_docs"]

DOCS_PATH = "/docs"
REDOC_PATH = "/redoc"
OAUTH2_REDIRECT_PATH = "/docs/oauth2-redirect"
ASSETS_PATH = "/docs/assets"

# Swagger UI would send the description to an online validator for its badge.
_SWAGGER_PARAMETERS = {"validatorUrl": None}


def install_docs(app: FastAPI) -> None:
    """Add the docs pages and their assets to `app` (built with `docs_url=None`,
    `redoc_url=None`, so FastAPI adds none of its own)."""
    # Found by its import spec, not imported: the package's code is not used here.
    assets = StaticFiles(packages=[("fastapi_offline", "static")])
    app.mount(ASSETS_PATH, assets, name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"

    def asset(request: Request, name: str) -> str:
        return f"{request.scope.get('root_path', '')}{ASSETS_PATH}/{name}"

    @app.get(DOCS_PATH, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=f"{request.scope.get('root_path', '')}{openapi_url}",
            title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=OAUTH2_REDIRECT_PATH,
            swagger_js_url=asset(request, "swagger-ui-bundle.js"),
            swagger_css_url=asset(request, "swagger-ui.css"),
            swagger_favicon_url=asset(request, "favicon.png"),
            swagger_ui_parameters=_SWAGGER_PARAMETERS,
        )

    @app.get(OAUTH2_REDIRECT_PATH, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get(REDOC_PATH, include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        return get_redoc_html(
            openapi_url=f"{request.scope.get('root_path', '')}{openapi_url}",
            title=f"{app.title} - ReDoc",
            redoc_js_url=asset(request, "redoc.standalone.js"),
            redoc_favicon_url=asset(request, "favicon.png"),
            with_google_fonts=False,
        )
