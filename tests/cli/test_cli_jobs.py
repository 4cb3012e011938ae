"""`sessiongate jobs ...` as real processes: a job's whole life from the command line, bad
input refused with nothing changed, and JSON for scripts."""

from __future__ import annotations

import json


def test_a_job_is_added_listed_shown_paused_resumed_run_and_removed(sg, home):
    h = ("--home", str(home))
    added = sg(
        "jobs", "add", "digest", "--every", "30m", "--deliver-to", "telegram:42",
        "--prompt", "the daily digest", *h, "--json",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)["next_at"] is not None
    table = sg("jobs", "list", *h)
    assert "digest" in table.stdout
    assert "every 30m" in table.stdout
    assert sg("jobs", "pause", "digest", *h).returncode == 0
    shown = json.loads(sg("jobs", "show", "digest", *h, "--json").stdout)
    assert (shown["id"], shown["paused"], shown["next_at"]) == ("digest", True, None)
    ran = sg("jobs", "run-now", "digest", *h, "--json")
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["state"] == "claimed"
    assert sg("jobs", "resume", "digest", *h).returncode == 0
    history = sg("jobs", "history", "digest", *h)
    assert "claimed" in history.stdout
    assert sg("jobs", "remove", "digest", *h).returncode == 0
    assert json.loads(sg("jobs", "list", *h, "--json").stdout) == {"jobs": []}


def test_bad_input_is_refused_with_the_reason_and_changes_nothing(sg, home):
    h = ("--home", str(home))
    bad = sg("jobs", "add", "j", "--cron", "61 * * * *", "--session-key", "k", "--prompt", "p", *h)
    assert bad.returncode == 2
    assert "minute" in bad.stderr
    assert "Traceback" not in bad.stderr
    both = sg(
        "jobs", "add", "j", "--every", "1h", "--cron", "* * * * *", "--session-key", "k",
        "--prompt", "p", *h, "--json",
    )  # fmt: skip
    assert both.returncode == 2
    assert "exactly one schedule" in json.loads(both.stderr)["error"]["message"]
    missing = sg("jobs", "show", "nope", *h, "--json")
    assert missing.returncode == 1
    assert json.loads(missing.stderr)["error"]["code"] == "job_not_found"
    sg("jobs", "add", "j", "--every", "1h", "--session-key", "k", "--prompt", "p", *h)
    again = sg("jobs", "add", "j", "--every", "2h", "--session-key", "k", "--prompt", "p", *h)
    assert again.returncode == 1
    assert "exists already" in again.stderr
    (only,) = json.loads(sg("jobs", "list", *h, "--json").stdout)["jobs"]
    assert only["every"] == "1h"  # the refusals changed nothing
