"""`sessiongate approvals list|approve|deny`, as real processes on a home's store."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from sessiongate import GatewayConfig, SessionStore
from sessiongate.store.approvals import ApprovalBook

if TYPE_CHECKING:
    from pathlib import Path


def _pending(home: Path, call_id: str, timeout: float = 3600) -> str:
    store = SessionStore(home / "sessions", GatewayConfig())
    try:
        row, _ = ApprovalBook(store).request(
            turn_id=1,
            call_id=call_id,
            session_key="agent:main:telegram:dm:7",
            tool="delete_file",
            arguments=json.dumps({"path": "/srv/data"}),
            approvers=["telegram:7"],
            timeout_seconds=timeout,
        )
    finally:
        store.close()
    return row.id


def test_list_shows_the_call_and_approve_decides_it_once(sg, home):
    approval_id = _pending(home, "call_1")
    listed = sg("approvals", "list", "--status", "pending", "--home", str(home), "--json")
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)["approvals"]
    assert (row["id"], row["tool"], row["status"]) == (approval_id, "delete_file", "pending")
    assert json.loads(row["arguments"]) == {"path": "/srv/data"}
    approved = sg("approvals", "approve", approval_id, "--home", str(home))
    assert approved.returncode == 0, approved.stderr
    assert approved.stdout.startswith("approved delete_file(")
    again = sg("approvals", "deny", approval_id, "--home", str(home))
    assert again.returncode != 0
    assert f"approval {approval_id} is already approved" in again.stderr
    text = sg("approvals", "list", "--home", str(home))
    assert f"{approval_id}  approved" in text.stdout


def test_deny_and_bad_input_are_clear(sg, home):
    approval_id = _pending(home, "call_2")
    assert sg("approvals", "deny", approval_id, "--home", str(home)).returncode == 0
    unknown = sg("approvals", "approve", "ffffffff", "--home", str(home))
    assert unknown.returncode != 0
    assert "no approval 'ffffffff'" in unknown.stderr
    bad = sg("approvals", "list", "--status", "maybe", "--home", str(home))
    assert bad.returncode == 2
    assert "unknown status" in bad.stderr
    assert "Traceback" not in unknown.stderr + bad.stderr
