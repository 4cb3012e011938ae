"""Arbitrary JSON and arbitrary keys against every route: never a 5xx (a 5xx is a bug)."""

from __future__ import annotations

from urllib.parse import quote

from hypothesis import HealthCheck, given, settings, strategies as st

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)
FIELDS = st.sampled_from(
    [
        "chat_id",
        "text",
        "wait",
        "message_id",
        "chat_type",
        "user_id",
        "entry_id",
        "turns",
        "fork_from",
        "leaf_entry_id",
        "pinned",
        "archived",
        "unread",
        "label",
        "expected_session_id",
        "expected_marked_unread_at",
        "platform",
    ]
)
BODIES = JSON | st.dictionaries(FIELDS, JSON, max_size=5)
SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
BODY_ROUTES = [
    ("POST", "/v1/messages"),
    ("POST", "{key}/rewind"),
    ("POST", "{key}/fork"),
    ("POST", "{key}/branches/switch"),
    ("PATCH", "{key}"),
]


@SETTINGS
@given(body=BODIES, route=st.sampled_from(BODY_ROUTES))
def test_any_json_body_is_answered_without_a_5xx(client, send, key_path, body, route):
    key = send("seed", chat_id="fuzz")["session_key"]
    method, template = route
    url = template if template.startswith("/") else key_path(key, template.removeprefix("{key}"))
    response = client.request(method, url, json=body)
    assert response.status_code < 500, (method, url, body, response.text)
    if response.status_code >= 400:
        assert {"code", "message"} <= response.json()["error"].keys()


@SETTINGS
@given(
    key=st.text(max_size=60), suffix=st.sampled_from(["", "/transcript", "/context", "/branches"])
)
def test_any_key_in_the_path_is_answered_without_a_5xx(client, key, suffix):
    response = client.get(f"/v1/sessions/{quote(key, safe='')}{suffix}")
    assert response.status_code < 500, (key, response.text)


@SETTINGS
@given(q=st.text(max_size=50), limit=st.integers(min_value=-5, max_value=600))
def test_any_search_is_answered_without_a_5xx(client, q, limit):
    response = client.get("/v1/search", params={"q": q, "limit": limit})
    assert response.status_code < 500, (q, response.text)
