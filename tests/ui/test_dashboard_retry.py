"""The composer against a gateway whose agent is the OpenAI-compatible one, talking to the
streaming fake server: a stream that breaks mid-way is retried, and the reply the composer
assembled from the deltas shows the text once (the `retry` event clears the partial text)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from playwright.sync_api import expect

from fake_openai import Broken, FakeOpenAI, Reply, Status
from sg_process import SyncGateway, clean_env
from test_dashboard import chat, key_of, open_session
from ui_harness import TOKEN, Api, Pages

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture(scope="module")
def model() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, model: FakeOpenAI) -> Iterator[SyncGateway]:
    """This module's own gateway (the shared one runs the echo agent)."""
    env = clean_env(
        SESSIONGATE_API__TOKEN=TOKEN,
        SESSIONGATE_AGENT__OPENAI__BASE_URL=model.base_url,
        SESSIONGATE_AGENT__OPENAI__MODEL="fake-model",
        SESSIONGATE_AGENT__OPENAI__RETRY_BACKOFF_SECONDS="0",
    )
    process = SyncGateway(tmp_path_factory.mktemp("ui-retry") / "home", env=env)
    try:
        yield process
    finally:
        process.stop()


def test_the_composer_shows_a_retried_reply_once(
    pages: Pages, gateway: SyncGateway, model: FakeOpenAI
) -> None:
    api = Api(gateway.url)
    chat_id = chat("retry")
    api.send(chat_id, "hello")
    page: Any = pages.new()
    open_session(page, pages.url, key_of(chat_id))
    model.script(Broken(["The answer ", "is "]), Reply("The answer is 42."))
    page.fill("#composer", "what is the answer?")
    page.click(".composer button[type=submit]")
    page.wait_for_selector(".message.assistant >> text=The answer is 42.")
    body = page.locator("body")
    expect(body).to_have_attribute("data-last-reply", "streamed")
    # The text the bubble assembled from the deltas, as it stood when `done` came: the
    # broken attempt's "The answer is " was cleared by the retry, not kept before the reply.
    expect(body).to_have_attribute("data-streamed-text", "The answer is 42.")
    api.client.close()


def test_a_failed_turn_looks_unlike_a_reply_and_the_model_is_named(
    pages: Pages, gateway: SyncGateway, model: FakeOpenAI
) -> None:
    api = Api(gateway.url)
    chat_id = chat("failing")
    key = key_of(chat_id)
    api.send(chat_id, "hello")
    model.script(Status(401, "bad key"))  # refused: the turn fails at once, with a notice
    assert api.send(chat_id, "and now?")["status"] == "failed"
    page: Any = pages.new()
    open_session(page, pages.url, key)
    failed = page.locator(".message.failed")
    expect(failed).to_have_count(1)
    expect(failed.locator(".badge")).to_have_text("turn failed")
    expect(failed.locator(".role")).to_have_text("gateway")
    # The reply before it is an ordinary one.
    expect(page.locator(".message.assistant:not(.failed)")).to_have_count(1)
    color = failed.evaluate("e => getComputedStyle(e).borderLeftColor")
    ordinary = page.locator(".message.assistant:not(.failed)").evaluate(
        "e => getComputedStyle(e).borderLeftColor"
    )
    assert color != ordinary
    expect(page.locator(".details dt:text-is('Model') + dd")).to_have_text("fake-model")
    # The list says the last thing that happened was a failure, not a reply.
    page.goto(f"{pages.url}/ui/#/")
    preview = page.locator(f'#session-list li[data-key="{key}"] .preview')
    expect(preview).to_contain_text("failed:")
    api.client.close()
