"""One runner per home: `<home>/gateway.lock` is taken at start and released at stop.

A second runner on a live home would run recovery over the live one's journal: its running
turns look crashed, get requeued and run a second time. `tests/cli/test_cli_run.py` checks the
same with real processes (`run` beside `run`, `chat` beside `run`).
"""

from __future__ import annotations

import stat
from typing import TYPE_CHECKING, Any

import pytest

from sessiongate.errors import HomeInUseError
from sessiongate.gateway.recovery import CLEAN_SHUTDOWN_FILE, LOCK_FILE
from sessiongate.store.lanes import TurnState

if TYPE_CHECKING:
    from gateway_support import Gateway


async def test_a_second_runner_on_a_live_home_is_refused_and_changes_nothing(make_gateway: Any):
    live: Gateway = await make_gateway()
    live.hub.blocking = True
    await live.adapter.receive("long job", wait=False)
    started = await live.hub.next_started()

    second: Gateway = await make_gateway(home=live.home, start=False)
    with pytest.raises(HomeInUseError, match="in use") as refused:
        await second.runner.start()
    assert refused.value.code == "home_in_use"

    # The live turn was not taken for a crashed one: still running, run once, no marker.
    assert live.lanes.get_turn(started.turn_id).state is TurnState.RUNNING
    assert not (live.home / CLEAN_SHUTDOWN_FILE).exists()
    assert second.hub.requests == []
    assert not second.runner.statistics().accepting
    live.hub.release_all()
    await live.runner.wait_idle()
    assert len(live.hub.requests) == 1
    assert live.lanes.get_turn(started.turn_id).state is TurnState.DELIVERED


async def test_the_lock_is_released_at_stop(make_gateway: Any):
    first: Gateway = await make_gateway()
    await first.runner.stop()
    first.store.close()
    again: Gateway = await make_gateway(home=first.home)
    assert (await again.adapter.receive("hello")).status == "replied"


async def test_the_lock_file_is_private(gw: Gateway):
    mode = stat.S_IMODE((gw.home / LOCK_FILE).stat().st_mode)
    assert mode == 0o600
