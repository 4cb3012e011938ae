"""On PostgreSQL the gateway's event loop never waits on the database (decision 15): a lane's
store calls run on the store's threads, lanes overlap, and one lane's rows keep their order."""

from __future__ import annotations

import asyncio

from gateway_support import HANG_GUARD_SECONDS, Hub

from sessiongate.gateway.store_calls import InlineCalls, ThreadedCalls


def _config(url: str) -> dict[str, object]:
    return {"store": {"url": url}, "mirror_sessions_json": False, "busy_input_mode": "queue"}


async def test_the_store_is_called_off_the_loop_on_postgresql_only(
    pg_schema, make_gateway, tmp_path
):
    remote = await make_gateway(home=tmp_path / "pg", **_config(pg_schema.url))
    local = await make_gateway(home=tmp_path / "sqlite")
    assert isinstance(remote.runner.calls, ThreadedCalls)
    assert isinstance(local.runner.calls, InlineCalls)


async def test_turns_on_postgresql_never_make_the_loop_wait(pg_schema, make_gateway):
    gw = await make_gateway(**_config(pg_schema.url))
    database = gw.store.database
    waits = database.loop_waits  # what the start did (recovery reads, before serving)
    # New lanes (a lease claimed, nothing to recover) and lanes with a lease held.
    for round_ in range(2):
        receipts = await asyncio.gather(
            *(
                gw.adapter.receive(
                    f"hello {round_}", chat_id=f"c{chat}", message_id=f"{round_}-{chat}"
                )
                for chat in range(4)
            )
        )
        assert [r.status for r in receipts] == ["replied"] * 4
    assert database.loop_waits == waits
    assert gw.transcript("c3") == [
        ("user", "hello 0"),
        ("assistant", "re: hello 0"),
        ("user", "hello 1"),
        ("assistant", "re: hello 1"),
    ]


async def test_a_burst_to_one_lane_is_accepted_in_the_order_it_arrived(pg_schema, make_gateway):
    hub = Hub()
    gw = await make_gateway(hub=hub, **_config(pg_schema.url))
    hub.blocking = True
    first = asyncio.create_task(gw.adapter.receive("m0", message_id="m0"))
    await hub.next_started()
    # Each accept runs off the loop; the next one to the same lane waits its turn.
    queued = await asyncio.gather(
        *(gw.adapter.receive(f"m{i}", message_id=f"m{i}", wait=False) for i in range(1, 9))
    )
    assert {r.status for r in queued} == {"queued"}
    hub.blocking = False
    hub.release_all()
    assert (await first).status == "replied"
    async with asyncio.timeout(HANG_GUARD_SECONDS):
        await gw.runner.wait_idle()
    users = [text for role, text in gw.transcript() if role == "user"]
    # The first turn's own message, then the others merged into the one waiting slot.
    assert users == ["m0", "\n".join(f"m{i}" for i in range(1, 9))]
