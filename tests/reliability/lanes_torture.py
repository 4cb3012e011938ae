"""Many instances, one database: 3 `sessiongate run` processes on one PostgreSQL schema serve
~20 chats over HTTP while the driver SIGKILLs and restarts them, SIGSTOPs them past their
lease, and terminates their database sessions (`pg_terminate_backend`).

Each chat is a client that sends its next message (a unique token) only after the previous
one was acknowledged, each time to a random live instance, retrying with the same message id
on another one when the first does not answer (killed, paused, unavailable). The agent is the
echo agent with a small delay, so faults land mid-turn. Checked afterwards from the
transcripts and the journal in the database:

- 0 lost: every acknowledged token is in a user message of its chat's conversation;
- 0 duplicated: no token is stored twice, and no turn has two replies;
- per-lane order: along each chat's transcript the tokens come in the order they were sent;
- no overlap: along each lane's journal no turn starts before the one before it finished;
- every turn ended replied (delivered), none failed or interrupted;
- fenced commits > 0 when there were pauses (read from the instances' logs).

Failover: at each SIGKILL, SIGSTOP and cut, the lanes the victim owned with work on them are
noted (at a restart, every lane with work); the failover time of a lane is from the fault to
the next turn of that lane finishing (on another instance: a paused one cannot finish
anything, a killed one is gone until restarted).

PostgreSQL restarts (`--restarts`) need a server of the run's own: the shared one serves
other test runs. The run then makes a private cluster (`tests/pg_cluster.py`) and restarts it
at random times, alternately `pg_ctl restart -m fast` and an immediate stop (a crash: WAL
recovery at the start). Every session of every instance ends at once: turns in flight fail
and are run again by the lane's owner, the writer, the readers and the wake-up listener
reconnect, heartbeats resume. `pg_terminate_backend` of one instance's sessions is the same
cut for one instance. A silent cut (`--cuts`) puts a relay between each instance and the
server (`cut_proxy.py`) and stops one instance's relay for 2 x TTL without closing anything:
its statements wait for answers that do not come, the others take its lanes over once its
lease expires, and what it commits after the link heals is fenced.

    python tests/reliability/lanes_torture.py --seconds 60 --kills 6 --pauses 6 --restarts 4 --json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import shutil
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from cut_proxy import CutProxy  # noqa: E402
from pg_cluster import PrivateCluster, cluster_problem  # noqa: E402
from sg_process import GatewayProcess, clean_env, poll_until  # noqa: E402

TTL = 3.0  # seconds: a pause of 2 x TTL always outlives a lease
HEARTBEAT = 0.5
SWEEP = 0.5
REQUEST_TIMEOUT = 2.0
CHAT_KEY = "agent:main:api:dm:"
# Lines of the instances' logs worth counting in the report: how they rode through.
LOG_LINES = {
    "reconnects": "reconnecting to the database",
    "database_lost": "lost the database",
    "database_back": "the database is back",
    "hints_lost": "wake-up hints lost",
    "hints_back": "wake-up hints are back",
    "declared_dead": "this instance was declared dead",
    "lane_errors": "lane worker failed",
    "turns_left": "lane lease lost",
    "heartbeat_errors": "instance heartbeat failed",
}


@dataclass
class LanesConfig:
    instances: int = 3
    chats: int = 20
    seconds: float = 20.0
    kills: int = 2
    pauses: int = 2
    terminates: int = 2
    restarts: int = 0  # PostgreSQL restarts, alternately fast and immediate (a private cluster)
    cuts: int = 0  # one instance's database link cut silently for 2 x TTL (`cut_proxy.py`)
    echo_delay: float = 0.05
    seed: int = 1
    ttl: float = TTL
    heartbeat: float = HEARTBEAT
    sweep: float = SWEEP


@dataclass
class LanesResult:
    acked: int = 0
    turns: int = 0
    merged: int = 0
    lost: int = 0
    duplicated: int = 0
    out_of_order: int = 0
    overlapping: int = 0
    bad_turns: int = 0
    fenced: int = 0
    kills: int = 0
    pauses: int = 0
    terminates: int = 0
    restarts: int = 0
    cuts: int = 0
    retries: int = 0
    failover_kill_s: list[float] = field(default_factory=list)
    failover_pause_s: list[float] = field(default_factory=list)
    # From the start of a restart to the lane's next turn finishing (the restart included).
    failover_restart_s: list[float] = field(default_factory=list)
    failover_cut_s: list[float] = field(default_factory=list)
    # How often each line of `LOG_LINES` was logged, over all the instances.
    log_lines: dict[str, int] = field(default_factory=dict)
    log_samples: dict[str, str] = field(default_factory=dict)
    faults: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (
            self.lost
            or self.duplicated
            or self.out_of_order
            or self.overlapping
            or self.bad_turns
            or self.problems
        )

    def summary(self) -> dict[str, Any]:
        out = asdict(self)
        for name in ("failover_kill_s", "failover_pause_s", "failover_restart_s", "failover_cut_s"):
            out[name] = percentiles(getattr(self, name))
        out["problems"] = self.problems[:20]
        return out


def percentiles(values: list[float]) -> dict[str, float | int]:
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {
        "n": len(ordered),
        "p50": round(statistics.median(ordered), 3),
        "p99": round(p99, 3),
        "max": round(ordered[-1], 3),
    }


def instance_url(server: str, schema: str, name: str) -> str:
    """The schema's URL with an application name of the instance's own (so one instance's
    sessions can be terminated), and a bound on a transaction left open by a paused process
    (its row locks would otherwise hold every other instance's writer until it wakes)."""
    options = quote(f"-csearch_path={schema} -cidle_in_transaction_session_timeout=1000")
    joiner = "&" if "?" in server else "?"
    return f"{server}{joiner}options={options}&application_name={schema}-{name}"


class Admin:
    """The driver's own connection, opened again after a restart ended it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.conn: Any = None

    def execute(self, query: str, params: Any = None) -> Any:
        import psycopg

        for attempt in range(50):
            try:
                if self.conn is None or self.conn.closed or self.conn.broken:
                    self.conn = psycopg.connect(self.url, autocommit=True, connect_timeout=5)
                return self.conn.execute(query, params)
            except psycopg.OperationalError:
                if attempt == 49:
                    raise
                time.sleep(0.1)  # the server is coming back: pg_ctl waits, this rarely runs
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


# ---------------------------------------------------------------------------- load


@dataclass
class Sent:
    chat: str
    seq: int
    token: str
    acked_at: float | None = None


class Load:
    def __init__(self, gateways: dict[str, GatewayProcess], cfg: LanesConfig) -> None:
        self.gateways = gateways
        self.cfg = cfg
        self.sent: dict[str, list[Sent]] = {}
        self.stop = asyncio.Event()
        self.retries = 0

    async def chat(self, client: httpx.AsyncClient, chat: str) -> None:
        rng = random.Random(f"{self.cfg.seed}:{chat}")
        log = self.sent.setdefault(chat, [])
        seq = 0
        while not self.stop.is_set():
            item = Sent(chat, seq, f"tok:{chat}:{seq}")
            log.append(item)
            await self._deliver(client, item, rng)
            seq += 1
            await asyncio.sleep(rng.uniform(0, 0.1))

    async def _deliver(self, client: httpx.AsyncClient, item: Sent, rng: random.Random) -> None:
        body = {
            "chat_id": item.chat,
            "text": item.token,
            "message_id": f"{item.chat}-m{item.seq}",
            "wait": False,
        }
        first = True
        while True:
            if not first:
                self.retries += 1
                await asyncio.sleep(0.05)
            first = False
            up = [g for g in self.gateways.values() if g.is_up and g.url]
            if not up:
                continue
            gateway = rng.choice(up)
            try:
                response = await client.post(
                    f"{gateway.url}/v1/messages", json=body, timeout=REQUEST_TIMEOUT
                )
            except httpx.HTTPError:
                continue
            if response.status_code not in (200, 202):
                continue  # 503 from a stopping instance, 429: nothing written, send again
            if response.json().get("status") not in ("queued", "duplicate", "replied"):
                continue
            item.acked_at = time.time()
            return


# ---------------------------------------------------------------------------- faults


def owned_lanes_with_work(conn: Any, pid: int) -> list[str]:
    rows = conn.execute(
        "SELECT l.session_key FROM lane_lease l JOIN instances i ON i.instance_id = l.owner "
        "WHERE i.pid = %s AND i.state = 'live' AND l.expires_at > now() AND ("
        "EXISTS (SELECT 1 FROM inbox b WHERE b.session_key = l.session_key) OR "
        "EXISTS (SELECT 1 FROM turns t WHERE t.session_key = l.session_key "
        "AND t.state IN ('accepted', 'running')))",
        (pid,),
    ).fetchall()
    return [r[0] for r in rows]


@dataclass
class Fault:
    kind: str
    at: float
    lanes: list[str]


def lanes_with_work(conn: Any) -> list[str]:
    rows = conn.execute(
        "SELECT DISTINCT session_key FROM inbox UNION "
        "SELECT session_key FROM turns WHERE state IN ('accepted', 'running')"
    ).fetchall()
    return [r[0] for r in rows]


async def inject(
    gateways: dict[str, GatewayProcess],
    cfg: LanesConfig,
    admin: Any,
    schema: str,
    faults_seen: list[Fault],
    result: LanesResult,
    cluster: PrivateCluster | None = None,
    proxies: dict[str, CutProxy] | None = None,
) -> None:
    rng = random.Random(cfg.seed)
    kinds = ["kill"] * cfg.kills + ["pause"] * cfg.pauses + ["terminate"] * cfg.terminates
    kinds += ["restart"] * cfg.restarts + ["cut"] * cfg.cuts
    rng.shuffle(kinds)
    gap = cfg.seconds / (len(kinds) + 1)
    for kind in kinds:
        await asyncio.sleep(gap)
        up = {n: g for n, g in gateways.items() if g.is_up and g.proc is not None}
        if not up:
            continue
        owning = {n: owned_lanes_with_work(admin, g.proc.pid) for n, g in up.items()}  # type: ignore[union-attr]
        # A kill or a pause hits an owner in the middle of its turns: the busiest instance.
        name = (
            rng.choice(sorted(up))
            if kind == "terminate"
            else max(sorted(up), key=lambda n: (len(owning[n]), rng.random()))
        )
        gateway = up[name]
        assert gateway.proc is not None
        lanes = owning[name]
        if kind == "restart":
            assert cluster is not None
            lanes = lanes_with_work(admin)
            # Alternately a clean restart and a crash: a crash's recovery replays the WAL.
            crash = result.restarts % 2 == 1
            result.faults.append(
                f"{'crash' if crash else 'restart'} postgres at {time.time():.1f} "
                f"with {len(lanes)} lanes at work"
            )
            at = time.time()
            await asyncio.to_thread(cluster.crash if crash else cluster.restart)
            faults_seen.append(Fault(kind, at, lanes))
            result.restarts += 1
            continue
        result.faults.append(f"{kind} {name} at {time.time():.1f} owning {len(lanes)}")
        if kind == "kill":
            at = time.time()
            await gateway.kill()
            faults_seen.append(Fault(kind, at, lanes))
            result.kills += 1
            await asyncio.sleep(1.0)
            await gateway.start()
        elif kind == "cut":
            assert proxies is not None
            at = time.time()
            proxies[name].cut()  # the process runs on; its statements get no answer
            faults_seen.append(Fault(kind, at, lanes))
            result.cuts += 1
            await asyncio.sleep(2 * cfg.ttl)
            proxies[name].heal()
        elif kind == "pause":
            at = time.time()
            gateway.proc.send_signal(signal.SIGSTOP)
            gateway._up.clear()  # the load sends elsewhere meanwhile
            faults_seen.append(Fault(kind, at, lanes))
            result.pauses += 1
            await asyncio.sleep(2 * cfg.ttl)
            gateway.proc.send_signal(signal.SIGCONT)
            gateway._up.set()
        else:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s AND pid <> pg_backend_pid()",
                (f"{schema}-{name}",),
            )
            result.terminates += 1


# ---------------------------------------------------------------------------- the run


def drained(admin: Any) -> bool:
    (waiting,) = admin.execute(
        "SELECT (SELECT count(*) FROM inbox) + (SELECT count(*) FROM turns "
        "WHERE state IN ('accepted', 'running', 'replied'))"
    ).fetchone()
    return int(waiting) == 0


def stuck(admin: Any) -> dict[str, Any]:
    """What is left when the lanes do not drain (for the report)."""
    return {
        "inbox": admin.execute(
            "SELECT id, session_key, state, turn_id FROM inbox ORDER BY id LIMIT 10"
        ).fetchall(),
        "turns": admin.execute(
            "SELECT id, session_key, state, attempt FROM turns "
            "WHERE state IN ('accepted', 'running', 'replied') LIMIT 10"
        ).fetchall(),
        "leases": admin.execute(
            "SELECT session_key, owner, epoch, expires_at > now() FROM lane_lease "
            "WHERE owner IS NOT NULL LIMIT 25"
        ).fetchall(),
        "instances": admin.execute(
            "SELECT instance_id, pid, state, probe_ready, now() - heartbeat_at FROM instances"
        ).fetchall(),
    }


async def run_lanes_torture(
    cfg: LanesConfig,
    server: str,
    schema: str,
    work: Path,
    cluster: PrivateCluster | None = None,
) -> LanesResult:
    """The run on `schema` of `server`; restarts (`cfg.restarts`) need `cluster`, the private
    server `server` is then on."""
    if cfg.restarts and cluster is None:
        raise ValueError("PostgreSQL restarts need a private cluster (tests/pg_cluster.py)")
    result = LanesResult()
    admin = Admin(instance_url(server, schema, "driver"))
    gateways: dict[str, GatewayProcess] = {}
    proxies: dict[str, CutProxy] = {}
    for k in range(cfg.instances):
        name = f"i{k}"
        link = server
        if cfg.cuts:
            # Each instance reaches the server through a relay of its own, which can cut it.
            parts = urlsplit(server)
            proxies[name] = await CutProxy(
                parts.hostname or "127.0.0.1", parts.port or 5432
            ).start()
            link = urlunsplit(
                parts._replace(netloc=f"{parts.username}@127.0.0.1:{proxies[name].port}")
            )
        env = clean_env(
            SESSIONGATE_STORE__URL=instance_url(link, schema, name),
            SESSIONGATE_STORE__LEASE_TTL_SECONDS=str(cfg.ttl),
            SESSIONGATE_STORE__HEARTBEAT_SECONDS=str(cfg.heartbeat),
            SESSIONGATE_STORE__SWEEP_SECONDS=str(cfg.sweep),
            SESSIONGATE_AGENT__ECHO__DELAY_SECONDS=str(cfg.echo_delay),
            SESSIONGATE_BUSY_INPUT_MODE="queue",
            SESSIONGATE_STUCK_LOOP_THRESHOLD="1000",
            SESSIONGATE_MIRROR_SESSIONS_JSON="false",
            SESSIONGATE_LOG__FORMAT="json",
        )
        gateways[name] = GatewayProcess(
            work / name / "home", env=env, log_path=work / f"{name}.log"
        )
    faults: list[Fault] = []
    load = Load(gateways, cfg)
    try:
        # One at a time: the first applies the migrations, the others find them applied.
        for gateway in gateways.values():
            await gateway.start()
        limits = httpx.Limits(max_connections=cfg.chats * 2, max_keepalive_connections=0)
        async with httpx.AsyncClient(limits=limits) as client:
            chats = [asyncio.create_task(load.chat(client, f"c{n}")) for n in range(cfg.chats)]
            await inject(gateways, cfg, admin, schema, faults, result, cluster, proxies)
            faults_total = cfg.kills + cfg.pauses + cfg.terminates + cfg.restarts + cfg.cuts
            await asyncio.sleep(cfg.seconds / (faults_total + 1))
            load.stop.set()
            await asyncio.gather(*chats)
        try:
            await poll_until(lambda: drained(admin), guard=60 + 4 * cfg.ttl, interval=0.2)
        except TimeoutError:
            result.problems.append(f"not drained: {stuck(admin)}")
    finally:
        for gateway in gateways.values():
            if gateway.proc is not None and gateway.proc.returncode is None:
                gateway.proc.send_signal(signal.SIGCONT)
            await gateway.aclose()
        for proxy in proxies.values():
            await proxy.aclose()
    result.retries = load.retries
    check(admin, load.sent, result)
    failovers(admin, faults, result)
    logs = [(work / f"{name}.log").read_text(errors="replace") for name in gateways]
    result.fenced = sum(text.count("write fenced") for text in logs)
    result.log_lines = {
        label: sum(text.count(line) for text in logs) for label, line in LOG_LINES.items()
    }
    # The first of each error line (with its traceback's last line), to tell what it was.
    for line in (ln for text in logs for ln in text.splitlines()):
        if '"level":"error"' in line.lower() or "lane worker failed" in line:
            label = next((k for k, v in LOG_LINES.items() if v in line), "error")
            result.log_samples.setdefault(label, line[-600:])
    admin.close()
    return result


def check(admin: Any, sent: dict[str, list[Sent]], result: LanesResult) -> None:
    acked = {s.token: s for items in sent.values() for s in items if s.acked_at is not None}
    result.acked = len(acked)
    rows = admin.execute(
        "SELECT s.session_key, e.role, e.content, e.idem FROM entries e "
        "JOIN sessions s ON s.sid = e.sid WHERE e.type = 'message' AND e.on_path = 1 "
        "ORDER BY s.session_key, s.started_at, e.depth"
    ).fetchall()
    where: dict[str, int] = {}
    order: dict[str, list[int]] = {}
    previous: dict[str, tuple[str, str]] = {}
    idem_of: dict[str, str] = {}
    for key, role, content, idem in rows:
        if not str(key or "").startswith(CHAT_KEY):
            continue
        chat = str(key).removeprefix(CHAT_KEY)
        before = previous.get(chat)
        before_idem = idem_of.get(chat)
        previous[chat] = (role, str(content))
        idem_of[chat] = str(idem)
        if role == "assistant":
            # One reply per turn, right after its user message: a turn run twice would
            # leave two replies (or a reply without its user message).
            if before is None or before[0] != "user" or content != f"echo: {before[1]}":
                result.duplicated += 1
                result.problems.append(
                    f"chat {chat}: reply {str(content)[:60]!r} ({idem}) after {before} "
                    f"({before_idem})"
                )
            continue
        if role != "user":
            continue
        if before is not None and before[0] == "user":
            result.problems.append(f"chat {chat}: {before[1][:60]!r} ({before_idem}) has no reply")
        result.turns += 1
        tokens = str(content).split("\n")
        if len(tokens) > 1:
            result.merged += 1
        for token in tokens:
            where[token] = where.get(token, 0) + 1
            parts = token.split(":")
            if len(parts) != 3 or parts[1] != chat:
                result.problems.append(f"{token[:60]!r} in chat {chat}'s transcript")
                continue
            order.setdefault(chat, []).append(int(parts[2]))
    for chat, (role, content) in previous.items():
        if role == "user":
            result.problems.append(f"chat {chat}: the last message {content[:60]!r} has no reply")
    lost = [token for token in acked if token not in where]
    result.lost = len(lost)
    for token in lost[:10]:
        _, chat, seq = token.split(":")
        seen = admin.execute(
            "SELECT status, inbox_id, turn_id FROM inbound_seen WHERE message_id = %s",
            (f"{chat}-m{seq}",),
        ).fetchall()
        turn = admin.execute(
            "SELECT id, state, error, attempt FROM turns WHERE id = ANY(%s)",
            ([r[2] for r in seen if r[2] is not None],),
        ).fetchall()
        stored = admin.execute(
            "SELECT s.session_key, s.session_id, e.on_path, e.depth, e.role, e.idem FROM entries e "
            "JOIN sessions s ON s.sid = e.sid WHERE e.content LIKE %s",
            (f"%{token}%",),
        ).fetchall()
        result.problems.append(f"lost {token}: seen {seen}, turns {turn}, stored {stored}")
    result.duplicated += sum(n - 1 for n in where.values() if n > 1)
    for chat, seqs in order.items():
        if seqs != sorted(seqs):
            result.out_of_order += 1
            result.problems.append(f"chat {chat} out of order: {seqs[:40]}")
    turns = admin.execute(
        "SELECT session_key, id, state, error, sg_us(started_at), sg_us(finished_at) "
        "FROM turns ORDER BY session_key, started_at"
    ).fetchall()
    last_end: dict[str, int] = {}
    for key, turn_id, state, error, started, finished in turns:
        if state not in ("delivered", "replied"):
            result.bad_turns += 1
            result.problems.append(f"turn {turn_id} on {key} ended {state}: {error}")
        if started is not None and key in last_end and started < last_end[key]:
            result.overlapping += 1
            result.problems.append(f"turn {turn_id} on {key} started before the last ended")
        if finished is not None:
            last_end[key] = max(last_end.get(key, 0), int(finished))


def failovers(admin: Any, faults: list[Fault], result: LanesResult) -> None:
    for fault in faults:
        for key in fault.lanes:
            row = admin.execute(
                "SELECT min(sg_us(finished_at)) FROM turns "
                "WHERE session_key = %s AND finished_at > to_timestamp(%s)",
                (key, fault.at),
            ).fetchone()
            if row is None or row[0] is None:
                continue
            seconds = row[0] / 1e6 - fault.at
            {
                "kill": result.failover_kill_s,
                "pause": result.failover_pause_s,
                "restart": result.failover_restart_s,
                "cut": result.failover_cut_s,
            }[fault.kind].append(seconds)


def make_schema(server: str, name: str) -> None:
    import psycopg

    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')


async def run_on_private_cluster(cfg: LanesConfig, work: Path) -> LanesResult:
    """The run on a cluster of its own (made, restarted and removed here): what restarts
    need (`cluster_problem()` says whether this machine can make one)."""
    with PrivateCluster() as cluster:
        make_schema(cluster.url, "sg_lanes")
        result = await run_lanes_torture(cfg, cluster.url, "sg_lanes", work, cluster)
        if not result.ok:
            result.problems.append(f"server log:{cluster.tail()}")
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--kills", type=int, default=6)
    parser.add_argument("--pauses", type=int, default=6)
    parser.add_argument("--terminates", type=int, default=6)
    parser.add_argument(
        "--restarts",
        type=int,
        default=0,
        help="PostgreSQL restarts, on a private cluster made for the run (--url is not used)",
    )
    parser.add_argument(
        "--cuts", type=int, default=0, help="silent cuts of one instance's database link"
    )
    parser.add_argument("--chats", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--ttl", type=float, default=TTL, help="lease TTL (10 is the default)")
    parser.add_argument("--heartbeat", type=float, default=HEARTBEAT)
    parser.add_argument("--sweep", type=float, default=SWEEP)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    cfg = LanesConfig(
        chats=args.chats,
        seconds=args.seconds,
        kills=args.kills,
        pauses=args.pauses,
        terminates=args.terminates,
        restarts=args.restarts,
        cuts=args.cuts,
        seed=args.seed,
        ttl=args.ttl,
        heartbeat=args.heartbeat,
        sweep=args.sweep,
    )
    with tempfile.TemporaryDirectory() as work:
        if cfg.restarts:
            problem = cluster_problem()
            if problem is not None:
                sys.exit(f"cannot restart PostgreSQL here: {problem}")
            result = asyncio.run(run_on_private_cluster(cfg, Path(work)))
        else:
            result = asyncio.run(run_on_shared(cfg, args.url, Path(work)))
        if not result.ok:
            # The instances' logs, to read what happened to the turns the check names.
            kept = Path(tempfile.mkdtemp(prefix="lanes-torture-"))
            for log in Path(work).glob("*.log"):
                shutil.copy(log, kept / log.name)
            result.problems.append(f"instance logs kept in {kept}")
    print(json.dumps(result.summary(), indent=2) if args.json else result.summary())
    sys.exit(0 if result.ok else 1)


async def run_on_shared(cfg: LanesConfig, url: str, work: Path) -> LanesResult:
    import postgres_support
    from postgres_support import Schema

    postgres_support.SERVER_URL = url
    schema = Schema()
    try:
        return await run_lanes_torture(cfg, url, schema.name, work)
    finally:
        with contextlib.suppress(Exception):
            schema.drop()


if __name__ == "__main__":
    main()
