"""Tool approvals asked in the chat, through a real gateway: the OpenAI-compatible agent
against the fake model server, a loopback Telegram chat, a real store and the fake clock."""

from __future__ import annotations

import asyncio
import json
import re
from typing import TYPE_CHECKING, Any

import pytest

import sample_tools
from fake_openai import Call, Calls, Reply
from sessiongate import GatewayConfig, SessionStore
from sessiongate.adapters.loopback import LoopbackAdapter
from sessiongate.agents import build_agent_factory
from sessiongate.errors import ApprovalDecidedError, NotAnApproverError
from sessiongate.gateway import GatewayRunner
from sessiongate.store.approvals import ApprovalBook

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from pathlib import Path

    from fake_openai import FakeOpenAI
    from sessiongate.core.clock import FakeClock

PROMPT_ID = re.compile(r"/approve ([0-9a-f]+)")
DELETE = Call("delete_file", json.dumps({"path": "/srv/data"}), id="call_del")


class Chat:
    def __init__(self, runner: GatewayRunner, adapter: LoopbackAdapter, store: SessionStore):
        self.runner = runner
        self.adapter = adapter
        self.store = store
        self.changes: list[Any] = []
        store.add_change_listener(self.changes.extend)

    def send(self, text: str, **fields: Any) -> asyncio.Task[Any]:
        fields.setdefault("chat_id", "alice")
        return asyncio.create_task(self.adapter.receive(text, **fields))

    async def say(self, text: str, **fields: Any) -> Any:
        return await self.send(text, **fields)

    async def prompt_id(self, count: int = 1) -> str:
        await until(lambda: len(self.prompts()) >= count)
        match = PROMPT_ID.search(self.prompts()[count - 1])
        assert match is not None
        return match.group(1)

    def prompts(self) -> list[str]:
        return [t for t in self.adapter.texts() if t.startswith("Approval needed")]

    def approval_events(self) -> list[tuple[str, str | None]]:
        return [
            (str(c.kind), c.status) for c in self.changes if str(c.kind).startswith("approval.")
        ]


async def until(condition: Callable[[], bool]) -> None:
    """Wait (on the loop, never on time) until `condition` holds; fail after many turns."""
    for _ in range(5000):
        if condition():
            return
        await asyncio.sleep(0.002)
    raise AssertionError("condition never held")


@pytest.fixture(autouse=True)
def _fresh_tool_log() -> None:
    sample_tools.DELETED.clear()


