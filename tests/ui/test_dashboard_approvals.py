"""The pending-approvals page in a real Chromium, against a gateway whose OpenAI-compatible
agent (talking to the fake model server) calls a tool that needs approval: the request comes
to the open page over the live feed, and the operator's decision on the page reaches the API
and lets the waiting turn finish (or tells the model the call was denied)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import pytest
from playwright.sync_api import expect

from fake_openai import Call, Calls, FakeOpenAI, Reply
from sg_process import SyncGateway, clean_env
from test_dashboard import chat, key_of
from ui_harness import TOKEN, Api, Pages

if TYPE_CHECKING:
    from collections.abc import Iterator

TESTS = Path(__file__).parents[1]


@pytest.fixture(scope="module")
def model() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, model: FakeOpenAI) -> Iterator[SyncGateway]:
    """This module's own gateway: `delete_*` tools wait for a decision."""
    path = os.pathsep.join(p for p in (str(TESTS), os.environ.get("PYTHONPATH", "")) if p)
    env = clean_env(
        PYTHONPATH=path,  # `sample_tools`, loaded by import path as a user's module would be
        SESSIONGATE_API__TOKEN=TOKEN,
        SESSIONGATE_AGENT__OPENAI__BASE_URL=model.base_url,
        SESSIONGATE_AGENT__OPENAI__MODEL="fake-model",
        SESSIONGATE_AGENT__OPENAI__MAX_RETRIES="0",
        SESSIONGATE_AGENT__OPENAI__TOOLS='["sample_tools:delete_file"]',
        SESSIONGATE_AGENT__APPROVALS__TOOLS='["delete_*"]',
    )
    process = SyncGateway(tmp_path_factory.mktemp("ui-approvals") / "home", env=env)
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def client(gateway: SyncGateway) -> Iterator[Api]:
    """The API of this module's gateway (the shared `api` fixture is the shared gateway's)."""
    api = Api(gateway.url)
    yield api
    api.client.close()


def ask_to_delete(api: Api, model: FakeOpenAI, chat_id: str, path: str, answer: str) -> int:
    model.script(
        Calls([Call("delete_file", json.dumps({"path": path}), id=f"call-{chat_id}")]),
        Reply(answer),
    )
    receipt = api.send(chat_id, f"please delete {path}", wait=False)
    turn_id: int = receipt["turn_id"]
    return turn_id


def test_a_requested_approval_appears_live_and_is_approved_from_the_page(
    pages: Pages, client: Api, model: FakeOpenAI
) -> None:
    api = client
    page: Any = pages.new()
    page.goto(f"{pages.url}/ui/#/approvals")
    expect(page.locator("#approval-list li").first).to_be_visible()
    expect(page.locator("#live")).to_have_text("live")
    chat_id = chat("approve")
    ask_to_delete(api, model, chat_id, "/srv/data", "deleted as asked")
    # No reload: the request comes over the live feed.
    item = page.locator("#approval-list li[data-approval]", has_text=key_of(chat_id))
    expect(item).to_have_count(1)
    expect(item.locator(".tool")).to_have_text("delete_file")
    expect(item).to_contain_text(key_of(chat_id))
    # The arguments exactly as the model sent them, which is what the decision binds to.
    expect(item.locator(".arguments")).to_have_text(json.dumps({"path": "/srv/data"}))
    expect(item.locator("time")).to_have_count(2)  # requested at, expires at
    approval_id = item.get_attribute("data-approval")
    item.get_by_role("button", name="Approve").click()
    expect(item).to_have_count(0)
    decided = api.client.get(f"/v1/approvals/{approval_id}").json()
    assert (decided["status"], decided["decided_by"]) == ("approved", "operator")
    # The waiting turn went on: the tool ran and the model's answer is in the transcript.
    page.goto(f"{pages.url}/ui/#/s/{quote(key_of(chat_id), safe='')}")
    page.wait_for_selector(".message.assistant >> text=deleted as asked")
    expect(page.locator(".message.tool pre")).to_have_text("deleted /srv/data")


def test_a_denied_approval_leaves_the_list_and_the_model_is_told(
    pages: Pages, client: Api, model: FakeOpenAI
) -> None:
    api = client
    chat_id = chat("deny")
    ask_to_delete(api, model, chat_id, "/srv/keep", "left it alone")
    page: Any = pages.new()
    page.goto(f"{pages.url}/ui/#/approvals")
    item = page.locator("#approval-list li[data-approval]", has_text=key_of(chat_id))
    expect(item).to_have_count(1)
    approval_id = item.get_attribute("data-approval")
    item.get_by_role("button", name="Deny").click()
    expect(item).to_have_count(0)
    assert api.client.get(f"/v1/approvals/{approval_id}").json()["status"] == "denied"
    page.goto(f"{pages.url}/ui/#/s/{quote(key_of(chat_id), safe='')}")
    page.wait_for_selector(".message.assistant >> text=left it alone")
    expect(page.locator(".message.tool pre")).not_to_have_text("deleted /srv/keep")


def test_an_approval_decided_elsewhere_leaves_the_open_page(
    pages: Pages, client: Api, model: FakeOpenAI
) -> None:
    chat_id = chat("elsewhere")
    ask_to_delete(client, model, chat_id, "/srv/other", "done elsewhere")
    page: Any = pages.new()
    page.goto(f"{pages.url}/ui/#/approvals")
    item = page.locator("#approval-list li[data-approval]", has_text=key_of(chat_id))
    expect(item).to_have_count(1)
    expect(page.locator("#live")).to_have_text("live")
    approval_id = item.get_attribute("data-approval")
    decided = client.client.post(f"/v1/approvals/{approval_id}", json={"decision": "approve"})
    assert decided.status_code == 200, decided.text
    # `approval.decided` on the feed: the page reads the list again without a reload.
    expect(item).to_have_count(0)
