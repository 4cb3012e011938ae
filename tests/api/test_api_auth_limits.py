"""Wrong credentials are limited per client address: after 10 failures within a minute every
further attempt from that address is a 429 with `Retry-After`, the right token included,
until the window moves on (time from the injected clock)."""

from __future__ import annotations

import httpx
import pytest

from sessiongate import GatewayConfig
from sessiongate.api.auth_limits import FAILURES_PER_WINDOW, FailureLimiter

TOKEN = "a-token-of-sixteen-chars"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
WRONG = {"Authorization": "Bearer wrong-token-guess"}
SAME_ORIGIN = {"Sec-Fetch-Site": "same-origin"}


@pytest.fixture
def config() -> GatewayConfig:
    return GatewayConfig(api={"token": TOKEN})


def test_wrong_bearer_tokens_are_limited_per_address(client, clock):
    for _ in range(FAILURES_PER_WINDOW):
        assert client.get("/v1/sessions", headers=WRONG).status_code == 401
    refused = client.get("/v1/sessions", headers=AUTH)
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "too_many_requests"
    assert refused.headers["retry-after"] == "60"
    # Still refused a little later, and the wait shrinks with the clock.
    clock.advance(45)
    again = client.post("/v1/messages", headers=AUTH, json={"chat_id": "a", "text": "x"})
    assert again.status_code == 429
    assert again.headers["retry-after"] == "15"
    # A request with no credential is no attempt: it gets its plain 401.
    assert client.get("/v1/sessions").status_code == 401
    clock.advance(15)
    assert client.get("/v1/sessions", headers=AUTH).status_code == 200


def test_failures_older_than_the_window_do_not_count(client, clock):
    for _ in range(FAILURES_PER_WINDOW - 1):
        assert client.get("/v1/sessions", headers=WRONG).status_code == 401
    clock.advance(61)
    for _ in range(FAILURES_PER_WINDOW - 1):
        assert client.get("/v1/sessions", headers=WRONG).status_code == 401
    assert client.get("/v1/sessions", headers=AUTH).status_code == 200


async def test_another_address_is_not_limited(app, runner, clock):
    await runner.start()
    try:
        guesser = httpx.ASGITransport(app=app, client=("203.0.113.9", 40000))
        operator = httpx.ASGITransport(app=app, client=("127.0.0.1", 40001))
        base = "http://127.0.0.1"
        async with (
            httpx.AsyncClient(transport=guesser, base_url=base) as bad,
            httpx.AsyncClient(transport=operator, base_url=base) as good,
        ):
            for _ in range(FAILURES_PER_WINDOW + 5):
                await bad.get("/v1/sessions", headers=WRONG)
            assert (await bad.get("/v1/sessions", headers=AUTH)).status_code == 429
            assert (await good.get("/v1/sessions", headers=AUTH)).status_code == 200
    finally:
        await runner.stop()


def test_wrong_sign_ins_are_limited_and_a_signed_in_dashboard_goes_on(client, clock):
    signed_in = client.post(
        "/ui/login", data={"token": TOKEN}, headers=SAME_ORIGIN, follow_redirects=False
    )
    assert signed_in.status_code == 303
    cookies = dict(signed_in.cookies)
    client.cookies.clear()
    for _ in range(FAILURES_PER_WINDOW):
        wrong = client.post(
            "/ui/login", data={"token": "guess"}, headers=SAME_ORIGIN, follow_redirects=False
        )
        assert wrong.headers["location"] == "/ui/login?error=1"
    refused = client.post(
        "/ui/login", data={"token": TOKEN}, headers=SAME_ORIGIN, follow_redirects=False
    )
    assert refused.status_code == 429
    assert int(refused.headers["retry-after"]) == 60
    # The browser that signed in before keeps working: it presents no new credential.
    client.cookies.update(cookies)
    assert client.get("/v1/sessions").status_code == 200
    client.cookies.clear()
    clock.advance(60)
    assert (
        client.post(
            "/ui/login", data={"token": TOKEN}, headers=SAME_ORIGIN, follow_redirects=False
        ).status_code
        == 303
    )


def test_the_limiter_remembers_a_bounded_number_of_addresses(clock):
    limiter = FailureLimiter(clock, limit=2, window_seconds=60, max_clients=3)
    for address in ("a", "b", "c", "d"):
        limiter.record_failure(address)
        limiter.record_failure(address)
    assert len(limiter) == 3
    assert limiter.retry_after("a") is None  # forgotten, the stalest first
    assert limiter.retry_after("d") == 60
    clock.advance(59.5)
    assert limiter.retry_after("d") == 1
    clock.advance(0.5)
    assert limiter.retry_after("d") is None
    assert len(limiter) == 2
