"""WhatsApp identity: one human, one id, however the bridge spells it."""

from __future__ import annotations

import pytest

from sessiongate.core.identity import (
    canonical_whatsapp_identifier,
    is_whatsapp_group,
    normalize_whatsapp_identifier,
    to_whatsapp_jid,
)


@pytest.mark.parametrize(
    "spelling",
    [
        "15551234567",
        "+15551234567",
        " +15551234567 ",
        "15551234567@s.whatsapp.net",
        "15551234567:12@s.whatsapp.net",
        "+15551234567:3@s.whatsapp.net",
        "15551234567@c.us",
        "15551234567:0",
        "+1 (555) 123-4567",
    ],
)
def test_phone_spellings_normalise_to_bare_digits(spelling):
    assert normalize_whatsapp_identifier(spelling) == "15551234567"


def test_lid_domain_and_device_suffix_are_stripped():
    assert normalize_whatsapp_identifier("987654321@lid") == "987654321"
    assert normalize_whatsapp_identifier("987654321:7@lid") == "987654321"


@pytest.mark.parametrize("group", ["120363041234567890@g.us", "1555-1700000000@g.us", "x@G.US"])
def test_group_ids_are_returned_unchanged(group):
    assert is_whatsapp_group(group)
    assert normalize_whatsapp_identifier(group) == group
    assert canonical_whatsapp_identifier(group, {group: "someone"}) == group


def test_non_numeric_local_part_is_kept_as_written():
    assert normalize_whatsapp_identifier("alice@s.whatsapp.net") == "alice"


def test_canonical_identifier_resolves_an_alias_from_a_mapping():
    aliases = {"987654321": "15551234567"}
    assert canonical_whatsapp_identifier("987654321@lid", aliases) == "15551234567"
    assert canonical_whatsapp_identifier("+15551234567", aliases) == "15551234567"


def test_canonical_identifier_resolves_an_alias_with_a_callable():
    seen: list[str] = []

    def resolver(normal: str) -> str | None:
        seen.append(normal)
        return "15551234567" if normal == "987654321" else None

    assert canonical_whatsapp_identifier("987654321:2@lid", resolver) == "15551234567"
    assert canonical_whatsapp_identifier("15550000000@c.us", resolver) == "15550000000"
    # The resolver is asked with the normalised form, not the raw spelling.
    assert seen == ["987654321", "15550000000"]


def test_canonical_identifier_without_aliases_is_the_normal_form():
    assert canonical_whatsapp_identifier("+15551234567:9@s.whatsapp.net") == "15551234567"


@pytest.mark.parametrize(
    ("identifier", "jid"),
    [
        ("15551234567", "15551234567@s.whatsapp.net"),
        ("+15551234567", "15551234567@s.whatsapp.net"),
        ("15551234567:4@c.us", "15551234567@s.whatsapp.net"),
        ("987654321@lid", "987654321@lid"),
        ("120363041234567890@g.us", "120363041234567890@g.us"),
    ],
)
def test_to_whatsapp_jid_builds_the_outbound_address(identifier, jid):
    assert to_whatsapp_jid(identifier) == jid


def test_jid_round_trips_through_normalisation():
    assert normalize_whatsapp_identifier(to_whatsapp_jid("15551234567")) == "15551234567"
