"""The fork rule: a lane is copied only into a lane whose readers could already read it."""

from __future__ import annotations

from sessiongate.core.fork_policy import lane_owner, may_fork
from sessiongate.core.keys import KeyParts, build_key_parts
from sessiongate.core.source import SessionSource

CHANNEL = KeyParts("slack", "group", "C1")
ALICE_IN_CHANNEL = KeyParts("slack", "group", "C1", participant_id="alice")
SHARED_THREAD = KeyParts("slack", "group", "C1", thread_id="T1")
ALICES_THREAD = KeyParts("slack", "group", "C1", thread_id="T1", participant_id="alice")
BOBS_THREAD = KeyParts("slack", "group", "C1", thread_id="T1", participant_id="bob")
ALICE_DM = KeyParts("slack", "dm", "D-alice")


def test_a_shared_lane_may_be_forked_into_any_lane_of_its_readers():
    assert may_fork(CHANNEL, SHARED_THREAD)
    assert may_fork(CHANNEL, ALICES_THREAD)


def test_one_persons_lane_never_becomes_a_shared_or_someone_elses_lane():
    assert not may_fork(ALICE_IN_CHANNEL, SHARED_THREAD)
    assert not may_fork(ALICE_IN_CHANNEL, BOBS_THREAD)
    assert not may_fork(ALICE_DM, SHARED_THREAD)
    assert may_fork(ALICE_IN_CHANNEL, ALICES_THREAD)
    assert may_fork(ALICE_DM, ALICE_DM)


def test_unknown_parts_or_another_platform_fail_closed():
    assert not may_fork(None, SHARED_THREAD)
    assert not may_fork(CHANNEL, None)
    assert not may_fork(CHANNEL, KeyParts("telegram", "group", "C1", thread_id="T1"))


def test_owners_follow_the_key_builder():
    def parts(**fields):
        return build_key_parts(SessionSource(platform="slack", **fields))

    assert lane_owner(parts(chat_id="C1", chat_type="group", user_id="u")) == "u"
    assert lane_owner(parts(chat_id="C1", chat_type="group", user_id="u", thread_id="t")) is None
    assert lane_owner(parts(chat_id="D1", chat_type="dm", user_id="u")) == "D1"
    assert lane_owner(KeyParts("slack", "dm")) is None  # the platform's shared sink
