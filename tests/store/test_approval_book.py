"""Tool approvals in the store (`ApprovalBook`), on every backend: one approval per call, one
decision per approval (a conditional update), bound to the arguments shown, started once,
expired by the clock, cancelled per session, and each change told after its commit."""

from __future__ import annotations

import json
import threading

from sessiongate.store.approvals import ApprovalBook, arguments_sha256
from sessiongate.store.changes import ChangeKind

ARGS = json.dumps({"path": "/srv/data"})


def ask(book: ApprovalBook, call_id: str = "call_1", key: str = "agent:main:api:dm:a", **kw):
    return book.request(
        turn_id=kw.get("turn_id", 7),
        call_id=call_id,
        session_key=key,
        tool="delete_file",
        arguments=ARGS,
        approvers=["telegram:alice"],
        timeout_seconds=kw.get("timeout", 60),
    )


def test_one_approval_per_call_holding_what_was_shown(store):
    book = ApprovalBook(store)
    row, new = ask(book)
    assert new
    assert (row.status, row.tool, row.arguments) == ("pending", "delete_file", ARGS)
    assert row.arguments_sha256 == arguments_sha256("delete_file", ARGS)
    assert json.loads(row.approvers) == ["telegram:alice"]
    again, new = ask(book)  # a resumed turn asks again for the same call
    assert (again, new) == (row, False)
    other, new = ask(book, call_id="call_2")
    assert new
    assert other.id != row.id
    assert {r.id for r in book.listed(status="pending")} == {row.id, other.id}
    assert book.for_call("agent:main:api:dm:a", 7, "call_2") == other


def test_a_decision_is_one_conditional_update_bound_to_the_arguments(store):
    book = ApprovalBook(store)
    row, _ = ask(book)
    assert book.decide(row.id, approve=True, by="x", sha256="0" * 64) is None  # another call
    assert book.get(row.id).status == "pending"
    decided = book.decide(row.id, approve=True, by="telegram:alice", sha256=row.arguments_sha256)
    assert (decided.status, decided.decided_by) == ("approved", "telegram:alice")
    assert book.decide(row.id, approve=False, by="x", sha256=row.arguments_sha256) is None
    assert book.get(row.id).status == "approved"


def test_two_concurrent_decisions_make_one(make_store):
    store, other = make_store(), make_store()
    row, _ = ask(ApprovalBook(store))
    outcomes: list[object] = []
    barrier = threading.Barrier(2)

    def press(target, approve: bool) -> None:
        barrier.wait()
        outcomes.append(
            ApprovalBook(target).decide(
                row.id, approve=approve, by="p", sha256=row.arguments_sha256
            )
        )

    threads = [
        threading.Thread(target=press, args=(store, True)),
        threading.Thread(target=press, args=(other, False)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    won = [o for o in outcomes if o is not None]
    assert len(won) == 1
    assert ApprovalBook(store).get(row.id).status == won[0].status


def test_a_decided_call_is_started_once(store):
    book = ApprovalBook(store)
    row, _ = ask(book)
    assert not book.use(row.id)  # pending: nothing to start
    book.decide(row.id, approve=True, by="a", sha256=row.arguments_sha256)
    assert book.use(row.id)
    assert not book.use(row.id)
    assert book.get(row.id).used


def test_approvals_expire_by_the_clock_and_cancel_per_session(store, clock):
    book = ApprovalBook(store)
    soon, _ = ask(book, call_id="a", timeout=60)
    later, _ = ask(book, call_id="b", timeout=600)
    elsewhere, _ = ask(book, call_id="c", key="agent:main:api:dm:b", timeout=600)
    clock.advance(59)
    assert book.expire_due() == []
    clock.advance(1)
    assert [r.id for r in book.expire_due()] == [soon.id]
    assert book.get(soon.id).status == "expired"
    assert book.cancel("agent:main:api:dm:a", by="stop") == [later.id]
    assert book.get(later.id).status == "cancelled"
    assert book.get(elsewhere.id).status == "pending"
    assert book.cancel("agent:main:api:dm:a", by="stop") == []


def test_each_change_is_told_after_its_commit(store):
    told: list[object] = []
    store.add_change_listener(told.extend)
    book = ApprovalBook(store)
    row, _ = ask(book)
    book.decide(row.id, approve=False, by="a", sha256=row.arguments_sha256)
    kinds = [(c.kind, c.status, c.approval_id, c.tool) for c in told]
    assert kinds == [
        (ChangeKind.APPROVAL_REQUESTED, "pending", row.id, "delete_file"),
        (ChangeKind.APPROVAL_DECIDED, "denied", row.id, "delete_file"),
    ]


def test_an_incognito_lanes_approvals_stay_in_memory(store):
    from sessiongate.core.source import SessionSource

    entry = store.create_incognito_session(SessionSource(platform="api", chat_id="ghost"))
    book = ApprovalBook(store)
    row, _ = ask(book, key=entry.session_key)
    with store.database.transaction() as conn:
        assert conn.get_approval(row.id) is None  # nothing of it on disk
    assert book.get(row.id) == row
    assert [r.id for r in book.listed(status="pending")] == [row.id]
    assert book.decide(row.id, approve=True, by="a", sha256=row.arguments_sha256) is not None
    assert book.use(row.id)
