"""Two runners (two homes) on one PostgreSQL schema: a lane's turns run only under its lease,
a stale owner's outcome is fenced, and the next owner recovers the turn it left.

One `Hub` serves both runners, so `hub.max_active` sees a lane's turns across instances.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import psycopg
import pytest
from gateway_support import HANG_GUARD_SECONDS, Hub

from sessiongate.errors import LeaseLostError, SessionBusyError, StoreUnavailableError
from sessiongate.store.lanes import TurnState
from sessiongate.store.ownership import Ownership

if TYPE_CHECKING:
    from pathlib import Path

KEY = "agent:main:telegram:dm:chat"


@pytest.fixture
def shared(pg_schema) -> dict[str, Any]:
    # A short TTL so a test's lease can be expired by hand; sweeps fast enough not to wait.
    return {
        "store": {
            "url": pg_schema.url,
            "lease_ttl_seconds": 3,
            "heartbeat_seconds": 0.5,
            "sweep_seconds": 0.05,
            "lane_idle_seconds": 0,
        },
        "mirror_sessions_json": False,
        "busy_input_mode": "queue",
    }


async def until(check, what: str) -> None:
    """Yield to the runners until `check()` holds (a hang guard, not a timing check)."""
    async with asyncio.timeout(HANG_GUARD_SECONDS):
        while not check():  # noqa: ASYNC110  # the state is rows in the database
            await asyncio.sleep(0.01)
    assert check(), what


def lease_row(url: str, key: str = KEY) -> tuple[Any, ...] | None:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT owner, epoch, expires_at > now() FROM lane_lease WHERE session_key = %s",
            (key,),
        ).fetchone()


def listening(url: str, instance_id: str) -> bool:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT probe_ready FROM instances WHERE instance_id = %s", (instance_id,)
        ).fetchone()
    return bool(row and row[0])


async def two(make_gateway, tmp_path: Path, shared: dict[str, Any]):
    hub = Hub()
    a = await make_gateway(home=tmp_path / "a", hub=hub, **shared)
    b = await make_gateway(home=tmp_path / "b", hub=hub, **shared)
    return hub, a, b


async def test_a_turn_runs_under_its_lanes_lease_and_the_idle_lane_is_given_back(
    shared, pg_schema, make_gateway, tmp_path
):
    hub, a, _b = await two(make_gateway, tmp_path, shared)
    hub.blocking = True
    reply = asyncio.create_task(a.adapter.receive("hello", message_id="m1"))
    await hub.next_started()
    owner, epoch, live = lease_row(pg_schema.url)
    assert owner == a.runner.presence.ownership.instance_id
    assert live
    assert epoch >= 1
    hub.release()
    await reply
    assert a.transcript() == [("user", "hello"), ("assistant", "re: hello")]
    # Idle past `lane_idle_seconds`: given back, so any instance can take the next message.
    await until(lambda: lease_row(pg_schema.url)[0] is None, "the idle lane given back")


async def test_a_route_changed_on_another_instance_during_a_turn_is_kept_by_its_outcome(
    shared, make_gateway, tmp_path
):
    # The outcome is written over the route as the claim saw it; B's change meanwhile makes
    # that commit refused whole, and the outcome is committed again over the route read.
    hub, a, b = await two(make_gateway, tmp_path, shared)
    hub.blocking = True
    reply = asyncio.create_task(a.adapter.receive("hello", message_id="m1"))
    started = await hub.next_started()
    b.store.set_session_fields(KEY, model_override="gpt-other")
    hub.release()
    assert (await reply).reply == "re: hello"
    entry = a.store.get_session(KEY)
    assert entry is not None
    assert (entry.model_override, entry.input_tokens) == ("gpt-other", 10)
    assert entry.last_activity_at is not None
    await until(lambda: a.lanes.get_turn(started.turn_id).state is TurnState.DELIVERED, "sent")
    assert a.transcript() == [("user", "hello"), ("assistant", "re: hello")]


async def test_a_turn_claimed_on_a_lingering_lease_runs_once_though_the_sweep_comes_first(
    shared, make_gateway, tmp_path
):
    # The accept claims the turn on the lane's lingering (idle) lease; the sweep's give-back
    # of idle leases then runs before the lane's worker has started. The lease must not go
    # back under the claimed turn, and the turn must not run twice (as claimed, and again as
    # recovered by the worker that takes the lease anew).
    shared["store"] = {**shared["store"], "lane_idle_seconds": 60}
    hub = Hub()
    a = await make_gateway(home=tmp_path / "a", hub=hub, **shared)
    assert (await a.adapter.receive("one", message_id="m1")).status == "replied"
    leases = a.runner.leases
    await until(lambda: not a.runner.is_busy(KEY), "the lane idle, its lease lingering")
    assert leases.holds(KEY)
    claims = leases.claims
    queued = await a.adapter.receive("two", message_id="m2", wait=False)
    # Claimed by its accept (a turn id at once), on the lease held: no claim of it again.
    assert (queued.status, leases.claims) == ("queued", claims)
    assert queued.turn_id is not None
    leases._linger = 0  # the linger is over: the sweep would give an idle lease back now
    await leases._release_idle(lambda key: None)
    await until(lambda: len(a.transcript()) == 4, "the second turn answered")
    await until(lambda: not a.runner.is_busy(KEY), "the lane idle again")
    assert [r.turn_id for r in hub.requests].count(queued.turn_id) == 1
    assert a.lanes.get_turn(queued.turn_id).state is TurnState.DELIVERED
    assert a.transcript() == [
        ("user", "one"),
        ("assistant", "re: one"),
        ("user", "two"),
        ("assistant", "re: two"),
    ]


async def test_another_instance_accepts_but_the_owner_runs_the_lane_in_order(
    shared, pg_schema, make_gateway, tmp_path
):
    hub, a, b = await two(make_gateway, tmp_path, shared)
    hub.blocking = True
    first = asyncio.create_task(a.adapter.receive("one", message_id="m1"))
    await hub.next_started()
    # B acks these after its commit; A owns the lane, so A runs them after "one", in order.
    acks = [
        await b.adapter.receive(text, message_id=f"b{i}", wait=False)
        for i, text in enumerate(["two", "three"])
    ]
    assert [r.status.value for r in acks] == ["queued", "queued"]
    hub.blocking = False
    hub.release_all()
    await first
    await until(lambda: not a.lanes.queue_depth(KEY) and not a.runner.is_busy(KEY), "drained")
    await until(lambda: len(a.transcript()) == 4, "both turns answered")
    assert hub.max_active[KEY] == 1
    users = [text for role, text in a.transcript() if role == "user"]
    assert users[0] == "one"
    # The slot merges what waited behind the running turn: one turn for both, in order.
    assert "two" in users[1]
    assert users[1].index("two") < users[1].index("three")


async def test_a_caller_waiting_on_another_instance_gets_the_owners_reply(
    shared, pg_schema, make_gateway, tmp_path
):
    # Behind a load balancer the message that waits for its reply may land on an instance
    # that does not own the lane: it is answered from the journal once the owner's turn ends.
    hub, a, b = await two(make_gateway, tmp_path, shared)
    hub.blocking = True
    first = asyncio.create_task(a.adapter.receive("one", message_id="m1"))
    await hub.next_started()
    waiting = asyncio.create_task(b.adapter.receive("two", message_id="b1"))
    await until(lambda: a.lanes.queue_depth(KEY) == 1, "B's message waits on A's lane")
    hub.blocking = False
    hub.release_all()
    assert (await first).reply == "re: one"
    async with asyncio.timeout(HANG_GUARD_SECONDS):
        receipt = await waiting
    assert receipt.status.value == "replied"
    assert receipt.reply == "re: two"
    assert hub.max_active[KEY] == 1


async def test_a_caller_waiting_on_a_lane_held_here_costs_the_journal_no_read(
    shared, pg_schema, make_gateway, tmp_path, monkeypatch
):
    # The poll for remote outcomes skips rows whose lane this instance holds: their own turn
    # answers them, and a read there would be a round trip in the running lane's way.
    from sessiongate.gateway import intake as intake_module

    monkeypatch.setattr(intake_module, "REMOTE_OUTCOME_POLL_SECONDS", 0.01)
    hub = Hub()
    a = await make_gateway(home=tmp_path / "a", hub=hub, **shared)
    polls: list[int] = []
    reads: list[int] = []
    rows, get_turn = a.runner._waiters.rows, a.runner.lane_store.get_turn

    def counted_rows() -> dict[int, str]:
        waiting = rows()
        polls.append(len(waiting))
        return waiting

    def counted_get_turn(turn_id: int):
        reads.append(turn_id)
        return get_turn(turn_id)

    monkeypatch.setattr(a.runner._waiters, "rows", counted_rows)
    monkeypatch.setattr(a.runner.lane_store, "get_turn", counted_get_turn)
    hub.blocking = True
    first = asyncio.create_task(a.adapter.receive("one", message_id="m1"))
    await hub.next_started()
    # From here the lane is held (its lease was claimed off the loop, and a poll may have
    # looked at the row before that).
    reads.clear()
    polls.clear()
    await until(lambda: sum(1 for n in polls if n) >= 3, "three polls with a waiter")
    assert reads == []
    hub.blocking = False
    hub.release_all()
    assert (await first).reply == "re: one"


async def test_a_stale_owner_is_fenced_and_the_next_owner_recovers_its_turn(
    shared, pg_schema, make_gateway, tmp_path
):
    hub, a, b = await two(make_gateway, tmp_path, shared)
    hub.blocking = True
    asyncio.create_task(a.adapter.receive("hello", message_id="m1"))  # noqa: RUF006
    started = await hub.next_started()
    # A pauses past its lease (as if SIGSTOPped): a thief takes the lane at a higher epoch.
    with psycopg.connect(pg_schema.url) as conn:
        conn.execute("UPDATE lane_lease SET expires_at = now() - interval '1 second'")
    thief = Ownership(a.store.database, instance_id="thief", ttl=3, heartbeat=0.5)
    thief.start()
    lease = thief.claim(KEY)
    assert lease is not None
    hub.release(started.turn_id)
    own = a.runner.presence.ownership
    await until(lambda: own.fenced_commits >= 1, "A's outcome was fenced")
    # Nothing of A's outcome committed: the journal still says running, no reply stored.
    assert a.lanes.get_turn(started.turn_id).state is TurnState.RUNNING
    assert [role for role, _ in a.transcript()] == ["user"]
    # The thief dies; a live instance's sweep takes the lane and recovers the turn.
    assert thief.release(lease)
    hub.blocking = False
    await until(lambda: a.lanes.get_turn(started.turn_id).state is TurnState.DELIVERED, "recovered")
    assert a.transcript() == [("user", "hello"), ("assistant", "re: hello")]
    assert hub.max_active[KEY] == 1
    assert a.runner.statistics().fenced_commits >= 1
    delivered = a.adapter.sent + b.adapter.sent
    assert [m.text for m in delivered if m.text == "re: hello"] == ["re: hello"]


async def test_no_agent_call_starts_once_the_lease_may_have_moved_on(
    shared, make_gateway, tmp_path
):
    hub = Hub()
    a = await make_gateway(home=tmp_path / "a", hub=hub, **shared)
    own = a.runner.presence.ownership
    own._deadline = 0.0  # the last renewal is older than the lease may last
    await a.adapter.receive("hello", message_id="m1", wait=False)
    sweeps = a.runner.leases.sweeps
    await until(lambda: a.runner.leases.sweeps >= sweeps + 3, "three sweeps")
    assert hub.requests == []  # nothing started while A could not act
    await asyncio.to_thread(own.heartbeat)  # renewed: its sweep brings the lane back
    await until(lambda: len(a.transcript()) == 2, "answered after the renewal")
    assert hub.max_active[KEY] == 1


@pytest.mark.parametrize("poll_only", [False, True])
async def test_the_owner_of_a_lane_hears_of_work_another_instance_accepted(
    shared, make_gateway, tmp_path, poll_only
):
    # With hints, no sweep runs within the test (its first is half a minute away): the
    # NOTIFY alone wakes the owner. Poll-only, the owner's sweep finds its lane.
    shared["store"] = {
        **shared["store"],
        "poll_only": poll_only,
        "sweep_seconds": 0.05 if poll_only else 30,
    }
    _hub, a, b = await two(make_gateway, tmp_path, shared)
    own = a.runner.presence.ownership
    await until(lambda: listening(shared["store"]["url"], own.instance_id), "A listens")
    lease = own.claim(KEY)  # A owns the lane, with no worker on it (idle, kept warm)
    assert lease is not None
    a.runner.leases._held[KEY] = lease
    receipt = await b.adapter.receive("hello", message_id="m1", wait=False)
    assert receipt.status.value == "queued"
    # The reply is sent after its commit: waited for, not only the transcript.
    await until(lambda: a.adapter.texts() == ["re: hello"], "A ran what B accepted")
    assert len(a.transcript()) == 2
    assert b.adapter.texts() == []
    assert b.runner.leases.claims_refused >= 1


async def _talk(gateway, n: int = 4) -> str:
    for i in range(n):
        receipt = await gateway.adapter.receive(f"{i} {'word ' * 100}")
    return receipt.session_key


async def test_a_compaction_commits_only_while_its_instance_owns_the_lane(
    shared, pg_schema, make_gateway, tmp_path
):
    # The transcript's compare-and-set alone would let this one commit: the thief took the
    # lane without writing to it yet (say, it has read the context for a turn). The fence
    # refuses it, as it refuses a stale owner's turn outcome.
    hub = Hub()
    a = await make_gateway(
        home=tmp_path / "a", hub=hub, **{**shared, "agent": {"context_window": 1000}}
    )
    key = await _talk(a)
    hub.summary_gate = asyncio.Event()
    compacting = asyncio.ensure_future(a.runner.compact(key))
    await hub.summary_started.wait()
    with psycopg.connect(pg_schema.url) as conn:  # A pauses past its lease mid-summary
        conn.execute("UPDATE lane_lease SET expires_at = now() - interval '1 second'")
    thief = Ownership(a.store.database, instance_id="thief", ttl=3, heartbeat=0.5)
    thief.start()
    assert thief.claim(key) is not None
    hub.summary_gate.set()
    with pytest.raises(LeaseLostError):
        await compacting
    session_id = a.store.get_session(key).session_id
    assert all(e["type"] == "message" for e in a.store.load_events(session_id))
    assert a.store.get_session(key).compaction_count == 0
    assert a.runner.presence.ownership.fenced_commits >= 1


async def test_a_compaction_is_refused_at_once_when_the_lane_cannot_be_held(
    shared, pg_schema, make_gateway, tmp_path
):
    hub = Hub()
    a = await make_gateway(
        home=tmp_path / "a", hub=hub, **{**shared, "agent": {"context_window": 1000}}
    )
    key = await _talk(a)
    await until(lambda: lease_row(pg_schema.url, key)[0] is None, "the idle lane given back")
    thief = Ownership(a.store.database, instance_id="thief", ttl=3, heartbeat=0.5)
    thief.start()
    assert thief.claim(key) is not None
    with pytest.raises(SessionBusyError):
        await a.runner.compact(key)
    assert hub.summarized == []  # no summary was asked for a lane it could not hold


async def test_an_accept_whose_answer_was_lost_leaves_its_turn_first_in_line(
    shared, make_gateway, tmp_path, monkeypatch
):
    # The connection dies with the answer of an accept that claimed its turn at once (a held
    # lane): the turn is committed `running`, no worker runs it, and the client's retry is a
    # duplicate. The lane's next message must not overtake it.
    shared["store"] = {**shared["store"], "lane_idle_seconds": 60}  # the lease lingers, held
    hub = Hub()
    a = await make_gateway(home=tmp_path / "a", hub=hub, **shared)
    assert (await a.adapter.receive("one", message_id="m1")).status == "replied"
    assert a.runner.leases.holds(KEY)
    intake = a.runner.intake
    accept = intake._accept_routed

    def answer_lost(*args, **kwargs):
        monkeypatch.setattr(intake, "_accept_routed", accept)
        accept(*args, **kwargs)  # committed ...
        raise StoreUnavailableError("the database is unavailable: server closed the connection")

    monkeypatch.setattr(intake, "_accept_routed", answer_lost)
    with pytest.raises(StoreUnavailableError):
        await a.adapter.receive("two", message_id="m2", wait=False)
    assert (await a.adapter.receive("two", message_id="m2", wait=False)).status == "duplicate"
    await a.adapter.receive("three", message_id="m3", wait=False)
    await until(lambda: len(a.transcript()) == 6, "every message answered")
    assert a.transcript() == [
        ("user", "one"),
        ("assistant", "re: one"),
        ("user", "two"),
        ("assistant", "re: two"),
        ("user", "three"),
        ("assistant", "re: three"),
    ]
