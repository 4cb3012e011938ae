"""The agent contract suite's gateway: one agent kind at a time, a real runner on a real
store, the model behind every kind the same fake OpenAI-compatible server."""

from __future__ import annotations

import importlib
import sys

import pytest
from agent_kinds import FRAMEWORKS, KINDS

from fake_openai import FakeOpenAI


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
    module.SAVER.clear()
    return module


@pytest.fixture
async def server(bots):
    with FakeOpenAI() as fake:
        bots.BASE_URL = fake.base_url
        yield fake
        for client in bots.CLIENTS:
            await client.aclose() if hasattr(client, "aclose") else await client.close()
        bots.CLIENTS.clear()
