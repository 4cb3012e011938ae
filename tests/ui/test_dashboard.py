"""The dashboard in a real Chromium against a real gateway process.

Each test uses chats of its own (the gateway is shared by the module), arranges state through
the JSON API, acts through the page as an operator would, and checks both the page and the API.
"""

from __future__ import annotations

import re
import uuid
from typing import Any
from urllib.parse import quote

from playwright.sync_api import expect

from ui_harness import TOKEN, Api, Pages


def chat(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def key_of(chat_id: str) -> str:
    return f"agent:main:api:dm:{chat_id}"


def open_session(page: Any, url: str, key: str) -> None:
    page.goto(f"{url}/ui/#/s/{quote(key, safe='')}")
    page.wait_for_selector(".message.user")


# ----------------------------------------------------------------------------- sign-in


def test_sign_in_sets_a_strict_http_only_cookie_and_never_puts_the_token_in_a_url(
    pages: Pages,
) -> None:
    page = pages.new(sign_in=False)
    page.goto(f"{pages.url}/ui/")
    assert page.url.endswith("/ui/login")
    page.fill("#token", "not-the-token")
    page.click("button[type=submit]")
    page.wait_for_selector("#login-error:not([hidden])")
    assert "not-the-token" not in page.url
    pages.sign_in(page)
    assert TOKEN not in page.url
    cookie = next(c for c in page.context.cookies() if c["name"] == "sessiongate_ui")
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict"
    assert TOKEN not in cookie["value"]


def test_the_api_refuses_the_dashboard_cookie_without_its_csrf_token(
    pages: Pages, api: Api
) -> None:
    chat_id = chat("csrf")
    api.send(chat_id, "hello")
    page = pages.new()
    path = f"/v1/sessions/{quote(key_of(chat_id), safe='')}"
    status = page.evaluate(
        """async (path) => (await fetch(path, {method: "PATCH",
            headers: {"Content-Type": "application/json"},
            body: JSON.stringify({pinned: true})})).status""",
        path,
    )
    assert status == 403
    assert api.row(key_of(chat_id))["pinned"] is False
    # The same request with the page's token goes through: the refusal was the CSRF check.
    reads = page.evaluate("async (path) => (await fetch(path)).status", path)
    assert reads == 200
    logout = page.evaluate("async () => (await fetch('/ui/logout', {method: 'POST'})).status")
    assert logout == 403


# ----------------------------------------------------------------------------- sessions


def test_list_search_and_filters(pages: Pages, api: Api) -> None:
    word = f"pineapple{uuid.uuid4().hex[:6]}"
    found, pinned = chat("find"), chat("pin")
    api.send(found, f"do you like {word}?")
    api.send(pinned, "pin me")
    api.patch(key_of(pinned), pinned=True)
    page = pages.new()
    page.wait_for_selector("#session-list li")
    # Pinned first.
    assert page.locator("#session-list li").first.get_attribute("data-key") == key_of(pinned)
    page.fill("#search", word)
    page.press("#search", "Enter")
    page.wait_for_selector(".hit")
    hits = page.locator(".hit .title").all_inner_texts()
    assert set(hits) == {key_of(found)}  # the question and its echo
    page.goto(f"{pages.url}/ui/#/?pinned=true")
    page.wait_for_selector(f'#session-list li[data-key="{key_of(pinned)}"]')
    keys = [li.get_attribute("data-key") for li in page.locator("#session-list li").all()]
    assert key_of(found) not in keys


def test_a_message_over_the_api_appears_in_the_open_list(pages: Pages, api: Api) -> None:
    page = pages.new()
    page.wait_for_selector("#session-list")
    newcomer = chat("live")
    api.send(newcomer, "I just arrived")
    page.wait_for_selector(f'#session-list li[data-key="{key_of(newcomer)}"]', timeout=20_000)
    # It came over the event feed, not the polling fallback.
    expect(page.locator("#live")).to_have_text("live")


def test_open_a_session_shows_its_row_and_transcript(pages: Pages, api: Api) -> None:
    chat_id = chat("open")
    api.send(chat_id, "first question")
    api.send(chat_id, "second question")
    page = pages.new()
    open_session(page, pages.url, key_of(chat_id))
    texts = page.locator(".message .text").all_inner_texts()
    assert texts == [
        "first question",
        "echo: first question",
        "second question",
        "echo: second question",
    ]
    details = page.locator(".details").inner_text()
    assert api.row(key_of(chat_id))["session_id"] in details


# ------------------------------------------------------------------------- tree actions


def test_rewind_fork_and_switch_branches(pages: Pages, api: Api) -> None:
    chat_id = chat("tree")
    key = key_of(chat_id)
    api.send(chat_id, "one")
    api.send(chat_id, "two")
    page = pages.new()
    open_session(page, pages.url, key)
    # Rewind to "two": it leaves the transcript and lands in the composer.
    page.locator(".message.user").nth(1).get_by_role("button", name="Rewind to here").click()
    expect(page.locator(".message")).to_have_count(2)
    assert page.input_value("#composer") == "two"
    page.fill("#composer", "two, again")
    page.click(".composer button[type=submit]")
    page.wait_for_selector(".message.assistant >> text=echo: two, again")
    branches = page.locator(".branch")
    assert branches.count() == 2
    # Switch back to the first branch.
    page.locator(".branch:not(.active)").get_by_role("button", name="Switch").click()
    expect(page.locator(".transcript")).not_to_contain_text("two, again")
    expect(page.locator(".message.assistant").last).to_have_text(re.compile("echo: two$"))
    # Fork from "one": the child opens with the message in its composer.
    page.locator(".message.user").first.get_by_role("button", name="Fork from here").click()
    expect(page.locator(".session-head h1")).not_to_have_text(key)
    expect(page.locator("#composer")).to_have_value("one")
    assert "%25f" in page.url  # the child's key is a fork key (`%f<hex>`)


def test_compact(pages: Pages, api: Api) -> None:
    chat_id = chat("compact")
    for n in range(6):
        api.send(chat_id, f"message number {n} " + "words " * 20)
    page = pages.new()
    open_session(page, pages.url, key_of(chat_id))
    page.get_by_role("button", name="Compact").click()
    page.wait_for_selector("#toast >> text=Compacted")
    page.wait_for_selector(".boundary.compaction")
    assert api.row(key_of(chat_id))["compaction_count"] == 1


def test_archive_and_unarchive(pages: Pages, api: Api) -> None:
    chat_id = chat("archive")
    key = key_of(chat_id)
    api.send(chat_id, "keep me somewhere")
    page = pages.new()
    open_session(page, pages.url, key)
    page.get_by_role("button", name="Archive", exact=True).click()
    page.wait_for_selector(".flags >> text=archived")
    assert api.row(key)["archived"] is True
    page.get_by_role("button", name="Unarchive").click()
    page.wait_for_selector(".actions >> text=Archive")
    assert api.row(key)["archived"] is False


def test_two_tabs_never_erase_each_others_unread_mark(pages: Pages, api: Api) -> None:
    chat_id = chat("unread")
    key = key_of(chat_id)
    api.send(chat_id, "read me later")
    # The first tab must not learn of the second tab's mark: its live feed is held unanswered
    # (no events, and no fallback to polling), so it acts on the mark it saw, whatever the
    # machine's load. The hold goes in before the page loads: opening a session only changes
    # the address's fragment, so a feed opened at sign-in would stay open and live.
    first = pages.new(sign_in=False)
    first.route("**/v1/events", lambda route: None)
    pages.sign_in(first)
    open_session(first, pages.url, key)
    first.get_by_role("button", name="Mark unread").click()
    first.wait_for_selector(".actions >> text=Mark read")
    second = pages.tab(first)
    open_session(second, pages.url, key)
    # The second tab marks it unread again, after the first tab saw the first mark...
    second.get_by_role("button", name="Mark read").click()
    second.wait_for_selector(".actions >> text=Mark unread")
    second.get_by_role("button", name="Mark unread").click()
    second.wait_for_selector(".actions >> text=Mark read")
    # ...so the first tab's acknowledgement of the mark it saw must not clear the new one.
    first.get_by_role("button", name="Mark read").click()
    expect(first.locator("#toast")).to_contain_text("marked unread again elsewhere")
    assert api.row(key)["unread"] is True


# ------------------------------------------------------------------------------ composer


def test_the_composer_shows_the_reply(pages: Pages, api: Api) -> None:
    chat_id = chat("compose")
    api.send(chat_id, "hello")
    page = pages.new()
    open_session(page, pages.url, key_of(chat_id))
    page.fill("#composer", "operator here")
    page.click(".composer button[type=submit]")
    page.wait_for_selector(".message.assistant >> text=echo: operator here")
    assert page.input_value("#composer") == ""
    # The reply came as a stream of deltas (SSE), not as one JSON answer.
    expect(page.locator("body")).to_have_attribute("data-last-reply", "streamed")


# ------------------------------------------------------------------------------ escaping


def test_markup_in_messages_and_labels_shows_as_text(pages: Pages, api: Api) -> None:
    chat_id = chat("xss")
    key = key_of(chat_id)
    probe = "<img src=x onerror=alert(1)>"
    api.send(chat_id, probe, user_name="<b>Mallory</b>")
    api.patch(key, label=f"<script>alert(2)</script>{uuid.uuid4().hex[:4]}")
    page = pages.new()
    page.wait_for_selector(f'#session-list li[data-key="{key}"]')
    assert "<script>alert(2)</script>" in page.locator(f'li[data-key="{key}"]').inner_text()
    open_session(page, pages.url, key)
    assert page.locator(".message.user .text").inner_text() == probe
    assert page.locator(".transcript img").count() == 0
    assert page.locator("script:not([src])").count() == 0
    assert pages.dialogs == []


# ------------------------------------------------------------------------------ layout


def test_phone_width_has_no_sideways_scroll_and_operations_render(pages: Pages, api: Api) -> None:
    chat_id = chat("phone")
    api.send(chat_id, "a long line " * 30)
    page = pages.new(width=390, height=844)
    open_session(page, pages.url, key_of(chat_id))
    width = page.evaluate("document.scrollingElement.scrollWidth")
    assert width <= 390
    page.goto(f"{pages.url}/ui/#/ops")
    page.wait_for_selector(".verdict")
    text = page.locator("main").inner_text()
    assert "Store health" in text
    assert "(this one)" in text  # the instances table


# ------------------------------------------------------------------ what a newcomer sees


def test_the_list_shows_the_chats_name_last_line_count_and_unread_state(
    pages: Pages, api: Api
) -> None:
    chat_id = chat("named")
    key = key_of(chat_id)
    api.send(chat_id, "first question")
    api.send(chat_id, "the latest line\nand a second one")
    api.patch(key, unread=True)
    page = pages.new()
    item = page.locator(f'#session-list li[data-key="{key}"]')
    expect(item.locator(".name")).to_have_text(chat_id)  # not the raw key
    expect(item.locator(".preview")).to_have_text("assistant: echo: the latest line")
    expect(item.locator(".count")).to_have_text("4 messages")
    expect(item.locator(".unread-badge")).to_have_text("unread")
    assert "unread" in (item.get_attribute("class") or "")


def test_the_session_page_names_the_model_that_answers(pages: Pages, api: Api) -> None:
    chat_id = chat("model")
    key = key_of(chat_id)
    api.send(chat_id, "hello")
    page = pages.new()
    open_session(page, pages.url, key)
    model = page.locator(".details dt:text-is('Model') + dd")
    expect(model).to_have_text("none: the echo agent repeats each message")
    expect(page.locator(".details dt:text-is('Messages') + dd")).to_have_text("2")
    api.patch(key, model="gpt-4o")
    page.reload()
    expect(model).to_have_text("gpt-4o (this session's choice)")
    assert "default" not in model.inner_text()


def test_an_archived_session_has_no_composer_to_send_with(pages: Pages, api: Api) -> None:
    chat_id = chat("shelved")
    key = key_of(chat_id)
    api.send(chat_id, "old news")
    api.patch(key, archived=True, expected_session_id=api.row(key)["session_id"])
    page = pages.new()
    open_session(page, pages.url, key)
    expect(page.locator("#composer")).to_be_disabled()
    expect(page.locator(".composer button[type=submit]")).to_be_disabled()
    assert "archived" in (page.get_attribute("#composer", "placeholder") or "")
    page.get_by_role("button", name="Unarchive").click()
    expect(page.locator("#composer")).to_be_enabled()


def test_a_fork_is_confirmed_and_shows_no_empty_branches_heading(pages: Pages, api: Api) -> None:
    chat_id = chat("forked")
    key = key_of(chat_id)
    api.send(chat_id, "one")
    api.send(chat_id, "two")
    page = pages.new()
    open_session(page, pages.url, key)
    page.locator(".message.user").nth(1).get_by_role("button", name="Fork from here").click()
    expect(page.locator("#toast")).to_contain_text("Forked into a new conversation")
    expect(page.locator(".session-head .parent")).to_contain_text("fork of")
    expect(page.locator("#composer")).to_have_value("two")
    expect(page.locator(".side h2", has_text="Branches")).to_be_hidden()
    expect(page.locator(".branches")).to_be_hidden()


def test_an_error_toast_stays_until_dismissed(pages: Pages, api: Api) -> None:
    taken, other = chat("taken"), chat("other")
    label = f"label-{uuid.uuid4().hex[:6]}"
    api.send(taken, "mine")
    api.patch(key_of(taken), label=label)
    api.send(other, "yours")
    page = pages.new()
    open_session(page, pages.url, key_of(other))
    page.fill("input[name=label]", label)
    page.get_by_role("button", name="Set label").click()  # the label is taken: a 409
    toast = page.locator("#toast")
    expect(toast).to_be_visible()
    expect(toast).to_have_attribute("data-kind", "error")
    expect(toast).to_have_attribute("role", "alert")
    toast.get_by_role("button", name="Dismiss").click()
    expect(toast).to_be_hidden()
    page.get_by_role("button", name="Set label").click()
    expect(toast).to_be_visible()
    page.keyboard.press("Escape")
    expect(toast).to_be_hidden()


def test_an_older_read_answering_last_never_hides_the_reply(pages: Pages, api: Api) -> None:
    chat_id = chat("overtaken")
    key = key_of(chat_id)
    api.send(chat_id, "hello")
    stale = api.client.get(f"/v1/sessions/{quote(key, safe='')}/transcript?limit=100").json()
    page = pages.new()
    open_session(page, pages.url, key)
    held: list[Any] = []

    def hold_the_first(route: Any) -> None:
        if held:
            route.continue_()
        else:
            held.append(route)  # answered below, after a newer read

    page.route("**/transcript?limit=*", hold_the_first)
    # A feed event starts a refresh whose transcript read is held...
    with page.expect_request("**/transcript?limit=*"):
        api.send(chat_id, "from elsewhere")
    # ...and meanwhile the operator sends: the newer read renders the reply.
    page.fill("#composer", "operator here")
    page.click(".composer button[type=submit]")
    reply = page.locator(".message.assistant .text", has_text="echo: operator here")
    expect(reply).to_be_visible()
    # The held read answers last with the transcript as it was before both messages.
    held[0].fulfill(json=stale)
    expect(page.locator("body")).to_have_attribute("data-dropped-reads", "1")
    expect(reply).to_be_visible()
    expect(page.locator(".message")).to_have_count(6)
