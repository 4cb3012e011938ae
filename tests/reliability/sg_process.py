"""The real gateway as a child process: `python -m sessiongate run --home H --port 0`.

Shared by the crash-torture harness (`torture.py`) and the reliability tests. The child gets a
clean environment (no `SESSIONGATE_*` of the caller) plus the overrides it is given, writes its
JSON log lines to a file (appended across restarts, so a run's whole log can be searched for
secrets and tracebacks afterwards), and announces its address on stdout, which is read up to the
banner's last line.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sqlite3
import subprocess
import sys
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

__all__ = [
    "READY_TIMEOUT",
    "ChildExitedError",
    "GatewayProcess",
    "SyncGateway",
    "clean_env",
    "count_rows",
    "is_drained",
    "poll_until",
    "read_turn_states",
    "selected_by_marker",
]

# A hang guard for a child that never comes up; never a timing assertion.
READY_TIMEOUT = 60.0
_LISTENING = re.compile(r"listening on (http://\S+)")
_BANNER_END = "Stop:"


def clean_env(**overrides: str) -> dict[str, str]:
    """The caller's environment without `SESSIONGATE_*`, plus `overrides`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SESSIONGATE_")}
    env.update(overrides)
    return env


class GatewayProcess:
    """One gateway home, started and stopped (or killed) as many times as a test needs."""

    def __init__(
        self,
        home: Path,
        *,
        env: dict[str, str] | None = None,
        log_path: Path | None = None,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.home = home
        self.env = clean_env() if env is None else env
        self.log_path = log_path if log_path is not None else home.parent / "gateway.log"
        self.extra_args = extra_args
        self.proc: asyncio.subprocess.Process | None = None
        self.url: str | None = None
        self.banner: list[str] = []
        self.starts = 0
        self._log: IO[bytes] | None = None
        self._up = asyncio.Event()

    # ------------------------------------------------------------------ starting

    async def spawn(self) -> None:
        """Start the child without waiting for it to listen (see `wait_ready`)."""
        assert self.proc is None or self.proc.returncode is not None, "already running"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self.url = None
        self.banner = []
        self.starts += 1
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "sessiongate",
            "run",
            "--home",
            str(self.home),
            "--port",
            "0",
            *self.extra_args,
            stdout=asyncio.subprocess.PIPE,
            stderr=self._log,
            env=self.env,
        )

    async def wait_ready(self, guard: float = READY_TIMEOUT) -> str:
        """Read the banner; returns the URL. Raises `ChildExitedError` if the child exits."""
        assert self.proc is not None
        assert self.proc.stdout is not None
        async with asyncio.timeout(guard):
            while True:
                raw = await self.proc.stdout.readline()
                if not raw:
                    code = await self.proc.wait()
                    raise ChildExitedError(code, self.banner)
                line = raw.decode("utf-8", "replace").rstrip("\n")
                self.banner.append(line)
                match = _LISTENING.search(line)
                if match:
                    self.url = match.group(1)
                if self.url is not None and line.startswith(_BANNER_END):
                    self._up.set()
                    return self.url

    async def start(self) -> str:
        await self.spawn()
        return await self.wait_ready()

    async def wait_up(self) -> str:
        """The URL of the running child, waiting for it when it is down."""
        while True:
            await self._up.wait()
            if self.url is not None:
                return self.url

    @property
    def is_up(self) -> bool:
        return self._up.is_set()

    # ------------------------------------------------------------------ stopping

    async def kill(self) -> int:
        """SIGKILL; returns the exit code (-9 unless the child had already exited)."""
        self._up.clear()
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGKILL)
        code = await self.proc.wait()
        self._close_log()
        return code

    async def terminate(self, guard: float = READY_TIMEOUT) -> int:
        """SIGTERM and wait for the graceful exit; returns the exit code."""
        self._up.clear()
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(guard):
            code = await self.proc.wait()
        self._close_log()
        return code

    def signal(self, sig: int) -> None:
        """Send `sig` without waiting (the caller goes on talking to the draining child)."""
        assert self.proc is not None
        if sig in (signal.SIGTERM, signal.SIGINT, signal.SIGKILL):
            self._up.clear()
        self.proc.send_signal(sig)

    async def wait_exit(self, guard: float = READY_TIMEOUT) -> int:
        assert self.proc is not None
        async with asyncio.timeout(guard):
            code = await self.proc.wait()
        self._close_log()
        return code

    async def aclose(self) -> None:
        """Kill the child if it still runs (test teardown)."""
        if self.proc is not None and self.proc.returncode is None:
            await self.kill()
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""


