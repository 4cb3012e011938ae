"""Singular connections under leader leases: one leader among the instances on one database,
a takeover when the leader dies or pauses, and a woken leader that may not act.

Time is injected: the roles wait on a fake clock that only the test moves, and a lease expires
on the database's clock by writing its `expires_at` into the past, never by sleeping. Waiting
for a role to react is bounded by a hang guard only.
"""

from __future__ import annotations

import asyncio
import random
from typing import TYPE_CHECKING

import pytest

from sessiongate import GatewayConfig, SessionStore
from sessiongate.adapters.kit.timing import ClockSleep
from sessiongate.errors import LeaseLostError
from sessiongate.gateway.leadership import Leadership
from sessiongate.store.backends import open_ownership

if TYPE_CHECKING:
    from collections.abc import Callable

    from sessiongate.core.clock import FakeClock
    from sessiongate.store.ownership import Ownership

ROLE = "telegram:polling"
GUARD = 30.0  # a hang guard, never a timing assertion


class Connection:
    """A stand-in singular connection: records when it runs and when it is stopped."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.stopped = asyncio.Event()
        self.runs = 0

    async def __call__(self) -> None:
        self.runs += 1
        self.stopped.clear()
        self.started.set()
        try:
            await asyncio.Event().wait()
        finally:
            self.started.clear()
            self.stopped.set()


async def until(event: asyncio.Event) -> None:
    async with asyncio.timeout(GUARD):
        await event.wait()


async def settle(predicate: Callable[[], bool]) -> None:
    """Until `predicate()` holds: the roles' database calls run on threads, which no fake
    clock can hurry, so this yields to them (under the hang guard)."""
    async with asyncio.timeout(GUARD):
        while not predicate():  # noqa: ASYNC110 (a thread's result: no event to wait on)
            await asyncio.sleep(0.005)


async def advance_until(sleep: ClockSleep, seconds: float, predicate: Callable[[], bool]) -> None:
    """Move time on by `seconds` at a time, letting each step's database calls finish,
    until `predicate()` holds."""
    async with asyncio.timeout(GUARD):
        while not predicate():
            await sleep.advance(seconds)
            await asyncio.sleep(0.05)


@pytest.fixture
def instances(tmp_path, pg_schema, clock):
    """Two instances' ownerships on one PostgreSQL schema (stores of their own)."""
    opened: list[SessionStore] = []

    def instance(name: str) -> Ownership:
        config = GatewayConfig(store={"url": pg_schema.url})  # type: ignore[arg-type]
        store = SessionStore(tmp_path / name, config, clock=clock)
        opened.append(store)
        own = open_ownership(store.database, config)
        assert own is not None
        own.instance_id = name
        own.start()
        return own

    yield instance("a"), instance("b"), opened[0]
    for store in opened:
        store.close()


def expire_leases(store: SessionStore) -> None:
    """The leader stops renewing (killed or paused) and its lease runs out."""
    with store.database.transaction() as tx:
        tx.execute(  # type: ignore[attr-defined]
            "UPDATE leader_lease SET expires_at = now() - interval '1 second'"
        )


def leadership(own: Ownership | None, clock: FakeClock, sleep: ClockSleep) -> Leadership:
    return Leadership(own, clock=clock, sleep=sleep.tick, rng=random.Random(7))


async def test_on_a_database_of_its_own_the_instance_simply_leads(tmp_path, clock):
    store = SessionStore(tmp_path / "home", GatewayConfig(), clock=clock)
    try:
        assert open_ownership(store.database, GatewayConfig()) is None
        lead = leadership(None, clock, ClockSleep(clock))
        role = lead.role(ROLE)
        connection = Connection()
        task = asyncio.create_task(role.run(connection))
        await until(connection.started)
        assert role.leading
        await role.check()  # nothing to ask: no other instance exists
        assert lead.leading() == {ROLE: True}
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert connection.stopped.is_set()
        assert not role.leading
    finally:
        store.close()


