"""Homes written by an earlier release are opened, migrated and served by this one.

`tests/fixtures/upgrade/<release>/` holds what `make_homes.py` beside them wrote with that
release's code: a SQLite home as its files, and a PostgreSQL schema as a `pg_dump`. Each is
copied (or loaded into a schema of its own), served by a real `sessiongate run`, read back
over HTTP and written to: the old conversations are all there, and they go on.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from postgres_support import Schema, server_problem
from sg_process import GatewayProcess, clean_env

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "upgrade"
RELEASES = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())
FIXTURE_SCHEMA = "sg_fixture_release"


def _check_served(url: str) -> None:
    with httpx.Client(base_url=url, timeout=30) as http:
        keys = {row["session_key"] for row in http.get("/v1/sessions").json()["sessions"]}
        for chat in ("alice", "bob"):
            assert f"agent:main:api:dm:{chat}" in keys
        carol = http.get("/v1/sessions/" + quote("agent:main:api:dm:carol", safe="")).json()
        assert carol["archived"] is True
        assert any(key.startswith("agent:main:api:dm:alice:%f") for key in keys), keys

        def texts(key: str) -> list[str]:
            path = "/v1/sessions/" + quote(key, safe="") + "/transcript"
            events = http.get(path, params={"branch": "all"}).json()["events"]
            return [e["content"] for e in events if e["type"] == "message"]

        alice = texts("agent:main:api:dm:alice")
        assert "alice message 0 about kumquats" in alice
        assert "alice last word" in alice  # the rewound branch is kept
        assert "alice on a new branch" in alice
        bob = http.get("/v1/sessions/" + quote("agent:main:api:dm:bob", safe="")).json()
        assert bob["label"] == "bob-label"
        assert bob["pinned"] is True
        found = http.get("/v1/search", params={"q": "kumquats"}).json()["results"]
        assert found, "the full-text index answers for old messages"
        reply = http.post("/v1/messages", json={"chat_id": "alice", "text": "after upgrade"})
        assert reply.status_code == 200, reply.text
        assert reply.json()["reply"] == "echo: after upgrade"
        assert "after upgrade" in texts("agent:main:api:dm:alice")


@pytest.mark.parametrize("release", RELEASES)
async def test_an_earlier_sqlite_home_is_served(tmp_path: Path, release: str) -> None:
    home = tmp_path / "home"
    shutil.copytree(FIXTURES / release / "sqlite-home", home)
    gateway = GatewayProcess(home)
    try:
        url = await gateway.start()
        _check_served(url)
    finally:
        await gateway.aclose()


@pytest.mark.parametrize("release", RELEASES)
async def test_an_earlier_postgres_schema_is_served(tmp_path: Path, release: str) -> None:
    problem = server_problem()
    if problem is not None:
        pytest.skip(problem)
    import psycopg

    schema = Schema()
    try:
        # psql's own meta-commands (`\restrict` in newer dumps) are not SQL.
        lines = (FIXTURES / release / "postgres.sql").read_text().splitlines()
        dump = "\n".join(line for line in lines if not line.startswith("\\"))
        dump = dump.replace(f"CREATE SCHEMA {FIXTURE_SCHEMA};", "")
        dump = dump.replace(f"{FIXTURE_SCHEMA}.", f'"{schema.name}".')
        with psycopg.connect(schema.url, autocommit=True) as conn:
            conn.execute(dump.encode())
        gateway = GatewayProcess(
            tmp_path / "home", env=clean_env(SESSIONGATE_STORE__URL=schema.url)
        )
        try:
            url = await gateway.start()
            _check_served(url)
        finally:
            await gateway.aclose()
    finally:
        schema.drop()
