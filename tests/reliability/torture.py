"""Crash torture over HTTP: SIGKILL the real gateway at random moments while clients talk to it.

    python tests/reliability/torture.py --kills 200 --chats 20 --json
    python tests/reliability/torture.py --kills 200 --chats 20 --busy-mode interrupt \
        --burst-share 0.3

The gateway runs as a child process (`python -m sessiongate run --home H --port 0`) with the echo
agent (`echo: <text>`, a small delay) in `queue` busy mode, or (`--busy-mode interrupt`) in the
gateway's default `interrupt` mode, where a follow-up merges into the lane's pending slot and
cancels the running turn, which ends `interrupted` and keeps its user message. Every chat has one
client that sends messages one after another without waiting for the reply (`wait: false`, a
few with `wait: true`), each with a unique platform message id and a text holding a unique
token; a share of the sends (`--burst-share`) are bursts of 2-3 messages sent at once, so that
several follow-ups reach a busy lane together; a share of the chats send every message as
`/queue <token>` (one turn each) instead of plain follow-ups (which merge into the pending slot
while the lane is busy). A message counts as acknowledged when the gateway answers 200/202 for
it; an unanswered request (connection refused or cut by a kill, a time-out) is sent again with
the same message id once the gateway is back, and the client sends nothing newer on that chat
until it (its whole burst) is acknowledged (a client that skipped ahead would reorder its own
chat). A killer task SIGKILLs the gateway at random moments — sometimes while it is still
starting and recovering — and starts it again.

After the last kill the gateway is started once more, the clients finish, the lanes drain, the
gateway is stopped with SIGTERM, and the state is checked (`check_home`):

- every acknowledged token is in exactly one transcript, exactly once (follow-ups merged into
  one turn are joined with a newline), and no unknown text is;
- every token is in its own chat's conversation, and none in any other conversation;
- per chat, tokens appear in the order they were sent (ordered by turn id, then line; the
  messages of one burst in any order among themselves);
- every user turn is followed by exactly one reply, `echo: <its text>`, or, only for a turn the
  stuck-loop guard suspended at the `stuck_loop_threshold`-th start in a row to find it cut
  off (after `stuck_loop_threshold - 1` killed resumes), by that notice with
  the turn journalled `failed`/`stuck_loop`; in `interrupt` mode a turn a follow-up cut off is
  journalled `interrupted`/`interrupt`, its user message (marked `interrupted: interrupt`) is
  kept and followed by no reply; in `queue` mode no turn may end `interrupted`;
- the journal holds no `accepted`/`running`/`replied` turn and the inbox is empty; no inbox row
  was claimed by two turns; each journalled turn left exactly one user message, each delivered
  turn exactly one reply (so no reply was delivered twice); every acknowledged id is recorded
  in the dedup table;
- no HTTP answer was a 5xx, and the gateway's log holds no error line.

Exit status 0 when no problem was found; the `--json` summary has the figures either way.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import signal
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx

from sg_process import GatewayProcess, clean_env, count_rows, is_drained, poll_until

__all__ = [
    "BUSY_MODES",
    "Action",
    "BusyMode",
    "Sent",
    "TortureConfig",
    "TortureResult",
    "check_home",
    "gateway_env",
    "load_ledger",
    "main",
    "run_scenario",
    "run_torture",
    "save_ledger",
]

BusyMode = Literal["queue", "interrupt"]
BUSY_MODES: tuple[BusyMode, ...] = ("queue", "interrupt")
# The journal's `error` of a turn a follow-up cancelled (`CancelReason.INTERRUPT`).
INTERRUPT_REASON = "interrupt"

# The key of chat `c` on the api platform with the default configuration.
TRAFFIC_KEY_PREFIX = "agent:main:api:dm:"
STUCK_NOTICE_PREFIX = "This conversation kept getting interrupted by restarts"
# Hang guards (a broken gateway fails the run instead of hanging it); never timing checks.
DRAIN_GUARD_SECONDS = 180.0
REQUEST_TIMEOUT_SECONDS = 15.0


@dataclass(slots=True)
class TortureConfig:
    kills: int = 3
    chats: int = 4
    seed: int = 0
    echo_delay: float = 0.02
    # Uptime before a kill, drawn uniformly (seconds after the gateway listens).
    min_uptime: float = 0.05
    max_uptime: float = 1.5
    # Share of kills aimed at a gateway still starting (recovery, resumes) instead.
    startup_kill_share: float = 0.2
    # Share of messages sent with `wait: true`.
    wait_share: float = 0.1
    # A pause between two sends of one chat, drawn uniformly from [0, max_pause].
    max_pause: float = 0.02
    # Share of chats that send every message as `/queue <text>` (one turn each, FIFO).
    queue_share: float = 0.25
    # Share of sends that are a burst: 2 to `max_burst` messages sent at once, so that several
    # follow-ups reach a busy lane together and merge into its pending slot (in `interrupt`
    # mode a lone follow-up is claimed as soon as it has cut the running turn off).
    burst_share: float = 0.0
    max_burst: int = 3
    stuck_loop_threshold: int = 3
    # The gateway's `busy_input_mode`: `queue` (follow-ups wait for the running turn) or
    # `interrupt` (the gateway's default: a follow-up cancels the running turn).
    busy_mode: BusyMode = "queue"


@dataclass(slots=True)
class Sent:
    """One client message: its chat, its place in the chat, its id, its token."""

    chat: str
    seq: int
    message_id: str
    token: str
    attempts: int = 0
    acked_status: str | None = None
    # The seq of the first message of its burst: messages sent at once may land in any order
    # among themselves, never before an earlier send or after a later one.
    burst: int | None = None

    @property
    def rank(self) -> int:
        return self.seq if self.burst is None else self.burst


@dataclass(slots=True)
class TortureResult:
    kills: int = 0
    startup_kills: int = 0
    starts: int = 0
    messages_acked: int = 0
    requests: int = 0
    retries: int = 0
    transport_errors: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    http_codes: dict[str, int] = field(default_factory=dict)
    five_xx: list[str] = field(default_factory=list)
    turns: dict[str, int] = field(default_factory=dict)
    user_turns: int = 0
    merged_turns: int = 0
    interrupted_turns: int = 0
    replies: int = 0
    resumed_turns: int = 0
    stuck_suspended: int = 0
    sessions: int = 0
    log_errors: int = 0
    final_exit_code: int | None = None
    elapsed_seconds: float = 0.0
    home: str = ""
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


# ---------------------------------------------------------------------- clients


class _Traffic:
    def __init__(self, gateway: GatewayProcess, config: TortureConfig, result: TortureResult):
        self.gateway = gateway
        self.config = config
        self.result = result
        self.sent: dict[str, list[Sent]] = {}
        self.stop_sending = asyncio.Event()
        self.nonce = f"{config.seed:x}"

    async def chat(self, client: httpx.AsyncClient, chat: str) -> None:
        rng = random.Random(f"{self.config.seed}:{chat}")
        queue = rng.random() < self.config.queue_share
        log = self.sent.setdefault(chat, [])
        seq = 0
        while not self.stop_sending.is_set():
            size = 1
            # No draw without bursts, so a queue-mode seed sends what it always sent.
            if self.config.burst_share and rng.random() < self.config.burst_share:
                size = rng.randint(2, max(2, self.config.max_burst))
            burst = [
                Sent(
                    chat,
                    n,
                    f"{chat}-m{n}",
                    f"tok:{chat}:{n}:{self.nonce}",
                    burst=seq if size > 1 else None,
                )
                for n in range(seq, seq + size)
            ]
            log.extend(burst)
            waits = [rng.random() < self.config.wait_share for _ in burst]
            # Nothing newer is sent until the whole burst is acknowledged.
            await asyncio.gather(
                *(
                    self._deliver(client, item, wait=wait, queue=queue)
                    for item, wait in zip(burst, waits, strict=True)
                )
            )
            seq += size
            if self.config.max_pause:
                await asyncio.sleep(rng.uniform(0, self.config.max_pause))

    async def _deliver(
        self, client: httpx.AsyncClient, item: Sent, *, wait: bool, queue: bool
    ) -> None:
        """Send until acknowledged, retrying with the same message id."""
        text = f"/queue {item.token}" if queue else item.token
        body = {"chat_id": item.chat, "text": text, "message_id": item.message_id}
        while True:
            url = await self.gateway.wait_up()
            item.attempts += 1
            self.result.requests += 1
            if item.attempts > 1:
                self.result.retries += 1
            try:
                response = await client.post(
                    f"{url}/v1/messages",
                    json={**body, "wait": wait},
                    timeout=REQUEST_TIMEOUT_SECONDS,
                )
            except httpx.TransportError:
                self.result.transport_errors += 1
                await asyncio.sleep(0.01)
                continue
            code = response.status_code
            _bump(self.result.http_codes, str(code))
            if code >= 500:
                self.result.five_xx.append(f"{code} for {item.message_id}: {response.text[:300]}")
                await asyncio.sleep(0.05)
                continue
            if code == 429:
                await asyncio.sleep(0.05)
                continue
            if code not in (200, 202):
                self.result.problems.append(
                    f"unexpected {code} for {item.message_id}: {response.text[:300]}"
                )
                return
            status = str(response.json().get("status"))
            _bump(self.result.statuses, status)
            if status == "failed":
                # Only a stopping runner answers so, and it wrote nothing: send it again.
                await asyncio.sleep(0.05)
                continue
            if status == "replied":
                reply = str(response.json().get("reply") or "")
                if item.token not in reply.removeprefix("echo: ").split("\n"):
                    self.result.problems.append(
                        f"{item.message_id} answered with a reply without its token: {reply!r}"
                    )
            item.acked_status = status
            self.result.messages_acked += 1
            return

    def acked(self) -> dict[str, Sent]:
        return {
            s.token: s for items in self.sent.values() for s in items if s.acked_status is not None
        }


def save_ledger(workdir: Path, sent: dict[str, list[Sent]]) -> None:
    """What the clients sent and which were acknowledged, for checking the home again."""
    data = {chat: [asdict(s) for s in items] for chat, items in sent.items()}
    (workdir / "ledger.json").write_text(json.dumps(data), encoding="utf-8")


def load_ledger(workdir: Path) -> tuple[dict[str, Sent], dict[str, list[Sent]]]:
    """(acknowledged by token, sent by chat) as `save_ledger` wrote them."""
    data = json.loads((workdir / "ledger.json").read_text(encoding="utf-8"))
    sent = {chat: [Sent(**item) for item in items] for chat, items in data.items()}
    acked = {s.token: s for items in sent.values() for s in items if s.acked_status is not None}
    return acked, sent


def _bump(counter: dict[str, int], key: str) -> None:
    counter[key] = counter.get(key, 0) + 1


# ---------------------------------------------------------------------- the killer


async def _killer(gateway: GatewayProcess, config: TortureConfig, result: TortureResult) -> None:
    rng = random.Random(f"{config.seed}:killer")
    for _ in range(config.kills):
        if rng.random() < config.startup_kill_share:
            # Aim at start-up: recovery, resumes, the startup gate.
            await gateway.spawn()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(rng.uniform(0.2, 1.2)):
                    await gateway.wait_ready()
            result.startup_kills += 1
        else:
            await gateway.start()
            await asyncio.sleep(rng.uniform(config.min_uptime, config.max_uptime))
        code = await gateway.kill()
        if code != -signal.SIGKILL:
            result.problems.append(f"the gateway exited by itself with {code} before a kill")
        result.kills += 1
    await gateway.start()


# ---------------------------------------------------------------------- running


def gateway_env(config: TortureConfig) -> dict[str, str]:
    return clean_env(
        SESSIONGATE_AGENT__ECHO__DELAY_SECONDS=str(config.echo_delay),
        SESSIONGATE_BUSY_INPUT_MODE=config.busy_mode,
        SESSIONGATE_STUCK_LOOP_THRESHOLD=str(config.stuck_loop_threshold),
    )


Action = Callable[[GatewayProcess, TortureResult], Awaitable[None]]


async def run_torture(config: TortureConfig, workdir: Path) -> TortureResult:
    """Run the whole torture in `workdir` (the gateway home is `workdir/home`)."""
    return await run_scenario(config, workdir, lambda gw, result: _killer(gw, config, result))


async def run_scenario(
    config: TortureConfig,
    workdir: Path,
    action: Action,
    *,
    env: dict[str, str] | None = None,
) -> TortureResult:
    """Traffic on `config.chats` chats while `action` does its worst to the gateway.

    `action` starts the gateway (as often as it likes) and must leave it running when it
    returns; then the clients finish, the lanes drain, the gateway gets SIGTERM and the home
    is checked.
    """
    started = time.monotonic()
    result = TortureResult(home=str(workdir / "home"))
    gateway = GatewayProcess(
        workdir / "home", env=env or gateway_env(config), log_path=workdir / "gateway.log"
    )
    traffic = _Traffic(gateway, config, result)
    limits = httpx.Limits(max_connections=config.chats * 2, max_keepalive_connections=0)
    try:
        async with httpx.AsyncClient(limits=limits) as client:
            chats = [
                asyncio.create_task(traffic.chat(client, f"c{i:02d}")) for i in range(config.chats)
            ]
            try:
                await action(gateway, result)
                traffic.stop_sending.set()
                async with asyncio.timeout(DRAIN_GUARD_SECONDS):
                    await asyncio.gather(*chats)
            finally:
                for task in chats:
                    task.cancel()
                await asyncio.gather(*chats, return_exceptions=True)
        db_path = workdir / "home" / "sessions" / "state.db"
        await poll_until(lambda: is_drained(db_path), guard=DRAIN_GUARD_SECONDS, interval=0.1)
        result.final_exit_code = await gateway.terminate()
        if result.final_exit_code != 0:
            result.problems.append(f"SIGTERM exit code {result.final_exit_code}, not 0")
    finally:
        await gateway.aclose()
    result.starts = gateway.starts
    save_ledger(workdir, traffic.sent)
    check_home(workdir / "home", traffic.acked(), traffic.sent, result, config=config)
    _check_log(gateway.log_text(), result)
    result.five_xx = result.five_xx[:20]
    if result.five_xx:
        result.problems.append(f"{len(result.five_xx)} answers were 5xx")
    result.elapsed_seconds = round(time.monotonic() - started, 1)
    return result


def _check_log(text: str, result: TortureResult) -> None:
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            if line.strip():
                result.problems.append(f"a log line that is not JSON: {line[:200]}")
            continue
        if record.get("level") in ("error", "critical"):
            result.log_errors += 1
            if result.log_errors <= 5:
                result.problems.append(f"error in the gateway log: {line[:400]}")


# ---------------------------------------------------------------------- checking


def check_home(
    home: Path,
    acked: dict[str, Sent],
    sent: dict[str, list[Sent]],
    result: TortureResult,
    *,
    config: TortureConfig,
) -> None:
    """The end-state checks of the module docstring, on a stopped gateway's home.

    Per-chat order is the order of turn ids (the gateway claims a lane's turns one after
    another), then of the lines merged into one turn; it does not depend on which session
    incarnation a turn landed in.
    """
    from sessiongate import GatewayConfig, SessionStore

    problems = result.problems
    db_path = home / "sessions" / "state.db"
    journal = _read_journal(db_path)
    result.turns = dict(Counter(t["state"] for t in journal.values()))
    for state in ("accepted", "running", "replied"):
        if result.turns.get(state):
            problems.append(f"{result.turns[state]} turns left {state!r}")
    if count_rows(db_path, "inbox"):
        problems.append(f"{count_rows(db_path, 'inbox')} inbox rows left")
    inbox_ids = Counter(t["inbox_id"] for t in journal.values() if t["inbox_id"] is not None)
    for inbox_id, n in inbox_ids.items():
        if n > 1:
            problems.append(f"inbox row {inbox_id} was claimed by {n} turns")
    for turn in journal.values():
        if turn["state"] == "interrupted" and config.busy_mode == "interrupt":
            # Cut off by a follow-up is an outcome of this mode; cut off by anything else
            # (`stop`, `stale`) is not, since the traffic sends no command that does it.
            if turn["error"] == INTERRUPT_REASON:
                result.interrupted_turns += 1
            else:
                problems.append(f"turn {turn['id']} ended interrupted: {turn['error']}")
        elif turn["state"] == "interrupted" or (
            turn["state"] == "failed" and turn["error"] != "stuck_loop"
        ):
            problems.append(f"turn {turn['id']} ended {turn['state']}: {turn['error']}")
        if turn["attempt"] > 1:
            result.resumed_turns += 1
        # The threshold-th start in a row to find the turn cut off suspends it: the crash that
        # first cut it off, then threshold - 1 killed resumes.
        expected_resumes = config.stuck_loop_threshold - 1
        if turn["error"] == "stuck_loop" and turn["resumes"] != expected_resumes:
            problems.append(
                f"turn {turn['id']} was suspended after {turn['resumes']} resumes, "
                f"not {expected_resumes}"
            )
    _check_seen(db_path, acked, problems)

    sessions = _read_sessions(db_path)
    result.sessions = len(sessions)
    known = {s.token: s for items in sent.values() for s in items}
    where: dict[str, list[str]] = {}
    per_chat: dict[str, list[tuple[int, int, int]]] = {}
    turn_messages: Counter[int] = Counter()
    replies_per_turn: Counter[int] = Counter()
    with SessionStore(home / "sessions", GatewayConfig(mirror_sessions_json=False)) as store:
        for session_id, key in sessions:
            events = store.load_events(session_id, branch="all")
            messages = [e for e in events if e.get("type") == "message"]
            chat = key.removeprefix(TRAFFIC_KEY_PREFIX) if key else None
            if chat not in sent:
                # Not a traffic conversation: none of the traffic may have leaked into it.
                for event in messages:
                    leaked = set(str(event.get("content") or "").split("\n")) & known.keys()
                    if leaked:
                        problems.append(f"{sorted(leaked)[:3]} leaked into {key} ({session_id})")
                continue
            if any(not e.get("on_path", True) for e in events):
                problems.append(f"{session_id} has entries off the active path")
            for index, event in enumerate(messages):
                if event.get("role") != "user":
                    continue
                metadata = event.get("metadata") or {}
                turn_id = metadata.get("turn_id")
                content = str(event.get("content") or "")
                tokens = content.split("\n")
                result.user_turns += 1
                if len(tokens) > 1:
                    result.merged_turns += 1
                if isinstance(turn_id, int):
                    turn_messages[turn_id] += 1
                else:
                    problems.append(f"user message {event.get('id')} without a turn id")
                for line, token in enumerate(tokens):
                    where.setdefault(token, []).append(session_id)
                    item = known.get(token)
                    if item is None:
                        problems.append(f"unknown text in {session_id}: {token[:80]!r}")
                    elif item.chat != chat:
                        problems.append(f"{token} of chat {item.chat} is in {key}'s transcript")
                    elif isinstance(turn_id, int):
                        per_chat.setdefault(item.chat, []).append((turn_id, line, item.rank))
                follow = messages[index + 1] if index + 1 < len(messages) else None
                journaled = journal.get(turn_id) if isinstance(turn_id, int) else None
                _check_reply(event, follow, journaled, result, replies_per_turn)
    for token, places in where.items():
        if len(places) > 1:
            problems.append(f"{token} is stored {len(places)} times: {places}")
    for token in acked:
        if token not in where:
            problems.append(f"acknowledged {token} is in no transcript")
    for chat, placed in per_chat.items():
        ranks = [rank for _, _, rank in sorted(placed)]
        if ranks != sorted(ranks):
            problems.append(f"chat {chat} is out of order: {ranks[:50]}")
    for turn_id, turn in journal.items():
        if turn_messages[turn_id] != 1:
            problems.append(f"turn {turn_id} has {turn_messages[turn_id]} user messages")
        if turn["state"] == "delivered" and replies_per_turn[turn_id] != 1:
            problems.append(f"turn {turn_id} has {replies_per_turn[turn_id]} replies")
    for turn_id in turn_messages:
        if turn_id not in journal:
            problems.append(f"transcript names turn {turn_id}, which the journal lacks")
    # Long lists of the same failure say nothing more than the first few.
    if len(problems) > 40:
        result.problems = [*problems[:40], f"... and {len(problems) - 40} more"]


def _check_reply(
    user: dict[str, Any],
    follow: dict[str, Any] | None,
    turn: dict[str, Any] | None,
    result: TortureResult,
    replies_per_turn: Counter[int],
) -> None:
    metadata = user.get("metadata") or {}
    turn_id = metadata.get("turn_id")
    content = str(user.get("content") or "")
    shown = None if follow is None else (follow.get("role"), str(follow.get("content"))[:80])
    marked = metadata.get("interrupted")
    if turn is not None and turn["state"] == "interrupted":
        # The user message stays (stored when its turn started, so the journal holds the
        # reason) and nothing answers it: the next entry is the next turn's user message, the
        # partial reply the user saw (marked with the reason), or there is none.
        seen = (follow or {}).get("metadata") or {}
        partial = (follow or {}).get("role") == "assistant" and seen.get("interrupted") == turn[
            "error"
        ]
        if follow is not None and follow.get("role") != "user" and not partial:
            result.problems.append(
                f"interrupted turn {turn_id} ({content[:60]!r}) is followed by {shown}"
            )
        return
    if marked is not None:
        state = None if turn is None else turn["state"]
        result.problems.append(f"turn {turn_id} is marked interrupted but journalled {state}")
        return
    reply = None if follow is None or follow.get("role") != "assistant" else follow
    if reply is not None and reply.get("content") == f"echo: {content}":
        result.replies += 1
        if isinstance(turn_id, int):
            replies_per_turn[turn_id] += 1
        return
    is_stuck_notice = reply is not None and str(reply.get("content") or "").startswith(
        STUCK_NOTICE_PREFIX
    )
    if (
        is_stuck_notice
        and turn is not None
        and (turn["state"], turn["error"]) == ("failed", "stuck_loop")
    ):
        result.stuck_suspended += 1
        return
    result.problems.append(f"turn {turn_id} ({content[:60]!r}) is followed by {shown}")


def _read_journal(db_path: Path) -> dict[int, dict[str, Any]]:
    conn = sqlite3.connect(db_path)
    try:
        conn.row_factory = sqlite3.Row
        rows = conn.execute(
            "SELECT id, session_key, session_id, inbox_id, state, attempt, resumes, error "
            "FROM turns ORDER BY id"
        ).fetchall()
    finally:
        conn.close()
    return {int(r["id"]): dict(r) for r in rows}


def _read_sessions(db_path: Path) -> list[tuple[str, str]]:
    conn = sqlite3.connect(db_path)
    try:
        rows = conn.execute(
            "SELECT session_id, session_key FROM sessions ORDER BY started_at, sid"
        ).fetchall()
    finally:
        conn.close()
    return [(str(a), str(b)) for a, b in rows]


def _check_seen(db_path: Path, acked: dict[str, Sent], problems: list[str]) -> None:
    conn = sqlite3.connect(db_path)
    try:
        seen = {str(r[0]) for r in conn.execute("SELECT message_id FROM inbound_seen")}
    finally:
        conn.close()
    missing = [s.message_id for s in acked.values() if s.message_id not in seen]
    if missing:
        problems.append(f"{len(missing)} acknowledged ids missing from the dedup table")


# ---------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    defaults = TortureConfig()
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--kills", type=int, default=defaults.kills)
    parser.add_argument("--chats", type=int, default=defaults.chats)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--echo-delay", type=float, default=defaults.echo_delay)
    parser.add_argument("--min-uptime", type=float, default=defaults.min_uptime)
    parser.add_argument("--max-uptime", type=float, default=defaults.max_uptime)
    parser.add_argument("--startup-kill-share", type=float, default=defaults.startup_kill_share)
    parser.add_argument("--wait-share", type=float, default=defaults.wait_share)
    parser.add_argument("--queue-share", type=float, default=defaults.queue_share)
    parser.add_argument("--busy-mode", choices=BUSY_MODES, default=defaults.busy_mode)
    parser.add_argument("--burst-share", type=float, default=defaults.burst_share)
    parser.add_argument("--workdir", type=Path, help="keep the home here (default: a temp dir)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args(argv)
    config = TortureConfig(
        kills=args.kills,
        chats=args.chats,
        seed=args.seed,
        echo_delay=args.echo_delay,
        min_uptime=args.min_uptime,
        max_uptime=args.max_uptime,
        startup_kill_share=args.startup_kill_share,
        wait_share=args.wait_share,
        queue_share=args.queue_share,
        busy_mode=args.busy_mode,
        burst_share=args.burst_share,
    )
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
        result = asyncio.run(run_torture(config, args.workdir))
    else:
        workdir = Path(tempfile.mkdtemp(prefix="sessiongate-torture-"))
        result = asyncio.run(run_torture(config, workdir))
    summary = {"ok": result.ok, "config": asdict(config), **asdict(result)}
    if args.json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    else:
        verdict = "OK" if result.ok else "PROBLEMS"
        sys.stdout.write(
            f"{verdict}: {result.kills} kills ({result.startup_kills} during start-up), "
            f"{result.messages_acked} messages acknowledged, {result.user_turns} turns "
            f"({result.merged_turns} merged, {result.interrupted_turns} interrupted, "
            f"{result.resumed_turns} resumed, "
            f"{result.stuck_suspended} suspended), {result.elapsed_seconds}s; home {result.home}\n"
        )
        for problem in result.problems:
            sys.stdout.write(f"  - {problem}\n")
    return 0 if result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
