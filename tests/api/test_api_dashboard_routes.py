"""What the dashboard needs of the API: cookie sign-in with CSRF, list filters, transcript
pages, and the operations summary. (The pages themselves are tested in a browser, tests/ui.)"""

from __future__ import annotations

import pytest

from sessiongate import GatewayConfig

TOKEN = "s3cret-token"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


class TestSignIn:
    @pytest.fixture
    def config(self) -> GatewayConfig:
        return GatewayConfig(api={"token": TOKEN})

    def sign_in(self, client) -> str:
        response = client.post("/ui/login", data={"token": TOKEN}, follow_redirects=False)
        assert response.status_code == 303
        assert response.headers["location"] == "/ui/"
        cookie = response.headers["set-cookie"]
        assert "HttpOnly" in cookie
        assert "SameSite=strict" in cookie or "SameSite=Strict" in cookie
        info = client.get("/ui/session").json()
        return str(info["csrf_token"])

    def test_pages_need_a_sign_in(self, client):
        response = client.get("/ui/", follow_redirects=False)
        assert response.status_code == 303
        assert response.headers["location"] == "/ui/login"
        assert client.get("/ui/session").status_code == 401

    def test_a_wrong_token_is_refused_without_echoing_it(self, client):
        response = client.post("/ui/login", data={"token": "guess"}, follow_redirects=False)
        assert response.headers["location"] == "/ui/login?error=1"
        assert "set-cookie" not in response.headers

    def test_a_sign_in_from_another_site_is_refused(self, client):
        response = client.post(
            "/ui/login",
            data={"token": TOKEN},
            headers={"Sec-Fetch-Site": "cross-site"},
            follow_redirects=False,
        )
        assert response.status_code == 403

    def test_the_cookie_reads_and_with_its_csrf_token_writes(self, client):
        sent = client.post("/v1/messages", json={"chat_id": "a", "text": "hi"}, headers=BEARER)
        assert sent.status_code == 200
        csrf = self.sign_in(client)
        path = "/v1/sessions/agent%3Amain%3Aapi%3Adm%3Aa"
        assert client.get(path).status_code == 200
        refused = client.patch(path, json={"pinned": True})
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "csrf_failed"
        assert client.get(path).json()["pinned"] is False
        wrong = client.patch(path, json={"pinned": True}, headers={"X-CSRF-Token": csrf + "x"})
        assert wrong.status_code == 403
        done = client.patch(path, json={"pinned": True}, headers={"X-CSRF-Token": csrf})
        assert done.json()["pinned"] is True

    def test_pages_carry_a_strict_content_security_policy(self, client):
        self.sign_in(client)
        for path in ("/ui/", "/ui/login", "/ui/static/app.js"):
            response = client.get(path)
            assert "script-src 'self'" in response.headers["content-security-policy"], path
            assert "unsafe-inline" not in response.headers["content-security-policy"]
            assert response.headers["x-frame-options"] == "DENY"

    def test_sign_out_needs_the_csrf_token_and_ends_the_session(self, client):
        csrf = self.sign_in(client)
        assert client.post("/ui/logout", data={}).status_code == 403
        out = client.post("/ui/logout", data={"csrf_token": csrf}, follow_redirects=False)
        assert out.status_code == 303
        assert client.get("/v1/sessions").status_code == 401


def test_without_a_token_the_dashboard_opens_a_session_itself(client):
    assert client.get("/ui/", follow_redirects=False).status_code == 200
    info = client.get("/ui/session").json()
    assert info["auth"] == "open"
    assert info["csrf_token"]


def test_list_filters_by_platform_pinned_and_unread(client, send, key_path):
    for chat in ("a", "b", "c"):
        send("hello", chat_id=chat)
    client.patch(key_path("agent:main:api:dm:b"), json={"pinned": True})
    client.patch(key_path("agent:main:api:dm:c"), json={"unread": True})

    def keys(query: str) -> list[str]:
        return [r["session_key"] for r in client.get(f"/v1/sessions?{query}").json()["sessions"]]

    assert keys("pinned=true") == ["agent:main:api:dm:b"]
    assert keys("unread=true") == ["agent:main:api:dm:c"]
    assert sorted(keys("unread=false")) == ["agent:main:api:dm:a", "agent:main:api:dm:b"]
    assert len(keys("platform=api")) == 3
    assert keys("platform=telegram") == []
    assert client.get("/v1/sessions?pinned=maybe").status_code == 422


def test_transcript_pages_backwards_from_the_newest(client, send, key_path):
    for n in range(5):
        send(f"message {n}", chat_id="pages")
    path = key_path("agent:main:api:dm:pages", "/transcript")
    newest = client.get(f"{path}?limit=4").json()
    assert [e["content"] for e in newest["events"]] == [
        "message 3",
        "echo: message 3",
        "message 4",
        "echo: message 4",
    ]
    assert newest["has_more"] is True
    older = client.get(f"{path}?limit=4&before={newest['events'][0]['id']}").json()
    assert [e["content"] for e in older["events"]][-1] == "echo: message 2"
    whole = client.get(path).json()
    assert whole["has_more"] is False
    assert len(whole["events"]) == 10
    missing = client.get(f"{path}?limit=4&before=999999")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "entry_not_found"


def test_operations_lists_lanes_deliveries_and_health(client, send):
    send("hello", chat_id="ops")
    ops = client.get("/v1/ops").json()
    assert ops["verdict"] == "healthy"
    assert {c["name"] for c in ops["health"]} >= {"search index", "sessions.json mirror"}
    assert ops["undelivered_total"] == 0
    assert ops["lanes"] == []
    refused = client.post("/v1/ops/deliveries/12345/retry")
    assert refused.status_code == 404
    assert refused.json()["error"]["code"] == "turn_not_found"
