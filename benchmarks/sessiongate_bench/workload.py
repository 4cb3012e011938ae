"""The benchmark workload of issue 5, run in a child process against one store adapter.

Standard library only: this same file runs under the project's interpreter (sessiongate's store,
the `sqlite3` baseline) and, as a script, under the contenders' virtual environment where
sessiongate is not installed. The parent (`sessiongate_bench.runner`) starts it as

    python workload.py run    --adapter SPEC --options JSON --work DIR --sizes JSON --out FILE
    python workload.py write  --adapter SPEC ... --writer 0|1 --mode distinct|shared
    python workload.py verify --adapter SPEC ... --names JSON

SPEC is `package.module:Class` or `/path/to/file.py:Class`. An adapter is constructed as
`Class(work_dir: Path, options: dict)` and offers (duck-typed, see `StoreAdapter`):
`create_session(name)` and `open_session(name)` returning a handle, `append(handle, messages)`
(one call per turn), `tail(handle, n)`, `load_all(handle)`, `text(item)` (the content of one
returned item), `files()` (its database files), `describe()` and `close()`. An optional
`max_thread_messages` caps the hot session and the shared writer session (LangGraph stores
whole checkpoints, so a long thread grows quadratically). An optional
`append_new(name, messages)` creates a conversation with its first turn in one call and returns
its handle; without it the workload calls `create_session` and then `append`.

Every message's content starts with a unique id (`m000042`, `w1-000007`) so the reads and the
two-writer check can tell exactly which messages came back, and how often. Past the ~400-line
budget because the file must run alone, with the standard library only, inside the contenders'
virtual environment.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import random
import sqlite3
import statistics
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "Sizes",
    "StoreAdapter",
    "disk_bytes",
    "load_adapter_class",
    "main",
    "percentiles",
    "run_workload",
    "turn_plan",
]

Emit = Callable[[dict[str, Any]], None]


@dataclass(frozen=True, slots=True)
class Sizes:
    """How big the workload is; the defaults are issue 5's (N = 10,000, M = 100,000)."""

    sessions: int = 10_000
    messages: int = 100_000
    hot_messages: int = 5_000
    # Reads of the hot session's last 50, timed one by one (median and p99 reported).
    tail_reads: int = 1_000
    full_reads: int = 20
    # Small sessions opened cold and read (last 50).
    cold_reads: int = 500
    writer_turns: int = 300
    writer_sessions: int = 10
    # Conversations created by their first turn, and the messages sent to them in turns of
    # 2-4 (the cost of a new conversation: it is the first message of every chat).
    new_sessions: int = 1_000
    new_messages: int = 12_000
    seed: int = 5

    @classmethod
    def quick(cls) -> Sizes:
        """Small enough that every store together takes well under a minute (the slowest
        contenders append under 100 messages a second); checks only that the benchmark
        works."""
        return cls(
            sessions=100,
            messages=400,
            hot_messages=300,
            tail_reads=50,
            full_reads=5,
            cold_reads=30,
            writer_turns=20,
            writer_sessions=5,
            new_sessions=50,
            new_messages=400,
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Sizes:
        known = {f.name for f in fields(cls)}
        return cls(**{k: int(v) for k, v in data.items() if k in known})

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


class StoreAdapter(Protocol):
    """What the workload needs from a store; contender scripts implement it by duck typing."""

    def create_session(self, name: str) -> Any: ...
    def open_session(self, name: str) -> Any: ...
    def append(self, handle: Any, messages: list[dict[str, str]]) -> None: ...
    def tail(self, handle: Any, n: int) -> Sequence[Any]: ...
    def load_all(self, handle: Any) -> Sequence[Any]: ...
    def text(self, item: Any) -> str: ...
    def files(self) -> list[Path]: ...
    def describe(self) -> dict[str, Any]: ...
    def close(self) -> None: ...


# ---------------------------------------------------------------------------- message shapes

_VOCABULARY = (
    "the session store keeps every turn of a conversation durable so an agent can resume "
    "after a crash without losing or duplicating a message while users on telegram slack "
    "discord whatsapp and the http api wait for a reply from the model which calls tools "
    "reads files searches the web and summarises long threads into compact context windows"
)
_WORDS = tuple(_VOCABULARY.split())


def filler_pool(rng: random.Random, size: int = 512) -> list[tuple[str, str]]:
    """(user, assistant) texts: users write 40-400 characters, assistants 100-1,500.

    Built once, before anything is timed, so text generation never counts as store time.
    """
    return [
        (_words(rng, rng.randint(40, 400)), _words(rng, rng.randint(100, 1500)))
        for _ in range(size)
    ]


def _words(rng: random.Random, length: int) -> str:
    out: list[str] = []
    total = 0
    while total < length:
        word = rng.choice(_WORDS)
        out.append(word)
        total += len(word) + 1
    return " ".join(out)[:length]


def turn_messages(uids: list[str], pool: list[tuple[str, str]], pick: int) -> list[dict[str, str]]:
    user, assistant = pool[pick % len(pool)]
    first = {"role": "user", "content": f"{uids[0]} {user}"}
    return [first, *({"role": "assistant", "content": f"{uid} {assistant}"} for uid in uids[1:])]


def uid_of(text: str) -> str:
    return text.split(" ", 1)[0]


def turn_plan(rng: random.Random, sessions: int, messages: int) -> list[tuple[int, int]]:
    """(session index, turn size 2-4) pairs adding up to exactly `messages`."""
    plan: list[tuple[int, int]] = []
    left = messages
    while left > 0:
        k = min(rng.choice((2, 3, 4)), left)
        plan.append((rng.randrange(sessions), k))
        left -= k
    return plan


# ---------------------------------------------------------------------------- measurements


def percentiles(samples_s: Sequence[float]) -> dict[str, float]:
    """Median, p99 and max of durations given in seconds, reported in milliseconds."""
    if not samples_s:
        return {"n": 0, "p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}
    ordered = sorted(samples_s)
    rank = max(0, min(len(ordered) - 1, round(0.99 * len(ordered)) - 1))
    return {
        "n": len(ordered),
        "p50_ms": statistics.median(ordered) * 1000,
        "p99_ms": ordered[rank] * 1000,
        "max_ms": ordered[-1] * 1000,
    }


def max_rss_mb() -> float:
    """Peak resident set of this process (Linux reports KiB, macOS bytes)."""
    try:
        import resource
    except ImportError:  # Windows has no getrusage; the report shows 0.
        return 0.0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def disk_bytes(root: Path, db_files: Sequence[Path]) -> dict[str, Any]:
    """Bytes on disk under `root` after folding each WAL into its database.

    The checkpoint runs on a separate connection; if another connection holds a read snapshot
    it cannot truncate, and the WAL is then counted as it stands (`checkpointed` says so).
    The `-shm` index is excluded: it is a shared-memory map, not stored data.
    """
    checkpointed = all(_fold_wal(path) for path in db_files if path.exists())
    total = 0
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            if not name.endswith("-shm"):
                total += os.path.getsize(os.path.join(dirpath, name))
    return {"bytes": total, "checkpointed": checkpointed}


def _fold_wal(path: Path, *, attempts: int = 40) -> bool:
    """Checkpoint `path`'s WAL into it and truncate it; False if it stayed busy. A store's own
    checkpointer (or a reader's snapshot) makes one attempt fail now and then, and a probe
    that counted the whole WAL read as a jump in the bytes per message."""
    conn = sqlite3.connect(str(path), timeout=10)
    try:
        for _ in range(attempts):
            try:
                row = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            except sqlite3.OperationalError:
                row = None
            if row is not None and row[0] == 0:
                return True
            time.sleep(0.05)
        return False
    finally:
        conn.close()


class _Progress:
    """Emits progress lines at most every quarter second."""

    def __init__(self, emit: Emit, phase: str, total: int) -> None:
        self.emit, self.phase, self.total = emit, phase, total
        self.next_at = 0.0
        emit({"event": "progress", "phase": phase, "done": 0, "total": total})

    def update(self, done: int) -> None:
        now = time.monotonic()
        if now >= self.next_at or done >= self.total:
            self.next_at = now + 0.25
            self.emit({"event": "progress", "phase": self.phase, "done": done, "total": self.total})


# ---------------------------------------------------------------------------- the workload


def run_workload(
    adapter_cls: Callable[[Path, dict[str, Any]], StoreAdapter],
    options: dict[str, Any],
    work: Path,
    sizes: Sizes,
    emit: Emit,
) -> dict[str, Any]:
    """Sessions, appends, the hot session, tail/full/cold reads, disk and memory, in order."""
    rng = random.Random(sizes.seed)
    pool = filler_pool(rng)
    plan = turn_plan(rng, sizes.sessions, sizes.messages)
    store_dir = work / "store"
    store_dir.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []

    started = time.perf_counter()
    adapter = adapter_cls(store_dir, options)
    open_s = time.perf_counter() - started
    rss_open = max_rss_mb()

    # 1. N sessions.
    progress = _Progress(emit, "create sessions", sizes.sessions)
    handles: list[Any] = []
    started = time.perf_counter()
    for i in range(sizes.sessions):
        handles.append(adapter.create_session(f"c{i}"))
        if i % 64 == 0:
            progress.update(i)
    create_s = time.perf_counter() - started
    progress.update(sizes.sessions)

    # 2. M messages in turns of 2-4 to random sessions, one call per turn; the disk is probed
    # at each quarter (outside the timed calls) to see whether bytes grow linearly.
    files = adapter.files()
    probes = [{"messages": 0, **disk_bytes(store_dir, files)}]
    quarters = {round(len(plan) * q / 4) - 1: q for q in (1, 2, 3, 4)}
    progress = _Progress(emit, "append", sizes.messages)
    latencies: list[float] = []
    last_uid: dict[int, str] = {}
    count: Counter[int] = Counter()
    seq = 0
    probe_s = 0.0
    started = time.perf_counter()
    for turn, (index, k) in enumerate(plan):
        uids = [f"m{seq + i:07d}" for i in range(k)]
        messages = turn_messages(uids, pool, turn)
        t0 = time.perf_counter()
        adapter.append(handles[index], messages)
        latencies.append(time.perf_counter() - t0)
        seq += k
        last_uid[index] = uids[-1]
        count[index] += k
        if turn % 32 == 0:
            progress.update(seq)
        if turn in quarters:
            p0 = time.perf_counter()
            probes.append({"messages": seq, **disk_bytes(store_dir, files)})
            probe_s += time.perf_counter() - p0
    append_s = time.perf_counter() - started - probe_s
    progress.update(seq)

    # 2b. The same kind of turns to conversations that do not exist yet: each is created by
    # its first turn, inside the timed call (one store call per turn where the adapter has
    # `append_new`). Compared with phase 2, this is what a new conversation costs.
    fresh = _append_to_new_conversations(adapter, pool, rng, sizes, emit)

    # 3. One hot session of 5,000 messages (or the adapter's cap), built the same way.
    cap = getattr(adapter, "max_thread_messages", None)
    hot_n = min(sizes.hot_messages, cap) if cap else sizes.hot_messages
    hot = adapter.create_session("hot")
    hot_uids: list[str] = []
    progress = _Progress(emit, "hot session", hot_n)
    hot_lat: list[float] = []
    turn = 0
    started = time.perf_counter()
    while len(hot_uids) < hot_n:
        k = min(rng.choice((2, 3, 4)), hot_n - len(hot_uids))
        uids = [f"h{len(hot_uids) + i:07d}" for i in range(k)]
        messages = turn_messages(uids, pool, turn)
        t0 = time.perf_counter()
        adapter.append(hot, messages)
        hot_lat.append(time.perf_counter() - t0)
        hot_uids.extend(uids)
        turn += 1
        if turn % 16 == 0:
            progress.update(len(hot_uids))
    hot_s = time.perf_counter() - started
    progress.update(hot_n)

    # 4. Its last 50, many times; then all of it.
    progress = _Progress(emit, "tail reads", sizes.tail_reads)
    tail_lat: list[float] = []
    items: Sequence[Any] = []
    for i in range(sizes.tail_reads):
        t0 = time.perf_counter()
        items = adapter.tail(hot, 50)
        tail_lat.append(time.perf_counter() - t0)
        if i % 32 == 0:
            progress.update(i)
    _check(problems, "tail of hot", [uid_of(adapter.text(x)) for x in items], hot_uids[-50:])

    progress = _Progress(emit, "full loads", sizes.full_reads)
    full_lat: list[float] = []
    for i in range(sizes.full_reads):
        t0 = time.perf_counter()
        items = adapter.load_all(hot)
        full_lat.append(time.perf_counter() - t0)
        progress.update(i + 1)
    _check(problems, "full load of hot", [uid_of(adapter.text(x)) for x in items], hot_uids)

    # 5. Open small sessions cold and read their last 50.
    used = sorted(count)
    picks = rng.sample(used, min(sizes.cold_reads, len(used)))
    progress = _Progress(emit, "open and read", len(picks))
    cold_lat: list[float] = []
    for i, index in enumerate(picks):
        t0 = time.perf_counter()
        handle = adapter.open_session(f"c{index}")
        items = adapter.tail(handle, 50)
        cold_lat.append(time.perf_counter() - t0)
        if i % 32 == 0:
            progress.update(i)
        got = [uid_of(adapter.text(x)) for x in items]
        if len(got) != min(50, count[index]) or not got or got[-1] != last_uid[index]:
            problems.append(f"open-and-read of c{index}: {len(got)} items, last {got[-1:]}")
    progress.update(len(picks))

    description = adapter.describe()
    adapter.close()
    total_messages = sizes.messages + sizes.new_messages + hot_n
    final = disk_bytes(store_dir, files)
    return {
        "status": "ok",
        "describe": description,
        "sqlite_version": sqlite3.sqlite_version,
        "python": sys.version.split()[0],
        "open_ms": open_s * 1000,
        "sessions": {
            "count": sizes.sessions,
            "seconds": create_s,
            "per_s": _rate(sizes.sessions, create_s),
        },
        "append": {
            "messages": sizes.messages,
            "turns": len(plan),
            "seconds": append_s,
            "msg_per_s": _rate(sizes.messages, append_s),
            "turns_per_s": _rate(len(plan), append_s),
            "turn_latency": percentiles(latencies),
        },
        "append_new": fresh,
        "hot": {
            "messages": hot_n,
            "seconds": hot_s,
            "msg_per_s": _rate(hot_n, hot_s),
            "turn_latency": percentiles(hot_lat),
        },
        "tail_50": percentiles(tail_lat),
        "full_load": {**percentiles(full_lat), "messages": hot_n},
        "open_and_tail_50": percentiles(cold_lat),
        "disk": {
            "bytes": final["bytes"],
            "messages": total_messages,
            "bytes_per_message": final["bytes"] / total_messages if total_messages else 0.0,
            "probes": probes,
            "growth": _growth(probes),
        },
        "rss_mb": {"after_open": rss_open, "peak": max_rss_mb()},
        "problems": problems,
    }


def _append_to_new_conversations(
    adapter: StoreAdapter, pool: list[tuple[str, str]], rng: random.Random, sizes: Sizes, emit: Emit
) -> dict[str, Any]:
    plan = turn_plan(rng, sizes.new_sessions, sizes.new_messages)
    append_new = getattr(adapter, "append_new", None)
    handles: dict[int, Any] = {}
    progress = _Progress(emit, "append with creation", sizes.new_messages)
    latencies: list[float] = []
    first_turns: list[float] = []
    seq = 0
    started = time.perf_counter()
    for turn, (index, k) in enumerate(plan):
        uids = [f"n{seq + i:07d}" for i in range(k)]
        messages = turn_messages(uids, pool, turn)
        handle = handles.get(index)
        t0 = time.perf_counter()
        if handle is not None:
            adapter.append(handle, messages)
        elif append_new is not None:
            handles[index] = append_new(f"n{index}", messages)
        else:
            handles[index] = adapter.create_session(f"n{index}")
            adapter.append(handles[index], messages)
        elapsed = time.perf_counter() - t0
        latencies.append(elapsed)
        if handle is None:
            first_turns.append(elapsed)
        seq += k
        if turn % 32 == 0:
            progress.update(seq)
    seconds = time.perf_counter() - started
    progress.update(seq)
    return {
        "messages": sizes.new_messages,
        "turns": len(plan),
        "conversations": len(handles),
        "seconds": seconds,
        "msg_per_s": _rate(sizes.new_messages, seconds),
        "turns_per_s": _rate(len(plan), seconds),
        "turn_latency": percentiles(latencies),
        "first_turn_latency": percentiles(first_turns),
    }


def _rate(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else 0.0


def _growth(probes: list[dict[str, Any]]) -> float | None:
    """Bytes per message added in the second half over those added in the first half.

    About 1 for storage that grows linearly; about 3 for whole-state checkpoints (the second
    half rewrites threads that are on average longer).
    """
    # A probe whose WAL could not be folded counts the WAL as well: not the data's size.
    by_q = {p["messages"]: p["bytes"] for p in probes if p.get("checkpointed", True)}
    points = sorted(by_q)
    if len(points) < 3:
        return None
    start, mid, end = points[0], points[len(points) // 2], points[-1]
    first = (by_q[mid] - by_q[start]) / max(1, mid - start)
    second = (by_q[end] - by_q[mid]) / max(1, end - mid)
    return second / first if first > 0 else None


def _check(problems: list[str], what: str, got: list[str], want: list[str]) -> None:
    if got != want:
        head = f"{len(got)} items, ends {got[-2:]}, expected {len(want)} ending {want[-2:]}"
        problems.append(f"{what}: {head}")


# ---------------------------------------------------------------------------- two writers


def run_writer(
    adapter_cls: Callable[[Path, dict[str, Any]], StoreAdapter],
    options: dict[str, Any],
    work: Path,
    *,
    writer: int,
    mode: str,
    sizes: Sizes,
    emit: Emit,
    wait_go: Callable[[], None],
) -> dict[str, Any]:
    """Append turns with unique ids; count the calls that raised. The parent checks the rest."""
    rng = random.Random(sizes.seed * 31 + writer)
    pool = filler_pool(rng, 64)
    store_dir = work / "store"
    store_dir.mkdir(parents=True, exist_ok=True)
    adapter = adapter_cls(store_dir, options)
    turns = sizes.writer_turns
    if mode == "distinct":
        names = [f"w{writer}-s{j}" for j in range(sizes.writer_sessions)]
        handles = [adapter.create_session(name) for name in names]
    else:
        names = ["shared"]
        # Writer 0 creates the session before writer 1 starts; writer 1 opens it.
        make = adapter.create_session if writer == 0 else adapter.open_session
        handles = [make("shared")]
        cap = getattr(adapter, "max_thread_messages", None)
        if cap:
            turns = min(turns, cap // (2 * 3))
    emit({"event": "ready"})
    wait_go()
    acked: list[str] = []
    errors: Counter[str] = Counter()
    samples: list[str] = []
    latencies: list[float] = []
    seq = 0
    started = time.perf_counter()
    for turn in range(turns):
        k = rng.choice((2, 3, 4))
        uids = [f"w{writer}-{seq + i:06d}" for i in range(k)]
        seq += k
        t0 = time.perf_counter()
        try:
            adapter.append(handles[rng.randrange(len(handles))], turn_messages(uids, pool, turn))
        except Exception as exc:  # every failure is a finding: counted, sampled, and go on
            errors[type(exc).__name__] += 1
            if len(samples) < 3:
                samples.append(f"{type(exc).__name__}: {exc}"[:300])
        else:
            acked.extend(uids)
        latencies.append(time.perf_counter() - t0)
    elapsed = time.perf_counter() - started
    adapter.close()
    return {
        "writer": writer,
        "names": names,
        "turns": turns,
        "attempted": seq,
        "acked": acked,
        "errors": sum(errors.values()),
        "error_kinds": dict(errors),
        "error_samples": samples,
        "seconds": elapsed,
        "turn_latency": percentiles(latencies),
    }


def verify_names(
    adapter_cls: Callable[[Path, dict[str, Any]], StoreAdapter],
    options: dict[str, Any],
    work: Path,
    names: list[str],
) -> dict[str, Any]:
    """How many times each writer uid is stored, over the given sessions."""
    adapter = adapter_cls(work / "store", options)
    found: Counter[str] = Counter()
    for name in names:
        for item in adapter.load_all(adapter.open_session(name)):
            uid = uid_of(adapter.text(item))
            if uid.startswith("w"):
                found[uid] += 1
    adapter.close()
    return {"found": dict(found)}


# ---------------------------------------------------------------------------- child entry


def load_adapter_class(spec: str) -> Callable[[Path, dict[str, Any]], StoreAdapter]:
    """`package.module:Class` by import, or `/path/file.py:Class` by path."""
    target, _, name = spec.rpartition(":")
    if target.endswith(".py"):
        path = Path(target)
        module_name = f"_bench_adapter_{path.stem}"
        module_spec = importlib.util.spec_from_file_location(module_name, path)
        if module_spec is None or module_spec.loader is None:
            raise ImportError(f"cannot load adapter file {path}")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[module_name] = module
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    adapter: Callable[[Path, dict[str, Any]], StoreAdapter] = getattr(module, name)
    return adapter


def _emit(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def _wait_go() -> None:
    line = sys.stdin.readline()
    if line.strip() != "go":
        raise SystemExit("the parent went away before the start signal")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="workload.py", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=("run", "write", "verify"))
    parser.add_argument("--adapter", required=True)
    parser.add_argument("--options", default="{}")
    parser.add_argument("--work", required=True, type=Path)
    parser.add_argument("--sizes", default="{}")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--writer", type=int, default=0)
    parser.add_argument("--mode", choices=("distinct", "shared"), default="distinct")
    parser.add_argument("--names", default="[]")
    args = parser.parse_args(argv)
    options = json.loads(args.options)
    sizes = Sizes.from_dict(json.loads(args.sizes))
    try:
        adapter_cls = load_adapter_class(args.adapter)
        if args.command == "run":
            result = run_workload(adapter_cls, options, args.work, sizes, _emit)
        elif args.command == "write":
            result = run_writer(
                adapter_cls,
                options,
                args.work,
                writer=args.writer,
                mode=args.mode,
                sizes=sizes,
                emit=_emit,
                wait_go=_wait_go,
            )
        else:
            result = verify_names(adapter_cls, options, args.work, json.loads(args.names))
    except Exception:  # reported to the parent, which marks this store failed and goes on
        args.out.write_text(json.dumps({"status": "error", "error": traceback.format_exc()}))
        return 1
    args.out.write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
