"""Approval prompts on Discord: Approve and Deny buttons (components) under the prompt, a press
acknowledged at once and read as the presser's `/approve <id>`, so only an allowed approver
decides, once. Through discord.py against the Discord stub (whose own parsing of the
interaction must not fail) and the OpenAI-compatible agent against the fake model server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import TYPE_CHECKING, Any

import pytest

import sample_tools
from fake_openai import Call, Calls, FakeOpenAI, Reply
from sessiongate import GatewayConfig, SessionStore
from sessiongate.adapters.discord import DiscordAdapter
from sessiongate.adapters.discord.payloads import DiscordIdentity, parse_interaction
from sessiongate.adapters.kit import ClockSleep
from sessiongate.agents import build_agent_factory
from sessiongate.core.config import DiscordConfig
from sessiongate.gateway import GatewayRunner
from sessiongate.testing.stubs import discord as dc

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator
    from pathlib import Path

HANG_GUARD = 15.0
GUILD = "2000000000000000001"
TEXT = "3000000000000000001"
ANN = dc.user("5000000000000000001", "ann")
BOB = dc.user("5000000000000000002", "bob")
EVE = dc.user("5000000000000000003", "eve")
_CHANNEL = {
    "id": TEXT, "type": 0, "guild_id": GUILD, "name": "general", "position": 0,
    "parent_id": None, "nsfw": False, "permissions": "0", "flags": 0, "topic": None,
    "rate_limit_per_user": 0,
}  # fmt: skip


async def until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(HANG_GUARD):
        while not condition():  # noqa: ASYNC110  # the stub records over the network
            await asyncio.sleep(0.01)


@pytest.fixture
def model() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@contextlib.asynccontextmanager
async def discord_gateway(
    tmp_path: Path, clock, model: FakeOpenAI, **section: Any
) -> AsyncIterator[tuple[dc.DiscordStub, GatewayRunner]]:
    sample_tools.DELETED.clear()
    stub = dc.DiscordStub()
    stub.channels[TEXT] = _CHANNEL
    async with dc.serve_stub(stub) as url:
        config = GatewayConfig(
            platforms={
                "discord": {
                    "token": stub.token,
                    "api_base_url": url,
                    "allow_from": ["*"],
                    **section,
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
        platform = config.platforms["discord"]
        assert isinstance(platform, DiscordConfig)
        sleeper = ClockSleep(clock)
        adapter = DiscordAdapter(platform, clock=clock, sleep=sleeper, tick=sleeper.tick)
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
            async with asyncio.timeout(HANG_GUARD):
                await stub.session_ready.wait()
            yield stub, runner
        finally:
            await runner.stop()
            store.close()


def message(stub: dc.DiscordStub, text: str, author: dict[str, Any] = ANN) -> dict[str, Any]:
    return {
        "id": stub.snowflake(), "channel_id": TEXT, "guild_id": GUILD, "type": 0,
        "content": f"<@{stub.bot_id}> {text}", "author": author,
        "member": {"roles": [], "nick": None},
        "timestamp": "2026-01-01T00:00:00.000000+00:00", "edited_timestamp": None,
        "tts": False, "mention_everyone": False, "mentions": [dc.user(stub.bot_id, "sg_bot")],
        "mention_roles": [], "attachments": [], "embeds": [], "pinned": False, "flags": 0,
    }  # fmt: skip


def texts(stub: dc.DiscordStub) -> list[str]:
    return [str(m.get("content")) for m in stub.sent]


async def test_the_prompt_has_buttons_and_a_press_decides_once(
    tmp_path, clock, model, caplog
) -> None:
    caplog.set_level(logging.INFO, logger="discord")
    model.script(Calls([Call("delete_file", json.dumps({"path": "/srv/x"}), id="c1")]))
    model.script(Reply("deleted it"))
    async with discord_gateway(tmp_path, clock, model) as (stub, runner):
        stub.dispatch("MESSAGE_CREATE", message(stub, "clean up"))
        await until(lambda: len(stub.buttons()) == 2)
        approve, deny = stub.buttons()
        assert [approve["label"], deny["label"]] == ["Approve", "Deny"]
        approval_id = approve["custom_id"].split(":", 1)[1]
        assert deny["custom_id"] == f"deny:{approval_id}"
        [prompt] = [m for m in stub.sent if m.get("components")]
        assert 'delete_file({"path": "/srv/x"})' in prompt["content"]
        assert prompt["allowed_mentions"]["parse"] == ["users"]
        first = stub.press(approve["custom_id"], ANN, guild_id=GUILD)
        await until(lambda: "deleted it" in texts(stub))
        assert sample_tools.DELETED == ["/srv/x"]
        assert runner.approvals.book.get(approval_id).decided_by == f"discord:{ANN['id']}"
        # The buttons give way to the outcome (the prompt edited).
        await until(lambda: not stub.buttons())
        assert prompt["components"] == []
        assert prompt["content"].endswith(f"\nApproved by discord:{ANN['id']}.")
        # Pressed again (or on another device): one decision, and the presser is told.
        second = stub.press(approve["custom_id"], ANN, guild_id=GUILD)
        await until(lambda: any("already approved" in t for t in texts(stub)))
        await until(lambda: len(stub.callbacks) == 2)
        # Each press is acknowledged at once, changing nothing on screen.
        assert [(c["id"], c["type"]) for c in stub.callbacks] == [(first, 6), (second, 6)]
        assert sample_tools.DELETED == ["/srv/x"]
    # discord.py parsed every interaction itself without a complaint or a reconnect.
    assert stub.connections == 1
    complaints = [r for r in caplog.records if r.name.startswith("discord.")]
    assert [r.getMessage() for r in complaints if r.levelno >= logging.ERROR] == []


async def test_another_member_pressing_approve_decides_nothing(tmp_path, clock, model) -> None:
    model.script(Calls([Call("delete_file", json.dumps({"path": "/srv/y"}), id="c1")]))
    model.script(Reply("kept it"))
    async with discord_gateway(tmp_path, clock, model) as (stub, runner):
        stub.dispatch("MESSAGE_CREATE", message(stub, "clean up"))
        await until(lambda: len(stub.buttons()) == 2)
        approve, deny = stub.buttons()
        approval_id = approve["custom_id"].split(":", 1)[1]
        stub.press(approve["custom_id"], BOB, guild_id=GUILD)
        await until(lambda: any("may not decide" in t for t in texts(stub)))
        assert runner.approvals.book.get(approval_id).status == "pending"
        stub.press(deny["custom_id"], ANN, guild_id=GUILD)
        await until(lambda: "kept it" in texts(stub))
        assert runner.approvals.book.get(approval_id).status == "denied"
        assert stub.buttons() == []
        assert sample_tools.DELETED == []


async def test_a_press_by_someone_not_allowed_is_refused_to_them_alone(
    tmp_path, clock, model
) -> None:
    model.script(Calls([Call("delete_file", json.dumps({"path": "/srv/z"}), id="c1")]))
    model.script(Reply("done"))
    allowed = {"allow_from": [ANN["id"]]}
    async with discord_gateway(tmp_path, clock, model, **allowed) as (stub, runner):
        stub.dispatch("MESSAGE_CREATE", message(stub, "clean up"))
        await until(lambda: len(stub.buttons()) == 2)
        approve, _ = stub.buttons()
        approval_id = approve["custom_id"].split(":", 1)[1]
        posted = len(stub.sent)
        stub.press(approve["custom_id"], EVE, guild_id=GUILD)
        await until(lambda: bool(stub.callbacks))
        (refusal,) = stub.callbacks
        assert refusal["type"] == 4
        assert refusal["data"]["flags"] == 64  # ephemeral: only the presser sees it
        assert "not allowed" in refusal["data"]["content"]
        assert len(stub.sent) == posted
        assert runner.approvals.book.get(approval_id).status == "pending"
        stub.press(approve["custom_id"], ANN, guild_id=GUILD)
        await until(lambda: "done" in texts(stub))
        assert sample_tools.DELETED == ["/srv/z"]


def test_a_press_maps_to_the_command_and_other_components_are_ignored() -> None:
    me = DiscordIdentity(user_id="1", application_id="2")
    base: dict[str, Any] = {"id": "77", "type": 3, "channel_id": "9", "user": EVE}
    event = parse_interaction({**base, "data": {"custom_id": "deny:ab12"}}, me, None)
    assert (event.text, event.kind) == ("/deny ab12", "component")
    assert event.source is not None
    assert (event.source.chat_id, event.source.user_id) == ("9", EVE["id"])
    for custom_id in ("approve:", "approve:XYZ", "vote:1", "approve:ab12 extra"):
        other = parse_interaction({**base, "data": {"custom_id": custom_id}}, me, None)
        assert other.source is None
