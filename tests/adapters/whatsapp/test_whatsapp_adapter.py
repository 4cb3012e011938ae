"""The WhatsApp adapter beyond the contract suite: the webhook route on the gateway's own HTTP
server (verification, signatures, bounds, malformed bodies), delivery reports, identities,
media in and out, and the 24-hour customer-service window."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import uvicorn

from sessiongate import GatewayConfig, SessionStore
from sessiongate.adapters.kit import ClockSleep, CredentialsError
from sessiongate.adapters.whatsapp import WhatsAppAdapter
from sessiongate.adapters.whatsapp.client import MediaTooLargeError, ServiceWindowClosedError
from sessiongate.agents import build_agent_factory
from sessiongate.api.app import create_app
from sessiongate.core.config import WhatsAppConfig
from sessiongate.core.platform import Platform
from sessiongate.core.source import ChatType, SessionSource
from sessiongate.gateway import GatewayRunner
from sessiongate.testing.stubs import whatsapp as wa

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

HANG_GUARD = 15.0
VERIFY = "verify-me-0123"
ALICE = "15551234567"


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


class Gateway:
    def __init__(self, tmp_path: Path, clock, stub: wa.GraphApiStub, **settings: Any):
        section: dict[str, Any] = {
            "token": stub.token,
            "phone_number_id": stub.phone_number_id,
            "app_secret": stub.app_secret,
            "verify_token": VERIFY,
            "base_url": stub.base_url,
            "allow_from": ["+1 (555) 123-4567"],
        }
        section.update(settings)
        self.config = GatewayConfig(platforms={"whatsapp": section})
        self.store = SessionStore(tmp_path / "home" / "sessions", self.config, clock=clock)
        platform = self.config.platforms["whatsapp"]
        assert isinstance(platform, WhatsAppConfig)
        self.adapter = WhatsAppAdapter(platform, clock=clock, sleep=ClockSleep(clock))
        self.runner = GatewayRunner(
            self.store,
            self.config,
            home=tmp_path / "home",
            agent_factory=build_agent_factory(self.config),
            clock=clock,
            adapters=[self.adapter],
        )

    async def settle(self, stub: wa.GraphApiStub) -> None:
        async with asyncio.timeout(HANG_GUARD):
            await stub.wait_posted()
            await self.runner.wait_idle()

    async def close(self) -> None:
        await self.runner.stop()
        self.store.close()


@pytest.fixture
async def graph() -> AsyncIterator[wa.GraphApiStub]:
    stub = wa.GraphApiStub()
    async with wa.serve_stub(stub):
        yield stub


@contextlib.asynccontextmanager
async def running(tmp_path, clock, stub, **settings: Any) -> AsyncIterator[tuple[Gateway, str]]:
    gateway = Gateway(tmp_path, clock, stub, **settings)
    await gateway.runner.start()
    app = create_app(gateway.runner, gateway.store, gateway.config)
    app.state.hooks = {"whatsapp": gateway.adapter}
    try:
        async with serving(app) as base:
            stub.webhook_url = f"{base}/hooks/whatsapp"
            yield gateway, base
    finally:
        await gateway.close()


@pytest.fixture
async def gateway(tmp_path, clock, graph) -> AsyncIterator[tuple[Gateway, str]]:
    async with running(tmp_path, clock, graph) as found:
        yield found


# ---------------------------------------------------------------------------- the route


async def test_the_verification_get_answers_the_challenge_only_for_the_verify_token(gateway):
    _, base = gateway
    async with httpx.AsyncClient() as http:
        good = await http.get(
            f"{base}/hooks/whatsapp",
            params={
                "hub.mode": "subscribe",
                "hub.verify_token": VERIFY,
                "hub.challenge": "1158201444",
            },
        )
        bad = await http.get(
            f"{base}/hooks/whatsapp",
            params={"hub.mode": "subscribe", "hub.verify_token": "nope", "hub.challenge": "x"},
        )
    assert (good.status_code, good.text) == (200, "1158201444")
    assert bad.status_code == 401
    assert "x" not in bad.text


async def test_a_signed_message_is_answered_once_even_when_meta_retries(gateway, graph):
    gw, _ = gateway
    message_id = graph.push_message("hello there")
    await gw.settle(graph)
    graph.redeliver(message_id)
    await gw.settle(graph)
    assert graph.texts(ALICE) == ["echo: hello there"]
    assert graph.webhook_answers == [200, 200]
    assert gw.adapter.statistics().duplicates == 1


@pytest.mark.parametrize(
    "headers",
    [{}, {"x-hub-signature-256": "sha256=" + "0" * 64}, {"x-hub-signature-256": "md5=abc"}],
)
async def test_an_unsigned_or_wrongly_signed_post_is_401_and_starts_nothing(
    gateway, graph, headers
):
    gw, base = gateway
    body = json.dumps(graph.message("let me in")).encode()
    async with httpx.AsyncClient() as http:
        answer = await http.post(f"{base}/hooks/whatsapp", content=body, headers=headers)
    assert answer.status_code == 401
    assert gw.adapter.statistics().events == 0
    assert graph.sent == []


async def test_a_signed_body_that_is_not_a_webhook_is_400_naming_the_field(gateway, graph):
    _, base = gateway
    body = graph.message("x")
    del body["entry"][0]["changes"][0]["value"]["messages"][0]["id"]
    raw = json.dumps(body).encode()
    async with httpx.AsyncClient() as http:
        answer = await http.post(
            f"{base}/hooks/whatsapp",
            content=raw,
            headers={"x-hub-signature-256": wa.sign(graph.app_secret, raw)},
        )
        junk = await http.post(
            f"{base}/hooks/whatsapp",
            content=b"{nope",
            headers={"x-hub-signature-256": wa.sign(graph.app_secret, b"{nope")},
        )
    assert answer.status_code == 400
    assert "entry[0].changes[0].value.messages[0].id" in answer.json()["error"]["message"]
    assert junk.status_code == 400
    assert junk.json()["error"]["code"] == "invalid_json"


async def test_a_body_over_the_bound_is_413(tmp_path, clock, graph):
    async with running(tmp_path, clock, graph, max_webhook_bytes=2048) as (gw, base):
        body = json.dumps(graph.message("y" * 4000)).encode()
        async with httpx.AsyncClient() as http:
            answer = await http.post(
                f"{base}/hooks/whatsapp",
                content=body,
                headers={"x-hub-signature-256": wa.sign(graph.app_secret, body)},
            )
        assert answer.status_code == 413
        assert gw.adapter.statistics().events == 0


async def test_without_a_whatsapp_adapter_the_hook_refuses_everything(tmp_path, clock):
    config = GatewayConfig()
    store = SessionStore(tmp_path / "sessions", config, clock=clock)
    runner = GatewayRunner(
        store, config, home=tmp_path, clock=clock, agent_factory=build_agent_factory(config)
    )
    app = create_app(runner, store, config)
    try:
        async with serving(app) as base, httpx.AsyncClient() as http:
            get = await http.get(f"{base}/hooks/whatsapp", params={"hub.verify_token": "x"})
            post = await http.post(
                f"{base}/hooks/whatsapp",
                content=b"{}",
                headers={"x-hub-signature-256": "sha256=00"},
            )
        assert (get.status_code, post.status_code) == (401, 401)
    finally:
        store.close()


# ---------------------------------------------------------------------------- reports, ids


async def test_delivery_reports_are_recorded_not_turned_into_turns(gateway, graph, caplog):
    gw, _ = gateway
    graph.push_message("hi")
    await gw.settle(graph)
    (sent,) = graph.sent
    for status in ("sent", "read", "delivered"):
        graph.push_status(sent["id"], status)
    graph.push_status(
        "wamid.OTHER", "failed", error={"code": 131026, "title": "Message undeliverable"}
    )
    with caplog.at_level(logging.WARNING):
        await gw.settle(graph)
    assert gw.adapter.statuses[sent["id"]].status == "read"  # a late "delivered" never demotes
    assert gw.adapter.statuses["wamid.OTHER"].error == "131026: Message undeliverable"
    assert gw.adapter.status_counts == {"sent": 1, "read": 1, "delivered": 1, "failed": 1}
    assert graph.texts() == ["echo: hi"]
    assert "not delivered" in caplog.text


async def test_a_failure_reported_later_marks_the_turns_send_record(gateway, graph):
    from sessiongate.store.lanes import TurnState
    from sessiongate.store.platform_state import PlatformState

    gw, _ = gateway
    graph.push_message("hi")
    await gw.settle(graph)
    (sent,) = graph.sent
    (turn,) = gw.runner.lane_store.turns_in_state(TurnState.DELIVERED)
    graph.push_status(sent["id"], "failed", error={"code": 131026, "title": "Undeliverable"})
    await gw.settle(graph)
    record = PlatformState(gw.store).get_send("whatsapp", turn.id)
    assert record is not None
    assert record.state == "refused"
    assert record.detail is not None
    assert "131026: Undeliverable" in record.detail


async def test_a_number_and_its_bsuid_route_to_one_conversation(gateway, graph):
    gw, _ = gateway
    graph.push_message("first", bsuid="US.13491208655302741918")
    await gw.settle(graph)
    # The user hides their number: only the BSUID arrives now.
    graph.push(
        graph.message(
            "second",
            sender="",
            bsuid="US.13491208655302741918",
            extra={"from_user_id": "US.13491208655302741918"},
        )
    )
    await gw.settle(graph)
    sessions = gw.store.list_sessions()
    assert len(sessions) == 1
    # The second reply goes to the id the message came from: the BSUID.
    assert [m.get("to") or m.get("recipient") for m in graph.sent] == [
        ALICE,
        "US.13491208655302741918",
    ]
    assert graph.texts() == ["echo: first", "echo: second"]


async def test_a_group_is_keyed_by_its_id_and_needs_a_mention(tmp_path, clock, graph):
    group = "Y2FwaV9ncm91cDoxNzA1NTU1MDEzOToxMjAzNjM0MDQ2OTQyMzM4MjAZD"
    async with running(tmp_path, clock, graph, allow_from=[group]) as (gw, _):
        graph.push_message("chatter", group_id=group)
        graph.push_message(f"@{graph.display_number} answer me", group_id=group)
        await gw.settle(graph)
        (session,) = gw.store.list_sessions()
        assert group in session.session_key
        assert graph.texts() == ["echo: answer me"]
        assert graph.sent[0]["recipient_type"] == "group"


# ---------------------------------------------------------------------------- media


async def test_inbound_media_is_a_reference_the_adapter_downloads(gateway, graph):
    gw, _ = gateway
    media_id = graph.add_media(b"\x89PNG fake image", "image/png")
    graph.push_message(
        kind="image",
        media={"id": media_id, "mime_type": "image/png", "sha256": "x", "caption": "look"},
    )
    await gw.settle(graph)
    (session,) = gw.store.list_sessions()
    transcript = gw.store.load_transcript(session.session_id)
    assert f"whatsapp://file/{media_id}" in json.dumps(transcript)
    assert await gw.adapter.download_media(media_id) == (b"\x89PNG fake image", "image/png")


async def test_media_over_the_cap_is_refused_before_the_download(tmp_path, clock, graph):
    async with running(tmp_path, clock, graph, max_media_mb=0.001) as (gw, _):
        media_id = graph.add_media(b"x" * 4096, "application/pdf")
        with pytest.raises(MediaTooLargeError):
            await gw.adapter.download_media(media_id)
        assert graph.calls["download"] == 0


async def test_a_reply_uploads_its_files_then_sends_them(tmp_path, clock, graph):
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "chart.png").write_bytes(b"\x89PNG chart")
    (folder / "notes.txt").write_bytes(b"notes")
    async with running(tmp_path, clock, graph, media_dirs=[str(folder)]) as (gw, _):
        graph.push_message("hi", timestamp=clock.now().timestamp())
        await gw.settle(graph)
        source = SessionSource(platform=Platform.WHATSAPP, chat_id=ALICE, chat_type=ChatType.DM)
        text = f"here\nMEDIA: {folder / 'chart.png'}\nMEDIA: {folder / 'notes.txt'}"
        await gw.adapter.send(source, text, turn_id=None)
    assert [(u["name"], u["data"]) for u in graph.uploads] == [
        ("chart.png", b"\x89PNG chart"),
        ("notes.txt", b"notes"),
    ]
    kinds = [m["type"] for m in graph.sent[1:]]
    assert kinds == ["text", "image", "document"]
    assert graph.sent[2]["image"]["id"] == graph.uploads[0]["id"]


# ---------------------------------------------------------------------------- the window


async def test_a_reply_after_24_hours_fails_with_its_reason_and_the_template(
    tmp_path, clock, graph, caplog
):
    async with running(tmp_path, clock, graph, window_template="come_back") as (gw, _):
        graph.push_message("hi", timestamp=clock.now().timestamp())
        await gw.settle(graph)
        source = SessionSource(platform=Platform.WHATSAPP, chat_id=ALICE, chat_type=ChatType.DM)
        clock.advance(23 * 3600)
        await gw.adapter.send(source, "still in time", turn_id=None)
        clock.advance(2 * 3600)
        with caplog.at_level(logging.WARNING), pytest.raises(ServiceWindowClosedError):
            await gw.adapter.send(source, "too late", turn_id=None)
        with pytest.raises(ServiceWindowClosedError, match=r"25\.0 hours ago"):
            await gw.adapter.send(source, "too late again", turn_id=None)
        assert "24-hour customer-service window" in caplog.text
        assert graph.texts() == ["echo: hi", "still in time"]
        templates = [m for m in graph.sent if m["type"] == "template"]
        assert [t["template"]["name"] for t in templates] == ["come_back"]  # once, not per try
        assert gw.adapter.window_refusals == 2
        # The user writes again: the window is open, and a later refusal invites again.
        graph.push_message("back", timestamp=clock.now().timestamp())
        await gw.settle(graph)
        assert graph.texts()[-1] == "echo: back"


async def test_a_reply_outside_the_window_is_a_failed_delivery_never_a_silent_drop(
    tmp_path, clock, graph
):
    async with running(tmp_path, clock, graph) as (gw, _):
        graph.push_message("hi", timestamp=clock.now().timestamp())
        await gw.settle(graph)
        clock.advance(25 * 3600)
        source = SessionSource(platform=Platform.WHATSAPP, chat_id=ALICE, chat_type=ChatType.DM)
        ok = await gw.runner._delivery.send(source, "late", turn_id=None)
        assert ok is False  # listed as failed by the gateway, not dropped
        assert gw.adapter.statistics().sent == 1


async def test_after_a_restart_the_window_is_read_from_the_conversation(tmp_path, clock, graph):
    async with running(tmp_path, clock, graph) as (gw, _):
        graph.push_message("hi", timestamp=clock.now().timestamp())
        await gw.settle(graph)
    clock.advance(3600)
    source = SessionSource(platform=Platform.WHATSAPP, chat_id=ALICE, chat_type=ChatType.DM)
    async with running(tmp_path, clock, graph) as (gw, _):
        await gw.adapter.send(source, "an hour later", turn_id=None)
        clock.advance(24 * 3600)
        with pytest.raises(ServiceWindowClosedError):
            await gw.adapter.send(source, "a day later", turn_id=None)
    assert graph.texts()[-1] == "an hour later"


async def test_a_stopped_adapter_answers_503_so_meta_retries(gateway, graph):
    gw, _ = gateway
    await gw.adapter.stop()
    graph.push_message("while stopping")
    await gw.settle(graph)
    assert graph.webhook_answers == [503]
    assert graph.sent == []


async def test_metas_own_window_refusal_is_recorded_refused(gateway, graph):
    gw, _ = gateway
    graph.fail("messages", wa.WINDOW_CLOSED)
    graph.push_message("hi")
    await gw.settle(graph)
    assert graph.texts() == []
    assert gw.adapter.statistics().refused == 1


# ---------------------------------------------------------------------------- start-up


async def test_a_refused_token_fails_the_start(tmp_path, clock, graph):
    gateway = Gateway(tmp_path, clock, graph, token="wrong")
    with pytest.raises(CredentialsError, match="190"):
        await gateway.runner.start()
    await gateway.close()


def test_missing_credentials_are_named(tmp_path):
    config = WhatsAppConfig(token="t", phone_number_id="1")
    with pytest.raises(CredentialsError, match="app_secret, verify_token"):
        WhatsAppAdapter(config)
