"""The Matrix adapter against a real homeserver: Synapse on SQLite, started by the test.

A user opens a direct chat with the bot (the bot joins the invite), writes, and gets the
echo; a reply in a thread lands in that thread. Everything runs through mautrix and Synapse's
own client-server API, the bot's echoes of its own events included.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from synapse_server import Synapse, SynapseUnavailableError

from sessiongate import GatewayConfig, SessionStore
from sessiongate.adapters.matrix import MatrixAdapter
from sessiongate.adapters.matrix.client import MatrixClient
from sessiongate.agents import build_agent_factory
from sessiongate.core.config import MatrixConfig
from sessiongate.gateway import GatewayRunner
from sessiongate.store.platform_state import PlatformState

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

HANG_GUARD = 60.0


@pytest.fixture(scope="module")
def synapse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synapse]:
    server = Synapse(tmp_path_factory.mktemp("synapse"))
    try:
        server.start()
    except SynapseUnavailableError as exc:
        server.stop()
        pytest.skip(f"no real homeserver here: {exc}")
    try:
        yield server
    finally:
        server.stop()


class User:
    """A person on the homeserver, through the plain client-server API."""

    def __init__(self, url: str, token: str, user_id: str) -> None:
        self.user_id = user_id
        self.http = httpx.AsyncClient(
            base_url=f"{url}/_matrix/client/v3",
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        self._txn = 0

    async def create_dm(self, bot: str) -> str:
        answer = await self.http.post("/createRoom", json={
            "preset": "trusted_private_chat", "is_direct": True, "invite": [bot]})  # fmt: skip
        answer.raise_for_status()
        return str(answer.json()["room_id"])

    async def create_encrypted_room(self, bot: str) -> str:
        encryption = {"type": "m.room.encryption", "state_key": "",
                      "content": {"algorithm": "m.megolm.v1.aes-sha2"}}  # fmt: skip
        answer = await self.http.post("/createRoom", json={
            "preset": "private_chat", "invite": [bot], "initial_state": [encryption]})  # fmt: skip
        answer.raise_for_status()
        return str(answer.json()["room_id"])

    async def say(self, room: str, body: str, **content: Any) -> str:
        self._txn += 1
        answer = await self.http.put(
            f"/rooms/{room}/send/m.room.message/t{self._txn}",
            json={"msgtype": "m.text", "body": body, **content},
        )
        answer.raise_for_status()
        return str(answer.json()["event_id"])

    async def messages(self, room: str) -> list[dict[str, Any]]:
        answer = await self.http.get(f"/rooms/{room}/messages",
                                     params={"dir": "b", "limit": 50})  # fmt: skip
        answer.raise_for_status()
        return list(reversed(answer.json()["chunk"]))

    async def wait_for(self, room: str, sender: str, body: str) -> dict[str, Any]:
        """Until `sender` posted `body` (or, with a trailing `...`, a body starting so) in
        `room`; that event."""
        async with asyncio.timeout(HANG_GUARD):
            while True:
                for event in await self.messages(room):
                    said = str(event.get("content", {}).get("body"))
                    if event.get("sender") == sender and (
                        said == body or (body.endswith("...") and said.startswith(body[:-3]))
                    ):
                        return event
                await asyncio.sleep(0.2)  # no event to wait on: the bot posts over HTTP


def _gateway(synapse: Synapse, bot: dict[str, Any], allowed: str, home: Path) -> Any:
    config = GatewayConfig(platforms={"matrix": {
        "homeserver": synapse.url, "user_id": bot["user_id"],
        "access_token": bot["access_token"], "allow_from": [allowed],
        "sync_timeout_seconds": 2,
    }})  # fmt: skip
    store = SessionStore(home / "sessions", config)
    section = config.platforms["matrix"]
    assert isinstance(section, MatrixConfig)
    adapter = MatrixAdapter(
        section, client=MatrixClient(synapse.url, bot["access_token"], sync_timeout_ms=2000)
    )
    factory = build_agent_factory(config)
    runner = GatewayRunner(store, config, home=home, agent_factory=factory, adapters=[adapter])
    return store, adapter, runner


async def test_a_dm_is_answered_and_a_thread_reply_lands_in_the_thread(synapse, tmp_path):
    bot = await asyncio.to_thread(synapse.register, "sg_bot")
    alice_account = await asyncio.to_thread(synapse.register, "alice")
    alice = User(synapse.url, alice_account["access_token"], alice_account["user_id"])
    room = await alice.create_dm(bot["user_id"])
    store, adapter, runner = _gateway(synapse, bot, alice.user_id, tmp_path / "home")
    await runner.start()
    try:
        # The first sync found the invite and joined it.
        assert adapter.rooms.room(room).chat_type().value == "dm"
        await alice.say(room, "hello bot")
        answer = await alice.wait_for(room, bot["user_id"], "echo: hello bot")
        assert answer["content"]["m.relates_to"]["m.in_reply_to"]["event_id"]

        root = await alice.say(room, "a topic")
        await alice.wait_for(room, bot["user_id"], "echo: a topic")
        await alice.say(room, "inside the thread", **{"m.relates_to": {
            "rel_type": "m.thread", "event_id": root, "is_falling_back": True,
            "m.in_reply_to": {"event_id": root}}})  # fmt: skip
        threaded = await alice.wait_for(room, bot["user_id"], "echo: inside the thread")
        relation = threaded["content"]["m.relates_to"]
        assert (relation["rel_type"], relation["event_id"]) == ("m.thread", root)

        # The bot's own events came back through /sync and started nothing.
        assert adapter.statistics().accepted == 3
        assert PlatformState(store).get_cursor("matrix", bot["user_id"]) == adapter.since
    finally:
        await runner.stop()
        store.close()
        await alice.http.aclose()


async def test_an_encrypted_room_is_told_and_left_never_sat_in_deaf(synapse, tmp_path):
    bot = await asyncio.to_thread(synapse.register, "sg_bot_e2e")
    carol_account = await asyncio.to_thread(synapse.register, "carol")
    carol = User(synapse.url, carol_account["access_token"], carol_account["user_id"])
    room = await carol.create_encrypted_room(bot["user_id"])
    store, _adapter, runner = _gateway(synapse, bot, carol.user_id, tmp_path / "home")
    await runner.start()
    try:
        notice = await carol.wait_for(room, bot["user_id"], f"{carol.user_id}: this room is...")
        assert "end-to-end encrypted" in notice["content"]["body"]
        async with asyncio.timeout(HANG_GUARD):
            while True:
                state = await carol.http.get(f"/rooms/{room}/state/m.room.member/{bot['user_id']}")
                if state.json().get("membership") == "leave":
                    break
                await asyncio.sleep(0.2)  # the bot leaves over HTTP
    finally:
        await runner.stop()
        store.close()
        await carol.http.aclose()
