"""The rules of an erasure request: whose lane a key is, and what is left of a message."""

from __future__ import annotations

from sessiongate.core.erasure import (
    TOMBSTONE_TEXT,
    Subject,
    lane_belongs_to,
    parse_subject,
    redact_user_message,
    subject_hash,
)
from sessiongate.core.keys import KeyParts


def test_a_dm_and_a_per_user_lane_are_the_persons_a_shared_group_is_not():
    ids = {"42"}
    assert lane_belongs_to(KeyParts("telegram", "dm", "42"), "telegram", ids)
    assert lane_belongs_to(KeyParts("telegram", "group", "g", None, "42"), "telegram", ids)
    assert lane_belongs_to(KeyParts("slack", "thread", "c", "t", "42"), "slack", {"42"})
    assert not lane_belongs_to(KeyParts("telegram", "group", "42"), "telegram", ids)
    assert not lane_belongs_to(KeyParts("discord", "dm", "42"), "telegram", ids)


def test_a_merged_message_keeps_the_other_senders_parts():
    content = "[Ann] hello\n[Bob] secret of bob\n[Ann] bye"
    payload = {
        "metadata": {
            "turn_id": 3,
            "senders": [
                {"user_id": "ann", "chars": 11},
                {"user_id": "bob", "chars": 19},
                {"user_id": "ann", "chars": 9},
            ],
        }
    }
    redaction = redact_user_message(content, payload, {"bob"})
    assert redaction is not None
    assert not redaction.whole
    assert redaction.content == "[Ann] hello\n[Ann] bye"
    assert redaction.payload["metadata"]["senders"] == [
        {"user_id": "ann", "chars": 11},
        {"user_id": "ann", "chars": 9},
    ]
    whole = redact_user_message(content, payload, {"ann", "bob"})
    assert whole is not None
    assert whole.whole
    assert whole.content == TOMBSTONE_TEXT
    assert redact_user_message(content, payload, {"carol"}) is None


def test_lengths_that_do_not_add_up_erase_the_whole_message():
    payload = {"metadata": {"senders": [{"user_id": "a", "chars": 99}, {"user_id": "b"}]}}
    redaction = redact_user_message("short", payload, {"b"})
    assert redaction is not None
    assert redaction.whole


def test_whatsapp_ids_are_matched_in_every_spelling_and_the_hash_is_salted():
    subject = parse_subject("WhatsApp:+1 555 1234@s.whatsapp.net")
    assert subject == Subject("whatsapp", "+1 555 1234@s.whatsapp.net")
    assert "15551234" in subject.ids()
    assert subject_hash(subject, b"a") != subject_hash(subject, b"b")
    assert subject_hash(subject, b"a") == subject_hash(subject, b"a")
