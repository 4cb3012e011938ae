"""Without a token the API is open on loopback, and a web page must not be able to use it:
a Host that is not a loopback name (DNS rebinding) is a 421, a change sent by another site a
403, and a change to `/v1/...` whose body is not declared JSON a 415."""

from __future__ import annotations

import pytest

from sessiongate import GatewayConfig

REBOUND = {"Host": "rebind.evil.example:8787"}
CROSS_SITE = {"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
KEY = "agent:main:api:dm:alice"


@pytest.fixture
def session(send, key_path) -> str:
    send("hello", chat_id="alice")
    return key_path(KEY)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/sessions"),
        ("GET", "/v1/sessions/agent%3Amain%3Aapi%3Adm%3Aalice/transcript"),
        ("POST", "/v1/messages"),
        ("GET", "/ui/session"),
        ("GET", "/ui/"),
        ("GET", "/openapi.json"),
    ],
)
def test_a_rebound_host_is_refused_everywhere(client, session, method, path):
    response = client.request(method, path, headers=REBOUND, json={"chat_id": "x", "text": "y"})
    assert response.status_code == 421, response.text
    error = response.json()["error"]
    assert error["code"] == "misdirected_request"
    assert "rebind.evil.example" in error["message"]
    # Nothing was sent, let alone answered.
    assert [r["session_key"] for r in client.get("/v1/sessions").json()["sessions"]] == [KEY]


@pytest.mark.parametrize(
    "host",
    ["localhost", "localhost:8787", "127.0.0.1", "127.0.0.1:1", "127.0.0.5:8787", "[::1]:8787"],
)
def test_loopback_names_are_served_with_any_port(client, host):
    assert client.get("/v1/sessions", headers={"Host": host}).status_code == 200


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1.evil.example", "localhost.evil.example", "0.0.0.0", "10.0.0.1", "[::2]", ""],
)
def test_names_that_only_look_local_are_refused(client, host):
    assert client.get("/v1/sessions", headers={"Host": host}).status_code == 421


def test_healthz_answers_only_its_own_host_too(client):
    assert client.get("/healthz", headers=REBOUND).status_code == 421


def test_webhooks_keep_their_own_rules_under_any_host(client):
    # A proxy may pass a platform's post on under its own name; the platform's secret decides.
    headers = {**REBOUND, **CROSS_SITE}
    response = client.post("/hooks/telegram", json={"update_id": 1}, headers=headers)
    assert response.status_code == 401
    assert client.post("/hooks/nothing", json={}, headers=headers).status_code == 404


class TestBehindAProxy:
    @pytest.fixture
    def config(self) -> GatewayConfig:
        return GatewayConfig(api={"allowed_hosts": ["Gateway.Example.com", "other.example:8443"]})

    def test_allowed_hosts_are_served(self, client):
        for host in ("gateway.example.com", "gateway.example.com:443", "other.example:8443"):
            assert client.get("/v1/sessions", headers={"Host": host}).status_code == 200, host

    def test_an_allowed_host_with_another_port_and_others_are_refused(self, client):
        for host in ("other.example:8444", "rebind.evil.example"):
            assert client.get("/v1/sessions", headers={"Host": host}).status_code == 421, host

    def test_the_proxys_origin_may_change_state(self, client, send, key_path):
        send("hello", chat_id="alice")
        response = client.post(
            key_path(KEY, "/reset"),
            json={},
            headers={"Origin": "https://gateway.example.com", "Sec-Fetch-Site": "same-origin"},
        )
        assert response.status_code == 200, response.text


def test_allowed_hosts_refuse_what_is_not_a_host_name():
    with pytest.raises(ValueError, match="not a host name"):
        GatewayConfig(api={"allowed_hosts": ["https://gateway.example.com/"]})


class TestWithAToken:
    @pytest.fixture
    def config(self) -> GatewayConfig:
        return GatewayConfig(api={"token": "a-token-of-sixteen-chars"})

    def test_any_host_is_served_as_before(self, client):
        auth = {"Authorization": "Bearer a-token-of-sixteen-chars"}
        response = client.get("/v1/sessions", headers={**REBOUND, **auth})
        assert response.status_code == 200
        assert client.get("/v1/sessions", headers=REBOUND).status_code == 401


@pytest.mark.parametrize("operation", ["/reset", "/compact", "/fork"])
def test_a_cross_site_form_post_with_an_empty_body_changes_nothing(
    client, session, operation, store
):
    before = store.list_sessions()
    response = client.post(session + operation, content=b"", headers={**FORM, **CROSS_SITE})
    assert response.status_code == 403, response.text
    assert response.json()["error"]["code"] == "cross_site_request"
    after = store.list_sessions()
    assert [(e.session_key, e.session_id) for e in after] == [
        (e.session_key, e.session_id) for e in before
    ]


@pytest.mark.parametrize(
    "headers",
    [
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},
        {"Origin": "http://evil.example"},
        {"Origin": "null"},
        {"Origin": "http://localhost:8787"},  # another origin on the same machine
        {"Origin": "http://127.0.0.1", "Sec-Fetch-Site": "cross-site"},
    ],
)
def test_a_change_from_another_site_is_refused_whatever_its_body(client, session, headers):
    for method in ("POST", "PATCH", "DELETE"):
        path = session + "/reset" if method == "POST" else session
        response = client.request(method, path, json={"pinned": True}, headers=headers)
        assert response.status_code == 403, (method, headers, response.text)
    assert client.get(session).json()["pinned"] is False


def test_the_gateways_own_page_and_clients_without_a_browser_may_change_state(client, session):
    own_page = {"Origin": "http://127.0.0.1", "Sec-Fetch-Site": "same-origin"}
    assert client.patch(session, json={"pinned": True}, headers=own_page).status_code == 200
    # curl and the CLI send neither header.
    assert client.patch(session, json={"pinned": False}).status_code == 200


def test_a_cross_site_read_is_not_refused_but_cannot_be_read_by_the_page(client, session):
    # Reads are the same-origin policy's job (no CORS headers are sent); refusing them would
    # break links into the dashboard.
    response = client.get(session, headers=CROSS_SITE)
    assert response.status_code == 200
    assert "access-control-allow-origin" not in response.headers


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/x-www-form-urlencoded", b""),
        ("application/x-www-form-urlencoded", b"mode=hard"),
        ("text/plain", b'{"mode": "hard"}'),
        ("multipart/form-data; boundary=x", b""),
        (None, b"{}"),  # a body must say what it is
    ],
)
def test_a_change_whose_body_is_not_declared_json_is_415(client, session, content_type, body):
    headers = {"Content-Type": content_type} if content_type else {}
    response = client.post(session + "/reset", content=body, headers=headers)
    assert response.status_code == 415, response.text
    assert response.json()["error"]["code"] == "unsupported_media_type"


def test_a_change_without_a_body_needs_no_content_type(client, session):
    assert client.post(session + "/compact").status_code == 200
    assert client.delete(session).status_code == 200


class TestJsonRuleWithAToken:
    @pytest.fixture
    def config(self) -> GatewayConfig:
        return GatewayConfig(api={"token": "a-token-of-sixteen-chars"})

    def test_the_json_rule_holds_with_a_token_after_the_token(self, client):
        auth = {"Authorization": "Bearer a-token-of-sixteen-chars"}
        form = client.post("/v1/messages", content=b"chat_id=a&text=b", headers=FORM)
        assert form.status_code == 401  # the token first
        form = client.post("/v1/messages", content=b"chat_id=a&text=b", headers={**FORM, **auth})
        assert form.status_code == 415