@pytest.fixture
def store_url(request: pytest.FixtureRequest) -> str | None:
    """None (SQLite in the home), or a PostgreSQL schema for a test run with
    `backend="postgres"`."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is None or callspec.params.get("backend") != "postgres":
        return None
    return str(request.getfixturevalue("pg_schema").url)


@pytest.fixture
async def make_chat(
    tmp_path: Path, clock: FakeClock, server: FakeOpenAI, store_url: str | None
) -> AsyncIterator[Callable[..., Any]]:
    made: list[GatewayRunner] = []
    stores: list[SessionStore] = []

    async def make(*, home: str = "home", approvals: dict[str, Any] | None = None) -> Chat:
        config = GatewayConfig(
            **({"store": {"url": store_url}} if store_url else {}),
            agent={
                "restart_drain_timeout": 0,
                "approvals": approvals or {"tools": ["delete_*"], "timeout_minutes": 30},
                "openai": {
                    "base_url": server.base_url,
                    "model": "fake-model",
                    "max_retries": 0,
                    "tools": ["sample_tools:delete_file", "sample_tools:lookup_order"],
                },
            },
        )
        store = SessionStore(tmp_path / home / "sessions", config, clock=clock)
        stores.append(store)
        adapter = LoopbackAdapter()
        runner = GatewayRunner(
            store,
            config,
            home=tmp_path / home,
            agent_factory=build_agent_factory(config),
            clock=clock,
            adapters=[adapter],
        )
        await runner.start()
        made.append(runner)
        return Chat(runner, adapter, store)

    yield make
    for runner in made:
        await runner.stop()
    for store in stores:
        store.close()


def tool_results(server: FakeOpenAI, request: int) -> list[str]:
    return [
        m["content"] for m in server.requests[request]["body"]["messages"] if m["role"] == "tool"
    ]


async def test_an_approved_call_runs_once_and_the_turn_finishes(make_chat, server) -> None:
    chat = await make_chat()
    server.script(Calls([DELETE]), Reply("done"))
    turn = chat.send("clean up")
    approval_id = await chat.prompt_id()
    prompt = chat.prompts()[0]
    # The prompt shows the whole call, and how to decide it.
    assert 'delete_file({"path": "/srv/data"})' in prompt
    assert f"/deny {approval_id}" in prompt
    assert sample_tools.DELETED == []  # nothing runs before the decision
    status = await chat.say("/status")
    assert f"Waiting for approval [{approval_id}]: delete_file" in status.reply
    answer = await chat.say(f"/approve {approval_id}")
    assert answer.reply == f"Approved: delete_file [{approval_id}]."
    receipt = await turn
    assert receipt.reply == "done"
    assert sample_tools.DELETED == ["/srv/data"]
    assert tool_results(server, 1) == ["deleted /srv/data"]
    row = chat.runner.approvals.book.get(approval_id)
    assert (row.status, row.decided_by, row.used) == ("approved", "telegram:alice", True)
    assert chat.approval_events() == [
        ("approval.requested", "pending"),
        ("approval.decided", "approved"),
    ]
    # A second press (or another device) changes nothing.
    again = await chat.say(f"/approve {approval_id}")
    assert again.reply == f"Approval {approval_id} is already approved."
    assert sample_tools.DELETED == ["/srv/data"]


async def test_a_denied_call_gets_a_denied_result_and_never_runs(make_chat, server) -> None:
    chat = await make_chat()
    server.script(Calls([DELETE, Call("lookup_order", '{"order_id": "7"}', id="call_ok")]))
    server.script(Reply("understood"))
    turn = chat.send("clean up")
    approval_id = await chat.prompt_id()
    await chat.say(f"/deny {approval_id}")
    assert (await turn).reply == "understood"
    assert sample_tools.DELETED == []
    denied, looked_up = tool_results(server, 1)
    assert json.loads(denied) == {"error": "denied: the call was not approved"}
    # The call that needs no approval ran as usual.
    assert json.loads(looked_up)["order_id"] == "7"
    stored = chat.store.load_transcript(chat.store.get_session(receipt_key(turn)).session_id)
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "tool", "assistant"]


def receipt_key(task: asyncio.Task[Any]) -> str:
    return task.result().session_key


async def test_an_approval_expires_by_the_clock(make_chat, server, clock) -> None:
    chat = await make_chat()
    server.script(Calls([DELETE]), Reply("too late"))
    turn = chat.send("clean up")
    approval_id = await chat.prompt_id()
    clock.advance(29 * 60)
    assert chat.runner.approvals.expire_due() == []
    clock.advance(61)
    assert (await turn).reply == "too late"
    assert sample_tools.DELETED == []
    assert json.loads(tool_results(server, 1)[0]) == {
        "error": "denied: expired (nobody decided in time)"
    }
    assert ("approval.expired", "expired") in chat.approval_events()
    late = await chat.say(f"/approve {approval_id}")
    assert late.reply == f"Approval {approval_id} is already expired."


async def test_only_an_allowed_approver_decides(make_chat, server) -> None:
    chat = await make_chat()
    server.script(Calls([DELETE]), Reply("done"))
    group = {"chat_id": "team", "chat_type": "group"}
    turn = chat.send("clean up", user_id="alice", **group)
    approval_id = await chat.prompt_id()
    # Another member of the group may not approve the session user's call.
    refused = await chat.say(f"/approve {approval_id}", user_id="bob", **group)
    assert refused.reply == f"You may not decide approval {approval_id}."
    with pytest.raises(NotAnApproverError):
        chat.runner.approvals.decide(approval_id, approve=True, by="telegram:bob")
    assert chat.runner.approvals.book.get(approval_id).status == "pending"
    await chat.say(f"/approve {approval_id}", user_id="alice", **group)
    assert (await turn).reply == "done"
    assert sample_tools.DELETED == ["/srv/data"]


async def test_a_configured_approver_decides_from_another_chat(make_chat, server) -> None:
    chat = await make_chat(approvals={"tools": ["delete_file"], "approvers": ["telegram:admin"]})
    server.script(Calls([DELETE]), Reply("done"))
    turn = chat.send("clean up")
    approval_id = await chat.prompt_id()
    mine = await chat.say(f"/approve {approval_id}")  # the asker is not an approver here
    assert mine.reply == f"You may not decide approval {approval_id}."
    await chat.say(f"/approve {approval_id}", chat_id="admin")
    assert (await turn).reply == "done"


async def test_a_decision_binds_to_the_call_shown(make_chat, server) -> None:
    chat = await make_chat()
    server.script(Calls([DELETE]), Reply("done"))
    turn = chat.send("clean up")
    approval_id = await chat.prompt_id()
    approvals = chat.runner.approvals
    with pytest.raises(ApprovalDecidedError):
        approvals.decide(approval_id, approve=True, by="operator", sha256="0" * 64)
    shown = approvals.book.get(approval_id).arguments_sha256
    approvals.decide(approval_id, approve=True, by="operator", sha256=shown)
    with pytest.raises(ApprovalDecidedError):  # one decision: the second loses
        approvals.decide(approval_id, approve=False, by="operator", sha256=shown)
    assert (await turn).reply == "done"
    assert sample_tools.DELETED == ["/srv/data"]


async def test_stop_cancels_a_pending_approval(make_chat, server) -> None:
    chat = await make_chat()
    server.script(Calls([DELETE]))
    turn = chat.send("clean up")
    approval_id = await chat.prompt_id()
    stopped = await chat.say("/stop")
    assert stopped.reply.startswith("Stopped the current reply.")
    await turn
    assert chat.runner.approvals.book.get(approval_id).status == "cancelled"
    late = await chat.say(f"/approve {approval_id}")
    assert late.reply == f"Approval {approval_id} is already cancelled."
    assert sample_tools.DELETED == []


async def test_new_cancels_a_pending_approval(make_chat, server) -> None:
    chat = await make_chat()
    server.script(Calls([DELETE]))
    turn = chat.send("clean up")
    approval_id = await chat.prompt_id()
    await chat.say("/new")
    await turn
    assert chat.runner.approvals.book.get(approval_id).status == "cancelled"
    assert sample_tools.DELETED == []


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_pending_approval_survives_a_restart_and_resumes_once(
    make_chat, server, backend
) -> None:
    first = await make_chat()
    server.script(Calls([DELETE]))
    turn = first.send("clean up")
    approval_id = await first.prompt_id()
    await first.runner.stop()  # the drain leaves the waiting turn for the next start
    await turn
    assert first.runner.approvals.book.get(approval_id).status == "pending"
    assert sample_tools.DELETED == []

    server.script(Reply("done after restart"))
    second = await make_chat()  # the same home
    book = second.runner.approvals.book
    await until(lambda: second.runner.approvals._wakers.get(approval_id) is not None)
    assert book.get(approval_id).status == "pending"
    assert second.prompts() == []  # the same approval: no second prompt
    assert (await second.say(f"/approve {approval_id}")).reply.startswith("Approved")
    key = book.get(approval_id).session_key
    await until(
        lambda: second.runner.lane_store.queue_depth(key) == 0 and key not in second.runner._lanes
    )
    assert sample_tools.DELETED == ["/srv/data"]
    messages = second.store.load_transcript(second.store.get_session(key).session_id)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[2]["content"] == "deleted /srv/data"
    assert messages[-1]["content"] == "done after restart"


async def test_a_follow_up_that_interrupts_the_turn_cancels_its_approval(make_chat, server) -> None:
    chat = await make_chat()
    server.script(Calls([DELETE]), Reply("ok, never mind"))
    turn = chat.send("clean up")
    approval_id = await chat.prompt_id()
    follow_up = await chat.say("no wait, keep it")  # busy_input_mode: interrupt
    assert follow_up.reply == "ok, never mind"
    await turn
    assert chat.runner.approvals.book.get(approval_id).status == "cancelled"
    assert sample_tools.DELETED == []


async def test_restarts_while_waiting_are_no_crash_loop(make_chat, server) -> None:
    # Three starts in a row find the turn cut off: a crash loop would be set aside as stuck
    # (`stuck_loop_threshold` 3); a turn waiting for a person is resumed each time.
    server.script(Calls([DELETE]))
    first = await make_chat()
    turn = first.send("clean up")
    approval_id = await first.prompt_id()
    await first.runner.stop()
    await turn
    for _ in range(3):
        chat = await make_chat()
        await until(lambda c=chat: c.runner.approvals._wakers.get(approval_id) is not None)
        await chat.runner.stop()
    server.script(Reply("done at last"))
    last = await make_chat()
    await until(lambda: last.runner.approvals._wakers.get(approval_id) is not None)
    await last.say(f"/approve {approval_id}")
    key = last.runner.approvals.book.get(approval_id).session_key
    await until(lambda: key not in last.runner._lanes)
    assert sample_tools.DELETED == ["/srv/data"]
    messages = last.store.load_transcript(last.store.get_session(key).session_id)
    assert messages[-1]["content"] == "done at last"
    assert not [m for m in last.adapter.texts() if "set aside" in m]


async def test_housekeeping_expires_an_approval_nobody_waits_on(make_chat, clock) -> None:
    chat = await make_chat()
    book = chat.runner.approvals.book
    row, _ = book.request(
        turn_id=99,
        call_id="call_x",
        session_key="agent:main:telegram:dm:alice",
        tool="delete_file",
        arguments="{}",
        approvers=["telegram:alice"],
        timeout_seconds=60,
    )
    assert (await chat.runner.housekeeping.tick()).approvals_expired == 0
    clock.advance(60)
    assert (await chat.runner.housekeeping.tick()).approvals_expired == 1
    assert book.get(row.id).status == "expired"
    assert ("approval.expired", "expired") in chat.approval_events()


async def test_a_decision_from_another_process_reaches_the_waiting_turn(
    make_chat, server, tmp_path, clock
) -> None:
    # `sessiongate approvals approve` (or another instance) writes the same store: the waiting
    # call reads it on its own, with nothing to wake it in this process.
    chat = await make_chat()
    server.script(Calls([DELETE]), Reply("done"))
    turn = chat.send("clean up")
    approval_id = await chat.prompt_id()
    other = SessionStore(tmp_path / "home" / "sessions", GatewayConfig(), clock=clock)
    try:
        book = ApprovalBook(other)
        row = book.get(approval_id)
        assert book.decide(approval_id, approve=True, by="operator", sha256=row.arguments_sha256)
    finally:
        other.close()
    assert (await turn).reply == "done"
    assert sample_tools.DELETED == ["/srv/data"]


async def test_a_decision_made_while_the_wait_reads_its_row_ends_the_wait_at_once(
    make_chat, server, monkeypatch
) -> None:
    # The waiting call reads its row off the loop; a decision landing during that read set
    # the wake that the wait then cleared, so the call slept until its next poll (half a
    # second). With the poll pushed out of reach, only the wake can end this wait.
    import functools
    import threading

    from sessiongate.gateway import approvals as approvals_module
    from sessiongate.gateway.approvals import OPERATOR

    monkeypatch.setattr(approvals_module, "_POLL_SECONDS", 3600)
    chat = await make_chat()
    approvals = chat.runner.approvals
    loop = asyncio.get_running_loop()
    read = approvals.book.get
    decided: list[str] = []

    def read_then_decide(approval_id: str) -> Any:
        row = read(approval_id)
        off_loop = threading.current_thread() is not threading.main_thread()
        if off_loop and not decided and row is not None and row.status == "pending":
            decided.append(approval_id)
            decide = functools.partial(approvals.decide, approval_id, approve=True, by=OPERATOR)
            loop.call_soon_threadsafe(decide)  # runs before the waiter sees this read's row
        return row

    monkeypatch.setattr(approvals.book, "get", read_then_decide)
    server.script(Calls([DELETE]), Reply("done"))
    async with asyncio.timeout(30):  # a hang guard: the lost wake waited an hour here
        receipt = await chat.say("clean up")
    assert receipt.reply == "done"
    assert len(decided) == 1
    assert sample_tools.DELETED == ["/srv/data"]
