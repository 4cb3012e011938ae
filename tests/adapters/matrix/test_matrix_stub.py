"""The homeserver stub as callers without an event loop use it (a CLI command, the
benchmark's parent process): its own thread, a Bearer token checked before the body."""

from __future__ import annotations

import httpx

from sessiongate.testing.stubs import matrix as mx


def test_the_stub_serves_from_its_own_thread_and_checks_the_token_first():
    stub = mx.HomeserverStub()
    stub.add_room(f"!r:{mx.SERVER}", [f"@alice:{mx.SERVER}"], direct=True)
    with mx.serve_stub_in_thread(stub) as url:
        base = f"{url}/_matrix/client/v3"
        good = {"Authorization": f"Bearer {stub.token}"}
        assert httpx.get(f"{base}/account/whoami", headers=good).json()["user_id"] == stub.user_id
        wrong = {"Authorization": "Bearer wrong"}
        send = f"{base}/rooms/!r:{mx.SERVER}/send/m.room.message/t1"
        refused = httpx.put(send, headers=wrong, content=b"{not json")
        assert (refused.status_code, refused.json()["errcode"]) == (401, "M_UNKNOWN_TOKEN")
        stub.push_text(f"!r:{mx.SERVER}", f"@alice:{mx.SERVER}", "hi")
        sync = httpx.get(f"{base}/sync", params={"timeout": "0"}, headers=good).json()
        (event,) = sync["rooms"]["join"][f"!r:{mx.SERVER}"]["timeline"]["events"]
        assert event["content"]["body"] == "hi"
        again = httpx.get(f"{base}/sync", params={"since": sync["next_batch"], "timeout": "0"},
                          headers=good).json()  # fmt: skip
        assert again["rooms"] == {}
    assert stub.unauthorized == 1
    assert stub.sent == []
