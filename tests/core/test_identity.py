"""WhatsApp identity: one human, one id, however the bridge spells it."""

from __future__ import annotations

import os
import re

import pytest
from hypothesis import assume, given, settings, strategies as st

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
        # The JID addresses the person, never one device; a LID stays a LID in any case.
        ("987654321:3@lid", "987654321@lid"),
        ("+987654321@LID", "987654321@lid"),
        ("120363041234567890@g.us", "120363041234567890@g.us"),
    ],
)
def test_to_whatsapp_jid_builds_the_outbound_address(identifier, jid):
    assert to_whatsapp_jid(identifier) == jid


@pytest.mark.parametrize("identifier", ["", "   ", "+", "@lid", "@s.whatsapp.net", ":3@lid"])
def test_to_whatsapp_jid_of_an_id_with_no_user_part_is_empty(identifier):
    assert to_whatsapp_jid(identifier) == ""


def test_jid_round_trips_through_normalisation():
    assert normalize_whatsapp_identifier(to_whatsapp_jid("15551234567")) == "15551234567"


# --- properties: exactly which spellings merge -------------------------------------------------
#
# By design the normaliser drops, and only drops: surrounding whitespace, a leading `+` (with any
# whitespace around it), one device suffix `:N` (ASCII digits) ending the local part, the domain
# (everything from the first `@`), and, in a phone number (a local part of ASCII digits and the
# separators ` -().`), the separators. Group ids (`…@g.us`) are kept whole. Two ids that differ in
# anything else must normalise apart; `_is_decoration_of` states that rule as a pattern, so a
# property over arbitrary text checks that nothing else is ever dropped.

_PHONE_SEPARATORS = " -()."
# Examples per property; `IDENTITY_EXAMPLES=20000 pytest tests/core/test_identity.py` runs long.
_EXAMPLES = int(os.environ.get("IDENTITY_EXAMPLES", "200"))
# Text that stresses every rule: the characters the normaliser reacts to, digits (ASCII and not),
# separators, case, whitespace of several kinds, and arbitrary unicode.
_ID_ALPHABET = st.sampled_from(
    [*"0123456789+:@ -().aZgus.\t\n\u00a0\u2003", "\u0661", "\uff11", "\u00b2", "\u0130"]
)
# Whole domains and suffixes as single pieces, so `@lid` or `@G.US` turn up, not only by chance.
_ID_PIECES = st.sampled_from(["@lid", "@LID", "@s.whatsapp.net", "@c.us", "@g.us", "@G.US", ":12"])
_hostile_ids = st.one_of(
    st.text(),
    st.text(_ID_ALPHABET, max_size=24),
    st.lists(st.one_of(_ID_ALPHABET, _ID_PIECES), max_size=10).map("".join),
)
_domains = st.one_of(
    st.sampled_from(["s.whatsapp.net", "c.us", "lid", "S.WhatsApp.NET", "LID", ""]),
    st.text(max_size=12).filter(lambda d: not d.strip().lower().endswith("g.us")),
)
_blank = st.text(st.sampled_from(" \t\n\u00a0\u2003"), max_size=2)


def _is_decoration_of(raw: str, normal: str) -> bool:
    """True when `raw` is `normal` plus only the decorations the normaliser may drop."""
    if normal.isascii() and normal.isdigit():
        sep = "[" + re.escape(_PHONE_SEPARATORS) + "]*"
        core = sep + sep.join(re.escape(d) for d in normal) + sep
    else:
        core = re.escape(normal)
    pattern = r"[\s+]*" + core + r"\s*(?::[0-9]+)?\s*(?:@.*)?"
    return re.fullmatch(pattern, raw, flags=re.DOTALL) is not None


@pytest.mark.parametrize(
    ("raw", "normal", "expected"),
    [
        ("+1 (555) 123-4567:4@s.whatsapp.net ", "15551234567", True),
        (" + alice :12@lid", "alice", True),
        ("alice:bob", "alice", False),
        ("alice:", "alice", False),
        ("15551234567_1", "15551234567", False),
        ("Alice", "alice", False),
    ],
)
def test_the_decoration_rule_itself(raw, normal, expected):
    assert _is_decoration_of(raw, normal) is expected


@given(_hostile_ids)
@settings(max_examples=_EXAMPLES)
def test_normalising_drops_nothing_but_the_designed_decorations(raw):
    normal = normalize_whatsapp_identifier(raw)
    if is_whatsapp_group(raw):
        assert normal == raw.strip()
    else:
        assert "@" not in normal
        assert _is_decoration_of(raw, normal), (raw, normal)


@given(_hostile_ids)
@settings(max_examples=_EXAMPLES)
def test_normalising_is_idempotent(raw):
    once = normalize_whatsapp_identifier(raw)
    assert normalize_whatsapp_identifier(once) == once


