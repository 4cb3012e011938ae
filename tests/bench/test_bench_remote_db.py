"""A database at a distance in the benchmark: the delay proxy really adds its round trip and
carries a byte stream intact; the section runs one real gateway per configuration (SQLite,
PostgreSQL direct and behind the proxy) and every turn completes while `/healthz` is probed.
No speed is asserted."""

from __future__ import annotations

import socket
import threading

from sessiongate_bench.delay_proxy import DelayProxy, measure_round_trip
from sessiongate_bench.postgres import ENV_URL
from sessiongate_bench.remote_db import (
    RemoteDbSizes,
    remote_db_goals,
    remote_db_lines,
    run_remote_db_section,
)


def _echo_server() -> tuple[socket.socket, int]:
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                while data := conn.recv(65536):
                    conn.sendall(data)

    threading.Thread(target=serve, daemon=True).start()
    return listener, listener.getsockname()[1]


def _exchange(port: int, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port)) as conn:
        conn.sendall(payload)
        conn.shutdown(socket.SHUT_WR)
        received = b""
        while data := conn.recv(65536):
            received += data
        return received


def test_the_proxy_carries_bytes_in_order_and_adds_at_least_its_round_trip():
    listener, port = _echo_server()
    try:
        payload = bytes(range(256)) * 4096  # 1 MiB, many chunks
        with DelayProxy.running("127.0.0.1", port, rtt_ms=20) as proxy:
            assert _exchange(proxy.port, payload) == payload
            # The added round trip is a floor, however loaded the machine: ≥ 20 ms each time.
            assert measure_round_trip(lambda: _exchange(proxy.port, b"x"), samples=5) >= 20
    finally:
        listener.close()


def test_without_a_url_the_section_is_skipped_and_the_report_says_why():
    section = run_remote_db_section(None, quick=True)
    assert section["status"] == "skipped"
    assert ENV_URL in section["reason"]
    assert f"Not measured: {section['reason']}." in remote_db_lines(section)
    assert {goal["passed"] for goal in remote_db_goals({"remote_db": section})} == {None}


def test_every_configuration_completes_its_turns_and_probes_on_a_real_server(pg_schema, long_run):
    from postgres_support import SERVER_URL

    sizes = RemoteDbSizes(turns=12, chats=(3,), round_trips_ms=(3.0,))
    with long_run():
        section = run_remote_db_section(SERVER_URL, quick=True, sizes=sizes)
    assert section["status"] == "ok", section.get("reason")
    shapes = [(r["store"], r["added_rtt_ms"], r["chats"]) for r in section["runs"]]
    assert shapes == [("sqlite", 0.0, 3), ("postgres", 0.0, 3), ("postgres", 3.0, 3)]
    for run in section["runs"]:
        assert run["turns"] == 12
        assert run["probes"] >= 1
    (proxy,) = section["proxies"]
    assert proxy["asked_ms"] == 3.0
    assert proxy["added_ms"] > 0
    assert "| postgres | 3 ms | 3 |" in "\n".join(remote_db_lines(section))
