"""What platform adapters keep in the store (`PlatformState`), on every backend: event claims,
pairing requests, threads and sends."""

from __future__ import annotations

from sessiongate.store.platform_state import PairingResult, PlatformState, SendRecord


def test_a_claim_is_held_once_taken_over_from_a_dead_owner_and_never_after_it_finished(store):
    state = PlatformState(store)
    assert state.claim_event("tg", "e1", owner="boot-a")
    assert not state.claim_event("tg", "e1", owner="boot-a")  # a redelivery to the same process
    assert state.claim_event("tg", "e1", owner="boot-b")  # boot-a died holding it
    state.finish_events("tg", ["e1"])
    assert not state.claim_event("tg", "e1", owner="boot-c")
    assert state.claim_event("other", "e1", owner="boot-c")  # ids are per platform


def test_a_batch_claims_each_id_once_and_a_released_claim_can_be_claimed_again(store):
    state = PlatformState(store)
    assert state.claim_events("tg", ["e1", "e2", "e1"], owner="boot-a") == {"e1", "e2"}
    assert state.claim_events("tg", ["e2", "e3"], owner="boot-a") == {"e3"}
    state.release_event("tg", "e2", owner="someone-else")  # not theirs: kept
    assert not state.claim_event("tg", "e2", owner="boot-a")
    state.release_event("tg", "e2", owner="boot-a")
    assert state.claim_event("tg", "e2", owner="boot-a")


def test_pruning_forgets_only_finished_claims_past_the_horizon(store, clock):
    state = PlatformState(store)
    state.claim_events("tg", ["old", "live"], owner="boot-a")
    state.finish_events("tg", ["old"])
    clock.advance(3600)
    state.claim_event("tg", "new", owner="boot-a")
    state.finish_events("tg", ["new"])
    assert state.prune_events(older_than_seconds=60) == 1
    assert state.claim_event("tg", "old", owner="boot-a")  # forgotten
    assert not state.claim_event("tg", "new", owner="boot-b")  # still finished
    assert state.claim_event("tg", "live", owner="boot-b")  # unfinished: kept, taken over


def test_a_sender_gets_one_live_code_capped_expiring_and_approved_once(store, clock):
    state = PlatformState(store)

    def ask(user_id: str) -> PairingResult:
        return state.request_pairing(
            "tg",
            user_id=user_id,
            chat_id=f"c{user_id}",
            user_name=None,
            ttl_seconds=600,
            max_pending=2,
        )

    first = ask("1")
    assert first.new
    assert first.code is not None
    assert len(first.code) == 8
    assert ask("1") == PairingResult(code=first.code, new=False)
    assert ask("2").new
    assert ask("3").capped
    clock.advance(601)
    renewed = ask("1")
    assert renewed.new
    assert renewed.code != first.code
    assert state.approve_pairing(first.code) is None  # expired, replaced
    assert not state.is_paired("tg", "1")
    assert renewed.code is not None
    approved = state.approve_pairing(f" {renewed.code.lower()} ")
    assert approved is not None
    assert (approved.user_id, approved.chat_id) == ("1", "c1")
    assert state.is_paired("tg", "1")
    assert ask("1").approved
    assert state.approve_pairing(renewed.code) is None  # once
    listed = {(r.user_id, r.approved) for r in state.list_pairing()}
    assert listed == {("1", True), ("2", False)}
    assert all(r.expires_at > r.created_at for r in state.list_pairing())


def test_threads_and_sends_are_remembered(store):
    state = PlatformState(store)
    assert not state.has_thread("tg", "c", "t")
    state.mark_thread("tg", "c", "t")
    state.mark_thread("tg", "c", "t")
    assert state.has_thread("tg", "c", "t")
    assert not state.has_thread("tg", "c", "u")
    assert state.begin_send("tg", 7) is None
    assert state.begin_send("tg", 7) == SendRecord("sending", None)
    state.record_send("tg", 7, "unconfirmed", "timed out")
    assert state.get_send("tg", 7) == SendRecord("unconfirmed", "timed out")
    assert state.get_send("other", 7) is None


def test_a_receiver_cursor_is_kept_per_platform_and_account(store):
    state = PlatformState(store)
    assert state.get_cursor("matrix", "@bot:example.org") is None
    state.set_cursor("matrix", "@bot:example.org", "s1")
    state.set_cursor("matrix", "@bot:example.org", "s2")
    state.set_cursor("matrix", "@other:example.org", "t9")
    assert state.get_cursor("matrix", "@bot:example.org") == "s2"
    assert state.get_cursor("matrix", "@other:example.org") == "t9"
    assert state.get_cursor("telegram", "@bot:example.org") is None


def test_a_stream_cursor_is_kept_per_platform_and_stream(store):
    state = PlatformState(store)
    assert state.get_cursor("signal", "+15550000001") is None
    state.set_cursor("signal", "+15550000001", "1767225600000-41")
    state.set_cursor("signal", "+15550000001", "1767225600000-42")
    state.set_cursor("signal", "+15550000002", "1767225600000-7")
    assert state.get_cursor("signal", "+15550000001") == "1767225600000-42"
    assert state.get_cursor("signal", "+15550000002") == "1767225600000-7"
    assert state.get_cursor("matrix", "+15550000001") is None