class ChildExitedError(RuntimeError):
    def __init__(self, code: int, banner: list[str]) -> None:
        super().__init__(f"the gateway exited with {code} before listening: {banner}")
        self.code = code
        self.banner = banner


def _connect(db_path: Path) -> sqlite3.Connection:
    # A plain reader beside the gateway (WAL lets it read while the gateway writes); it never
    # writes, and a busy timeout covers a checkpoint in progress.
    conn = sqlite3.connect(db_path, timeout=30)
    conn.execute("PRAGMA busy_timeout = 30000")
    return conn


def read_turn_states(db_path: Path) -> dict[str, int]:
    """`turns` rows per state."""
    conn = _connect(db_path)
    try:
        rows = conn.execute("SELECT state, COUNT(*) FROM turns GROUP BY state").fetchall()
    finally:
        conn.close()
    return {str(state): int(n) for state, n in rows}


def count_rows(db_path: Path, table: str) -> int:
    assert table.isidentifier()
    conn = _connect(db_path)
    try:
        (n,) = conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()  # noqa: S608
    finally:
        conn.close()
    return int(n)


def selected_by_marker(request: object, marker: str) -> bool:
    """Whether the run asked for `marker` explicitly (`pytest -m torture`): the long variants
    run only then, so a plain `pytest` stays fast."""
    config = getattr(request, "config", None)
    expression = str(getattr(getattr(config, "option", None), "markexpr", "") or "")
    return marker in expression.replace(f"not {marker}", "")


class SyncGateway:
    """The gateway child for synchronous tests (module-scoped fixtures): start, URL, stop."""

    def __init__(
        self, home: Path, *, env: dict[str, str] | None = None, extra_args: tuple[str, ...] = ()
    ) -> None:
        self.home = home
        self.log_path = home.parent / "gateway.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sessiongate",
                "run",
                "--home",
                str(home),
                "--port",
                "0",
                *extra_args,
            ],
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=clean_env() if env is None else env,
            text=True,
        )
        self.url = self._read_banner()

    def _read_banner(self) -> str:
        assert self.proc.stdout is not None
        url = None
        seen = []
        for line in self.proc.stdout:
            seen.append(line)
            match = _LISTENING.search(line)
            if match:
                url = match.group(1)
            if url is not None and line.startswith(_BANNER_END):
                return url
        self.proc.wait(timeout=READY_TIMEOUT)
        raise ChildExitedError(self.proc.returncode, seen)

    def stop(self) -> int:
        """SIGTERM and wait; returns the exit code (killed after the hang guard)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=READY_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log.close()
        return self.proc.returncode


async def poll_until(
    predicate: Callable[[], bool], *, guard: float = READY_TIMEOUT, interval: float = 0.05
) -> None:
    """Wait until `predicate()` holds. It reads state another process owns (its database, its
    log, a file), which cannot signal an event here, so this polls; `guard` is a hang guard."""
    async with asyncio.timeout(guard):
        while not predicate():  # noqa: ASYNC110 (see the docstring: no event to wait on)
            await asyncio.sleep(interval)


def is_drained(db_path: Path) -> bool:
    """No turn waits, runs or awaits delivery, and the inbox is empty."""
    states = read_turn_states(db_path)
    open_turns = sum(states.get(s, 0) for s in ("accepted", "running", "replied"))
    return not open_turns and not count_rows(db_path, "inbox")
