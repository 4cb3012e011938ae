"""The built-in `schedule` tool, called by the OpenAI-compatible agent (the fake server makes
the calls) inside a real gateway: its jobs target the calling session only, run there as
system turns, are bounded, and another session's jobs are answered as if they did not exist."""

from __future__ import annotations

import json

from fake_openai import Call, Calls, Reply
from sessiongate.store.jobs import JobStore


def create(**fields: object) -> Call:
    return Call("schedule", json.dumps({"action": "create", **fields}))


async def test_a_created_job_runs_its_prompt_in_the_calling_session(make_gateway, clock):
    gw = await make_gateway(tools=["schedule"])
    gw.server.script(Calls([create(prompt="check the build", every="1h")]), Reply("scheduled"))
    receipt = await gw.say("alice", "remind me hourly to check the build")
    assert receipt.reply == "scheduled"
    [created] = gw.tool_results(1)
    job_id = created["created"]["job_id"]
    [job] = JobStore(gw.store).all()
    assert (job.job_id, job.spec.session_key) == (job_id, gw.key("alice"))
    clock.advance(3600)
    [run] = await gw.runner.jobs.tick()
    assert (run.state, run.session_key) == ("accepted", gw.key("alice"))
    await gw.runner.wait_idle()
    entry = gw.store.get_session(gw.key("alice"))
    transcript = gw.store.load_transcript(entry.session_id)
    ran = next(m for m in transcript if m["content"] == "check the build")
    assert ran["metadata"]["event_kind"] == "cron"


async def test_list_and_cancel_reach_only_the_callers_own_jobs(make_gateway):
    gw = await make_gateway(tools=["schedule"])
    gw.server.script(Calls([create(prompt="bob's reminder", every="2h")]), Reply("ok"))
    await gw.say("bob", "remind me")
    [bobs] = gw.tool_results(1)
    bob_job = bobs["created"]["job_id"]
    gw.server.script(
        Calls(
            [
                Call("schedule", json.dumps({"action": "list"})),
                Call("schedule", json.dumps({"action": "cancel", "job_id": bob_job})),
                Call("schedule", json.dumps({"action": "cancel", "job_id": "sched-nope"})),
            ]
        ),
        Reply("done"),
    )
    await gw.say("alice", "show and cancel")
    listed, cancel_bobs, cancel_missing = gw.tool_results(3)
    assert listed == {"jobs": []}
    # Bob's job is answered exactly like one that does not exist, and is left alone.
    assert cancel_bobs["error"].replace(bob_job, "J") == cancel_missing["error"].replace(
        "sched-nope", "J"
    )
    assert [j.job_id for j in JobStore(gw.store).all()] == [bob_job]
    gw.server.script(
        Calls(
            [
                Call("schedule", json.dumps({"action": "cancel", "job_id": bob_job})),
                Call("schedule", json.dumps({"action": "list"})),
            ]
        ),
        Reply("gone"),
    )
    await gw.say("bob", "cancel mine")
    cancelled, after = gw.tool_results(5)[-2:]  # bob's history holds his first call too
    assert cancelled == {"cancelled": bob_job}
    assert after == {"jobs": []}
    assert JobStore(gw.store).all() == []


async def test_bad_or_too_many_jobs_are_clear_tool_errors(make_gateway):
    gw = await make_gateway(tools=["schedule"], session_tools={"schedule_max_jobs": 1})
    gw.server.script(
        Calls(
            [
                create(prompt="too often", every="1m"),
                create(prompt="too often", cron="* * * * *"),
                create(every="1h"),
                create(prompt="two", every="1h", cron="0 9 * * *"),
                create(prompt="past", at="2001-01-01T00:00:00Z"),
                create(prompt="fine", cron="0 9 * * *", timezone="Europe/Paris"),
                create(prompt="one more", every="1h"),
            ]
        ),
        Reply("tried"),
    )
    await gw.say("alice", "schedule things")
    often, often_cron, no_prompt, two, past, fine, more = gw.tool_results(1)
    assert "shortest interval allowed is 300 s" in often["error"]
    assert "60 s apart" in often_cron["error"]
    assert "needs a prompt" in no_prompt["error"]
    assert "exactly one schedule" in two["error"]
    assert "in the past" in past["error"]
    assert fine["created"]["cron"] == "0 9 * * *"
    assert "the most allowed" in more["error"]
    assert len(JobStore(gw.store).all()) == 1


async def test_the_tool_is_off_unless_named(make_gateway):
    gw = await make_gateway(tools=["sessions_list"])
    gw.server.script(Reply("hi"))
    await gw.say("alice", "hello")
    offered = [t["function"]["name"] for t in gw.server.requests[0]["body"]["tools"]]
    assert offered == ["sessions_list"]
