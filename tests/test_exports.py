"""The public surface: DESIGN.md's contract names exist, and `__all__` matches what is public."""

from __future__ import annotations

import inspect

import sessiongate
from sessiongate import SessionStore
from sessiongate.core import clock, identity

CONTRACT = {
    "Platform",
    "SessionSource",
    "SessionEntry",
    "SessionContext",
    "SessionStore",
    "GatewayConfig",
    "build_session_key",
    "parse_session_key",
    "is_shared_multi_user_session",
    "build_session_context",
    "build_session_context_prompt",
}

STORE_METHODS = {
    "get_or_create_session": ["source", "force_new"],
    "update_session": ["session_key", "last_prompt_tokens"],
    "reset_session": ["session_key", "display_name"],
    "switch_session": ["session_key", "target_session_id"],
    "suspend_session": ["session_key"],
    "mark_resume_pending": ["session_key", "reason"],
    "clear_resume_pending": ["session_key"],
    "suspend_recently_active": ["max_age_seconds"],
    "prune_old_entries": ["max_age_days"],
    "list_sessions": ["active_minutes"],
    "lookup_by_session_id": ["session_id"],
    "has_any_sessions": [],
    "append_to_transcript": ["session_id", "message", "skip_db"],
    "append_messages": ["session_id", "messages"],
    "rewrite_transcript": ["session_id", "messages"],
    "load_transcript": ["session_id", "limit"],
    "rewind_session": ["session_id", "n"],
    "search": ["query", "limit"],
    "close": [],
}


def test_all_lists_exactly_the_contract():
    assert set(sessiongate.__all__) == CONTRACT
    assert sessiongate.__all__ == sorted(sessiongate.__all__)
    for name in CONTRACT:
        assert getattr(sessiongate, name) is not None


def test_store_methods_keep_their_signatures():
    for name, params in STORE_METHODS.items():
        signature = inspect.signature(getattr(SessionStore, name))
        positional = [p for p in signature.parameters if p != "self"][: len(params)]
        assert positional == params, name
    init = inspect.signature(SessionStore.__init__).parameters
    assert list(init)[1:4] == ["sessions_dir", "config", "has_active_processes_fn"]
    assert init["clock"].kind is inspect.Parameter.KEYWORD_ONLY


def test_store_defaults_match_the_contract():
    sig = inspect.signature
    assert sig(SessionStore.rewind_session).parameters["n"].default == 1
    assert sig(SessionStore.search).parameters["limit"].default == 20
    assert sig(SessionStore.suspend_recently_active).parameters["max_age_seconds"].default == 120
    assert sig(SessionStore.mark_resume_pending).parameters["reason"].default == "restart_timeout"


def test_named_modules_expose_their_contract():
    for name in (
        "normalize_whatsapp_identifier",
        "canonical_whatsapp_identifier",
        "to_whatsapp_jid",
    ):
        assert callable(getattr(identity, name))
    fake = clock.FakeClock(clock.SystemClock().now())
    before = fake.now()
    fake.advance(1.5)
    assert (fake.now() - before).total_seconds() == 1.5


def test_package_ships_type_information():
    from importlib.resources import files

    assert files("sessiongate").joinpath("py.typed").is_file()
