"""`/model` through a real gateway and the fake model server: it shows the model and the
allowed ones, a choice reaches the model call (the request's `model` changes), and a model
the agent's `models` list does not allow is refused with a clear message."""

from __future__ import annotations


def models_sent(gw) -> list[str]:
    return [request["body"]["model"] for request in gw.server.requests]


async def test_model_shows_chooses_and_refuses(make_gateway) -> None:
    gw = await make_gateway(agent={"models": ["gpt-4o", "big-model"]})
    await gw.say("alice", "hi")
    shown = await gw.say("alice", "/model")
    assert shown.status == "command"
    assert shown.reply.splitlines()[:2] == [
        "Model: fake-model",
        "Allowed: fake-model, gpt-4o, big-model",
    ]
    chosen = await gw.say("alice", "/model big-model")
    assert chosen.reply == "Model: big-model. It answers from the next message on."
    await gw.say("alice", "and now?")
    refused = await gw.say("alice", "/model gpt-5-ultra")
    assert refused.reply.startswith("Model gpt-5-ultra is not allowed here.")
    assert refused.reply.endswith("Allowed: fake-model, gpt-4o, big-model (agent.models).")
    await gw.say("alice", "still big?")
    assert (await gw.say("alice", "/model")).reply.startswith(
        "Model: big-model (the agent's default: fake-model)"
    )
    await gw.say("alice", "/model default")
    await gw.say("alice", "back")
    # Each turn's request names the model the session chose; a refusal changed nothing.
    assert models_sent(gw) == ["fake-model", "big-model", "big-model", "fake-model"]
    # Bob's session never chose: the agent's model.
    await gw.say("bob", "hi")
    assert models_sent(gw)[-1] == "fake-model"


async def test_without_a_models_list_only_the_agents_model_is_allowed(make_gateway) -> None:
    gw = await make_gateway()
    shown = await gw.say("alice", "/model")
    assert shown.reply.splitlines() == [
        "Model: fake-model",
        "Allowed: fake-model",
        "Only the agent's model is allowed (agent.models).",
    ]
    refused = await gw.say("alice", "/model gpt-4o")
    assert refused.reply.startswith("Model gpt-4o is not allowed here.")
    await gw.say("alice", "hi")
    assert models_sent(gw) == ["fake-model"]
