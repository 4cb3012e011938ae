"""Scheduled jobs in the store (`JobStore`), on every backend: the job rows, the claim of a
slot that is held once ever, the cursor that `catch_up` moves, and run history."""

from __future__ import annotations

import pytest

from sessiongate.core.jobs import JobSpec
from sessiongate.store.jobs import JobExistsError, JobNotFoundError, JobStore
from sessiongate.store.records import to_us


def _spec(**fields: object) -> JobSpec:
    base: dict[str, object] = {"id": "digest", "every": "30m", "session_key": "k", "prompt": "p"}
    return JobSpec.model_validate({**base, **fields})


def test_a_job_is_added_once_listed_updated_paused_and_removed(store):
    jobs = JobStore(store)
    added = jobs.add(_spec())
    assert added.job_id == "digest"
    with pytest.raises(JobExistsError):
        jobs.add(_spec(prompt="other"))
    assert [j.job_id for j in jobs.all()] == ["digest"]
    assert jobs.update("digest", {"prompt": "new"}).spec.prompt == "new"
    assert jobs.set_paused("digest", True).paused
    assert jobs.get("digest").paused
    with pytest.raises(ValueError, match="every"):
        jobs.update("digest", {"every": "soon"})
    assert jobs.get("digest").spec.every == "30m"  # the refused change wrote nothing
    jobs.remove("digest")
    with pytest.raises(JobNotFoundError):
        jobs.get("digest")
    with pytest.raises(JobNotFoundError):
        jobs.remove("digest")


def test_a_slot_is_claimed_once_even_by_a_second_claimant(store, clock):
    jobs = JobStore(store)
    jobs.add(_spec())
    assert jobs.claim_due("digest", owner="a") == []  # nothing due yet
    clock.advance(30 * 60)
    runs = jobs.claim_due("digest", owner="a")
    assert [r.state for r in runs] == ["claimed"]
    assert jobs.claim_due("digest", owner="b") == []  # the cursor moved past it
    # A claimant that read the cursor before it moved still cannot hold the slot.
    with store.database.transaction() as conn:
        again = conn.claim_job_slot("digest", to_us(runs[0].slot_at), owner="b", at=0, skipped=0)
    assert again is None
    assert [r.run_id for r in jobs.unfinished()] == [runs[0].run_id]
    jobs.mark(runs[0].run_id, "accepted", session_key="k", turn_id=7)
    assert jobs.unfinished() == []
    found = jobs.run_of_turn(7)
    assert found is not None
    assert (found.session_key, found.state) == ("k", "accepted")
    assert [r.run_id for r in jobs.history("digest")] == [runs[0].run_id]


@pytest.mark.parametrize(
    ("catch_up", "ran", "skipped"), [("latest", 1, 4), ("all", 3, 2), ("none", 0, 5)]
)
def test_slots_missed_while_down_follow_catch_up(store, clock, catch_up, ran, skipped):
    jobs = JobStore(store)
    jobs.add(_spec(catch_up=catch_up, catch_up_cap=3))
    clock.advance(5 * 30 * 60 + 120)  # five slots missed, the last two minutes ago
    runs = jobs.claim_due("digest", owner="a")
    assert len(runs) == ran
    assert runs == sorted(runs, key=lambda r: r.slot_at)
    history = jobs.history("digest")
    assert sum(r.skipped for r in history) == (skipped if ran else 0)
    assert jobs.get("digest").cursor_at is not None
    clock.advance(30 * 60 - 120)  # back up: the next slot is on time, whatever `catch_up`
    assert len(jobs.claim_due("digest", owner="a")) == 1


def test_a_paused_job_claims_nothing_and_run_now_claims_an_extra_slot(store, clock):
    jobs = JobStore(store)
    jobs.add(_spec(paused=True, catch_up="all"))
    clock.advance(3600)
    assert jobs.claim_due("digest", owner="a") == []
    jobs.set_paused("digest", False)
    assert jobs.claim_due("digest", owner="a") == []  # the paused slots are not caught up
    clock.advance(1800)
    assert len(jobs.claim_due("digest", owner="a")) == 1
    jobs.set_paused("digest", True)
    clock.advance(1)
    run = jobs.claim_now("digest", owner="a")
    assert run.slot_at == clock.now()
    with pytest.raises(JobExistsError):
        jobs.claim_now("digest", owner="b")
    with pytest.raises(JobNotFoundError):
        jobs.claim_now("nope", owner="a")


def test_config_sync_adds_and_updates_but_keeps_a_runtime_pause(store):
    jobs = JobStore(store)
    jobs.sync([_spec()])
    jobs.set_paused("digest", True)
    jobs.sync([_spec(prompt="changed")])
    got = jobs.get("digest")
    assert got.paused
    assert got.spec.prompt == "changed"
