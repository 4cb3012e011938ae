"""Access control and privacy, end to end: a real gateway process, a real model endpoint.

One gateway run (module fixture) is configured the way a cautious operator would: an API token,
an allow list on the `api` platform, PII redaction, the OpenAI-compatible agent pointed at a
local fake endpoint that records every request (what the model sees), small body and message
bounds, debug logging. The fixture drives it through allowed and refused traffic, hostile keys
and oversized bodies, deletes a conversation (archive blob), stops it with SIGTERM, and the tests
inspect what is left: the HTTP answers, the model's requests, every file under the home, and the
gateway's log.
"""

from __future__ import annotations

import gzip
import os
import sqlite3
import stat
import subprocess
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx
import pytest

from fake_openai import FakeOpenAI
from sessiongate.core.redaction import hash_chat_id, hash_user_id
from sg_process import SyncGateway, clean_env

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

TOKEN = "tok-Operator-7Qx9-do-not-leak"
API_KEY = "sk-live-Provider-Zz81-do-not-leak"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
ALICE, BOB, MALLORY = "alice-raw-id-4242", "bob-raw-id-8686", "mallory-raw-id-6666"
DM_CHAT, GROUP_CHAT = "dm-raw-chat-1111", "group-raw-chat-7777"
MAX_BODY, MAX_CHARS = 4096, 500
HOSTILE_KEYS = [
    "../../../../etc/passwd",
    "agent:main:api:dm:../../../escape",
    "..",
    ".",
    "/etc/passwd",
    "agent:main:api:dm:x/../../../y",
    "agent:main:api:dm:%2e%2e%2f%2e%2e%2fz",
    "agent:main:api:dm:\\..\\..\\w",
]


@dataclass
class PrivacyRun:
    home: Path
    workdir: Path
    log: str
    model_sees: str
    answers: dict[str, httpx.Response] = field(default_factory=dict)
    unauthenticated: list[tuple[str, str, int, Any]] = field(default_factory=list)
    hostile: list[tuple[str, str, int, Any]] = field(default_factory=list)
    cli_hostile: list[tuple[str, int, str]] = field(default_factory=list)
    files_before: set[str] = field(default_factory=set)
    exit_code: int | None = None


def _message(chat: str, user: str | None, text: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"chat_id": chat, "text": text, **extra}
    if user is not None:
        body["user_id"] = user
    return body


def _operations(client: httpx.Client) -> list[tuple[str, str]]:
    """The routes the operator token guards: all but `/healthz` and the webhooks under
    `/hooks/`, which each route's own secret guards (tests/gateway/test_inbound_hooks.py)."""
    spec = client.get("/openapi.json").json()
    return [
        (method.upper(), path)
        for path, methods in spec["paths"].items()
        for method in methods
        if path != "/healthz" and not path.startswith("/hooks/")
    ]


