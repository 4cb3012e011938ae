"""`sessiongate run` with WhatsApp enabled, as a real process: Meta's verification GET, a
signed webhook answered through the Graph API stub, and a refused token stopping the start."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import httpx

from sessiongate.testing.stubs import whatsapp as wa

if TYPE_CHECKING:
    from pathlib import Path

LISTENING = re.compile(r"listening on (http://127\.0\.0\.1:\d+)")
# A hang guard for conditions the test waits on, never a timing assertion.
HANG_GUARD_SECONDS = 60.0


def _config(tmp_path: Path, stub: wa.GraphApiStub, url: str, **keys: str) -> Path:
    section = {
        "token": stub.token,
        "phone_number_id": stub.phone_number_id,
        "app_secret": stub.app_secret,
        "verify_token": "verify-me",
        "base_url": url,
        "allow_from": "['*']",
        **keys,
    }
    path = tmp_path / "config.yaml"
    lines = ["platforms:", "  whatsapp:"]
    lines += [
        f"    {k}: {v}" if k == "allow_from" else f"    {k}: '{v}'" for k, v in section.items()
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_run_verifies_the_webhook_and_answers_a_signed_message(env, home, tmp_path):
    stub = wa.GraphApiStub()
    with wa.serve_stub_in_thread(stub) as graph:
        config = _config(tmp_path, stub, graph)
        proc = subprocess.Popen(
            [sys.executable, "-m", "sessiongate", "run", "--home", str(home), "--port", "0",
             "--config", str(config)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env(),
        )  # fmt: skip
        try:
            assert proc.stdout is not None
            url = None
            for line in proc.stdout:
                match = LISTENING.search(line)
                url = url or (match.group(1) if match else None)
                if url and line.startswith("Stop:"):
                    break
            assert url is not None, proc.stderr.read() if proc.stderr else ""
            hook = f"{url}/hooks/whatsapp"
            verified = httpx.get(hook, params={"hub.mode": "subscribe",
                                               "hub.verify_token": "verify-me",
                                               "hub.challenge": "4242"})  # fmt: skip
            assert (verified.status_code, verified.text) == (200, "4242")
            raw = json.dumps(stub.message("hello from the real command")).encode()
            unsigned = httpx.post(hook, content=raw)
            assert unsigned.status_code == 401
            signature = {"x-hub-signature-256": wa.sign(stub.app_secret, raw)}
            signed = httpx.post(hook, content=raw, headers=signature)
            assert signed.status_code == 200, signed.text
            deadline = time.monotonic() + HANG_GUARD_SECONDS
            while not stub.texts() and time.monotonic() < deadline:
                time.sleep(0.05)  # waiting on the reply's arrival (a condition), not timing it
            assert stub.texts() == ["echo: hello from the real command"]
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0, err
    assert stub.token not in err
    assert stub.app_secret not in err


def test_run_with_a_refused_token_exits_at_once(sg, home, tmp_path):
    stub = wa.GraphApiStub()
    with wa.serve_stub_in_thread(stub) as graph:
        config = _config(tmp_path, stub, graph, token="wrong")
        result = sg("run", "--home", str(home), "--port", "0", "--config", str(config))
    assert result.returncode == 1
    assert "WhatsApp error 190" in result.stderr
    assert "Traceback" not in result.stderr
    assert stub.unauthorized == 1  # no retry loop
