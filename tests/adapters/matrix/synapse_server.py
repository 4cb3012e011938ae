"""A real Matrix homeserver for the tests: Synapse on SQLite, on a loopback port.

Synapse (`matrix-synapse` from the package index) lives in a virtualenv of its own, created on
first use under `~/.cache/sessiongate-tests/synapse-venv` (its dependencies, Twisted among
them, stay out of the project's environment), so only the first run pays for the install. A
machine where it cannot be installed skips the tests that need it, saying why.

`Synapse.start` writes a minimal config (no federation listener, no key servers, generous
rate limits), generates the signing key, starts the server and waits for
`/_matrix/client/versions`; users are registered through the admin shared-secret API.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

SYNAPSE_VERSION = "1.163.2"
VENV = Path.home() / ".cache" / "sessiongate-tests" / "synapse-venv"
SERVER_NAME = "localhost"
# A cold start on SQLite creates the whole schema: allow for a slow, shared machine.
START_SECONDS = 120.0
_CONFIG = """\
server_name: "{server_name}"
pid_file: "{data}/homeserver.pid"
listeners:
  - port: {port}
    bind_addresses: ["127.0.0.1"]
    type: http
    tls: false
    x_forwarded: false
    resources:
      - names: [client]
        compress: false
database:
  name: sqlite3
  args:
    database: "{data}/homeserver.db"
media_store_path: "{data}/media"
signing_key_path: "{data}/signing.key"
registration_shared_secret: "{secret}"
report_stats: false
enable_metrics: false
trusted_key_servers: []
suppress_key_server_warning: true
presence:
  enabled: false
url_preview_enabled: false
rc_message: {{per_second: 1000, burst_count: 1000}}
rc_joins: {{local: {{per_second: 1000, burst_count: 1000}}}}
rc_invites:
  per_room: {{per_second: 1000, burst_count: 1000}}
  per_user: {{per_second: 1000, burst_count: 1000}}
rc_registration: {{per_second: 1000, burst_count: 1000}}
rc_login:
  address: {{per_second: 1000, burst_count: 1000}}
  account: {{per_second: 1000, burst_count: 1000}}
"""


class SynapseUnavailableError(Exception):
    """Synapse cannot be installed or started here (the reason is the message)."""


def synapse_python() -> Path:
    """The interpreter of the Synapse virtualenv, created (once, under a lock) if missing."""
    python = VENV / "bin" / "python"
    if _importable(python):
        return python
    try:
        VENV.parent.mkdir(parents=True, exist_ok=True)
        lock = open(VENV.parent / "synapse-venv.lock", "w")  # noqa: SIM115  # closed below
    except OSError as exc:
        raise SynapseUnavailableError(f"no cache folder for the Synapse virtualenv: {exc}") from exc
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _importable(python):
            return python
        building = VENV.with_name(f"{VENV.name}.build-{os.getpid()}")
        shutil.rmtree(building, ignore_errors=True)
        try:
            subprocess.run([sys.executable, "-m", "venv", str(building)], check=True,
                           capture_output=True, timeout=300)  # fmt: skip
            subprocess.run(
                [str(building / "bin" / "python"), "-m", "pip", "install", "--quiet",
                 f"matrix-synapse=={SYNAPSE_VERSION}"],
                check=True, capture_output=True, timeout=900,
            )  # fmt: skip
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
            shutil.rmtree(building, ignore_errors=True)
            detail = getattr(exc, "stderr", b"") or b""
            tail = detail.decode(errors="replace").strip().splitlines()[-1:] if detail else []
            raise SynapseUnavailableError(
                f"matrix-synapse {SYNAPSE_VERSION} could not be installed: {exc} {tail}"
            ) from exc
        shutil.rmtree(VENV, ignore_errors=True)
        building.rename(VENV)
    return python


def _importable(python: Path) -> bool:
    if not python.exists():
        return False
    found = subprocess.run([str(python), "-c", "import synapse.app.homeserver"],
                           capture_output=True, timeout=120)  # fmt: skip
    return found.returncode == 0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Synapse:
    def __init__(self, data: Path) -> None:
        self.data = data
        self.secret = os.urandom(16).hex()
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    def start(self) -> None:
        python = synapse_python()
        self.data.mkdir(parents=True, exist_ok=True)
        config = self.data / "homeserver.yaml"
        config.write_text(_CONFIG.format(server_name=SERVER_NAME, data=self.data,
                                         port=self.port, secret=self.secret))  # fmt: skip
        app = [str(python), "-m", "synapse.app.homeserver", "-c", str(config)]
        keys = subprocess.run([*app, "--generate-keys"], capture_output=True, timeout=120)
        if keys.returncode != 0:
            raise SynapseUnavailableError(f"synapse --generate-keys failed: {keys.stderr[-500:]!r}")
        self._log = open(self.data / "synapse.log", "wb")  # noqa: SIM115  # closed by stop()
        self.process = subprocess.Popen(app, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SynapseUnavailableError(f"synapse exited: {self.log_tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/_matrix/client/versions", timeout=2).status_code == 200:
                    return
            time.sleep(0.2)  # a subprocess's readiness has no event to wait on
        raise SynapseUnavailableError(f"synapse did not answer in {START_SECONDS}s")

    def log_tail(self) -> str:
        path = self.data / "synapse.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        if self._log is not None:
            self._log.close()
            self._log = None

    def register(self, username: str, *, admin: bool = False) -> dict[str, Any]:
        """A user through the admin shared-secret API: `user_id`, `access_token`."""
        endpoint = f"{self.url}/_synapse/admin/v1/register"
        nonce = httpx.get(endpoint, timeout=30).json()["nonce"]
        password = os.urandom(8).hex()
        message = b"\x00".join([nonce.encode(), username.encode(), password.encode(),
                                b"admin" if admin else b"notadmin"])  # fmt: skip
        mac = hmac.new(self.secret.encode(), message, hashlib.sha1).hexdigest()
        answer = httpx.post(endpoint, json={"nonce": nonce, "username": username,
                                            "password": password, "admin": admin, "mac": mac},
                            timeout=30)  # fmt: skip
        answer.raise_for_status()
        return dict(answer.json())