async def test_one_instance_leads_and_a_dead_leaders_role_moves_on(instances, clock):
    own_a, own_b, store = instances
    sleep = ClockSleep(clock)
    role_a = leadership(own_a, clock, sleep).role(ROLE)
    role_b = leadership(own_b, clock, sleep).role(ROLE)
    conn_a, conn_b = Connection(), Connection()
    task_a = asyncio.create_task(role_a.run(conn_a))
    await until(conn_a.started)
    task_b = asyncio.create_task(role_b.run(conn_b))
    # b asks, is refused, and waits to ask again; a renews on its heartbeat.
    await settle(lambda: role_b.claims == 1)
    for n in range(1, 4):
        # Until renewed: a step taken before a's next heartbeat was asleep wakes nothing.
        await advance_until(sleep, own_a.heartbeat_interval, lambda n=n: role_a.renewals >= n)
    await advance_until(sleep, own_a.heartbeat_interval, lambda: role_b.claims > 1)
    assert role_a.leading
    assert not role_b.leading
    assert conn_b.runs == 0
    assert [i["leader_of"] for i in own_a.instances()] == [[ROLE], []]

    # a dies (its process is gone: its tasks never run again) and its lease runs out.
    task_a.cancel()
    await asyncio.gather(task_a, return_exceptions=True)
    expire_leases(store)
    await advance_until(sleep, own_b.heartbeat_interval, conn_b.started.is_set)
    assert role_b.leading
    assert role_b.lease is not None
    assert role_b.lease.epoch == 2
    assert [i["leader_of"] for i in own_a.instances()] == [[], [ROLE]]
    task_b.cancel()
    await asyncio.gather(task_b, return_exceptions=True)


async def test_a_paused_leader_that_wakes_after_the_takeover_may_not_act(instances, clock):
    own_a, own_b, store = instances
    sleep = ClockSleep(clock)
    role_a = leadership(own_a, clock, sleep).role(ROLE)
    conn_a = Connection()
    task_a = asyncio.create_task(role_a.run(conn_a))
    await until(conn_a.started)
    await role_a.check()

    # a is stopped (SIGSTOP) past its lease: its clock runs on, its renewals do not happen,
    # and b takes the role over.
    clock.advance(own_a.ttl)
    expire_leases(store)
    successor = own_b.claim_leader(ROLE)
    assert successor is not None
    assert not role_a.leading  # the local half needs no database to say no

    # a wakes up, and the first thing its connection does is confirm it still leads.
    with pytest.raises(LeaseLostError):
        await role_a.check()
    await until(conn_a.stopped)
    assert role_a.losses == 1
    assert not role_a.leading
    assert own_b.hold_leader(successor)  # the successor's lease was never touched
    # a goes back to asking, and is refused while b leads.
    claims = role_a.claims
    await advance_until(sleep, own_a.heartbeat_interval, lambda: role_a.claims > claims + 1)
    assert conn_a.runs == 1
    assert not task_a.done()
    task_a.cancel()
    await asyncio.gather(task_a, return_exceptions=True)


async def test_a_leader_whose_renewal_is_refused_stops_its_connection(instances, clock):
    own_a, own_b, store = instances
    sleep = ClockSleep(clock)
    role_a = leadership(own_a, clock, sleep).role(ROLE)
    conn_a = Connection()
    task_a = asyncio.create_task(role_a.run(conn_a))
    await until(conn_a.started)
    expire_leases(store)
    assert own_b.claim_leader(ROLE) is not None
    # The heartbeat's renewal finds the successor's epoch: the connection is cancelled.
    await advance_until(sleep, own_a.heartbeat_interval, conn_a.stopped.is_set)
    assert not role_a.leading
    task_a.cancel()
    await asyncio.gather(task_a, return_exceptions=True)


async def test_a_clean_stop_hands_the_role_over_without_waiting_out_the_lease(instances, clock):
    own_a, own_b, _store = instances
    sleep = ClockSleep(clock)
    role_a = leadership(own_a, clock, sleep).role(ROLE)
    conn_a = Connection()
    task_a = asyncio.create_task(role_a.run(conn_a))
    await until(conn_a.started)
    assert own_b.claim_leader(ROLE) is None
    task_a.cancel()
    await asyncio.gather(task_a, return_exceptions=True)
    taken = own_b.claim_leader(ROLE)
    assert taken is not None
    assert taken.epoch == 2


async def test_a_failed_connection_gives_the_lease_up_and_is_retried(instances, clock):
    own_a, own_b, _store = instances
    sleep = ClockSleep(clock)
    role_a = leadership(own_a, clock, sleep).role(ROLE)
    attempts: list[int] = []
    again = asyncio.Event()

    async def flaky() -> None:
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("the platform went away")
        again.set()
        await asyncio.Event().wait()

    task_a = asyncio.create_task(role_a.run(flaky))
    await settle(lambda: bool(attempts) and role_a.lease is None)
    # While a backs off, the lease is free for another instance to try.
    lease = own_b.claim_leader(ROLE)
    assert lease is not None
    assert own_b.release_leader(lease)
    await advance_until(sleep, 5.0, again.is_set)
    assert len(attempts) == 2
    task_a.cancel()
    await asyncio.gather(task_a, return_exceptions=True)
