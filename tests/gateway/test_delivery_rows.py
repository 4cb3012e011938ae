"""Deliveries that tell the truth, through a running gateway: a platform that refuses sends
fills the dead-letter list, retries empty it, and a restart never sends a stale reply."""

from __future__ import annotations

from sessiongate.adapters.loopback import LoopbackAdapter
from sessiongate.gateway.delivery import REDELIVERY_GRACE_SECONDS
from sessiongate.store.deliveries import UNDELIVERED
from sessiongate.store.lanes import TurnState
from sessiongate.store.records import DeliveryStatus


async def test_a_sent_reply_keeps_the_platform_message_id(make_gateway) -> None:
    gw = await make_gateway()
    receipt = await gw.adapter.receive("hello")
    row = gw.runner.deliveries.of_turn(receipt.turn_id)
    assert (row.status, row.message_id, row.attempts) == (DeliveryStatus.SENT, "loopback-1", 1)
    assert gw.lanes.get_turn(receipt.turn_id).state is TurnState.DELIVERED
    assert gw.runner.delivery_outcomes() == {"sent": 1}


async def test_refused_sends_fill_the_dead_letter_list_and_retries_empty_it(
    make_gateway, clock
) -> None:
    gw = await make_gateway(delivery={"max_attempts": 2})
    gw.adapter.fail_sends = 1_000
    first = await gw.adapter.receive("one", chat_id="a")
    second = await gw.adapter.receive("two", chat_id="b")
    failed = gw.runner.deliveries.find(UNDELIVERED)
    assert {r.turn_id for r in failed} == {first.turn_id, second.turn_id}
    assert {(r.status, r.reason) for r in failed} == {
        (DeliveryStatus.FAILED, "ConnectionError: loopback: send refused")
    }
    # The turn is not delivered while its delivery is not.
    assert gw.lanes.get_turn(first.turn_id).state is TurnState.REPLIED
    clock.advance(REDELIVERY_GRACE_SECONDS)
    assert (await gw.runner.housekeeping.tick()).redelivered == 0
    dead = gw.runner.deliveries.find(UNDELIVERED)
    assert {(r.status, r.attempts) for r in dead} == {(DeliveryStatus.DEAD, 2)}
    # Given up: housekeeping leaves the dead alone, however long it waits.
    attempts = gw.adapter.send_attempts
    clock.advance(REDELIVERY_GRACE_SECONDS * 100)
    await gw.runner.housekeeping.tick()
    assert gw.adapter.send_attempts == attempts
    # The platform is back; the operator retries each from the list.
    gw.adapter.fail_sends = 0
    for row in dead:
        again = await gw.runner.retry_delivery_row(row.id)
        assert again.status is DeliveryStatus.SENT
    assert gw.runner.deliveries.find(UNDELIVERED) == []
    assert sorted(gw.adapter.texts()) == ["re: one", "re: two"]
    assert gw.lanes.get_turn(first.turn_id).state is TurnState.DELIVERED
    assert await gw.runner.retry_delivery_row(dead[0].id) is None  # sent: nothing to retry
    assert gw.runner.delivery_outcomes() == {"failed": 2, "dead": 2, "sent": 2}


async def test_a_failed_notice_is_a_row_retried_like_a_reply(make_gateway, clock) -> None:
    gw = await make_gateway()
    await gw.adapter.receive("hello")  # the start-up gate is open
    gw.adapter.fail_sends = 1
    await gw.adapter.receive("/status")
    (row,) = gw.runner.deliveries.find(UNDELIVERED)
    assert (row.kind, row.status) == ("notice", DeliveryStatus.FAILED)
    clock.advance(REDELIVERY_GRACE_SECONDS)
    assert (await gw.runner.housekeeping.tick()).redelivered == 1
    assert gw.runner.deliveries.get(row.id).status is DeliveryStatus.SENT
    assert gw.adapter.texts() == ["re: hello", row.text]


async def _undelivered_then_stopped(make_gateway):
    gw = await make_gateway()
    gw.adapter.fail_sends = 1
    receipt = await gw.adapter.receive("hello")
    await gw.runner.stop()
    gw.store.close()
    return gw, receipt.turn_id


async def test_a_restart_reports_a_reply_older_than_max_age_and_never_sends_it(
    make_gateway, clock
) -> None:
    gw, turn_id = await _undelivered_then_stopped(make_gateway)
    clock.advance(3601)  # the gateway was down for more than `delivery.max_age_seconds`
    adapter = LoopbackAdapter()
    again = await make_gateway(home=gw.home, adapter=adapter)
    await again.runner.wait_idle()
    assert adapter.sent == []
    row = again.runner.deliveries.of_turn(turn_id)
    assert (row.status, row.reason) == (DeliveryStatus.DEAD, "stale")
    assert again.lanes.get_turn(turn_id).state is TurnState.REPLIED
    # Housekeeping does not send it either; the operator can.
    clock.advance(REDELIVERY_GRACE_SECONDS * 10)
    await again.runner.housekeeping.tick()
    assert adapter.sent == []
    assert (await again.runner.retry_delivery_row(row.id)).status is DeliveryStatus.SENT
    assert adapter.texts() == ["re: hello"]


async def test_a_restart_within_max_age_sends_the_unconfirmed_reply_once(
    make_gateway, clock
) -> None:
    gw, turn_id = await _undelivered_then_stopped(make_gateway)
    clock.advance(600)
    adapter = LoopbackAdapter()
    again = await make_gateway(home=gw.home, adapter=adapter)
    await again.runner.wait_idle()
    assert adapter.texts() == ["re: hello"]
    assert again.lanes.get_turn(turn_id).state is TurnState.DELIVERED
    clock.advance(REDELIVERY_GRACE_SECONDS * 10)
    await again.runner.housekeeping.tick()
    assert adapter.texts() == ["re: hello"]


async def test_a_dead_reply_is_not_sent_by_a_restart_but_the_ops_retry_sends_it(
    make_gateway, clock
) -> None:
    gw = await make_gateway(delivery={"max_attempts": 1})
    gw.adapter.fail_sends = 1
    receipt = await gw.adapter.receive("hello")
    assert gw.runner.deliveries.of_turn(receipt.turn_id).status is DeliveryStatus.DEAD
    await gw.runner.stop()
    gw.store.close()
    clock.advance(60)  # well within `delivery.max_age_seconds`: given up all the same
    adapter = LoopbackAdapter()
    again = await make_gateway(home=gw.home, adapter=adapter, delivery={"max_attempts": 1})
    await again.runner.wait_idle()
    assert adapter.sent == []
    assert await again.runner.retry_delivery(receipt.turn_id)
    assert adapter.texts() == ["re: hello"]
    assert again.lanes.get_turn(receipt.turn_id).state is TurnState.DELIVERED
