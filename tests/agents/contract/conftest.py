"""The agent contract suite's gateway: one agent kind at a time, a real runner on a real
store, the model behind every kind the same fake OpenAI-compatible server."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from fake_openai import FakeOpenAI

FRAMEWORKS = Path(__file__).resolve().parents[1] / "frameworks"
# The kinds every agent runs the suite as, with the module each one needs.
KINDS = {
    "openai": "openai",
    "openai-agents": "agents",
    "pydantic-ai": "pydantic_ai",
    "langgraph": "langgraph",
}
ENTRIES = {
    "openai-agents": "bots:support_agent",
    "pydantic-ai": "bots:pydantic_agent",
    "langgraph": "bots:order_graph",
}


def agent_settings(kind: str, base_url: str) -> dict:
    if kind == "openai":
        return {
            "agent": {
                "openai": {
                    "base_url": base_url,
                    "model": "fake-model",
                    "max_retries": 0,
                    "tools": ["bots:lookup_order"],
                }
            }
        }
    return {"agents": {"main": {"kind": kind, "entry": ENTRIES[kind]}}}


@pytest.fixture(params=list(KINDS))
def kind(request) -> str:
    importlib.import_module(KINDS[request.param])  # installed with the dev extra
    return request.param


@pytest.fixture
def bots(monkeypatch):
    monkeypatch.syspath_prepend(str(FRAMEWORKS))
    sys.modules.pop("bots", None)
    module = importlib.import_module("bots")
    module.CALLS.clear()
    return module


@pytest.fixture
async def server(bots):
    with FakeOpenAI() as fake:
        bots.BASE_URL = fake.base_url
        yield fake
        for client in bots.CLIENTS:
            await client.aclose() if hasattr(client, "aclose") else await client.close()
        bots.CLIENTS.clear()
