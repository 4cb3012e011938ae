"""Approval prompts on Slack: a Block Kit message with Approve and Deny buttons, a press (by
Socket Mode or the signed interactivity Request URL) read as the presser's `/approve <id>`, so
only an allowed approver decides, once. Through slack-sdk against the Slack stub and the
OpenAI-compatible agent against the fake model server."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import uvicorn

import sample_tools
from fake_openai import Call, Calls, FakeOpenAI, Reply
from sessiongate import GatewayConfig, SessionStore
from sessiongate.adapters.kit import ClockSleep
from sessiongate.adapters.slack import SlackAdapter
from sessiongate.adapters.slack.payloads import SlackIdentity, parse_block_actions
from sessiongate.agents import build_agent_factory
from sessiongate.api.app import create_app
from sessiongate.core.config import SlackConfig
from sessiongate.gateway import GatewayRunner
from sessiongate.testing.stubs import slack as sl

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator
    from pathlib import Path

HANG_GUARD = 15.0
ANN, BOB = "U0ANN", "U0BOB"
CHANNEL = "C0GENERAL"


async def until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(HANG_GUARD):
        while not condition():  # noqa: ASYNC110  # the stub records over the network
            await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    )
    task = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(HANG_GUARD):
            while not server.started:  # noqa: ASYNC110  # uvicorn offers no event for it
                await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        await task


@pytest.fixture
def model() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@contextlib.asynccontextmanager
async def slack_gateway(
    tmp_path: Path, clock, model: FakeOpenAI, mode: str
) -> AsyncIterator[tuple[sl.SlackStub, GatewayRunner, SessionStore, GatewayConfig]]:
    sample_tools.DELETED.clear()
    stub = sl.SlackStub()
    async with sl.serve_stub(stub):
        config = GatewayConfig(
            platforms={
                "slack": {
                    "bot_token": stub.bot_token,
                    "app_token": stub.app_token,
                    "signing_secret": sl.SIGNING_SECRET,
                    "base_url": stub.url + "/api/",
                    "allow_from": ["*"],
                    "mode": mode,
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
        platform = config.platforms["slack"]
        assert isinstance(platform, SlackConfig)
        sleeper = ClockSleep(clock)
        adapter = SlackAdapter(
            platform, clock=clock, sleep=sleeper, tick=sleeper.tick, ping_interval=0.2
        )
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
            yield stub, runner, store, config
        finally:
            await runner.stop()
            store.close()


def mention(text: str, *, user: str = ANN, ts: str = "1767225600.000100") -> dict[str, Any]:
    event = {"type": "app_mention", "user": user, "text": f"<@UBOT> {text}", "ts": ts,
             "channel": CHANNEL, "event_ts": ts, "team": "T0TEAM"}  # fmt: skip
    return {"type": "event_callback", "team_id": "T0TEAM", "event_id": f"Ev{ts}", "event": event}


def texts(stub: sl.SlackStub) -> list[str]:
    return [str(m.get("text")) for m in stub.sent]


async def test_the_prompt_has_buttons_and_a_press_decides_once(tmp_path, clock, model) -> None:
    model.script(Calls([Call("delete_file", json.dumps({"path": "/srv/x"}), id="c1")]))
    model.script(Reply("deleted it"))
    async with slack_gateway(tmp_path, clock, model, "socket") as (stub, runner, _, _):
        stub.push_event(mention("clean up"))
        await until(lambda: len(stub.buttons()) == 2)
        approve, deny = stub.buttons()
        assert [approve["text"]["text"], deny["text"]["text"]] == ["Approve", "Deny"]
        approval_id = approve["action_id"].split(":", 1)[1]
        assert approve["action_id"] == f"approve:{approval_id}"
        assert deny["action_id"] == f"deny:{approval_id}"
        [prompt] = [m for m in stub.sent if m.get("blocks")]
        shown = " ".join(b["text"]["text"] for b in prompt["blocks"] if b["type"] == "section")
        assert 'delete_file({"path": "/srv/x"})' in shown
        assert prompt["channel"] == CHANNEL
        first = stub.push_press(approve["action_id"], user_id=ANN)
        await until(lambda: "deleted it" in texts(stub))
        assert sample_tools.DELETED == ["/srv/x"]
        assert runner.approvals.book.get(approval_id).decided_by == f"slack:{ANN}"
        # The buttons give way to the outcome (chat.update).
        await until(lambda: not stub.buttons())
        assert prompt["blocks"][-1] == {
            "type": "context",
            "elements": [{"type": "plain_text", "text": f"Approved by slack:{ANN}."}],
        }
        assert 'delete_file({"path": "/srv/x"})' in prompt["blocks"][0]["text"]["text"]
        # Pressed again (or on another device): one decision, and the presser is told.
        second = stub.push_press(approve["action_id"], user_id=ANN)
        await until(lambda: any("already approved" in t for t in texts(stub)))
        await until(lambda: {first, second} <= set(stub.acks))
        assert sample_tools.DELETED == ["/srv/x"]
        # The same press delivered again (no ack reached Slack) is no second command.
        answers = len(stub.sent)
        stub.redeliver(second)
        await until(lambda: stub.acks.count(second) == 2)
        await runner.wait_idle()
        assert len(stub.sent) == answers


async def test_another_member_pressing_approve_decides_nothing(tmp_path, clock, model) -> None:
    model.script(Calls([Call("delete_file", json.dumps({"path": "/srv/y"}), id="c1")]))
    model.script(Reply("kept it"))
    async with slack_gateway(tmp_path, clock, model, "socket") as (stub, runner, _, _):
        stub.push_event(mention("clean up"))
        await until(lambda: len(stub.buttons()) == 2)
        approve, deny = stub.buttons()
        approval_id = approve["action_id"].split(":", 1)[1]
        stub.push_press(approve["action_id"], user_id=BOB, user_name="bob")
        await until(lambda: any("may not decide" in t for t in texts(stub)))
        assert runner.approvals.book.get(approval_id).status == "pending"
        stub.push_press(deny["action_id"], user_id=ANN)
        await until(lambda: "kept it" in texts(stub))
        assert runner.approvals.book.get(approval_id).status == "denied"
        assert stub.buttons() == []
        assert any(t.endswith(f"Denied by slack:{ANN}.") for t in texts(stub))
        assert sample_tools.DELETED == []


async def test_a_signed_press_at_the_interactivity_url_decides_and_a_forged_one_is_401(
    tmp_path, clock, model
) -> None:
    model.script(Calls([Call("delete_file", json.dumps({"path": "/srv/z"}), id="c1")]))
    model.script(Reply("done"))
    async with slack_gateway(tmp_path, clock, model, "events") as (stub, runner, store, config):
        app = create_app(runner, store, config)
        app.state.hooks = {"slack": runner.adapters[0]}
        now = int(clock.now().timestamp())
        async with serving(app) as base, httpx.AsyncClient(base_url=base, timeout=60.0) as client:
            raw = json.dumps(mention("clean up")).encode()
            response = await client.post("/hooks/slack/events", content=raw,
                                         headers=sl.sign(raw, timestamp=now))  # fmt: skip
            assert response.status_code == 200
            await until(lambda: len(stub.buttons()) == 2)
            approve, _ = stub.buttons()
            approval_id = approve["action_id"].split(":", 1)[1]
            press = stub.press(approve["action_id"], user_id=ANN)
            # Forged: signed with another secret, or the body changed after signing.
            body, headers = sl.interactivity_form(press, secret="not-the-secret", timestamp=now)
            forged = await client.post("/hooks/slack/interactivity", content=body,
                                       headers=headers)  # fmt: skip
            assert forged.status_code == 401
            body, headers = sl.interactivity_form(press, timestamp=now)
            tampered = body.replace(ANN.encode(), BOB.encode())
            forged = await client.post("/hooks/slack/interactivity", content=tampered,
                                       headers=headers)  # fmt: skip
            assert forged.status_code == 401
            assert runner.approvals.book.get(approval_id).status == "pending"
            # Signed, but not an interaction: 400, nothing decided.
            bad = b"payload=%5B1%2C2%5D"
            headers = {**sl.sign(bad, timestamp=now),
                       "Content-Type": "application/x-www-form-urlencoded"}  # fmt: skip
            refused = await client.post("/hooks/slack/interactivity", content=bad,
                                        headers=headers)  # fmt: skip
            assert refused.status_code == 400
            assert runner.approvals.book.get(approval_id).status == "pending"
            body, headers = sl.interactivity_form(press, timestamp=now)
            accepted = await client.post("/hooks/slack/interactivity", content=body,
                                         headers=headers)  # fmt: skip
            assert accepted.status_code == 200
            await until(lambda: "done" in texts(stub))
        assert runner.approvals.book.get(approval_id).status == "approved"
        assert sample_tools.DELETED == ["/srv/z"]


def test_a_press_maps_to_the_command_and_other_actions_are_ignored() -> None:
    me = SlackIdentity(user_id="UBOT", bot_id="BBOT", team_id="T0TEAM")
    base: dict[str, Any] = {
        "type": "block_actions", "user": {"id": "U5", "username": "eve"},
        "channel": {"id": "C9"}, "trigger_id": "t1", "team": {"id": "T0TEAM"},
        "message": {"ts": "1.000002", "thread_ts": "1.000001"},
    }  # fmt: skip
    event = parse_block_actions(
        {**base, "actions": [{"action_id": "deny:ab12", "action_ts": "2.1"}]}, me
    )
    assert event.text == "/deny ab12"
    assert event.source is not None
    assert (event.source.chat_id, event.source.user_id, event.source.thread_id) == (
        "C9",
        "U5",
        "1.000001",
    )
    for action_id in ("approve:", "approve:XYZ", "vote:1", "approve:ab12 extra"):
        actions = [{"action_id": action_id, "action_ts": "2.2"}]
        assert parse_block_actions({**base, "actions": actions}, me).source is None