def _drive(gateway: SyncGateway, run: PrivacyRun) -> None:
    a = run.answers
    with httpx.Client(base_url=gateway.url, headers=AUTH, timeout=60) as client:
        a["alice_dm"] = client.post("/v1/messages", json=_message(DM_CHAT, ALICE, "hello there"))
        group = {"chat_type": "group", "chat_name": "Secret Club"}
        a["alice_group"] = client.post(
            "/v1/messages",
            json=_message(GROUP_CHAT, ALICE, "group hello", user_name="Alice Realname", **group),
        )
        a["bob_group"] = client.post(
            "/v1/messages",
            json=_message(GROUP_CHAT, BOB, "bob here", user_name="Bob Realname", **group),
        )
        a["alice_fail"] = client.post(
            "/v1/messages", json=_message(DM_CHAT, ALICE, "please FAIL this one")
        )
        a["mallory"] = client.post(
            "/v1/messages", json=_message("mallory-chat", MALLORY, "mallory was here")
        )
        a["mallory_group"] = client.post(
            "/v1/messages", json=_message(GROUP_CHAT, MALLORY, "mallory in the group", **group)
        )
        a["anonymous"] = client.post("/v1/messages", json=_message("anon-chat", None, "no id"))
        a["too_many_chars"] = client.post(
            "/v1/messages",
            json=_message(DM_CHAT, ALICE, "c" * (MAX_CHARS + 1), message_id="big-text"),
        )
        a["too_big_body"] = client.post(
            "/v1/messages",
            json=_message(DM_CHAT, ALICE, "small", chat_name="n" * MAX_BODY, message_id="big-body"),
        )

        def chunks() -> Iterator[bytes]:
            yield b'{"chat_id": "' + DM_CHAT.encode() + b'", "text": "'
            for _ in range(8):
                yield b"z" * 1024
            yield b'", "message_id": "big-chunked"}'

        a["too_big_chunked"] = client.post(
            "/v1/messages", content=chunks(), headers={"Content-Type": "application/json"}
        )
        dm_key = a["alice_dm"].json()["session_key"]
        for index, (method, template) in enumerate(_operations(client)):
            path = template.replace("{key}", quote(dm_key, safe=""))
            # Each probe from a loopback address of its own: wrong tokens are limited per
            # address (10 a minute), and this checks the 401 of every route, not the limit.
            source = f"127.0.0.{10 + index}"
            for label, headers in (("none", {}), ("wrong", {"Authorization": "Bearer nope"})):
                transport = httpx.HTTPTransport(local_address=source)
                with httpx.Client(transport=transport, timeout=60) as probe:
                    answer = probe.request(method, gateway.url + path, headers=headers)
                body = answer.json() if answer.content else None
                run.unauthenticated.append(
                    (f"{method} {template} [{label}]", path, answer.status_code, body)
                )
        for key in HOSTILE_KEYS:
            encoded = quote(key, safe="")
            for method, suffix, body in (
                ("DELETE", "", None),
                ("POST", "/fork", {"fork_from": "active"}),
                ("POST", "/reset", None),
                ("GET", "/transcript", None),
            ):
                answer = client.request(method, f"/v1/sessions/{encoded}{suffix}", json=body)
                run.hostile.append(
                    (f"{method} {key!r}{suffix}", key, answer.status_code, answer.json())
                )
        # A legitimate conversation whose chat id holds path tricks, then deleted: the archive
        # blob is named by the session id, never by the key.
        tricky = client.post("/v1/messages", json=_message("../../escape", ALICE, "tricky"))
        a["tricky"] = tricky
        a["tricky_delete"] = client.delete(
            f"/v1/sessions/{quote(tricky.json()['session_key'], safe='')}"
        )
        a["dm_delete"] = client.delete(f"/v1/sessions/{quote(dm_key, safe='')}")
    for key in HOSTILE_KEYS[:3]:
        done = subprocess.run(
            [
                *(sys.executable, "-m", "sessiongate", "sessions", "export"),
                *("--home", str(run.home), "--key", key, "-o", str(run.workdir / "export.json")),
            ],
            capture_output=True,
            text=True,
            env=clean_env(),
            timeout=60,
            check=False,
        )
        run.cli_hostile.append((key, done.returncode, done.stderr))


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture(scope="module")
def privacy(tmp_path_factory: pytest.TempPathFactory) -> PrivacyRun:
    workdir = tmp_path_factory.mktemp("privacy")
    home = workdir / "home"
    with FakeOpenAI() as fake:
        env = clean_env(
            SESSIONGATE_API__TOKEN=TOKEN,
            SESSIONGATE_AGENT__OPENAI__API_KEY=API_KEY,
            SESSIONGATE_AGENT__OPENAI__BASE_URL=fake.base_url,
            SESSIONGATE_AGENT__OPENAI__MODEL="fake-model",
            SESSIONGATE_PLATFORMS__API__ALLOW_FROM=f"[{ALICE}, {BOB}]",
            SESSIONGATE_REDACT_PII="true",
            SESSIONGATE_GROUP_SESSIONS_PER_USER="false",
            SESSIONGATE_API__MAX_BODY_BYTES=str(MAX_BODY),
            SESSIONGATE_API__MAX_MESSAGE_CHARS=str(MAX_CHARS),
        )
        gateway = SyncGateway(home, env=env, extra_args=("--log-level", "debug"))
        run = PrivacyRun(home=home, workdir=workdir, log="", model_sees="")
        try:
            run.files_before = _tree(workdir)
            _drive(gateway, run)
        finally:
            run.exit_code = gateway.stop()
        run.log = gateway.log_path.read_text(encoding="utf-8")
        run.model_sees = fake.bodies_text()
        assert {r["authorization"] for r in fake.requests} == {f"Bearer {API_KEY}"}
    return run


def _dump(db: Path) -> str:
    conn = sqlite3.connect(db)
    try:
        return "\n".join(conn.iterdump())
    finally:
        conn.close()


def _all_bytes(home: Path) -> dict[str, bytes]:
    """Every file under the home, archives decompressed too."""
    found = {}
    for path in home.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found[str(path.relative_to(home))] = data
            if path.suffix == ".gz":
                found[f"{path.relative_to(home)} (decompressed)"] = gzip.decompress(data)
    return found


