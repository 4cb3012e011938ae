"""The running gateway and `sessiongate sessions export/import/prune` on one home, at once.

Clients keep talking to the gateway (the torture traffic, no kills) while the command line
exports every session, prunes old routing entries and imports the export back (which brings the
pruned keys back, to be pruned again), round after round. No HTTP client may see a 5xx, every
command must succeed, and the torture checks must hold for the live chats. The old sessions the
commands churn are seeded in 2020 so that prune always has work.
"""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from sessiongate import GatewayConfig, Platform, SessionSource, SessionStore
from sessiongate.core.clock import FakeClock
from torture import TortureConfig, TortureResult, run_scenario

if TYPE_CHECKING:
    from pathlib import Path

    from sg_process import GatewayProcess

SEEDED = 6
ROUNDS = 2
# A hang guard per command; never a timing assertion.
COMMAND_TIMEOUT = 120.0


def _seed_old_sessions(home: Path) -> list[str]:
    clock = FakeClock(datetime(2020, 1, 1, tzinfo=UTC))
    keys = []
    with SessionStore(home / "sessions", GatewayConfig(), clock=clock) as store:
        for i in range(SEEDED):
            source = SessionSource(platform=Platform.TELEGRAM, chat_id=f"old{i}", user_id="u")
            entry = store.get_or_create_session(source)
            store.append_messages(
                entry.session_id,
                [
                    {"role": "user", "content": f"old words {i}", "message_id": f"old-{i}"},
                    {"role": "assistant", "content": f"old reply {i}"},
                ],
            )
            keys.append(entry.session_key)
    return keys


async def _sessions_command(home: Path, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sessiongate",
        "sessions",
        *args,
        "--home",
        str(home),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(COMMAND_TIMEOUT):
        out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_gateway_and_sessions_commands_share_a_home_without_errors(tmp_path: Path):
    home = tmp_path / "home"
    old_keys = _seed_old_sessions(home)
    export = tmp_path / "export.json"
    pruned_total = imported_total = 0

    async def commands(gateway: GatewayProcess, result: TortureResult) -> None:
        nonlocal pruned_total, imported_total
        await gateway.start()
        for _ in range(ROUNDS):
            for args in (
                ("export", "-o", str(export)),
                ("prune", "--max-age-days", "30", "--json"),
                ("import", str(export), "--json"),
                ("list", "--json"),
            ):
                code, out, err = await _sessions_command(home, *args)
                if code != 0:
                    result.problems.append(f"sessions {args[0]} exited {code}: {err[-500:]}")
                    continue
                if args[0] == "prune":
                    pruned_total += json.loads(out)["pruned"]
                elif args[0] == "import":
                    imported_total += json.loads(out)["imported"]

    config = TortureConfig(kills=0, chats=4, seed=5, echo_delay=0.02)
    result = await run_scenario(config, tmp_path, commands)
    assert result.ok, "\n".join(result.problems)
    assert result.messages_acked > 0
    # Every round pruned the seeded keys and the import brought them back. (Fewer imports
    # would mean a pruned key came back from a stale sessions.json: the race of the mirror
    # import described in docs/RELIABILITY.md, finding 1.)
    assert pruned_total == SEEDED * ROUNDS
    assert imported_total == SEEDED * ROUNDS
    with SessionStore(home / "sessions", GatewayConfig(mirror_sessions_json=False)) as store:
        for i, key in enumerate(old_keys):
            entry = store.get_session(key)
            assert entry is not None
            texts = [m["content"] for m in store.load_transcript(entry.session_id)]
            assert texts == [f"old words {i}", f"old reply {i}"]
