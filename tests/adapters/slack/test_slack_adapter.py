"""The Slack adapter beyond the contract suite: the signed Events API route on the gateway's
own HTTP server, one turn for `message` + `app_mention`, thread forks, the socket's reconnect,
the reply-anchor fallback, and start-up failures."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx
import pytest
import uvicorn

from sessiongate import GatewayConfig, SessionStore
from sessiongate.adapters.kit import ClockSleep, CredentialsError, PlatformError
from sessiongate.adapters.slack import SlackAdapter
from sessiongate.agents import build_agent_factory
from sessiongate.api.app import create_app
from sessiongate.core.config import SlackConfig
from sessiongate.gateway import GatewayRunner
from sessiongate.testing.stubs import slack as sl

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

HANG_GUARD = 15.0


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
    def __init__(self, tmp_path: Path, clock, stub: sl.SlackStub, **settings: Any) -> None:
        section: dict[str, Any] = {
            "bot_token": stub.bot_token,
            "app_token": stub.app_token,
            "signing_secret": sl.SIGNING_SECRET,
            "base_url": stub.url + "/api/",
            "allow_from": ["*"],
        }
        section.update(settings)
        self.config = GatewayConfig(platforms={"slack": section})
        self.store = SessionStore(tmp_path / "home" / "sessions", self.config, clock=clock)
        platform = self.config.platforms["slack"]
        assert isinstance(platform, SlackConfig)
        self.sleeper = ClockSleep(clock)
        self.adapter = SlackAdapter(
            platform, clock=clock, sleep=self.sleeper, tick=self.sleeper.tick, ping_interval=0.2
        )
        self.runner = GatewayRunner(
            self.store,
            self.config,
            home=tmp_path / "home",
            agent_factory=build_agent_factory(self.config),
            clock=clock,
            adapters=[self.adapter],
        )

    async def settle(self, events: int) -> None:
        async with asyncio.timeout(HANG_GUARD):
            await self.adapter.wait_events(events)
            await self.runner.wait_idle()

    async def close(self) -> None:
        await self.runner.stop()
        self.store.close()


@pytest.fixture
async def stub() -> AsyncIterator[sl.SlackStub]:
    api = sl.SlackStub()
    async with sl.serve_stub(api):
        yield api


@pytest.fixture
async def events(tmp_path, clock, stub) -> AsyncIterator[tuple[sl.SlackStub, str, Gateway]]:
    gateway = Gateway(tmp_path, clock, stub, mode="events")
    await gateway.runner.start()
    app = create_app(gateway.runner, gateway.store, gateway.config)
    app.state.hooks = {"slack": gateway.adapter}
    try:
        async with serving(app) as base:
            yield stub, base, gateway
    finally:
        await gateway.close()


def callback(event_id: str, text: str, *, kind: str = "message", ts: str = "1767225600.000100"):
    event: dict[str, Any] = {"type": kind, "user": "U0ANN", "text": text, "ts": ts,
                             "channel": "C0GENERAL", "event_ts": ts, "team": "T0TEAM"}  # fmt: skip
    if kind == "message":
        event["channel_type"] = "channel"
    return {"type": "event_callback", "team_id": "T0TEAM", "event_id": event_id, "event": event}


def signed(body: dict[str, Any], clock, **extra: str) -> tuple[bytes, dict[str, str]]:
    raw = json.dumps(body).encode()
    return raw, {**sl.sign(raw, timestamp=int(clock.now().timestamp())), **extra}


async def test_message_and_app_mention_for_one_post_are_one_turn_and_retries_are_dropped(
    events, clock
):
    stub, base, gateway = events
    message = callback("Ev1", "<@UBOT> hello there")
    mention = callback("Ev2", "<@UBOT> hello there", kind="app_mention")
    async with httpx.AsyncClient(base_url=base, timeout=60.0) as client:
        for body, extra in ((message, {}), (mention, {}), (message, {"X-Slack-Retry-Num": "1"})):
            raw, headers = signed(body, clock, **extra)
            response = await client.post("/hooks/slack/events", content=raw, headers=headers)
            assert response.status_code == 200
    await gateway.settle(3)
    assert [m["text"] for m in stub.sent] == ["echo: hello there"]
    assert gateway.adapter.counters.duplicates == 2
    assert gateway.adapter.retries_seen == 1


async def test_url_verification_answers_the_challenge(events, clock):
    _, base, _ = events
    raw, headers = signed({"type": "url_verification", "challenge": "c-123"}, clock)
    async with httpx.AsyncClient(base_url=base, timeout=60.0) as client:
        response = await client.post("/hooks/slack/events", content=raw, headers=headers)
    assert response.status_code == 200
    assert response.json() == {"challenge": "c-123"}


@pytest.mark.parametrize(
    "tamper",
    ["unsigned", "wrong-signature", "stale-timestamp", "garbage-timestamp", "bearer-token"],
)
async def test_anything_not_signed_now_is_401_and_its_body_never_parsed(events, clock, tamper):
    _, base, gateway = events
    raw = b"{not json"  # a parser would answer 400; the signature check answers first
    now = int(clock.now().timestamp())
    headers = {
        "unsigned": {},
        "wrong-signature": sl.sign(raw, secret="other-secret", timestamp=now),
        "stale-timestamp": sl.sign(raw, timestamp=now - 301),
        "garbage-timestamp": {**sl.sign(raw, timestamp=now), "X-Slack-Request-Timestamp": "x"},
        "bearer-token": {"Authorization": f"Bearer {sl.SIGNING_SECRET}"},
    }[tamper]
    async with httpx.AsyncClient(base_url=base, timeout=60.0) as client:
        response = await client.post("/hooks/slack/events", content=raw, headers=headers)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"
    assert gateway.adapter.counters.events == 0


async def test_a_signed_body_that_is_not_an_event_is_400(events, clock):
    _, base, _ = events
    raw = b"[1, 2]"
    async with httpx.AsyncClient(base_url=base, timeout=60.0) as client:
        response = await client.post(
            "/hooks/slack/events",
            content=raw,
            headers=sl.sign(raw, timestamp=int(clock.now().timestamp())),
        )
    assert response.status_code == 400


async def test_a_signed_slash_command_form_runs_the_gateway_command(events, clock):
    stub, base, gateway = events
    raw = (
        b"command=%2Fsg-status&text=&channel_id=C0GENERAL&user_id=U0ANN&team_id=T0TEAM"
        b"&trigger_id=t1"
    )
    headers = {**sl.sign(raw, timestamp=int(clock.now().timestamp()))}
    headers["Content-Type"] = "application/x-www-form-urlencoded"
    async with httpx.AsyncClient(base_url=base, timeout=60.0) as client:
        response = await client.post("/hooks/slack/events", content=raw, headers=headers)
    assert response.status_code == 200
    # The answer to the request is what Slack shows the command's user alone.
    assert response.json() == {"response_type": "ephemeral", "text": "Running /status..."}
    await gateway.settle(1)
    (reply,) = stub.sent
    assert "echo:" not in reply["text"]


async def test_the_first_message_of_a_thread_forks_the_channel_session(tmp_path, clock, stub):
    gateway = Gateway(tmp_path, clock, stub)
    await gateway.runner.start()
    try:
        stub.push_event(callback("Ev1", "<@UBOT> remember the word kiwi"))
        await gateway.settle(1)
        reply = callback("Ev2", "<@UBOT> what was the word?", ts="1767225700.000100")
        reply["event"]["thread_ts"] = "1767225600.000100"
        stub.push_event(reply)
        await gateway.settle(2)
        thread = next(
            s for s in gateway.store.list_sessions() if s.origin.thread_id == "1767225600.000100"
        )
        assert thread.forked_from_parent
        contents = [m["content"] for m in gateway.store.load_transcript(thread.session_id)]
        assert any("kiwi" in str(c) for c in contents)
        assert stub.sent[-1]["thread_ts"] == "1767225600.000100"
        assert len(stub.acks) == 2  # each envelope acknowledged after its hand-off
    finally:
        await gateway.close()


async def test_a_dropped_socket_reconnects_and_keeps_receiving(tmp_path, clock, stub):
    gateway = Gateway(tmp_path, clock, stub)
    await gateway.runner.start()
    try:
        stub.push_event(callback("Ev1", "<@UBOT> before"))
        await gateway.settle(1)
        await stub.drop_sockets()
        stub.push_event(callback("Ev2", "<@UBOT> after", ts="1767225601.000100"))
        await gateway.settle(2)
        assert [m["text"] for m in stub.sent] == ["echo: before", "echo: after"]
        assert stub.connections >= 2
        assert len(stub.open_sockets) == 1  # the old socket is gone: one live connection
    finally:
        await gateway.close()


async def _connected_socket(gateway: Gateway) -> Any:
    """The receiver's socket once its first connect() finished (the adapter sets `receiving`
    after it, and is then waiting on its watchdog tick): the SDK sets up its reconnect state
    inside connect(), so a socket dropped before then would be repaired behind the test."""
    async with asyncio.timeout(HANG_GUARD):
        while not gateway.adapter.receiving:  # noqa: ASYNC110  # set by the receiver task
            await asyncio.sleep(0.01)
    socket = gateway.adapter.socket
    assert socket is not None
    assert await socket.is_connected()
    return socket


async def test_the_watchdog_rebuilds_a_socket_that_stays_down(tmp_path, clock, stub):
    gateway = Gateway(tmp_path, clock, stub)
    await gateway.runner.start()
    try:
        socket = await _connected_socket(gateway)
        # The SDK's own repair off *before* the drop: once the first connect() returned,
        # nothing turns it back on, so the socket stays down until the watchdog acts.
        socket.auto_reconnect_enabled = False
        await socket.disconnect()  # type: ignore[no-untyped-call]
        assert not await socket.is_connected()
        await gateway.sleeper.advance(gateway.adapter.watchdog.stall_seconds)
        async with asyncio.timeout(HANG_GUARD):
            while gateway.adapter.counters.reconnects < 1:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        stub.push_event(callback("Ev1", "<@UBOT> still there?"))
        await gateway.settle(1)
        assert [m["text"] for m in stub.sent] == ["echo: still there?"]
        assert gateway.adapter.counters.stalls == 1
    finally:
        await gateway.close()


async def test_a_shared_thread_never_holds_what_was_said_in_one_persons_lane(events, clock):
    """The defaults (per-user channel lanes, shared threads): an operator's note in Alice's
    lane must not reach the thread Alice opens and Bob joins, nor its model context."""
    _, base, gateway = events
    root = "1767225600.000100"
    note = "OPERATOR NOTE: alice is on a performance plan"
    async with httpx.AsyncClient(base_url=base, timeout=60.0) as client:

        async def post(body: dict[str, Any]) -> None:
            raw, headers = signed(body, clock)
            response = await client.post("/hooks/slack/events", content=raw, headers=headers)
            assert response.status_code == 200

        await post(callback("Ev1", "<@UBOT> plan the launch", ts=root))
        await gateway.settle(1)
        [alice] = gateway.store.list_sessions()
        assert alice.session_key.endswith(":U0ANN")  # her own lane in the channel
        response = await client.post(
            f"/v1/sessions/{quote(alice.session_key, safe='')}/messages", json={"text": note}
        )
        assert response.status_code == 200
        in_thread = callback("Ev2", "<@UBOT> details?", ts="1767225700.000100")
        in_thread["event"]["thread_ts"] = root
        await post(in_thread)
        await gateway.settle(2)
        bob = callback("Ev3", "<@UBOT> me too", ts="1767225800.000100")
        bob["event"].update(thread_ts=root, user="U0BOB")
        await post(bob)
        await gateway.settle(3)
    [thread] = [s for s in gateway.store.list_sessions() if s.origin and s.origin.thread_id]
    assert thread.extra.get("fork_refused") is True
    transcript = gateway.store.load_transcript(thread.session_id)
    context = gateway.store.model_context(thread.session_id).messages
    assert note not in repr(transcript)
    assert note not in repr(context)
    # The thread's parent message (everyone sees it in the channel) is its first context.
    assert transcript[0]["content"] == "plan the launch"
    assert "me too" in repr(transcript)
    assert note in repr(gateway.store.load_transcript(alice.session_id))


async def test_a_thread_bob_opens_under_alices_post_starts_with_her_post_alone(events, clock):
    _, base, gateway = events
    root = "1767225600.000100"
    async with httpx.AsyncClient(base_url=base, timeout=60.0) as client:

        async def post(body: dict[str, Any]) -> None:
            raw, headers = signed(body, clock)
            response = await client.post("/hooks/slack/events", content=raw, headers=headers)
            assert response.status_code == 200

        await post(callback("Ev1", "<@UBOT> plan the launch", ts=root))
        await gateway.settle(1)
        await post(callback("Ev2", "<@UBOT> my salary is 90k", ts="1767225650.000100"))
        await gateway.settle(2)
        bob = callback("Ev3", "<@UBOT> count me in", ts="1767225800.000100")
        bob["event"].update(thread_ts=root, user="U0BOB", parent_user_id="U0ANN")
        await post(bob)
        await gateway.settle(3)
    [thread] = [s for s in gateway.store.list_sessions() if s.origin and s.origin.thread_id]
    assert thread.extra.get("fork_refused") is True
    transcript = gateway.store.load_transcript(thread.session_id)
    assert transcript[0]["content"] == "plan the launch"
    assert "90k" not in repr(transcript)
    assert "90k" not in repr(gateway.store.model_context(thread.session_id).messages)


async def test_a_thread_slack_refuses_gets_the_reply_in_the_channel(tmp_path, clock, stub):
    gateway = Gateway(tmp_path, clock, stub)
    await gateway.runner.start()
    try:
        stub.fail("chat.postMessage", sl.CANNOT_REPLY)
        reply = callback("Ev1", "<@UBOT> in a thread")
        reply["event"]["thread_ts"] = "1767225500.000001"
        stub.push_event(reply)
        await gateway.settle(1)
        (posted,) = stub.sent
        assert posted.get("thread_ts") is None
        assert posted["text"].endswith("in a thread")
    finally:
        await gateway.close()


@pytest.mark.parametrize("token", ["bot_token", "app_token"])
async def test_a_refused_token_fails_the_start_without_retrying(tmp_path, clock, stub, token):
    gateway = Gateway(tmp_path, clock, stub, **{token: "xoxb-wrong"})
    with pytest.raises(CredentialsError, match="invalid_auth"):
        await gateway.runner.start()
    await gateway.close()
    method = "auth.test" if token == "bot_token" else "apps.connections.open"
    assert stub.calls[method] == 1


async def test_events_mode_without_a_signing_secret_refuses_to_start(tmp_path, clock, stub):
    gateway = Gateway(tmp_path, clock, stub, mode="events", signing_secret=None)
    with pytest.raises(CredentialsError, match="signing_secret"):
        await gateway.runner.start()
    await gateway.close()


async def test_commands_are_written_to_the_manifest_only_when_they_differ(tmp_path, clock, stub):
    settings = {"app_config_token": stub.config_token, "app_id": "A0APP"}
    for _ in range(2):
        gateway = Gateway(tmp_path, clock, stub, **settings)
        await gateway.runner.start()
        await gateway.close()
    assert "/sg-new" in stub.commands()
    assert stub.manifest_updates == 1


async def test_tokens_never_reach_the_log_even_at_debug(tmp_path, clock, stub, caplog):
    caplog.set_level(logging.DEBUG)
    gateway = Gateway(tmp_path, clock, stub)
    await gateway.runner.start()
    try:
        stub.push_event(callback("Ev1", "<@UBOT> hello"))
        await gateway.settle(1)
    finally:
        await gateway.close()
    assert "auth.test" in caplog.text  # the SDK did log its requests
    assert stub.bot_token not in caplog.text
    assert stub.app_token not in caplog.text


async def test_a_second_socket_for_one_app_token_is_refused(tmp_path, clock, stub):
    first = Gateway(tmp_path / "a", clock, stub)
    await first.runner.start()
    second = Gateway(tmp_path / "b", clock, stub)
    try:
        with pytest.raises(PlatformError, match="already has a socket"):
            await second.runner.start()
    finally:
        await second.close()
        await first.close()
    assert len(stub.open_sockets) == 0


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (b'{"type": "event_callback", "event": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "body"),
        (b'{"type": "event_callback", "event": "message"}', "body.event"),
        (
            b'{"type": "event_callback", "event": {"type": "message", "channel": "C1", '
            b'"ts": "1.0", "files": "f"}}',
            "event.files",
        ),
        (
            b'{"type": "event_callback", "event": {"type": "message", "channel": "C1", '
            b'"ts": "1.0", "user_profile": [1]}}',
            "event.user_profile",
        ),
        (
            b'{"type": "event_callback", "event": {"type": "message", "channel": {}}}',
            "event.channel",
        ),
    ],
    ids=["deep nesting", "event as a string", "files as a string", "profile as a list", "channel"],
)
async def test_signed_garbage_is_400_naming_the_field_and_starts_nothing(
    events, clock, caplog, raw, field
):
    _, base, gateway = events
    headers = sl.sign(raw, timestamp=int(clock.now().timestamp()))
    with caplog.at_level(logging.WARNING, logger="sessiongate.adapters.slack.adapter"):
        async with httpx.AsyncClient(base_url=base, timeout=60.0) as client:
            response = await client.post("/hooks/slack/events", content=raw, headers=headers)
    assert response.status_code == 400, response.text
    assert field in response.json()["error"]["message"]
    assert any(getattr(r, "field", None) == field for r in caplog.records)
    assert gateway.adapter.counters.events == 0
    assert gateway.store.list_sessions() == []


@pytest.mark.parametrize("tamper", ["unsigned", "stale-timestamp", "no-signature", "garbage"])
async def test_a_stalled_post_whose_headers_fail_is_401_before_its_body(events, clock, tamper):
    _, base, gateway = events
    now = int(clock.now().timestamp())
    signature = "v0=" + "a" * 64
    headers = {
        "unsigned": "",
        "stale-timestamp": f"X-Slack-Request-Timestamp: {now - 301}\r\n"
        f"X-Slack-Signature: {signature}\r\n",
        "no-signature": f"X-Slack-Request-Timestamp: {now}\r\n",
        "garbage": f"X-Slack-Request-Timestamp: {now}\r\nX-Slack-Signature: v0=zz\r\n",
    }[tamper]
    host, port = base.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(
            b"POST /hooks/slack/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            + headers.encode()
            + b"Content-Type: application/json\r\nContent-Length: 500000\r\n\r\n{"
        )
        await writer.drain()
        async with asyncio.timeout(HANG_GUARD):  # the body timeout is 30 s away
            status_line = await reader.readline()
    finally:
        writer.close()
    assert status_line.split()[1] == b"401"
    assert gateway.adapter.counters.events == 0
