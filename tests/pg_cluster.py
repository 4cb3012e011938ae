"""A private PostgreSQL cluster a test may restart and crash: the shared server never is.

`PrivateCluster` runs `initdb` into a temporary directory, starts the server on a free port of
127.0.0.1 (its unix socket in that directory, so nothing else's is touched), with fsync on (a
crash restart must find what was committed), and trust authentication for `postgres`.
`restart()` is `pg_ctl restart -m fast` (sessions ended, a shutdown checkpoint), `crash()` an
immediate stop and start again (no checkpoint: the server recovers from its WAL, as after a
power cut). `initdb` refuses to run as root: as root, every server command runs as the
`postgres` OS user, who owns the directory.

    problem = cluster_problem()          # None, or why there can be no private cluster
    with PrivateCluster() as cluster:    # cluster.url: postgresql://postgres@127.0.0.1:<port>/postgres
        cluster.restart()
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["PrivateCluster", "cluster_problem"]

BIN_DIRS = [
    os.environ.get("SESSIONGATE_TEST_PG_BIN", ""),
    "/usr/lib/postgresql/16/bin",
    "/usr/lib/postgresql/15/bin",
]
OS_USER = "postgres"
START_TIMEOUT = 30


def bin_dir() -> Path | None:
    for candidate in BIN_DIRS:
        if candidate and (Path(candidate) / "initdb").is_file():
            return Path(candidate)
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def cluster_problem() -> str | None:
    """None when a private cluster can be made here, else the reason (for a skip)."""
    if bin_dir() is None:
        return "no PostgreSQL server binaries (initdb, pg_ctl): set SESSIONGATE_TEST_PG_BIN"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(OS_USER)
        except KeyError:
            return f"running as root and there is no {OS_USER!r} OS user to run initdb as"
        if shutil.which("runuser") is None:
            return "running as root and there is no runuser to run initdb as postgres"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivateCluster:
    def __init__(self, *, settings: dict[str, str] | None = None) -> None:
        problem = cluster_problem()
        if problem is not None:
            raise RuntimeError(problem)
        self.bin = bin_dir()
        self.root = Path(tempfile.mkdtemp(prefix="sg-pgcluster-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = _free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self.restarts = 0
        self.crashes = 0
        self._settings = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.root}'",
            "fsync": "on",
            "synchronous_commit": "on",
            "max_connections": "100",
            "shared_buffers": "32MB",
            **(settings or {}),
        }
        self._as_root = os.geteuid() == 0
        if self._as_root:
            user = pwd.getpwnam(OS_USER)
            os.chown(self.root, user.pw_uid, user.pw_gid)
        self._started = False

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        assert self.bin is not None
        command = [str(self.bin / args[0]), *args[1:]]
        if self._as_root:
            command = ["runuser", "-u", OS_USER, "--", *command]
        return subprocess.run(
            command, check=check, capture_output=True, text=True, timeout=START_TIMEOUT + 30
        )

    def _pg_ctl(self, *args: str) -> None:
        result = self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w",
            "-t", str(START_TIMEOUT), *args, check=False,
        )  # fmt: skip
        if result.returncode != 0:
            raise RuntimeError(f"pg_ctl {' '.join(args)} failed: {result.stderr}{self.tail()}")

    def start(self) -> PrivateCluster:
        self._run("initdb", "-D", str(self.data), "-U", OS_USER, "--auth=trust", "-E", "UTF8")
        with (self.data / "postgresql.conf").open("a") as conf:
            for name, value in self._settings.items():
                conf.write(f"{name} = {value}\n")
        self._pg_ctl("start")
        self._started = True
        self._run("psql", "-h", str(self.root), "-p", str(self.port), "-U", OS_USER,
                  "-c", "CREATE DATABASE test", "postgres")  # fmt: skip
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/test"
        return self

    def restart(self) -> None:
        """A clean restart: every session is ended, the server checkpoints and comes back."""
        self._pg_ctl("restart", "-m", "fast")
        self.restarts += 1

    def crash(self) -> None:
        """An immediate stop (no checkpoint, like a crash), then a start: WAL recovery."""
        self._pg_ctl("stop", "-m", "immediate")
        self._pg_ctl("start")
        self.crashes += 1

    def stop(self) -> None:
        if self._started:
            self._started = False
            with contextlib.suppress(RuntimeError, subprocess.SubprocessError):
                self._pg_ctl("stop", "-m", "immediate")

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def tail(self, chars: int = 2000) -> str:
        try:
            return "\n" + self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def __enter__(self) -> PrivateCluster:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: Any) -> None:
        self.close()
