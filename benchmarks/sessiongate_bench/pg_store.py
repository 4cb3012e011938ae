"""sessiongate's PostgreSQL store beside plain psycopg 3, on the same server in the same run.

Both write into one private schema (`bench_schema`, dropped afterwards): sessiongate through
its public store API (a conversation's first turn creates its session and appends in one
transaction, `atomic(savepoints=False)`, as the gateway routes a new chat; later turns are one
`append_messages` each), the baseline into two tables of its own (`plain_conversations`,
`plain_messages`: id, conversation id, role, content, a JSONB payload, created_at), one
transaction per turn (the first turn's INSERT of the conversation, `executemany` of the turn's
rows, COMMIT).

- appends: the same turns of 2-4 messages to random conversations, each created by its first
  turn, in `rounds` rounds, the two taking turns at going first; medians of msg/s and their
  ratio (sessiongate ÷ psycopg).
- writers: `writers` threads, each appending to conversations of its own, through ONE shared
  sessiongate store, against psycopg with a connection per thread; msg/s each and the ratio,
  and every acknowledged message counted back (lost must be 0).
- tail_50: the last 50 messages of one conversation, sessiongate's `load_transcript(limit=50)`
  against `ORDER BY id DESC LIMIT 50`, read alternately; p50/p99 each.
- round_trips: a sample of appends to known conversations with libpq's protocol trace on the
  writing connection (`postgres_trace.count_trace`).

Skipped with the reason without a PostgreSQL server. The server shares the machine's cores
with the benchmark, so the figures say what this machine does.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessiongate_bench.in_process import latency_summary
from sessiongate_bench.postgres import HOW_TO, bench_schema, server_problem
from sessiongate_bench.postgres_trace import count_trace

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sessiongate import SessionStore

__all__ = ["PgStoreSizes", "pg_store_goals", "pg_store_lines", "run_pg_store_section"]

X = "\u00d7"
_TAIL = 50
_SCHEMA = """
CREATE TABLE plain_conversations (
    id bigserial PRIMARY KEY, name text NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE plain_messages (
    id bigserial PRIMARY KEY,
    conversation_id bigint NOT NULL REFERENCES plain_conversations(id),
    role text NOT NULL, content text NOT NULL, payload jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now());
CREATE INDEX plain_messages_tail ON plain_messages (conversation_id, id);
"""
_INSERT_CONVERSATION = "INSERT INTO plain_conversations (name) VALUES (%s) RETURNING id"
_INSERT_MESSAGE = (
    "INSERT INTO plain_messages (conversation_id, role, content, payload) VALUES (%s, %s, %s, %s)"
)
_TAIL_SQL = (
    "SELECT id, role, content, payload, created_at FROM plain_messages "
    "WHERE conversation_id = %s ORDER BY id DESC LIMIT 50"
)
_COUNT_SQL = (
    "SELECT c.name, count(m.id) FROM plain_conversations c "
    "LEFT JOIN plain_messages m ON m.conversation_id = c.id WHERE c.name LIKE %s GROUP BY c.name"
)

Message = dict[str, str]


@dataclass(frozen=True, slots=True)
class PgStoreSizes:
    conversations: int = 1000
    messages: int = 12000  # per round, in turns of 2-4
    rounds: int = 3
    writers: int = 8
    writer_turns: int = 100  # per thread
    tail_messages: int = 300
    tail_reads: int = 1000
    traced_turns: int = 50

    @classmethod
    def quick(cls) -> PgStoreSizes:
        return cls(conversations=40, messages=400, writer_turns=10, tail_messages=60,
                   tail_reads=100, traced_turns=10)  # fmt: skip


def run_pg_store_section(
    url: str | None, *, quick: bool, sizes: PgStoreSizes | None = None
) -> dict[str, Any]:
    """`{"status": "ok", "appends": ..., "writers": ..., "tail_50": ..., "round_trips": ...}`,
    or skipped / error with the reason."""
    sizes = sizes or (PgStoreSizes.quick() if quick else PgStoreSizes())
    if url is None:
        return {"status": "skipped", "reason": HOW_TO}
    problem = server_problem(url)
    if problem is not None:
        return {"status": "skipped", "reason": problem}
    import psycopg

    try:
        with (
            tempfile.TemporaryDirectory(prefix="sessiongate-pg-store-bench-") as tmp,
            bench_schema(url) as schema_url,
        ):
            with psycopg.connect(schema_url, autocommit=True) as conn:
                conn.execute(_SCHEMA)
            store = _open_store(Path(tmp), schema_url)
            try:
                return {"status": "ok", "sizes": asdict(sizes)} | _measure(store, schema_url, sizes)
            finally:
                store.close()
    except (psycopg.Error, OSError, RuntimeError, ValueError) as exc:
        return {"status": "error", "reason": f"{type(exc).__name__}: {exc}"[:1000]}


def _open_store(home: Path, url: str) -> SessionStore:
    from sessiongate import GatewayConfig, SessionStore

    config = GatewayConfig.model_validate({"store": {"url": url}, "mirror_sessions_json": False})
    return SessionStore(home / "sessions", config)


def _measure(store: SessionStore, url: str, sizes: PgStoreSizes) -> dict[str, Any]:
    import psycopg

    with psycopg.connect(url) as conn, psycopg.connect(url, autocommit=True) as reader:
        sg, plain = _Sessiongate(store), _Plain(conn)
        for i in range(20):  # warm-up: imports, caches, prepared statements
            sg.turn(f"warm-{i % 4}", _messages(i, 3))
            plain.turn(f"warm-{i % 4}", _messages(i, 3))
        appends = _appends(sg, plain, sizes)
        database: Any = store.database  # the PostgreSQL backend: its writer connection
        trips = {
            "sessiongate": _traced(database.conn.pgconn, sg, sizes.traced_turns),
            "psycopg": _traced(conn.pgconn, plain, sizes.traced_turns),
        }
        writers = _writers(store, url, sizes)
        tail = _tail(store, sg, plain, reader, sizes)
    return {"appends": appends, "writers": writers, "tail_50": tail, "round_trips": trips}


def _messages(i: int, n: int) -> list[Message]:
    filler = "lorem ipsum dolor sit amet " * 3
    return [
        {"role": "user" if k % 2 == 0 else "assistant", "content": f"message {i}.{k} {filler}"}
        for k in range(n)
    ]


class _Writer:
    """One side's turns: `turn(name, messages)`; `known` maps a conversation to its id."""

    def __init__(self) -> None:
        self.known: dict[str, Any] = {}

    def turn(self, name: str, messages: list[Message]) -> None:
        raise NotImplementedError


class _Sessiongate(_Writer):
    def __init__(self, store: SessionStore) -> None:
        super().__init__()
        self.store = store

    def turn(self, name: str, messages: list[Message]) -> None:
        from sessiongate import SessionSource
        from sessiongate.core.platform import Platform

        sid = self.known.get(name)
        if sid is not None:
            self.store.append_messages(sid, messages)
            return
        with self.store.atomic(savepoints=False):
            source = SessionSource(platform=Platform.API, chat_id=name)
            sid = self.store.get_or_create_session(source).session_id
            self.store.append_messages(sid, messages)
        self.known[name] = sid


class _Plain(_Writer):
    def __init__(self, conn: Any) -> None:
        super().__init__()
        self.conn = conn

    def turn(self, name: str, messages: list[Message]) -> None:
        from psycopg.types.json import Jsonb

        with self.conn.cursor() as cur:
            cid = self.known.get(name)
            if cid is None:
                cur.execute(_INSERT_CONVERSATION, (name,))
                cid = cur.fetchone()[0]
            rows = [(cid, m["role"], m["content"], Jsonb(m)) for m in messages]
            cur.executemany(_INSERT_MESSAGE, rows)
        self.conn.commit()
        self.known[name] = cid


def _plan(sizes: PgStoreSizes, seed: int) -> list[tuple[int, int]]:
    """(conversation, messages) per turn: `sizes.messages` in turns of 2-4."""
    rng, turns, left = random.Random(seed), [], sizes.messages
    while left > 0:
        n = min(rng.randint(2, 4), left)
        turns.append((rng.randrange(sizes.conversations), n))
        left -= n
    return turns


def _run_turns(turn: _Writer, prefix: str, plan: Sequence[tuple[int, int]]) -> dict[str, Any]:
    latencies: list[float] = []
    started = time.perf_counter()
    for i, (conversation, n) in enumerate(plan):
        t0 = time.perf_counter()
        turn.turn(f"{prefix}-c{conversation}", _messages(i, n))
        latencies.append(time.perf_counter() - t0)
    seconds = time.perf_counter() - started
    messages = sum(n for _, n in plan)
    return {"msg_per_s": round(messages / seconds, 1), "turn_ms": latency_summary(latencies)}


def _appends(sg: _Writer, plain: _Writer, sizes: PgStoreSizes) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {"sessiongate": [], "psycopg": []}
    for r in range(sizes.rounds):
        plan = _plan(sizes, seed=r)
        order = [("sessiongate", sg), ("psycopg", plain)]
        for name, turn in order if r % 2 == 0 else order[::-1]:
            runs[name].append(_run_turns(turn, f"a{r}", plan))
    result: dict[str, Any] = {}
    for name, parts in runs.items():
        rates = [p["msg_per_s"] for p in parts]
        result[name] = {
            "msg_per_s": statistics.median(rates),
            "rounds": rates,
            "turn_ms": [p["turn_ms"] for p in parts],
        }
    result["ratio"] = _ratio(result["sessiongate"]["msg_per_s"], result["psycopg"]["msg_per_s"])
    return result


def _traced(pgconn: Any, turn: _Writer, n: int) -> dict[str, float]:
    """Round trips, statements and commits per append to a conversation that exists."""
    import psycopg

    turn.turn("traced", _messages(0, 3))
    with tempfile.TemporaryFile("w+") as trace:
        pgconn.trace(trace.fileno())
        pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            for i in range(n):
                turn.turn("traced", _messages(i, 3))
        finally:
            pgconn.untrace()
        trace.seek(0)
        counts = count_trace(iter(trace))
    return {f"{key}_per_append": round(value / n, 2) for key, value in counts.items()}


def _writers(store: SessionStore, url: str, sizes: PgStoreSizes) -> dict[str, Any]:
    import psycopg

    runs: dict[str, list[dict[str, Any]]] = {"sessiongate": [], "psycopg": []}
    for r in range(sizes.rounds):
        sides = ["sessiongate", "psycopg"] if r % 2 == 0 else ["psycopg", "sessiongate"]
        for side in sides:
            conns = [psycopg.connect(url) for _ in range(sizes.writers if side == "psycopg" else 0)]
            try:
                shared = _Sessiongate(store)
                turns: list[_Writer] = [_Plain(c) for c in conns] or [shared] * sizes.writers
                run = _threads(turns, f"w{r}", sizes.writer_turns)
                known: dict[str, Any] = {}
                for t in turns:
                    known |= t.known
                run["stored"] = (
                    {n: len(store.load_transcript(sid)) for n, sid in known.items()}
                    if side == "sessiongate"
                    else _plain_counts(url, f"w{r}-%")
                )
            finally:
                for conn in conns:
                    conn.close()
            acked, stored = run.pop("acked"), run.pop("stored")
            run["acknowledged"] = sum(acked.values())
            run["stored"] = sum(stored.get(n, 0) for n in acked)
            run["lost"] = sum(max(0, n - stored.get(name, 0)) for name, n in acked.items())
            runs[side].append(run)
    result: dict[str, Any] = {"threads": sizes.writers}
    for side, parts in runs.items():
        result[side] = {
            "msg_per_s": statistics.median(p["msg_per_s"] for p in parts),
            "rounds": [p["msg_per_s"] for p in parts],
            **{k: sum(p[k] for p in parts) for k in ("acknowledged", "stored", "lost", "errors")},
            "error_kinds": sorted({k for p in parts for k in p["error_kinds"]}),
        }
    result["ratio"] = _ratio(result["sessiongate"]["msg_per_s"], result["psycopg"]["msg_per_s"])
    return result


def _threads(turns: Sequence[_Writer], prefix: str, per_thread: int) -> dict[str, Any]:
    """Each thread appends `per_thread` turns to 4 conversations of its own."""
    acked: dict[str, int] = {}
    errors: list[str] = []
    lock, start = threading.Lock(), threading.Barrier(len(turns) + 1)

    def work(k: int, turn: _Writer) -> None:
        start.wait()
        for i in range(per_thread):
            name, messages = f"{prefix}-t{k}-c{i % 4}", _messages(i, 2 + i % 3)
            try:
                turn.turn(name, messages)
            except Exception as exc:  # counted and reported, not raised: the run goes on
                with lock:
                    errors.append(type(exc).__name__)
                continue
            with lock:
                acked[name] = acked.get(name, 0) + len(messages)

    threads = [threading.Thread(target=work, args=(k, t)) for k, t in enumerate(turns)]
    for thread in threads:
        thread.start()
    start.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - started
    rate = round(sum(acked.values()) / seconds, 1)
    return {"msg_per_s": rate, "acked": acked, "errors": len(errors), "error_kinds": errors}


def _plain_counts(url: str, pattern: str) -> dict[str, int]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        counts: dict[str, int] = dict(conn.execute(_COUNT_SQL, (pattern,)).fetchall())
        return counts


def _tail(
    store: SessionStore, sg: _Writer, plain: _Writer, reader: Any, sizes: PgStoreSizes
) -> dict[str, Any]:
    for i in range(0, sizes.tail_messages, 3):
        sg.turn("hot", _messages(i, 3))
        plain.turn("hot", _messages(i, 3))
    sid, cid = sg.known["hot"], plain.known["hot"]

    def read_sg() -> int:
        return len(store.load_transcript(sid, limit=_TAIL))

    def read_plain() -> int:
        return len(reader.execute(_TAIL_SQL, (cid,)).fetchall()[::-1])

    times: dict[str, list[float]] = {"sessiongate": [], "psycopg": []}
    reads = [("sessiongate", read_sg), ("psycopg", read_plain)]
    for i in range(sizes.tail_reads):
        for name, read in reads if i % 2 == 0 else reads[::-1]:
            t0 = time.perf_counter()
            got = read()
            times[name].append(time.perf_counter() - t0)
            if got != min(_TAIL, sizes.tail_messages):
                raise RuntimeError(f"{name}'s tail read returned {got} messages")
    result: dict[str, Any] = {name: latency_summary(t) for name, t in times.items()}
    result["ratio_p50"] = _ratio(result["sessiongate"]["p50_ms"], result["psycopg"]["p50_ms"])
    return result


def _ratio(mine: float, base: float) -> float:
    return round(mine / base, 3) if base > 0 else 0.0


# ---------------------------------------------------------------------------- the report

_GOALS = (
    f"PostgreSQL store appends ≥ 0.8{X} plain psycopg 3",
    f"8 writers through one PostgreSQL store ≥ 0.8{X} psycopg connection-per-thread",
)


def pg_store_goals(results: dict[str, Any]) -> list[dict[str, Any]]:
    section = results.get("pg_store", {})
    if section.get("status") != "ok":
        why = f"not measured: {section.get('reason', 'no pg_store section')}"
        return [{"goal": name, "measured": why, "passed": None} for name in _GOALS]
    appends, writers = section["appends"], section["writers"]
    sg, pg = writers["sessiongate"], writers["psycopg"]
    lost = sg["lost"] + pg["lost"]
    return [
        {
            "goal": _GOALS[0],
            "measured": f"{appends['ratio']:.2f}{X} ({appends['sessiongate']['msg_per_s']:,.0f} "
            f"vs {appends['psycopg']['msg_per_s']:,.0f} msg/s)",
            "passed": appends["ratio"] >= 0.8,
        },
        {
            "goal": _GOALS[1],
            "measured": f"{writers['ratio']:.2f}{X} ({sg['msg_per_s']:,.0f} vs "
            f"{pg['msg_per_s']:,.0f} msg/s, {writers['threads']} threads; lost {lost})",
            "passed": writers["ratio"] >= 0.8 and lost == 0 and sg["errors"] == 0,
        },
    ]


def pg_store_lines(section: dict[str, Any]) -> list[str]:
    """The report's markdown: appends, writers and tail reads side by side, or why not."""
    lines = ["## PostgreSQL store beside plain psycopg 3", ""]
    if section.get("status") != "ok":
        return [*lines, f"Not measured: {section.get('reason', 'no pg_store section')}.", ""]
    s, a, w, t = section["sizes"], section["appends"], section["writers"], section["tail_50"]
    trips = section["round_trips"]
    lines += [
        f"Same server, same schema, same run: {s['messages']:,} messages in turns of 2-4 to "
        f"{s['conversations']:,} conversations per round, {s['rounds']} rounds taking turns at "
        f"going first (medians); {w['threads']} writer threads, {s['writer_turns']} turns each.",
        "",
        "| | sessiongate | psycopg 3 | ratio |",
        "|---|---|---|---|",
        f"| appends msg/s | {a['sessiongate']['msg_per_s']:,.0f} | "
        f"{a['psycopg']['msg_per_s']:,.0f} | {a['ratio']:.2f}{X} |",
        f"| {w['threads']} writers msg/s (one store / a connection each) | "
        f"{w['sessiongate']['msg_per_s']:,.0f} | {w['psycopg']['msg_per_s']:,.0f} | "
        f"{w['ratio']:.2f}{X} |",
        f"| writers: acknowledged / lost / errors | {_acks(w['sessiongate'])} | "
        f"{_acks(w['psycopg'])} | |",
        f"| tail 50 p50 / p99 | {_pair(t['sessiongate'])} | {_pair(t['psycopg'])} | "
        f"{t['ratio_p50']:.2f}{X} |",
        f"| round trips / statements per append | {_trips(trips['sessiongate'])} | "
        f"{_trips(trips['psycopg'])} | |",
        "",
    ]
    return lines


def _acks(side: dict[str, Any]) -> str:
    return f"{side['acknowledged']:,} / {side['lost']} / {side['errors']}"


def _pair(p: dict[str, float]) -> str:
    return f"{p['p50_ms']:.3f} / {p['p99_ms']:.3f} ms"


def _trips(t: dict[str, float]) -> str:
    return f"{t['round_trips_per_append']:.2f} / {t['statements_per_append']:.2f}"
