"""Approval prompts on Telegram: Approve and Deny buttons under the prompt, a press read as
the presser's `/approve <id>` (so only an allowed approver decides, once), through the real
SDK against the Bot API stub and the OpenAI-compatible agent against the fake model server."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import pytest

import sample_tools
from fake_openai import Call, Calls, FakeOpenAI, Reply
from sessiongate import GatewayConfig, SessionStore
from sessiongate.adapters.kit import ClockSleep
from sessiongate.adapters.telegram import TelegramAdapter
from sessiongate.adapters.telegram.payloads import BotIdentity, parse_update
from sessiongate.agents import build_agent_factory
from sessiongate.core.config import TelegramConfig
from sessiongate.gateway import GatewayRunner
from sessiongate.testing.stubs import telegram as tg

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator
    from pathlib import Path


async def until(condition: Callable[[], bool]) -> None:
    for _ in range(5000):
        if condition():
            return
        await asyncio.sleep(0.002)
    raise AssertionError("condition never held")


@pytest.fixture
def model() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
async def gateway(tmp_path: Path, clock, model) -> AsyncIterator[tuple[tg.BotApiStub, Any]]:
    sample_tools.DELETED.clear()
    bot_api = tg.BotApiStub()
    async with tg.serve_stub(bot_api) as url:
        config = GatewayConfig(
            platforms={
                "telegram": {
                    "token": bot_api.token,
                    "base_url": url,
                    "poll_timeout_seconds": 1,
                    "allow_from": ["*"],
                }
            },
            agent={
                "approvals": {"tools": ["delete_file"]},
                "openai": {
                    "base_url": model.base_url,
                    "model": "fake-model",
                    "max_retries": 0,
                    "tools": ["sample_tools:delete_file"],
                },
            },
        )
        store = SessionStore(tmp_path / "home" / "sessions", config, clock=clock)
        platform = config.platforms["telegram"]
        assert isinstance(platform, TelegramConfig)
        adapter = TelegramAdapter(platform, clock=clock, sleep=ClockSleep(clock))
        runner = GatewayRunner(
            store,
            config,
            home=tmp_path / "home",
            agent_factory=build_agent_factory(config),
            clock=clock,
            adapters=[adapter],
        )
        await runner.start()
        try:
            yield bot_api, runner
        finally:
            await runner.stop()
            store.close()


async def test_the_prompt_has_buttons_and_a_press_decides_once(gateway, model) -> None:
    bot_api, _ = gateway
    model.script(Calls([Call("delete_file", json.dumps({"path": "/srv/x"}), id="c1")]))
    model.script(Reply("deleted it"))
    bot_api.push_message("clean up", chat_id=42, user_id=42)
    await until(lambda: bool(bot_api.keyboards()))
    [keyboard] = bot_api.keyboards()
    [row] = keyboard["inline_keyboard"]
    assert [b["text"] for b in row] == ["Approve", "Deny"]
    approve = row[0]["callback_data"]
    approval_id = approve.split(":", 1)[1]
    assert row[1]["callback_data"] == f"deny:{approval_id}"
    [prompt] = [m for m in bot_api.sent if m.get("reply_markup")]
    assert 'delete_file({"path": "/srv/x"})' in prompt["text"]
    bot_api.push_press(approve, chat_id=42, user_id=42)
    await until(lambda: "deleted it" in bot_api.texts(42))
    assert sample_tools.DELETED == ["/srv/x"]
    assert bot_api.answered == ["cb1"]
    # Pressed again (or on another device): one decision.
    bot_api.push_press(approve, chat_id=42, user_id=42)
    await until(lambda: any("already approved" in t for t in bot_api.texts(42)))
    assert sample_tools.DELETED == ["/srv/x"]


async def test_another_member_pressing_approve_decides_nothing(gateway, model) -> None:
    bot_api, runner = gateway
    model.script(Calls([Call("delete_file", json.dumps({"path": "/srv/y"}), id="c1")]))
    model.script(Reply("ok"))
    group = {"chat_id": -100, "chat_type": "group"}
    mention = [{"type": "mention", "offset": 0, "length": 7}]
    bot_api.push_message(
        "@sg_bot clean up", user_id=42, username="alice", entities=mention, **group
    )
    await until(lambda: bool(bot_api.keyboards()))
    approve = bot_api.keyboards()[0]["inline_keyboard"][0][0]["callback_data"]
    approval_id = approve.split(":", 1)[1]
    bot_api.push_press(approve, user_id=77, username="bob", **group)
    await until(lambda: any("may not decide" in t for t in bot_api.texts(-100)))
    assert runner.approvals.book.get(approval_id).status == "pending"
    bot_api.push_press(f"deny:{approval_id}", user_id=42, username="alice", **group)
    await until(lambda: "ok" in bot_api.texts(-100))
    assert sample_tools.DELETED == []


def test_a_press_maps_to_the_command_and_other_buttons_are_ignored() -> None:
    me = BotIdentity(id="1000", username="sg_bot")
    base = {"id": "q", "from": {"id": 5, "is_bot": False, "first_name": "Eve"},
            "message": {"message_id": 3, "chat": {"id": 9, "type": "private"}}}  # fmt: skip
    event = parse_update({"update_id": 1, "callback_query": {**base, "data": "deny:ab12"}}, me)
    assert event.text == "/deny ab12"
    assert event.source is not None
    assert (event.source.chat_id, event.source.user_id) == ("9", "5")
    for data in ("approve:", "approve:XYZ", "vote:1", "approve:ab12 extra"):
        other = parse_update({"update_id": 2, "callback_query": {**base, "data": data}}, me)
        assert other.source is None
