"""One gateway instance on PostgreSQL, in process, with the echo agent: turns/s, and database
round trips and transactions per turn (every statement psycopg sends is one round trip).

    python benchmarks/postgres_gateway.py --url postgresql://postgres@127.0.0.1:5432/test

It works in a schema of its own (made and dropped here), so it can share a database.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg

from sessiongate import GatewayConfig, SessionSource, SessionStore
from sessiongate.agents import build_agent_factory
from sessiongate.core.platform import Platform
from sessiongate.gateway import GatewayRunner, MessageEvent

COUNTS = {"statements": 0, "transactions": 0}


class CountingCursor(psycopg.Cursor[Any]):
    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        COUNTS["statements"] += 1
        if isinstance(query, str) and query.startswith("BEGIN"):
            COUNTS["transactions"] += 1
        return super().execute(query, params, **kwargs)


async def measure(url: str, home: Path, chats: int, turns: int) -> dict[str, Any]:
    config = GatewayConfig(store={"url": url})  # type: ignore[arg-type]
    store = SessionStore(home / "sessions", config)
    store.database.conn.cursor_factory = CountingCursor  # type: ignore[attr-defined]
    runner = GatewayRunner(store, config, home=home, agent_factory=build_agent_factory(config))
    await runner.start()

    def event(i: int, prefix: str = "c") -> MessageEvent:
        source = SessionSource(platform=Platform.API, chat_id=f"{prefix}{i % chats}")
        return MessageEvent(source=source, text=f"hello {i}")

    try:
        for i in range(50):  # warm-up on chats of their own
            await runner.handle_message(event(i, "warm"))
        COUNTS.update(statements=0, transactions=0)
        started, cpu = time.perf_counter(), time.process_time()
        for i in range(turns):
            receipt = await runner.handle_message(event(i))
            if receipt.status != "replied":
                raise RuntimeError(f"turn not replied: {receipt}")
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    finally:
        await runner.stop()
        store.close()
    return {
        "turns": turns,
        "turns_per_s": round(turns / wall, 1),
        "client_cpu_ms_per_turn": round(1000 * cpu / turns, 3),
        "round_trips_per_turn": round(COUNTS["statements"] / turns, 2),
        "transactions_per_turn": round(COUNTS["transactions"] / turns, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--chats", type=int, default=20)
    args = parser.parse_args()
    schema = f"sg_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(args.url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    joiner = "&" if "?" in args.url else "?"
    url = f"{args.url}{joiner}options={quote(f'-csearch_path={schema}')}"
    try:
        with tempfile.TemporaryDirectory() as work:
            result = asyncio.run(measure(url, Path(work), args.chats, args.turns))
    finally:
        with psycopg.connect(args.url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    print(json.dumps(result))


if __name__ == "__main__":
    main()
