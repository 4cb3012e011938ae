"""A 10,000-entry transcript: the first screen shows the newest page, scrolling up loads more.

The time to the first screen is measured in the browser and printed (docs/DASHBOARD.md quotes
it); a unit test asserts no timing, only that the page loads in pages rather than whole.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from playwright.sync_api import expect

from conftest import TOKEN, Pages
from sessiongate import GatewayConfig, SessionSource, SessionStore
from sg_process import SyncGateway, clean_env

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

import pytest

ENTRIES = 10_000
KEY = "agent:main:api:dm:big"


def seed(home: Path) -> None:
    store = SessionStore(home / "sessions", GatewayConfig())
    try:
        entry = store.get_or_create_session(
            SessionSource(platform="api", chat_id="big", chat_type="dm", user_id="big")
        )
        messages = []
        for n in range(ENTRIES // 2):
            messages.append({"role": "user", "content": f"question {n}"})
            messages.append({"role": "assistant", "content": f"answer {n}"})
        store.append_messages(entry.session_id, messages)
    finally:
        store.close()


@pytest.fixture(scope="module")
def big_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SyncGateway]:
    home = tmp_path_factory.mktemp("ui-big") / "home"
    seed(home)
    process = SyncGateway(home, env=clean_env(SESSIONGATE_API__TOKEN=TOKEN))
    try:
        yield process
    finally:
        process.stop()


def test_a_long_transcript_opens_on_its_newest_page_and_pages_upward(
    browser: Any, big_gateway: SyncGateway
) -> None:
    tabs = Pages(browser, big_gateway.url)
    try:
        page = tabs.new()
        page.goto("about:blank")
        page.goto(f"{big_gateway.url}/ui/#/s/{KEY.replace(':', '%3A')}")
        page.wait_for_selector(".message.assistant >> text=answer 4999")
        # performance.now() counts from this document's navigation: a cold load of the page.
        first_screen_ms = page.evaluate("performance.now()")
        print(f"first screen of a {ENTRIES}-entry transcript: {first_screen_ms:.0f} ms")
        rendered = page.locator(".message").count()
        assert rendered < ENTRIES // 10  # one page, not the whole transcript
        page.locator(".sentinel button").click()
        expect(page.locator(".message")).to_have_count(rendered * 2)
        assert page.locator(".message .text").first.inner_text() == "question 4900"
    finally:
        tabs.close(None)