@given(
    st.text(_ID_ALPHABET, max_size=16).map(normalize_whatsapp_identifier),
    st.sampled_from(["", "+", "+ ", " +"]),
    st.one_of(st.just(""), st.integers(0, 99).map(str)),
    _domains,
    _blank,
    _blank,
)
@settings(max_examples=_EXAMPLES)
def test_every_designed_decoration_merges_into_the_bare_id(core, plus, device, domain, pre, post):
    # A normal form with no colon (a colon would make the device suffix ambiguous) and not a
    # group: dressing it in any designed decoration normalises back to exactly it.
    assume(":" not in core and not is_whatsapp_group(core))
    raw = pre + plus + core + (f":{device}" if device else "") + (f"@{domain}" if domain else "")
    assert normalize_whatsapp_identifier(raw + post) == core


@given(st.text("0123456789", min_size=1, max_size=15), st.data())
@settings(max_examples=_EXAMPLES)
def test_phone_separators_merge_into_the_bare_digits(digits, data):
    formatted = "".join(
        data.draw(st.text(st.sampled_from(_PHONE_SEPARATORS), max_size=2)) + d for d in digits
    )
    assert normalize_whatsapp_identifier("+" + formatted) == digits


@given(_hostile_ids, _hostile_ids)
@settings(max_examples=_EXAMPLES)
def test_ids_that_differ_beyond_the_decorations_never_merge(a, b):
    # Draw two ids, strip both to their normal forms, then dress each in a decoration: they
    # merge exactly when their normal forms were equal.
    na, nb = normalize_whatsapp_identifier(a), normalize_whatsapp_identifier(b)
    assume(not is_whatsapp_group(na) and not is_whatsapp_group(nb))
    dressed_a = normalize_whatsapp_identifier(f" +{na}:7@s.whatsapp.net")
    dressed_b = normalize_whatsapp_identifier(f"{nb}@lid ")
    if ":" not in na and ":" not in nb:
        assert (dressed_a == dressed_b) == (na == nb)


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("alice:bob@s.whatsapp.net", "alice:carol@s.whatsapp.net"),  # not a device suffix
        ("15551234567", "15551234568"),
        ("Alice", "alice"),  # case is never folded: ids are opaque
        ("1555\u0661", "15551"),  # a non-ASCII digit is not a phone digit
        ("12a3", "123"),
        ("x@g.us", "x"),
    ],
)
def test_ids_differing_in_anything_else_stay_apart(one, other):
    assert normalize_whatsapp_identifier(one) != normalize_whatsapp_identifier(other)


@given(_hostile_ids, st.dictionaries(_hostile_ids, _hostile_ids, max_size=4))
@settings(max_examples=_EXAMPLES)
def test_normalising_and_canonicalising_never_raise(raw, table):
    normalize_whatsapp_identifier(raw)
    canonical_whatsapp_identifier(raw, table)
    canonical_whatsapp_identifier(raw, table.get)
    to_whatsapp_jid(raw)


@given(_hostile_ids, st.lists(st.tuples(_hostile_ids, _hostile_ids), max_size=4))
@settings(max_examples=_EXAMPLES)
def test_canonicalising_is_idempotent_when_aliases_point_at_canonical_ids(raw, pairs):
    # The store keeps every alias pointing straight at a canonical id (one hop), both normalised.
    targets = {normalize_whatsapp_identifier(t) for _, t in pairs}
    aliases = {
        normalize_whatsapp_identifier(a): normalize_whatsapp_identifier(t)
        for a, t in pairs
        if normalize_whatsapp_identifier(a) not in targets
    }
    once = canonical_whatsapp_identifier(raw, aliases)
    assert canonical_whatsapp_identifier(once, aliases) == once
    assert canonical_whatsapp_identifier(raw) == normalize_whatsapp_identifier(raw)


@given(_hostile_ids)
@settings(max_examples=_EXAMPLES)
def test_to_whatsapp_jid_round_trips_through_normalisation(raw):
    jid = to_whatsapp_jid(raw)
    assert normalize_whatsapp_identifier(jid) == normalize_whatsapp_identifier(raw)
    assert to_whatsapp_jid(jid) == jid


@given(_hostile_ids)
@settings(max_examples=_EXAMPLES)
def test_to_whatsapp_jid_addresses_the_person_not_one_device(raw):
    assume(not is_whatsapp_group(raw))
    jid = to_whatsapp_jid(raw)
    local, _, domain = jid.partition("@")
    assert local == normalize_whatsapp_identifier(raw)
    # No user part, no address: never `@s.whatsapp.net`.
    assert domain in ("s.whatsapp.net", "lid") if local else jid == ""
