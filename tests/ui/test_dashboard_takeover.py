"""The dashboard's Take over and Hand back: while a chat is taken over the agent does not
answer it, people's messages show as they arrive, and the composer is the reply box whose
text goes to the chat as the bot (stored as the assistant's message, marked operator)."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from test_dashboard import chat, key_of, open_session
from ui_harness import Api, Pages, quote


def test_take_over_reply_and_hand_back(pages: Pages, api: Api) -> None:
    chat_id = chat("takeover")
    key = key_of(chat_id)
    api.send(chat_id, "hello")
    page: Any = pages.new()
    open_session(page, pages.url, key)
    page.get_by_role("button", name="Take over").click()
    expect(page.locator(".session-head .badge", has_text="taken over")).to_have_count(1)
    expect(page.locator(".composer button[type=submit]")).to_have_text("Reply")
    taken_over = page.locator(".details dt", has_text="Taken over").locator(
        "xpath=following-sibling::dd[1]"
    )
    expect(taken_over).to_contain_text("by operator · ")
    expect(taken_over).to_contain_text("back to the agent")
    expect(taken_over).not_to_contain_text("[object")
    takeover = api.client.get(f"/v1/sessions/{quote(key)}/takeover").json()
    assert (takeover["taken_over"], takeover["taken_by"]) == (True, "operator")
    # A person writes meanwhile: stored, shown, not answered.
    assert api.send(chat_id, "is anyone there?")["status"] == "held"
    expect(page.locator(".message.user", has_text="is anyone there?")).to_have_count(1)
    page.fill("#composer", "Yes, a person here.")
    page.click(".composer button[type=submit]")
    mine = page.locator(".message.assistant", has_text="Yes, a person here.")
    expect(mine).to_have_count(1)
    expect(mine.locator(".operator-badge")).to_have_text("operator")
    events = api.client.get(f"/v1/sessions/{quote(key)}/transcript").json()["events"]
    assert [e["content"] for e in events if e.get("role")] == [
        "hello",
        "echo: hello",
        "is anyone there?",
        "Yes, a person here.",
    ]
    assert events[-1]["metadata"]["written_by"] == "operator"
    page.get_by_role("button", name="Hand back").click()
    expect(page.get_by_role("button", name="Take over")).to_have_count(1)
    expect(page.locator(".session-head .badge", has_text="taken over")).to_have_count(0)
    expect(page.locator(".composer button[type=submit]")).to_have_text("Send")
    # The operator answered last: the agent waits for the next message, and answers it.
    assert api.send(chat_id, "thanks")["reply"] == "echo: thanks"
