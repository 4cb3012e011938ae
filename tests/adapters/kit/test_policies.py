"""Gating and access: the two pure rules every adapter applies."""

from __future__ import annotations

import pytest

from sessiongate.adapters.kit import (
    Access,
    AccessPolicy,
    GatePolicy,
    GateReason,
    MessageFacts,
    compile_patterns,
    decide_access,
    decide_gate,
    passes,
)
from sessiongate.core.platform import Platform
from sessiongate.core.source import ChatType, SessionSource


def group(**facts) -> MessageFacts:
    return MessageFacts(chat_type=ChatType.GROUP, text=facts.pop("text", "hello"), **facts)


@pytest.mark.parametrize(
    ("facts", "reason"),
    [
        (group(), GateReason.NOT_ADDRESSED),
        (group(mentions_bot=True), GateReason.MENTIONED),
        (group(reply_to_bot=True), GateReason.REPLY_TO_BOT),
        (group(command_to_bot=True), GateReason.COMMAND_TO_BOT),
        (group(command_to_other=True, mentions_bot=True), GateReason.COMMAND_TO_OTHER),
        (group(in_joined_thread=True), GateReason.THREAD_JOINED),
        (group(is_own=True, mentions_bot=True), GateReason.OWN_MESSAGE),
        (group(is_bot=True, mentions_bot=True), GateReason.OTHER_BOT),
        (group(is_edit=True, mentions_bot=True), GateReason.EDIT),
        (group(is_deletion=True), GateReason.DELETION),
        (group(text=" "), GateReason.EMPTY),
        (MessageFacts(chat_type=ChatType.DM, text="hi"), GateReason.DM),
    ],
)
def test_gate_reasons(facts, reason):
    assert decide_gate(facts, GatePolicy()) is reason


def test_patterns_and_open_groups_pass():
    policy = GatePolicy(patterns=compile_patterns([r"\bhey bot\b", "("]))
    assert len(policy.patterns) == 1  # the bad one is skipped, not fatal
    assert passes(decide_gate(group(text="Hey Bot, help"), policy))
    assert passes(decide_gate(group(), GatePolicy(require_mention=False)))


def test_bots_can_be_let_in():
    facts = group(is_bot=True, mentions_bot=True)
    assert passes(decide_gate(facts, GatePolicy(allow_bots=True)))


def source(chat_type=ChatType.DM, chat_id="1", user_id="1") -> SessionSource:
    return SessionSource(
        platform=Platform.TELEGRAM, chat_id=chat_id, chat_type=chat_type, user_id=user_id
    )


def test_nothing_configured_admits_nobody_but_pairing_dms():
    closed = AccessPolicy.build(None, "allowlist")
    assert decide_access(source(), closed, paired=False) is Access.DENY
    assert decide_access(source(ChatType.GROUP, "-5"), closed, paired=False) is Access.DENY
    pairing = AccessPolicy.build(None, "pairing")
    assert decide_access(source(), pairing, paired=False) is Access.PAIR
    assert decide_access(source(), pairing, paired=True) is Access.ADMIT


def test_pairing_does_not_admit_in_groups():
    policy = AccessPolicy.build(None, "pairing")
    assert decide_access(source(ChatType.GROUP, "-5"), policy, paired=True) is Access.DENY


def test_users_and_chats_are_listed_independently():
    policy = AccessPolicy.build(["7", "-5"], "allowlist")
    assert decide_access(source(user_id="7"), policy, paired=False) is Access.ADMIT
    assert decide_access(source(ChatType.GROUP, "-9", "7"), policy, paired=False) is Access.ADMIT
    assert decide_access(source(ChatType.GROUP, "-5", "8"), policy, paired=False) is Access.ADMIT
    assert decide_access(source(ChatType.GROUP, "-9", "8"), policy, paired=False) is Access.DENY
    # A listed chat id is not a DM pass for a user of the same number.
    assert decide_access(source(chat_id="8", user_id="8"), policy, paired=False) is Access.DENY


def test_a_star_admits_everyone():
    policy = AccessPolicy.build(["*"], "allowlist")
    assert decide_access(source(ChatType.CHANNEL, "-3", None), policy, paired=False) is Access.ADMIT
