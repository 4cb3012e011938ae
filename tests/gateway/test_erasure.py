"""Right to erasure through a real gateway: the person's lanes go whole, their messages in a
shared lane become tombstones (with the agent's answers to them), and their unique strings
are nowhere afterwards: not in `state.db`, its log, the mirror or the archive blobs (the
files are scanned byte by byte), nor in any table of a PostgreSQL store."""

from __future__ import annotations

import gzip
from typing import TYPE_CHECKING, Any

import pytest

from sessiongate.core.erasure import TOMBSTONE_TEXT, Subject, parse_subject

if TYPE_CHECKING:
    from pathlib import Path

    from gateway_support import Gateway

ALICE = "alice77x"
SECRETS = ["ZQXALICEDM1", "ZQXALICEGRP2", "ZQXALICETHREAD3", "ZQXALICEGONE4", "ZQXALICENAME"]
BOB_TEXT = "BOBKEEPS1"
CONFIG = {"group_sessions_per_user": False, "thread_sessions_per_user": True}


@pytest.fixture(params=["sqlite", "postgres"])
def store_config(request: pytest.FixtureRequest) -> dict[str, Any]:
    if request.param == "sqlite":
        return {}
    schema = request.getfixturevalue("pg_schema")
    return {"store": {"url": schema.url}}


async def _converse(gw: Gateway) -> dict[str, str]:
    alice = {"user_id": ALICE, "user_name": "ZQXALICENAME"}
    bob = {"user_id": "bob", "user_name": "Bob"}
    group = {"chat_type": "group", "chat_name": "Team"}
    await gw.adapter.receive("hi ZQXALICEDM1", chat_id=ALICE, **alice)
    await gw.adapter.receive(f"{BOB_TEXT} from bob", chat_id="grp", **group, **bob)
    await gw.adapter.receive("mine ZQXALICEGRP2", chat_id="grp", **group, **alice)
    await gw.adapter.receive(
        "thread ZQXALICETHREAD3", chat_id="grp", thread_id="t1", **group, **alice
    )
    # A shared lane deleted earlier: its archive blob holds both people's messages.
    await gw.adapter.receive("old bob BOBOLD2", chat_id="grp2", **group, **bob)
    await gw.adapter.receive("old ZQXALICEGONE4", chat_id="grp2", **group, **alice)
    # Bob wrote last in the group: its routing entry names him, not her.
    await gw.adapter.receive("bob again", chat_id="grp", **group, **bob)
    keys = {entry.session_key: entry.session_id for entry in gw.store.list_sessions()}
    grp2 = next(k for k in keys if k.endswith(":grp2"))
    assert gw.store.delete_session(grp2)
    return keys


async def test_forget_erases_a_person_everywhere(
    store_config: dict[str, Any], make_gateway: Any, tmp_path: Path
) -> None:
    gw: Gateway = await make_gateway(**CONFIG, **store_config)
    keys = await _converse(gw)
    dm = next(k for k in keys if k.endswith(f":dm:{ALICE}"))
    thread = next(k for k in keys if ":t1:" in k or (k.endswith(f":{ALICE}") and k != dm))
    group = next(k for k in keys if k.endswith(":group:grp"))
    assert gw.store.search("ZQXALICEGRP2")
    # A fork of her DM copies her words under a key of its own: it is hers too.
    fork, _ = gw.store.fork_session(dm)

    plan = gw.store.forget_user(Subject("telegram", ALICE), dry_run=True)
    assert plan.dry_run
    assert plan.receipt_id is None
    assert set(plan.keys) == {dm, thread, fork.session_key}
    assert gw.store.get_session(dm) is not None  # a plan changes nothing

    receipt = gw.store.forget_user(Subject("telegram", ALICE))
    assert receipt.counts() == plan.counts()
    assert receipt.lanes_deleted == 3
    # Her message in the group and the agent's answer to it.
    assert receipt.messages_tombstoned == 2
    assert receipt.blobs_rewritten == 1
    assert receipt.receipt_id is not None
    assert gw.store.get_session(dm) is None
    assert gw.store.get_session(thread) is None
    assert not gw.store.search("ZQXALICEGRP2")

    # Bob's messages stay, hers are tombstones, in the transcript and the model context.
    entry = gw.store.get_session(group)
    assert entry is not None
    texts = [m["content"] for m in gw.store.load_transcript(entry.session_id)]
    assert any(BOB_TEXT in t for t in texts)
    assert TOMBSTONE_TEXT in texts
    context = gw.store.model_context(entry.session_id)
    assert not any("ZQXALICEGRP2" in str(m.get("content")) for m in context.messages)
    assert gw.store.search(BOB_TEXT)

    [kept] = gw.store.erasure_receipts()
    assert kept["id"] == receipt.receipt_id
    assert kept["subject_hash"] == receipt.subject_hash
    assert ALICE not in str(kept)

    needles = [*SECRETS, ALICE]
    if store_config:
        _assert_postgres_free_of(store_config["store"]["url"], needles)
    else:
        _assert_files_free_of(gw.home / "sessions", needles)


def _assert_files_free_of(folder: Path, needles: list[str]) -> None:
    scanned = 0
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.name.endswith(".gz"):
            data = gzip.decompress(data)
        scanned += 1
        for needle in needles:
            assert needle.encode() not in data, f"{needle} found in {path.name}"
    assert {p.name for p in folder.iterdir()} >= {"state.db", "sessions.json", "archive"}
    assert scanned >= 4


def _assert_postgres_free_of(url: str, needles: list[str]) -> None:
    import psycopg

    with psycopg.connect(url) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
            )
        ]
        assert {"entries", "routes", "turns", "inbox", "inbound_seen", "erasures"} <= set(tables)
        for table in tables:
            for needle in needles:
                found = conn.execute(
                    f'SELECT count(*) FROM "{table}" AS t WHERE t::text LIKE %s',  # noqa: S608
                    (f"%{needle}%",),
                ).fetchone()
                assert found is not None
                assert found[0] == 0, f"{needle} found in {table}"


async def test_whatsapp_aliases_of_the_person_go_too(make_gateway: Any) -> None:
    gw: Gateway = await make_gateway()
    store = gw.store
    store.learn_identity_alias("whatsapp", "99887766@lid", "15551234")
    store.learn_identity_alias("whatsapp", "15550000", "someone_else")
    receipt = store.forget_user(parse_subject("whatsapp:+1 555 1234"))
    assert receipt.identity_aliases == 1
    assert store.forget_user(parse_subject("whatsapp:15550000"), dry_run=True).identity_aliases


@pytest.mark.parametrize(
    "text", ["", "telegram", "telegram:", ":42", "Tele gram:1", "x:" + "9" * 600, 42]
)
def test_a_malformed_subject_is_refused(text: object) -> None:
    with pytest.raises(ValueError, match=r"\S"):
        parse_subject(text)


async def test_an_incognito_lane_of_the_person_goes_too(make_gateway: Any) -> None:
    from sessiongate import SessionSource

    gw: Gateway = await make_gateway()
    ghost = gw.store.create_incognito_session(
        SessionSource(platform="telegram", chat_id="inco1", user_id="inco1")
    )
    gw.store.append_messages(ghost.session_id, [{"role": "user", "content": "private"}])
    plan = gw.store.forget_user(parse_subject("telegram:inco1"), dry_run=True)
    assert plan.keys == [ghost.session_key]
    assert gw.store.get_session(ghost.session_key) is not None
    receipt = gw.store.forget_user(parse_subject("telegram:inco1"))
    assert receipt.sessions_deleted == 1
    assert gw.store.get_session(ghost.session_key) is None
