"""What a gateway's turns ask of PostgreSQL, counted from libpq's protocol trace of the
store's writer connection and the server process's CPU time (`bench/postgres.py` explains
the counts)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from sessiongate import SessionStore
    from sessiongate.gateway import GatewayRunner, MessageEvent

__all__ = ["count_trace", "server_cpu_reader", "traced_turns"]


def count_trace(lines: Iterator[str]) -> dict[str, int]:
    """Round trips, statements and commits in a libpq protocol trace (`PQtrace`)."""
    round_trips = statements = commits = 0
    last = ""
    for line in lines:
        direction, _, rest = line.partition("\t")
        _, _, message = rest.partition("\t")
        if direction == "F":
            if last != "F":
                round_trips += 1
            if message.startswith(("Execute", "Query")):
                statements += 1
        elif direction == "B" and message.startswith('CommandComplete\t "COMMIT"'):
            commits += 1
        if direction in ("F", "B"):
            last = direction
    return {"round_trips": round_trips, "statements": statements, "commits": commits}


def server_cpu_reader(store: SessionStore) -> Callable[[], float]:
    """CPU seconds of the server processes behind the store's writer connections so far (the
    server on this machine; 0 for a process that cannot be read)."""
    database: Any = store.database
    stats = [Path(f"/proc/{c.info.backend_pid}/stat") for c in database.writer_connections()]
    ticks = os.sysconf("SC_CLK_TCK")

    def cpu(stat: Path) -> float:
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime

    return lambda: sum(cpu(stat) for stat in stats)


async def traced_turns(
    store: SessionStore, runner: GatewayRunner, events: Sequence[MessageEvent]
) -> dict[str, float]:
    """Run `events` one after another with every writer connection's protocol traced;
    per-turn counts (the turns' store calls run on the store's threads, each taking a
    writer of its own)."""
    import psycopg

    database: Any = store.database
    readers_before = database._readers.get_stats().get("requests_num", 0)
    with contextlib.ExitStack() as files:
        traces = []
        with contextlib.ExitStack() as traced:
            for conn in database.writer_connections():
                trace = files.enter_context(tempfile.TemporaryFile("w+"))
                conn.pgconn.trace(trace.fileno())
                conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
                traced.callback(conn.pgconn.untrace)
                traces.append(trace)
            for message in events:
                receipt = await runner.handle_message(message)
                if receipt.status != "replied":
                    raise RuntimeError(f"turn not replied: {receipt}")
        counts = {"round_trips": 0, "statements": 0, "commits": 0}
        for trace in traces:
            trace.seek(0)
            for name, value in count_trace(iter(trace)).items():
                counts[name] += value
    readers = database._readers.get_stats().get("requests_num", 0) - readers_before
    n = len(events)
    return {
        "sample_turns": n,
        "round_trips_per_turn": round(counts["round_trips"] / n, 2),
        "statements_per_turn": round(counts["statements"] / n, 2),
        "transactions_per_turn": round(counts["commits"] / n, 2),
        "reader_checkouts_per_turn": round(readers / n, 2),
    }
