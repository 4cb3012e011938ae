"""Several agents behind one gateway: bindings route to an agent, the agent's id is its keys'
namespace, listings and search filter by agent, and each turn is priced by its model."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from fake_openai import FakeOpenAI
from sessiongate import GatewayConfig

if TYPE_CHECKING:
    from collections.abc import Iterator

PRICE = {"input_per_million": 3.0, "output_per_million": 15.0}


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def config(fake: FakeOpenAI) -> GatewayConfig:
    openai = {"kind": "openai", "base_url": fake.base_url, "api_key": "k"}
    return GatewayConfig(
        agents={
            "support": {**openai, "model": "priced-model"},
            "lab": {**openai, "model": "unpriced-model"},
        },
        bindings=[
            {"platform": "api", "chat_id": "vip", "agent": "support"},
            {"platform": "api", "chat_type": "group", "agent": "lab"},
        ],
        pricing={"priced-model": PRICE},
    )


def test_bindings_route_each_message_to_its_agents_namespace(send, fake):
    vip = send("hello there", chat_id="vip")
    assert vip["session_key"] == "agent:support:api:dm:vip"
    assert vip["reply"] == "model says: hello there"
    assert fake.requests[-1]["body"]["model"] == "priced-model"
    alice = send("hello there", chat_id="alice")
    assert alice["session_key"] == "agent:main:api:dm:alice"  # main's keys as before
    assert alice["reply"] == "echo: hello there"
    group = send("hi all", chat_id="room", chat_type="group", user_id="u1")
    assert group["session_key"].startswith("agent:lab:api:group:room")


def test_the_session_row_names_its_agent_and_cost(client, send, key_path):
    send("one", chat_id="vip")
    send("two", chat_id="vip")
    row = client.get(key_path("agent:support:api:dm:vip")).json()
    assert row["agent"] == "support"
    assert row["cost_status"] == "estimated"
    # The fake reports 10 prompt and 3 completion tokens a call.
    assert row["estimated_cost_usd"] == pytest.approx(2 * (10 * 3.0 + 3 * 15.0) / 1e6)
    group = send("x", chat_id="room", chat_type="group", user_id="u1")
    lab = client.get(key_path(group["session_key"])).json()
    assert (lab["agent"], lab["cost_status"], lab["estimated_cost_usd"]) == ("lab", "unknown", 0)
    send("y", chat_id="alice")
    main = client.get(key_path("agent:main:api:dm:alice")).json()
    assert (main["agent"], main["cost_status"]) == ("main", "estimated")  # echo costs nothing


def test_listing_and_search_filter_by_agent(client, send):
    send("needle in support", chat_id="vip")
    send("needle in main", chat_id="alice")
    listed = client.get("/v1/sessions", params={"agent": "support"}).json()
    assert [s["session_key"] for s in listed["sessions"]] == ["agent:support:api:dm:vip"]
    assert listed["total"] == 1
    main = client.get("/v1/sessions", params={"agent": "main"}).json()
    assert [s["session_key"] for s in main["sessions"]] == ["agent:main:api:dm:alice"]
    assert client.get("/v1/sessions", params={"agent": "nobody"}).json()["total"] == 0
    hits = client.get("/v1/search", params={"q": "needle", "agent": "support"}).json()
    assert {h["session_key"] for h in hits["results"]} == {"agent:support:api:dm:vip"}
    every = client.get("/v1/search", params={"q": "needle"}).json()
    assert len({h["session_key"] for h in every["results"]}) == 2


@pytest.mark.parametrize("bad", ["Support", "a:b", "x" * 40, ""])
def test_an_invalid_agent_filter_is_a_422(client, bad):
    for path in ("/v1/sessions", "/v1/search?q=x"):
        response = client.get(path, params={"agent": bad})
        assert response.status_code == 422, (path, response.text)
        assert response.json()["error"]["code"] == "invalid_request"
