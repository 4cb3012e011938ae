"""The OpenAI-compatible agent's failures as a person and an operator see them through the
gateway: what the user is told, what is stored, what the log says."""

from __future__ import annotations

import json
import logging

import pytest

from fake_openai import Call, Calls, NoChoices, Reply, Status


def turn_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith("sessiongate")]


async def stored(gw, user: str) -> list[dict]:
    entry = gw.store.get_session(gw.key(user))
    return gw.store.load_transcript(entry.session_id)


async def test_a_200_without_choices_fails_the_turn_and_stores_no_empty_reply(
    make_gateway,
) -> None:
    gw = await make_gateway()
    gw.server.script(NoChoices())
    receipt = await gw.say("alice", "hello?")
    assert receipt.status == "failed"
    assert receipt.reply == "Sorry, the model sent no answer. Please try again."
    messages = await stored(gw, "alice")
    assert [m["role"] for m in messages] == ["user", "assistant"]
    notice = messages[-1]
    assert notice["content"] == receipt.reply
    # The notice is for the person, never context for the model.
    assert notice["metadata"]["exclude_from_context"] is True
    assert not any(m["role"] == "assistant" and not m["content"] for m in messages)


@pytest.mark.parametrize(
    ("status", "setting"), [(401, "agent.openai.api_key"), (404, "agent.openai.model")]
)
async def test_a_misconfigured_agent_says_so_and_the_log_names_the_setting(
    make_gateway, caplog, status, setting
) -> None:
    gw = await make_gateway()
    gw.server.script(Status(status, "the model `fake-model` does not exist"))
    with caplog.at_level(logging.INFO):
        receipt = await gw.say("alice", "hello")
    assert receipt.status == "failed"
    assert "misconfigured" in receipt.reply
    lines = turn_lines(caplog)
    assert not [r for r in lines if r.levelno >= logging.ERROR]
    assert not [r for r in lines if r.exc_info]  # no traceback anywhere
    [cause] = [r for r in lines if r.levelno == logging.WARNING and "misconfigured" in r.msg]
    assert setting in cause.getMessage()


async def test_an_unavailable_model_is_retried_then_reported_as_temporary(
    make_gateway, caplog
) -> None:
    gw = await make_gateway(max_retries=2, retry_backoff_seconds=0)
    gw.server.script(Status(503), Status(429), Status(500))
    with caplog.at_level(logging.INFO):
        receipt = await gw.say("alice", "hello")
    assert receipt.status == "failed"
    assert "temporarily unavailable" in receipt.reply
    assert len(gw.server.requests) == 3
    assert not [r for r in turn_lines(caplog) if r.levelno >= logging.ERROR or r.exc_info]
    # The next message is answered as usual once the server is back.
    assert (await gw.say("alice", "again")).reply == "model says: again"


async def test_a_failed_compaction_summary_logs_one_warning_and_compacts_nothing(
    make_gateway, caplog
) -> None:
    gw = await make_gateway(agent={"context_window": 1000})
    for n in range(6):
        gw.server.script(Reply(f"answer {n} " + "y" * 600))
        await gw.say("alice", f"question {n} " + "x" * 600)
    gw.server.script(Status(401))
    with caplog.at_level(logging.INFO):
        result = await gw.runner.compact(gw.key("alice"))
    assert result["compacted"] is False
    assert result["reason"] == "summary_failed"
    assert gw.server.requests[-1]["body"]["messages"][0]["content"].startswith("Summarize")
    lines = turn_lines(caplog)
    assert not [r for r in lines if r.levelno >= logging.ERROR or r.exc_info]
    assert any("check agent.openai.api_key" in r.getMessage() for r in lines)


DEEP = '{"a":' * 50_000 + "1" + "}" * 50_000


async def test_each_bad_tool_call_gets_its_own_error_result_and_the_turn_goes_on(
    make_gateway,
) -> None:
    gw = await make_gateway()
    gw.server.script(
        Calls(
            [
                Call("", "{}"),
                Call("sessions_list", DEEP),
                Call("sessions_list", "[" * 50_000 + "]" * 50_000),
                Call("sessions_list", json.dumps({"limit": 5})),
            ]
        ),
        Reply("carried on"),
    )
    receipt = await gw.say("alice", "go")
    assert receipt.reply == "carried on"
    sent = gw.server.requests[1]["body"]["messages"]
    results = [m for m in sent if m["role"] == "tool"]
    assert len(results) == 4
    empty, deep, deep_list, fine = (json.loads(m["content"]) for m in results)
    assert "names no valid tool" in empty["error"]
    assert "nested" in deep["error"]
    assert "nested" in deep_list["error"]
    assert isinstance(fine, list)
    # The turn is stored whole: the calls, each result, and the reply.
    entry = gw.store.get_session(gw.key("alice"))
    transcript = gw.store.load_transcript(entry.session_id)
    assert [m["role"] for m in transcript] == ["user", "assistant", *["tool"] * 4, "assistant"]
    assert transcript[-1]["content"] == "carried on"
