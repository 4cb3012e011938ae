"""Routes with a credential of their own (platform webhooks, the dashboard's sign-in) check it
from the headers before a byte of the body is read, over a real socket: a stalled or oversized
unsigned post is refused at once (never a 408 after the body timeout, never a 413), and a path
under `/hooks/` that no webhook has is a 404 at once."""

from __future__ import annotations

import pytest

from live_server import raw_connection, read_response, request_head, serving
from sessiongate import GatewayConfig
from sessiongate.api.app import create_app
from sessiongate.api.routes_hooks import HOOKS

TOKEN = "a-token-of-sixteen-chars"
HOOK_PATHS = [hook.path for hook in HOOKS]


@pytest.fixture(params=["open", "token"])
def config(request) -> GatewayConfig:
    # Only the body timeout could end a read of a stalled body: an hour away.
    api: dict[str, object] = {"body_timeout_seconds": 3600}
    if request.param == "token":
        api["token"] = TOKEN  # webhooks bypass the token: their own check must hold
    return GatewayConfig(api=api)


@pytest.fixture
async def server(store, config, runner):
    await runner.start()
    try:
        async with serving(create_app(runner, store, config)) as server:
            yield server
    finally:
        await runner.stop()


async def _stalled(server, path: str, headers: dict[str, str] | None = None):
    """POST a JSON head announcing 1 MB and send 11 bytes of it; the answer, read at once."""
    async with raw_connection(*server.bound) as (reader, writer):
        head = {"Content-Type": "application/json", "Content-Length": "1000000", **(headers or {})}
        writer.write(request_head("POST", path, head) + b'{"update_id')
        await writer.drain()
        # A read of the body would wait an hour; read_response gives up long before.
        return await read_response(reader)


@pytest.mark.parametrize("path", HOOK_PATHS)
async def test_a_stalled_unsigned_hook_post_is_401_at_once(server, path, store):
    response = await _stalled(server, path)
    assert response.status == 401
    assert response.json()["error"]["code"] == "unauthorized"
    assert response.headers.get("connection") == "close"
    assert store.list_sessions() == []


@pytest.mark.parametrize("path", HOOK_PATHS)
async def test_a_2_mib_unsigned_hook_post_is_401_not_413(server, path):
    body = b'{"x": "' + b"y" * (2 * 1024 * 1024) + b'"}'
    async with raw_connection(*server.bound) as (reader, writer):
        head = {"Content-Type": "application/json", "Content-Length": str(len(body))}
        writer.write(request_head("POST", path, head))
        await writer.drain()
        response = await read_response(reader)
    assert response.status == 401


@pytest.mark.parametrize(
    "path", ["/hooks/discord", "/hooks/", "/hooks/telegram/extra", "/hooks/slack"]
)
async def test_an_unknown_hook_is_404_at_once(server, path):
    response = await _stalled(server, path)
    assert response.status == 404
    assert response.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize("path", ["/hooks/slack/events", "/hooks/slack/interactivity"])
async def test_a_signed_looking_slack_post_without_its_timestamp_is_401_at_once(server, path):
    signature = {"X-Slack-Signature": "v0=" + "0" * 64}
    response = await _stalled(server, path, signature)
    assert response.status == 401


class TestSignIn:
    @pytest.fixture
    def config(self) -> GatewayConfig:
        return GatewayConfig(api={"token": TOKEN, "body_timeout_seconds": 3600})

    async def test_a_sign_in_from_another_site_is_refused_before_the_form_is_read(self, server):
        headers = {"Sec-Fetch-Site": "cross-site", "Content-Type": "text/plain"}
        response = await _stalled(server, "/ui/login", headers)
        assert response.status == 403
        assert response.json()["error"]["code"] == "forbidden"

    async def test_a_sign_in_form_over_8_kib_is_413(self, server):
        async with raw_connection(*server.bound) as (reader, writer):
            body = b"token=" + b"x" * 9000
            head = {
                "Content-Type": "application/x-www-form-urlencoded",
                "Content-Length": str(len(body)),
            }
            writer.write(request_head("POST", "/ui/login", head) + body)
            response = await read_response(reader)
        assert response.status == 413

    async def test_a_sign_out_without_a_session_is_refused_before_the_form_is_read(self, server):
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        response = await _stalled(server, "/ui/logout", headers)
        assert response.status == 403
        assert response.json()["error"]["code"] == "csrf_failed"
