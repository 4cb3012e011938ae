"""`hooks.routes` is checked at load: unique names, one credential, readable templates, a
known agent serving the route's lane; templates fill only from the body's fields."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sessiongate.core.config import GatewayConfig
from sessiongate.core.inbound_hooks import Template, TemplateError, fence_payload

SECRET = "s" * 20


def route(**fields: object) -> dict[str, object]:
    return {"name": "gh", "secret": SECRET, "session_key": "{body.repo}", "prompt": "p"} | fields


@pytest.mark.parametrize(
    ("routes", "message"),
    [
        ([route(), route()], "'gh' is used twice"),
        ([route(secret=None)], "exactly one of secret and bearer"),
        ([route(bearer=SECRET)], "exactly one of secret and bearer"),
        ([route(secret="short")], "at least 16 characters"),
        ([route(session_key=None)], "session_key template or deliver_to"),
        ([route(prompt="{body.x!r}")], "is not a field"),
        ([route(prompt="{__class__}")], "is not a field"),
        ([route(prompt="{body.x:>10}")], "is not a field"),
        ([route(prompt="open {body.x")], "never closed"),
        ([route(prompt="a } b")], "lone '}'"),
        ([route(name="Bad Name")], "hook name"),
        ([route(deliver_to="nowhere:1")], "unknown platform"),
        ([route(session="isolated")], "isolated needs deliver_to"),
        ([route(agent="nobody")], "not configured"),
        ([route(id_field="delivery")], "not a field"),
    ],
)
def test_a_bad_route_is_a_clear_config_error(routes, message):
    with pytest.raises(ValidationError) as caught:
        GatewayConfig(hooks={"routes": routes})
    assert message in str(caught.value)


def test_a_routes_agent_must_be_the_one_its_bindings_choose():
    agents = {"ops": {"kind": "echo"}}
    with pytest.raises(ValidationError) as caught:
        GatewayConfig(agents=agents, hooks={"routes": [route(agent="ops")]})
    assert "bind it: {platform: webhook, chat_id: 'gh', agent: ops}" in str(caught.value)
    bound = GatewayConfig(
        agents=agents,
        bindings=[{"platform": "webhook", "chat_id": "gh", "agent": "ops"}],
        hooks={"routes": [route(agent="ops")]},
    )
    assert bound.hooks.routes[0].agent == "ops"


def test_the_dedupe_window_is_at_least_a_day():
    with pytest.raises(ValidationError, match="greater than or equal to 24"):
        GatewayConfig(hooks={"dedupe_hours": 1})


def test_templates_fill_from_the_body_only():
    template = Template.parse("{{literal}} {body.a.0.b} {body.n} {body.flag}")
    body = {"a": [{"b": "x"}], "n": 3, "flag": True}
    assert template.render(body, quote=False) == "{literal} x 3 true"
    with pytest.raises(TemplateError, match=r"no field body\.a\.1"):
        Template.parse("{body.a.1.b}").render(body, quote=False)
    with pytest.raises(TemplateError, match="is null"):
        Template.parse("{body.z}").render({"z": None}, quote=False)


def test_the_fence_tag_follows_the_payload_and_the_payload_has_no_angle_brackets():
    one, two = fence_payload("gh", {"a": "<x>"}), fence_payload("gh", {"a": "<y>"})
    assert one.splitlines()[0] != two.splitlines()[0]
    inner = one.splitlines()[2:-1]
    assert all("<" not in line and ">" not in line for line in inner)
