"""The systemd unit in deploy/ verifies, and the gateway speaks `Type=notify` for real.

A real `sessiongate run` child gets `$NOTIFY_SOCKET` pointing at a datagram socket the test
holds: it must say READY=1 only once it serves HTTP, and STOPPING=1 when SIGTERM starts the
drain, as systemd expects of a `Type=notify` service.
"""

from __future__ import annotations

import asyncio
import configparser
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from sessiongate import GatewayConfig
from sg_process import GatewayProcess, clean_env

UNIT = Path(__file__).resolve().parents[2] / "deploy" / "systemd" / "sessiongate.service"
GUARD = 60.0  # a hang guard for a datagram that never comes, never a timing assertion


def _unit() -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser(strict=False)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(UNIT)
    return parser


def test_the_unit_stops_later_than_the_drain_and_is_hardened():
    service = _unit()["Service"]
    assert service["Type"] == "notify"
    drain = GatewayConfig().agent.restart_drain_timeout
    assert float(service["TimeoutStopSec"]) > drain
    assert service["Restart"] == "on-failure"
    assert service["User"] == "sessiongate"
    for option in ("NoNewPrivileges", "ProtectSystem", "ProtectHome", "PrivateTmp"):
        assert option in service, option


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_systemd_analyze_verifies_the_unit(tmp_path):
    # verify checks that ExecStart exists: point it at this environment's command.
    command = Path(sys.executable).with_name("sessiongate")
    if not command.exists():
        pytest.skip("the sessiongate command is not installed beside this Python")
    unit = tmp_path / "sessiongate.service"
    unit.write_text(UNIT.read_text().replace("/opt/sessiongate/bin/sessiongate", str(command)))
    verified = subprocess.run(
        ["systemd-analyze", "verify", str(unit)],
        capture_output=True,
        text=True,
        timeout=GUARD,
        check=False,
    )
    assert verified.returncode == 0, verified.stderr
    assert verified.stderr.strip() == "", verified.stderr


async def _receive(listener: socket.socket) -> list[str]:
    async with asyncio.timeout(GUARD):
        data = await asyncio.get_running_loop().sock_recv(listener, 4096)
    return data.decode().split("\n")


async def test_the_gateway_notifies_ready_then_stopping(tmp_path):
    address = str(tmp_path / "notify.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as listener:
        listener.bind(address)
        listener.setblocking(False)
        gateway = GatewayProcess(tmp_path / "home", env=clean_env(NOTIFY_SOCKET=address))
        try:
            await gateway.spawn()
            ready = await _receive(listener)
            assert "READY=1" in ready
            # READY came after the socket listens: the banner is on its way, and it serves.
            url = await gateway.wait_ready()
            async with httpx.AsyncClient(timeout=GUARD) as http:
                assert (await http.get(url + "/healthz")).status_code == 200
            assert any(f.startswith("STATUS=serving on ") for f in ready)
            assert gateway.proc is not None
            gateway.proc.terminate()
            stopping = await _receive(listener)
            assert "STOPPING=1" in stopping
            assert await gateway.wait_exit() == 0
        finally:
            await gateway.aclose()
