"""`/v1/jobs`: scheduled jobs over HTTP, with the API's error shape for every refusal."""

from __future__ import annotations

import pytest


@pytest.fixture
def lane(send) -> str:
    return send("hello")["session_key"]


def job(key: str, **fields: object) -> dict:
    return {"id": "digest", "every": "1h", "session_key": key, "prompt": "digest"} | fields


def test_a_job_is_created_read_listed_changed_and_removed(client, lane):
    created = client.post("/v1/jobs", json=job(lane))
    assert created.status_code == 201, created.text
    body = created.json()
    assert (body["id"], body["every"], body["paused"]) == ("digest", "1h", False)
    assert body["next_at"] is not None
    assert [j["id"] for j in client.get("/v1/jobs").json()["jobs"]] == ["digest"]
    assert client.get("/v1/jobs/digest").json()["session_key"] == lane
    paused = client.patch("/v1/jobs/digest", json={"paused": True})
    assert paused.status_code == 200, paused.text
    assert paused.json()["paused"] is True
    assert paused.json()["next_at"] is None
    changed = client.patch("/v1/jobs/digest", json={"every": None, "cron": "0 9 * * mon"})
    assert changed.json()["cron"] == "0 9 * * mon"
    assert client.delete("/v1/jobs/digest").json() == {"removed": "digest"}
    assert client.get("/v1/jobs/digest").status_code == 404


def test_run_now_accepts_a_turn_in_the_jobs_lane(client, lane):
    client.post("/v1/jobs", json=job(lane, paused=True))
    ran = client.post("/v1/jobs/digest/run")
    assert ran.status_code == 200, ran.text
    run = ran.json()
    assert (run["state"], run["session_key"]) == ("accepted", lane)
    assert run["turn_id"] is not None
    runs = client.get("/v1/jobs/digest/runs").json()["runs"]
    assert [r["run_id"] for r in runs] == [run["run_id"]]
    # Each run says how its turn stands; the list carries every job's latest run.
    assert runs[0]["turn_state"] is not None
    assert "delivery_status" in runs[0]
    (listed,) = client.get("/v1/jobs").json()["jobs"]
    assert listed["last_run"]["run_id"] == run["run_id"]


def test_a_job_that_never_ran_has_no_last_run(client, lane):
    client.post("/v1/jobs", json=job(lane))
    assert client.get("/v1/jobs").json()["jobs"][0]["last_run"] is None


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"every": "soon"}, "every"),
        ({"cron": "* * *"}, "cron: '* * *' has 3 fields"),
        ({"cron": "* * * * *"}, "exactly one schedule"),
        ({"colour": "red"}, "colour"),
        ({"agent": "nobody"}, "not configured"),
        ({"timezone": "Nowhere/Land"}, "IANA"),
        ({"every": None, "at": "2001-01-01T00:00:00Z"}, "in the past"),
    ],
)
def test_a_bad_job_is_refused_with_422_and_nothing_is_written(client, lane, fields, message):
    response = client.post("/v1/jobs", json=job(lane, **fields))
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "invalid_job"
    assert message in error["message"]
    assert client.get("/v1/jobs").json() == {"jobs": []}


def test_refusals_have_the_error_shape_and_change_nothing(client, lane):
    assert client.post("/v1/jobs", json=job(lane)).status_code == 201
    taken = client.post("/v1/jobs", json=job(lane, prompt="again"))
    assert (taken.status_code, taken.json()["error"]["code"]) == (409, "job_exists")
    missing = client.get("/v1/jobs/nope")
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "job_not_found")
    assert client.post("/v1/jobs/nope/run").status_code == 404
    assert client.delete("/v1/jobs/nope").status_code == 404
    bad = client.patch("/v1/jobs/digest", json={"agent": "nobody"})
    assert (bad.status_code, bad.json()["error"]["code"]) == (422, "invalid_job")
    renamed = client.patch("/v1/jobs/digest", json={"id": "other"})
    assert renamed.status_code == 422
    not_json = client.post("/v1/jobs", content=b"[1", headers={"content-type": "application/json"})
    assert not_json.status_code in (400, 422)
    assert client.get("/v1/jobs/digest").json()["prompt"] == "digest"
    assert client.get("/v1/jobs/digest/runs?limit=0").status_code == 422