def test_the_run_was_well_behaved(privacy: PrivacyRun):
    a = privacy.answers
    assert privacy.exit_code == 0
    assert a["alice_dm"].json()["reply"] == "model says: hello there"
    assert a["bob_group"].json()["status"] == "replied"
    assert a["alice_fail"].json()["status"] == "failed"  # the model refused; a notice
    assert a["tricky_delete"].status_code == 200
    assert a["dm_delete"].status_code == 200


def test_an_unauthorised_sender_gets_403_and_leaves_no_trace(privacy: PrivacyRun):
    for name in ("mallory", "mallory_group", "anonymous"):
        answer = privacy.answers[name]
        assert answer.status_code == 403, answer.text
        assert answer.json()["error"]["code"] == "unauthorized"
    # No agent call ...
    assert "mallory" not in privacy.model_sees
    assert "no id" not in privacy.model_sees
    # ... no session, no transcript row, no inbox or dedup row, nothing in the mirror.
    db = privacy.home / "sessions" / "state.db"
    dump = _dump(db)
    assert "mallory" not in dump
    assert "anon-chat" not in dump
    assert "mallory" not in (privacy.home / "sessions" / "sessions.json").read_text()


def test_the_operator_token_guards_every_route_over_http(privacy: PrivacyRun):
    assert len({name.rsplit(" [", 1)[0] for name, *_ in privacy.unauthenticated}) >= 14
    for name, _path, status, body in privacy.unauthenticated:
        assert status == 401, name
        assert body["error"]["code"] == "unauthorized", name


def test_keys_with_path_tricks_are_refused_and_touch_no_file(privacy: PrivacyRun):
    for name, _key, status, body in privacy.hostile:
        # 405 only for ".", which the client normalises to the collection route.
        assert status in (400, 404, 405), (name, status, body)
        assert {"code", "message"} <= body["error"].keys()
    for key, code, err in privacy.cli_hostile:
        assert code == 1, (key, err)
        assert "no session" in err
    # Nothing appeared outside the home, and inside it only the store's own files.
    outside = {p for p in _tree(privacy.workdir) if not p.startswith("home")}
    assert outside <= privacy.files_before | {"gateway.log"}
    archive = privacy.home / "sessions" / "archive"
    names = sorted(p.name for p in archive.iterdir())
    assert len(names) == 4  # two deletes: a blob and its checksum each
    for name in names:
        assert name.split(".", 1)[0].count("_") == 2, name  # YYYYMMDD_HHMMSS_<hex>
        assert ".." not in name


def test_body_and_message_sizes_are_bounded(privacy: PrivacyRun):
    a = privacy.answers
    assert a["too_many_chars"].status_code == 413
    assert a["too_many_chars"].json()["error"]["code"] == "message_too_long"
    for name in ("too_big_body", "too_big_chunked"):
        assert a[name].status_code == 413, a[name].text
        assert a[name].json()["error"]["code"] == "payload_too_large"
    dump = _dump(privacy.home / "sessions" / "state.db")
    for message_id in ("big-text", "big-body", "big-chunked"):
        assert message_id not in dump


def test_secrets_never_reach_the_database_the_mirror_or_the_log(privacy: PrivacyRun):
    files = _all_bytes(privacy.home)
    assert "sessions/state.db" in files
    assert "sessions/sessions.json" in files
    for secret in (TOKEN, API_KEY):
        for name, data in files.items():
            assert secret.encode() not in data, (secret, name)
        assert secret not in privacy.log
    # The debug log did record the run (the check above is not vacuous).
    assert "turn replied" in privacy.log
    assert "turn failed" in privacy.log


def test_with_redact_pii_raw_ids_never_reach_the_model(privacy: PrivacyRun):
    seen = privacy.model_sees
    for raw in (ALICE, BOB, DM_CHAT, GROUP_CHAT):
        assert raw not in seen, raw
    # The ids were there, hashed: the DM prompt names the sender, the group one the chat, by
    # digest (a shared session prefixes messages with the sender's name, not an id).
    assert hash_user_id(ALICE) in seen
    assert hash_chat_id(GROUP_CHAT, "api") in seen
    assert "[Bob Realname] bob here" in seen


def test_data_files_are_0600_and_folders_0700(privacy: PrivacyRun):
    wrong = []
    paths = list(privacy.home.rglob("*"))
    for path in paths:
        mode = stat.S_IMODE(os.lstat(path).st_mode)
        expected = 0o700 if path.is_dir() else 0o600
        if mode != expected:
            wrong.append(f"{path.relative_to(privacy.workdir)} is {mode:o}")
    assert len(paths) >= 6
    assert not wrong, wrong


def test_the_home_folder_is_0700(privacy: PrivacyRun):
    assert stat.S_IMODE(os.lstat(privacy.home).st_mode) == 0o700
