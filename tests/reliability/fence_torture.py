"""Fencing under real process faults: N instances (child processes) on one PostgreSQL schema
commit turns to shared lanes while the driver SIGSTOPs them past their lease, SIGKILLs and
restarts them, and terminates their database sessions (`pg_terminate_backend`).

Each child loops: claim a random lane (or keep the one it holds), "run a turn" for a few ms,
then commit the turn's message inside `Ownership.fenced(lease)`, and log every attempt to its
own append-only event file: `commit` after the commit returned, `fenced` when the lease had
moved on. Then the checker reads the transcripts and the event logs:

- 0 lost: every logged commit is in its lane's transcript;
- 0 duplicated: no turn id appears twice;
- 0 stale: no fenced attempt is in a transcript, and along each lane's transcript the epochs
  never go down (a paused owner that woke up never committed over its successor);
- no overlap: within one lane and epoch, one instance only;
- fenced > 0 in a run with pauses (the test can bite).

    python tests/reliability/fence_torture.py --seconds 60 --pauses 10 --kills 10 --json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

TTL = 1.5  # seconds; a pause of 2 x TTL always outlives a lease
HEARTBEAT = 0.3
READY_SECONDS = 120.0


@dataclass
class FenceConfig:
    instances: int = 3
    lanes: int = 20
    seconds: float = 8.0
    pauses: int = 2
    kills: int = 2
    terminates: int = 2
    seed: int = 1


@dataclass
class FenceResult:
    committed: int = 0
    fenced: int = 0
    lost: int = 0
    duplicated: int = 0
    stale: int = 0
    overlapping: int = 0
    pauses: int = 0
    kills: int = 0
    terminates: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.stale or self.overlapping)


# ---------------------------------------------------------------------------- the child


def child(url: str, name: str, events: Path, lanes: int, seed: int) -> None:
    from sessiongate import GatewayConfig, SessionSource, SessionStore
    from sessiongate.errors import LeaseLostError, SessiongateError
    from sessiongate.store.ownership import Ownership

    rng = random.Random(seed)
    config = GatewayConfig(store={"url": url}, mirror_sessions_json=False)  # type: ignore[arg-type]
    store = SessionStore(Path(tempfile.mkdtemp()), config)
    # One instance id per process start, as the gateway has: a restarted child is a new owner.
    own = Ownership(
        store.database,  # type: ignore[arg-type]
        instance_id=f"{name}-{os.getpid()}",
        ttl=TTL,
        heartbeat=HEARTBEAT,
    )
    own.start()
    sessions = {
        f"lane{i}": store.get_or_create_session(
            SessionSource(platform="api", chat_id=f"lane{i}")
        ).session_id
        for i in range(lanes)
    }

    def beat() -> None:
        while True:
            time.sleep(HEARTBEAT)
            # Lost the database, or declared dead: either way the fence decides.
            with contextlib.suppress(SessiongateError):
                own.heartbeat()

    threading.Thread(target=beat, daemon=True).start()
    out = events.open("a", buffering=1)
    out.write(json.dumps({"event": "ready"}) + "\n")
    held: dict[str, Any] = {}
    n = 0
    while True:
        lane = (
            rng.choice(list(held) or list(sessions))
            if rng.random() < 0.7
            else rng.choice(list(sessions))
        )
        try:
            lease = held.get(lane) or own.claim(lane)
        except SessiongateError:
            continue
        if lease is None:
            continue
        held[lane] = lease
        n += 1
        turn = f"{own.instance_id}-{n}"
        time.sleep(rng.uniform(0.002, 0.02))  # the agent's work, outside any transaction
        body = {"turn": turn, "instance": own.instance_id, "epoch": lease.epoch, "lane": lane}
        try:
            with own.fenced(lease):
                store.append_messages(
                    sessions[lane], [{"role": "user", "content": json.dumps(body)}]
                )
        except LeaseLostError:
            held.pop(lane, None)
            out.write(json.dumps({"event": "fenced", **body}) + "\n")
            continue
        except SessiongateError:
            held.pop(lane, None)  # the database went away mid-commit: unknown, not logged
            continue
        out.write(json.dumps({"event": "commit", **body}) + "\n")
        if rng.random() < 0.05:
            own.release(lease)
            held.pop(lane, None)


# ---------------------------------------------------------------------------- the driver


def _spawn(
    url: str, name: str, events: Path, cfg: FenceConfig, seed: int
) -> subprocess.Popen[bytes]:
    code = (
        f"import sys; sys.path.insert(0, {str(HERE)!r}); from fence_torture import child; "
        f"child({url!r}, {name!r}, __import__('pathlib').Path({str(events)!r}), "
        f"{cfg.lanes}, {seed})"
    )
    # Its stderr goes beside its events, so a child that dies says why.
    with events.with_suffix(".err").open("ab") as err:
        return subprocess.Popen([sys.executable, "-c", code], stderr=err)


def run_fence_torture(
    cfg: FenceConfig, url: str, work: Path, admin_url: str, app_name: str
) -> FenceResult:
    import psycopg

    rng = random.Random(cfg.seed)
    result = FenceResult()
    names = [f"i{k}" for k in range(cfg.instances)]
    procs = {n: _spawn(url, n, work / f"{n}.jsonl", cfg, rng.randrange(1 << 30)) for n in names}
    faults = ["pause"] * cfg.pauses + ["kill"] * cfg.kills + ["terminate"] * cfg.terminates
    rng.shuffle(faults)
    gap = cfg.seconds / (len(faults) + 1)
    try:
        # The run's time counts from when every child is up: a loaded machine may take
        # seconds to start three interpreters, and a fault before then tests nothing.
        _wait_ready(procs, work)
        for fault in faults:
            time.sleep(gap)
            victim = rng.choice(names)
            proc = procs[victim]
            if fault == "pause":
                proc.send_signal(signal.SIGSTOP)
                time.sleep(TTL * 2)
                proc.send_signal(signal.SIGCONT)
                result.pauses += 1
            elif fault == "kill":
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                procs[victim] = _spawn(
                    url, victim, work / f"{victim}.jsonl", cfg, rng.randrange(1 << 30)
                )
                result.kills += 1
            else:
                with psycopg.connect(admin_url, autocommit=True) as conn:
                    conn.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE application_name = %s AND pid <> pg_backend_pid()",
                        (app_name,),
                    )
                result.terminates += 1
        time.sleep(gap)
    finally:
        for proc in procs.values():
            proc.send_signal(signal.SIGCONT)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    check(url, work, result)
    return result


def _wait_ready(procs: dict[str, subprocess.Popen[bytes]], work: Path) -> None:
    deadline = time.monotonic() + READY_SECONDS
    waiting = set(procs)
    while waiting:
        for name in list(waiting):
            if _first_event(work / f"{name}.jsonl") == "ready":
                waiting.discard(name)
            elif procs[name].poll() is not None:
                raise RuntimeError(f"{name} died starting: {_stderr(work, name)}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"not ready after {READY_SECONDS} s: {sorted(waiting)}")
        time.sleep(0.05)


def _first_event(events: Path) -> str | None:
    """The first event a child logged: `ready`, once it is up (read alone, not the file's
    thousands of lines to come)."""
    if not events.exists():
        return None
    with events.open() as lines:
        first = lines.readline()
    return json.loads(first)["event"] if first.endswith("\n") else None


def _stderr(work: Path, name: str) -> str:
    path = work / f"{name}.err"
    return path.read_text()[-2000:] if path.exists() else ""


def check(url: str, work: Path, result: FenceResult) -> None:
    from sessiongate import GatewayConfig, SessionStore

    logged: dict[str, dict[str, Any]] = {}
    fenced: set[str] = set()
    for path in work.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            if event["event"] == "commit":
                logged[event["turn"]] = event
            elif event["event"] == "fenced":
                fenced.add(event["turn"])
    result.fenced = len(fenced)
    config = GatewayConfig(store={"url": url}, mirror_sessions_json=False)  # type: ignore[arg-type]
    seen: dict[str, int] = {}
    with SessionStore(Path(tempfile.mkdtemp()), config) as store:
        for entry in store.list_sessions():
            epochs: dict[int, str] = {}
            last = 0
            for message in store.load_transcript(entry.session_id):
                body = json.loads(message["content"])
                seen[body["turn"]] = seen.get(body["turn"], 0) + 1
                if body["turn"] in fenced:
                    result.stale += 1
                    result.problems.append(f"fenced turn {body['turn']} was committed")
                if body["epoch"] < last:
                    result.stale += 1
                    result.problems.append(
                        f"{entry.session_key}: epoch {body['epoch']} after {last}"
                    )
                last = max(last, body["epoch"])
                owner = epochs.setdefault(body["epoch"], body["instance"])
                if owner != body["instance"]:
                    result.overlapping += 1
                    result.problems.append(
                        f"{entry.session_key}: epoch {body['epoch']} has two owners"
                    )
    result.committed = len(seen)
    result.duplicated = sum(1 for count in seen.values() if count > 1)
    lost = [turn for turn in logged if turn not in seen]
    result.lost = len(lost)
    result.problems += [f"committed turn {t} is missing" for t in lost[:10]]
    if not result.committed:
        result.problems += [f"{p.stem}: {_stderr(work, p.stem)}" for p in work.glob("*.err")]


def main() -> None:
    from postgres_support import SERVER_URL, Schema

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name, default in asdict(FenceConfig()).items():
        parser.add_argument(f"--{name}", type=type(default), default=default)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    cfg = FenceConfig(**{k: getattr(args, k) for k in asdict(FenceConfig())})
    schema = Schema()
    try:
        with tempfile.TemporaryDirectory() as work:
            result = run_fence_torture(cfg, schema.url, Path(work), SERVER_URL, schema.name)
    finally:
        schema.drop()
    data = {**asdict(result), "ok": result.ok, "config": asdict(cfg)}
    print(json.dumps(data, indent=2) if args.json else data)
    sys.exit(0 if result.ok else 1)


if __name__ == "__main__":
    main()
