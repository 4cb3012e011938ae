"""A private PostgreSQL schema per test, on the server `SESSIONGATE_TEST_POSTGRES_URL` names.

Default: the project machines' server (`postgresql://postgres@127.0.0.1:5432/test`). Each test
gets a schema of its own with a unique name (other engineers run the suite at the same time on
the same server) that is dropped afterwards; with no server reachable, the PostgreSQL variants
skip with one line that says how to point them at one.
"""

from __future__ import annotations

import functools
import os
import threading
import uuid
from urllib.parse import quote

# Read at import: the suite's autouse fixture clears every SESSIONGATE_* variable per test.
# Named explicitly (as CI does), the server must answer: a run that was asked to test
# PostgreSQL never goes green by skipping it.
REQUIRED = bool(os.environ.get("SESSIONGATE_TEST_POSTGRES_URL"))
SERVER_URL = os.environ.get(
    "SESSIONGATE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
HOW_TO = (
    f"no PostgreSQL server at {SERVER_URL}: set SESSIONGATE_TEST_POSTGRES_URL to a "
    "postgresql:// URL of a database the tests may create schemas in"
)


@functools.cache
def server_problem() -> str | None:
    """None when the server answers, else the skip reason (asked once per run)."""
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed: pip install 'sessiongate[postgres]'"
    try:
        with psycopg.connect(SERVER_URL, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error:
        return HOW_TO
    return None


def wait_for(predicate, *, attempts: int = 1000) -> bool:
    """Whether `predicate` came true within `attempts` tries 10 ms apart: a hang guard for a
    connection a thread opens, not a timing assertion."""
    for _ in range(attempts):
        if predicate():
            return True
        threading.Event().wait(0.01)
    return False


def with_schema(url: str, schema: str) -> str:
    """`url` with the connection option that makes `schema` the search path."""
    joiner = "&" if "?" in url else "?"
    # The application name lets `drop` find the sessions a test left connected.
    options = quote(f"-csearch_path={schema}")
    return f"{url}{joiner}options={options}&application_name={schema}"


class Schema:
    """One throwaway schema; `url` connects to it."""

    def __init__(self) -> None:
        import psycopg

        self.name = f"sg_test_{uuid.uuid4().hex[:16]}"
        self.url = with_schema(SERVER_URL, self.name)
        with psycopg.connect(SERVER_URL, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{self.name}"')

    def drop(self) -> None:
        import psycopg

        with psycopg.connect(SERVER_URL, autocommit=True) as conn:
            # Sessions still connected (a store a test left open) would hold locks on it.
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE pid <> pg_backend_pid() AND query_start IS NOT NULL "
                "AND datname = current_database() AND application_name = %s",
                (self.name,),
            )
            conn.execute(f'DROP SCHEMA IF EXISTS "{self.name}" CASCADE')
