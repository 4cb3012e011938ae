from __future__ import annotations

import pytest

from sessiongate import GatewayConfig
from sessiongate.api.bind import UnsafeBindError, check_bind_address, is_loopback_host

TOKEN = "s3cret-token"


class TestWithAToken:
    @pytest.fixture
    def config(self) -> GatewayConfig:
        return GatewayConfig(api={"token": TOKEN})

    @pytest.mark.parametrize(
        ("method", "path"),
        [
            ("GET", "/v1/sessions"),
            ("GET", "/v1/sessions/agent%3Amain%3Aapi%3Adm%3Aa"),
            ("GET", "/v1/search?q=x"),
            ("POST", "/v1/messages"),
            ("POST", "/v1/sessions/agent%3Amain%3Aapi%3Adm%3Aa/rewind"),
            ("GET", "/metrics"),
        ],
    )
    def test_every_route_but_healthz_needs_the_token(self, client, method, path):
        response = client.request(method, path, json={"chat_id": "a", "text": "x"})
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "unauthorized"
        assert response.headers["www-authenticate"] == "Bearer"

    def test_a_wrong_token_or_scheme_is_refused(self, client):
        for header in (f"Bearer {TOKEN}x", f"Basic {TOKEN}", TOKEN, "Bearer"):
            response = client.get("/v1/sessions", headers={"Authorization": header})
            assert response.status_code == 401, header

    def test_the_right_token_is_let_in(self, client):
        headers = {"Authorization": f"Bearer {TOKEN}"}
        assert client.get("/v1/sessions", headers=headers).status_code == 200
        sent = client.post("/v1/messages", json={"chat_id": "a", "text": "x"}, headers=headers)
        assert sent.json()["status"] == "replied"
        assert client.get("/metrics", headers=headers).status_code == 200

    def test_healthz_needs_no_token(self, client):
        assert client.get("/healthz").json()["status"] == "ok"


def test_without_a_token_the_routes_are_open(client):
    assert client.get("/v1/sessions").status_code == 200


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.1", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.5", False),
        ("example.org", False),
    ],
)
def test_loopback_hosts(host, loopback):
    assert is_loopback_host(host) is loopback


def test_a_public_address_needs_a_token():
    with pytest.raises(UnsafeBindError, match="without an API token"):
        check_bind_address("0.0.0.0", GatewayConfig())
    check_bind_address("0.0.0.0", GatewayConfig(api={"token": "x" * 16}))
    check_bind_address("127.0.0.1", GatewayConfig())


def test_a_public_address_refuses_a_token_shorter_than_16_characters():
    short = "Fifteen-chars!!"
    assert len(short) == 15
    with pytest.raises(UnsafeBindError) as refused:
        check_bind_address("0.0.0.0", GatewayConfig(api={"token": short}))
    message = refused.value.message
    assert "15 characters" in message
    assert "at least 16" in message
    assert "guessed" in message
    assert short not in message
    assert "\n" not in message
    # On loopback a short token (or none) is still the operator's choice.
    check_bind_address("127.0.0.1", GatewayConfig(api={"token": short}))
    check_bind_address("::1", GatewayConfig(api={"token": "abc"}))
