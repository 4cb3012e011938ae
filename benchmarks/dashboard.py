"""The dashboard in Chromium: the screenshots in docs/ and the first-screen time of a long
transcript.

    .venv/bin/python benchmarks/dashboard.py [--out docs] [--runs 7]

Starts a real gateway on a fresh home (a 10,000-entry session written through the store
first, a few ordinary chats sent over the API), signs in, saves `dashboard-sessions.png`
(1280x800) and `dashboard-session.png` (390 px wide) into `--out`, and prints the time from
navigation to the newest page of the 10,000-entry transcript on screen, cold, over `--runs`
loads. Needs Debian's Chromium (`apt-get install chromium`) and the dev extra (playwright).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
from playwright.sync_api import sync_playwright

from sessiongate import GatewayConfig, SessionSource, SessionStore

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TOKEN = "dashboard-demo-token"
ENTRIES = 10_000
BIG = "agent:main:api:dm:long-running"


def seed_store(home: Path) -> None:
    store = SessionStore(home / "sessions", GatewayConfig())
    try:
        entry = store.get_or_create_session(
            SessionSource(platform="api", chat_id="long-running", user_id="long-running")
        )
        messages = []
        for n in range(ENTRIES // 2):
            messages.append({"role": "user", "content": f"Question {n}: how is order {n} doing?"})
            messages.append({"role": "assistant", "content": f"Order {n} shipped on time."})
        store.append_messages(entry.session_id, messages)
    finally:
        store.close()


def start_gateway(home: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "sessiongate", "run", "--home", str(home), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        # PYTHONPATH kept: run from a checkout with `PYTHONPATH=src`, the gateway is its code.
        env={"SESSIONGATE_API__TOKEN": TOKEN, "PATH": "/usr/bin:/bin"}
        | {k: v for k, v in os.environ.items() if k == "PYTHONPATH"},
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        match = re.search(r"listening on (http://\S+)", line)
        if match:
            return proc, match.group(1)
    raise SystemExit("the gateway did not start")


def seed_chats(url: str) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    chats = [
        ("alice", "Alice", "Can you summarise yesterday's support tickets?"),
        ("bob", "Bob", "What's the status of the Berlin deployment?"),
        ("carol", "Carol", "Draft a reply to the supplier about the late shipment."),
    ]
    with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
        for chat_id, name, text in chats:
            client.post(
                "/v1/messages",
                json={"chat_id": chat_id, "user_id": chat_id, "user_name": name, "text": text},
            ).raise_for_status()
        client.post(
            "/v1/messages",
            json={"chat_id": "alice", "user_id": "alice", "text": "And the open ones?"},
        ).raise_for_status()
        client.patch("/v1/sessions/agent%3Amain%3Aapi%3Adm%3Abob", json={"pinned": True})
        client.patch("/v1/sessions/agent%3Amain%3Aapi%3Adm%3Aalice", json={"unread": True})
        client.patch(
            "/v1/sessions/agent%3Amain%3Aapi%3Adm%3Acarol", json={"label": "supplier reply"}
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs"))
    parser.add_argument("--runs", type=int, default=7)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        seed_store(home)
        proc, url = start_gateway(home)
        try:
            seed_chats(url)
            result = browse(url, options.out, options.runs)
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    print(json.dumps(result, indent=2))


def browse(url: str, out: Path, runs: int) -> dict[str, object]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            wide = browser.new_context(viewport={"width": 1280, "height": 800})
            page = wide.new_page()
            page.goto(f"{url}/ui/")
            page.fill("#token", TOKEN)
            page.click("button[type=submit]")
            page.wait_for_selector("#session-list li")
            out.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(out / "dashboard-sessions.png"))
            times = []
            for _ in range(runs):
                page.goto("about:blank")
                page.goto(f"{url}/ui/#/s/{BIG.replace(':', '%3A')}")
                page.wait_for_selector(f".message.assistant >> text=Order {ENTRIES // 2 - 1}")
                times.append(page.evaluate("performance.now()"))
            cookies = wide.cookies()
            phone = browser.new_context(viewport={"width": 390, "height": 844})
            phone.add_cookies(cookies)
            small = phone.new_page()
            small.goto(f"{url}/ui/#/s/agent%3Amain%3Aapi%3Adm%3Aalice")
            small.wait_for_selector(".message.assistant")
            small.screenshot(path=str(out / "dashboard-session.png"), full_page=True)
        finally:
            browser.close()
    return {
        "transcript_entries": ENTRIES,
        "first_screen_ms_median": round(statistics.median(times)),
        "first_screen_ms_max": round(max(times)),
        "runs": runs,
    }


if __name__ == "__main__":
    main()
