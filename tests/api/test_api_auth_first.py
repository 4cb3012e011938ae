"""With a token set, nothing but `/healthz` answers without it: the API's description and its
pages included, and before the body of the request is read, let alone parsed. The docs pages
load only what the gateway itself serves (no CDN)."""

from __future__ import annotations

import json
import re

import httpx
import pytest

from live_server import raw_connection, read_response, request_head, serving
from sessiongate import GatewayConfig
from sessiongate.api.app import create_app

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
DESCRIPTION_ROUTES = [
    "/openapi.json",
    "/docs",
    "/redoc",
    "/docs/oauth2-redirect",
    "/docs/assets/swagger-ui-bundle.js",
]


@pytest.fixture
def config() -> GatewayConfig:
    return GatewayConfig(api={"token": TOKEN})


@pytest.mark.parametrize("path", DESCRIPTION_ROUTES)
def test_the_description_and_its_pages_need_the_token(client, path):
    refused = client.get(path)
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "unauthorized"
    assert refused.headers["www-authenticate"] == "Bearer"
    assert client.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get(path, headers=AUTH).status_code == 200


def test_only_healthz_is_open(client):
    assert client.get("/healthz").status_code == 200
    # Not even the existence of a route is told without the token.
    assert client.get("/v1/nothing").status_code == 401
    assert client.get("/v1/nothing", headers=AUTH).status_code == 404


_REFERENCE = re.compile(r"""(?:src|href|spec-url)="([^"]+)"|url: '([^']+)'""")


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_docs_pages_load_nothing_from_elsewhere(client, page):
    html = client.get(page, headers=AUTH).text
    assert "://" not in html, "the page points outside the gateway"
    references = [a or b for a, b in _REFERENCE.findall(html)]
    assert any(r.endswith(".js") for r in references)
    assert "/openapi.json" in references
    for reference in references:
        assert reference.startswith("/"), reference
        assert not reference.startswith("//"), reference
        loaded = client.get(reference, headers=AUTH)
        assert loaded.status_code == 200, reference
        assert len(loaded.content) > 1000 or reference.endswith(".png"), reference


def test_the_swagger_bundle_is_swagger_ui(client):
    bundle = client.get("/docs/assets/swagger-ui-bundle.js", headers=AUTH)
    assert "javascript" in bundle.headers["content-type"]
    assert b"SwaggerUIBundle" in bundle.content[:2000]


class TestWithoutAToken:
    @pytest.fixture
    def config(self) -> GatewayConfig:
        return GatewayConfig()

    def test_the_docs_are_open(self, client):
        assert client.get("/docs").status_code == 200
        assert client.get("/openapi.json").json()["info"]["title"] == "sessiongate"


# Bodies that would each cost the gateway a parse (or a 400 / 413 that says it parsed them).
UNAUTHENTICATED_BODIES = {
    "broken JSON": b'{"chat_id": "a", "text": ',
    "deep JSON": b"[" * 100_000,
    "2 MiB": b'{"chat_id": "a", "text": "' + b"x" * (2 * 1024 * 1024) + b'"}',
    "UTF-16": json.dumps({"chat_id": "a", "text": "x"}).encode("utf-16"),
    "not JSON at all": b"\xff\xfe\x00",
}


@pytest.mark.parametrize("name", list(UNAUTHENTICATED_BODIES))
async def test_an_unauthenticated_body_is_401_over_a_real_socket(store, config, runner, name):
    await runner.start()
    try:
        async with serving(create_app(runner, store, config)) as server:
            assert server.bound is not None
            host, port = server.bound
            async with httpx.AsyncClient(base_url=f"http://{host}:{port}") as http:
                for headers in ({}, {"Authorization": "Bearer nope"}):
                    response = await http.post(
                        "/v1/messages",
                        content=UNAUTHENTICATED_BODIES[name],
                        headers={"Content-Type": "application/json", **headers},
                    )
                    assert response.status_code == 401, response.text
                    assert response.json()["error"]["code"] == "unauthorized"
                # The connection is still good for a request with the token.
                sent = await http.post(
                    "/v1/messages", json={"chat_id": "a", "text": "hi"}, headers=AUTH
                )
                assert sent.json()["reply"] == "echo: hi"
    finally:
        await runner.stop()
    assert len(store.list_sessions()) == 1


async def test_the_401_goes_out_before_the_body_has_arrived(store, config, runner):
    await runner.start()
    try:
        async with serving(create_app(runner, store, config)) as server:
            assert server.bound is not None
            async with raw_connection(*server.bound) as (reader, writer):
                headers = {"Content-Type": "application/json", "Content-Length": "100"}
                writer.write(request_head("POST", "/v1/messages", headers) + b'{"chat_id":')
                await writer.drain()
                # 89 bytes are still to come, and the answer is already here.
                response = await read_response(reader)
            assert response.status == 401
            assert response.json()["error"]["code"] == "unauthorized"
    finally:
        await runner.stop()
    assert store.list_sessions() == []
