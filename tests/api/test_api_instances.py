"""`GET /v1/instances` and the instance metrics, on SQLite (one instance by construction) and
on a shared PostgreSQL schema (this instance registered, beside another one)."""

from __future__ import annotations

import pytest

from sessiongate import GatewayConfig
from sessiongate.store.ownership import Ownership


@pytest.fixture(params=["sqlite", "postgres"])
def config(request) -> GatewayConfig:
    if request.param == "sqlite":
        return GatewayConfig()
    schema = request.getfixturevalue("pg_schema")
    return GatewayConfig(store={"url": schema.url})  # type: ignore[arg-type]


def test_this_instance_is_listed_with_its_lanes(client, send, store, config):
    send("hello")
    listed = client.get("/v1/instances").json()["instances"]
    mine = [i for i in listed if i["this"]]
    assert len(mine) == 1
    assert mine[0]["state"] == "live"
    assert mine[0]["heartbeat_age_s"] < 60
    if config.store.url is None:
        assert listed == mine
        assert mine[0]["instance_id"] == "local"
        return
    other = Ownership(store.database, instance_id="other")  # type: ignore[arg-type]
    other.start()
    other.claim("agent:main:api:dm:bob")
    listed = {i["instance_id"]: i for i in client.get("/v1/instances").json()["instances"]}
    assert listed["other"]["lanes"] == 1
    assert listed["other"]["this"] is False
    metrics = client.get("/metrics").text
    assert "sessiongate_runner_database_connected 1.0" in metrics
    assert "sessiongate_runner_fenced_commits 0.0" in metrics
