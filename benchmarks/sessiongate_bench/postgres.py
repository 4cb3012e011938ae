"""The gateway on PostgreSQL: one instance in process with the echo agent, beside SQLite's.

The server comes from `sessiongate bench --postgres-url`, else `SESSIONGATE_BENCH_POSTGRES_URL`;
with neither (or psycopg missing, or no server answering) the section is skipped with the
reason and the rest of the benchmark goes on. It works in a schema of its own, made and
dropped here, so it can share a database with other users.

Turns per second are timed with nothing traced. A sample of turns afterwards runs with libpq's
protocol trace on the store's writer connection, and the trace is counted:

- `round_trips_per_turn`: the times the client sent and then read the server's answer (a run
  of frontend messages followed by backend ones). Every statement outside pipeline mode is one;
  in pipeline mode, one flush or sync carries all the statements queued before it. A reply
  that arrives while the client is still sending counts as a new round trip, so the count
  errs high, never low.
- `statements_per_turn`: Execute and simple Query messages (BEGIN, SAVEPOINT and COMMIT count).
- `transactions_per_turn`: COMMITs the server confirmed.
- `cpu_ms_per_turn`, `server_cpu_ms_per_turn`: CPU time of the gateway process and of the
  server process behind the writer connection (read from /proc: the server on this machine),
  over the timed turns. On a shared machine these vary far less than turns per second.
- `reader_checkouts_per_turn`: connections the turns took from the reader pool (their
  statements are not in the trace; with short transcripts there are none).

The same is measured again with `synchronous_commit=off` in the connection's options
(`async_commit`): SQLite's default durability, where a commit does not wait for the disk.
Otherwise each of a turn's two commits waits for one WAL flush, and on a slow disk that alone
bounds one instance's sequential turns.

The trace covers the connection, not the task, so the instance's heartbeat and its sweep
(each a transaction of its own, every 2 s and 1 s by default) are set to an hour for the
measure: what is counted is the turns'.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from sessiongate_bench.in_process import measure_in_process
from sessiongate_bench.postgres_trace import count_trace, server_cpu_reader, traced_turns

if TYPE_CHECKING:
    from collections.abc import Iterator


__all__ = [
    "ENV_URL",
    "bench_schema",
    "count_trace",
    "postgres_url_from",
    "run_postgres_section",
    "server_cpu_reader",
    "server_problem",
    "traced_turns",
]

ENV_URL = "SESSIONGATE_BENCH_POSTGRES_URL"
# The second measure's server setting: a commit returns before its WAL reaches the disk, the
# durability of SQLite's default `synchronous=NORMAL` (a crash of the process or the server
# loses nothing; one of the machine may lose the last moments of commits).
ASYNC_COMMIT = "-csynchronous_commit=off"
HOW_TO = f"no PostgreSQL URL: pass --postgres-url or set {ENV_URL}"


def postgres_url_from(option: str | None) -> str | None:
    """The server to measure on: the option, else the environment, else None."""
    url = option or os.environ.get(ENV_URL) or None
    return url.strip() if url else None


def run_postgres_section(
    url: str | None, *, chats: int, turns: int, timeout_s: float
) -> dict[str, Any]:
    """`{"status": "ok", "in_process": {...}}`, or skipped / error with the reason."""
    if url is None:
        return {"status": "skipped", "reason": HOW_TO}
    problem = server_problem(url)
    if problem is not None:
        return {"status": "skipped", "reason": problem}
    command = [sys.executable, "-m", "sessiongate_bench.postgres", url]
    with tempfile.TemporaryDirectory(prefix="sessiongate-postgres-bench-") as tmp:
        try:
            done = subprocess.run(
                [*command, tmp, str(chats), str(turns)],
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return {"status": "error", "reason": f"no result within {timeout_s:.0f} s"}
    if done.returncode != 0:
        return {"status": "error", "reason": done.stderr.strip()[-800:]}
    in_process: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return {"status": "ok", "chats": chats, "turns": turns, "in_process": in_process}


def server_problem(url: str) -> str | None:
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed: pip install 'sessiongate[postgres]'"
    from sessiongate.store.postgres.database import redact_url, redacted_error

    try:
        with psycopg.connect(url, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return (
            f"no PostgreSQL server answers at {redact_url(url)}: {redacted_error(exc, url)[:200]}"
        )
    return None


@contextlib.contextmanager
def bench_schema(url: str, *, settings: str = "") -> Iterator[str]:
    """A fresh schema on `url`; yields the URL that uses it (with the server `settings`,
    `-c name=value` options), drops it afterwards."""
    import psycopg

    name = f"sg_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    joiner = "&" if "?" in url else "?"
    try:
        yield f"{url}{joiner}options={quote(f'-csearch_path={name} {settings}'.strip())}"
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def main(argv: list[str] | None = None) -> int:
    """The child: `URL WORK CHATS TURNS`, printing one JSON line."""
    parser = argparse.ArgumentParser(prog="python -m sessiongate_bench.postgres")
    parser.add_argument("url")
    parser.add_argument("work", type=Path)
    parser.add_argument("chats", type=int)
    parser.add_argument("turns", type=int)
    args = parser.parse_args(argv)
    with bench_schema(args.url) as url:
        result = asyncio.run(measure_in_process(args.work / "a", args.chats, args.turns, url=url))
    with bench_schema(args.url, settings=ASYNC_COMMIT) as url:
        result["async_commit"] = asyncio.run(
            measure_in_process(args.work / "b", args.chats, args.turns, url=url)
        )
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        raise SystemExit(main())
