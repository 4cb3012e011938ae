"""A 10,000-entry transcript: the first screen shows the newest page, scrolling up loads more.

The time to the first screen is measured in the browser and printed (docs/DASHBOARD.md quotes
it); a unit test asserts no timing, only that the page loads in pages rather than whole.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sessiongate import GatewayConfig, SessionSource, SessionStore
from sg_process import SyncGateway, clean_env
from ui_harness import TOKEN, Pages

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
        messages = page.locator(".message")
        assert messages.count() < ENTRIES // 10  # pages, not the whole transcript
        # Scrolling up (the top sentinel in view) loads earlier pages, oldest first on screen.
        for _ in range(200):  # a hang guard: each round waits at most 50 ms for a page
            if messages.count() >= 400:
                break
            page.locator(".sentinel").scroll_into_view_if_needed()
            page.wait_for_timeout(50)
        # Counted and read in one step of the page: a page still on its way may land between
        # two separate reads.
        shown, first = page.evaluate(
            "() => { const all = document.querySelectorAll('.message');"
            " return [all.length, all[0].querySelector('.text').innerText]; }"
        )
        assert first == f"question {(ENTRIES - shown) // 2}"
    finally:
        tabs.close(None)
