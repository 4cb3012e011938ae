"""The OpenAPI description is what a schema-driven fuzzer will trust: check it says the truth."""

from __future__ import annotations

import pytest

DESIGN_ROUTES = {
    ("post", "/v1/messages"),
    ("get", "/v1/sessions"),
    ("get", "/v1/sessions/{key}"),
    ("patch", "/v1/sessions/{key}"),
    ("delete", "/v1/sessions/{key}"),
    ("get", "/v1/sessions/{key}/transcript"),
    ("get", "/v1/sessions/{key}/context"),
    ("get", "/v1/search"),
    ("post", "/v1/sessions/{key}/reset"),
    ("post", "/v1/sessions/{key}/rewind"),
    ("post", "/v1/sessions/{key}/fork"),
    ("post", "/v1/sessions/{key}/compact"),
    ("get", "/v1/sessions/{key}/branches"),
    ("post", "/v1/sessions/{key}/branches/switch"),
    ("get", "/healthz"),
    ("get", "/metrics"),
}
# Added beside DESIGN.md's routes: explicit creation (incognito too) and messages by key.
ADDED_ROUTES = {
    ("post", "/v1/sessions"),
    ("post", "/v1/sessions/{key}/messages"),
    ("get", "/v1/instances"),  # round 2: the instances sharing the database
    ("get", "/v1/turns/{turn_id}"),
    ("get", "/v1/events"),  # round 2: the live feed
    # Platform webhooks (DESIGN round 2), signed by the platform instead of the bearer token.
    ("post", "/hooks/telegram"),
    ("post", "/hooks/slack/events"),
    ("post", "/hooks/slack/interactivity"),
    ("get", "/hooks/whatsapp"),
    ("post", "/hooks/whatsapp"),
    ("post", "/hooks/in/{name}"),  # inbound webhooks (`hooks.routes`)
    # What the dashboard's operations page shows (and its one action).
    ("get", "/v1/ops"),
    ("post", "/v1/ops/deliveries/{turn_id}/retry"),
    ("post", "/v1/erasure"),  # round 2: the right to erasure
    # Scheduled jobs (docs/AUTOMATION.md).
    ("get", "/v1/jobs"),
    ("post", "/v1/jobs"),
    ("get", "/v1/jobs/{job_id}"),
    ("patch", "/v1/jobs/{job_id}"),
    ("delete", "/v1/jobs/{job_id}"),
    ("post", "/v1/jobs/{job_id}/run"),
    ("get", "/v1/jobs/{job_id}/runs"),
    # Round 3: tool approvals asked in the chat, listed and decided by programs.
    ("get", "/v1/approvals"),
    ("get", "/v1/approvals/{approval_id}"),
    ("post", "/v1/approvals/{approval_id}"),
    # The dead-letter lists: deliveries and outbound webhook events.
    ("get", "/v1/deliveries"),
    ("post", "/v1/deliveries/retry"),
    ("post", "/v1/deliveries/{delivery_id}/retry"),
    ("get", "/v1/webhooks/events"),
    ("post", "/v1/webhooks/events/{event_id}/retry"),
    # An operator takes a chat over from the agent (docs/AUTOMATION.md).
    ("get", "/v1/sessions/{key}/takeover"),
    ("post", "/v1/sessions/{key}/takeover"),
    ("delete", "/v1/sessions/{key}/takeover"),
    ("post", "/v1/sessions/{key}/reply"),
}


@pytest.fixture
def schema(client) -> dict:
    response = client.get("/openapi.json")
    assert response.status_code == 200
    return response.json()


def _operations(schema):
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            yield method, path, operation


def test_every_design_route_is_described_and_nothing_else(schema):
    assert {(m, p) for m, p, _ in _operations(schema)} == DESIGN_ROUTES | ADDED_ROUTES


def test_every_error_response_is_the_error_body(schema):
    for method, path, operation in _operations(schema):
        for status, response in operation["responses"].items():
            if status.startswith(("4", "5")):
                ref = response["content"]["application/json"]["schema"]["$ref"]
                assert ref.endswith("/ErrorOut") or (path == "/healthz"), (method, path, status)


def test_validation_failures_are_documented_as_our_422(schema):
    for method, path, operation in _operations(schema):
        if operation.get("parameters") or operation.get("requestBody"):
            assert "422" in operation["responses"], (method, path)
    assert "HTTPValidationError" not in schema["components"]["schemas"]


def test_request_bodies_refuse_unknown_fields(schema):
    components = schema["components"]["schemas"]
    for name in (
        "MessageIn",
        "SessionMessageIn",
        "SessionCreateIn",
        "PatchIn",
        "SwitchIn",
        "RewindIn",
        "ForkIn",
    ):
        assert components[name]["additionalProperties"] is False, name


def test_operator_routes_declare_the_bearer_scheme(schema):
    assert schema["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    for _method, path, operation in _operations(schema):
        if path != "/healthz" and not path.startswith("/hooks/"):
            assert operation.get("security"), path


def test_docs_api_md_describes_every_route():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "API.md").read_text(encoding="utf-8")
    for method, path in DESIGN_ROUTES:
        assert f"### `{method.upper()} {path}`" in text, (method, path)
