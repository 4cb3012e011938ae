"""Schema-driven fuzzing of the HTTP API (schemathesis) against a live gateway process.

Every operation in `/openapi.json` gets generated requests — valid ones (positive mode) and ones
that break the schema (negative mode: wrong types, missing fields, odd strings in path and
query) — sent over a real socket to `sessiongate run` on 127.0.0.1 with an operator token. The
rule is the DESIGN's: no 5xx, ever, and every 4xx is the JSON error shape. Half the session-key
path parameters are keys that exist (seeded before the run, including keys with `:`, `/` and
`%` in them), so the routes get past their 404.

The schemathesis pytest plugin does not run under pytest 9 (`Function._nodeid`), so each
operation's strategy (`APIOperation.as_strategy`) is driven by hypothesis directly. The default
run is small (`FUZZ_EXAMPLES_QUICK`, 6 per operation and mode); `pytest -m slow` runs
`FUZZ_EXAMPLES` (default 200).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings, strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.core.result import Ok

from sg_process import SyncGateway, clean_env, selected_by_marker

if TYPE_CHECKING:
    from collections.abc import Iterator

TOKEN = "fuzz-operator-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
_STREAMS = frozenset({"/v1/events"})
SEEDED_CHATS = ("alice", "bob:with:colons", "carol/with/slashes", "dan%percent")


class Live:
    def __init__(self, gateway: SyncGateway, keys: list[str]) -> None:
        self.gateway = gateway
        self.keys = keys
        self.cases = 0
        self.statuses: dict[int, int] = {}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    home = tmp_path_factory.mktemp("fuzz") / "home"
    gateway = SyncGateway(home, env=clean_env(SESSIONGATE_API__TOKEN=TOKEN))
    try:
        keys = []
        for chat in SEEDED_CHATS:
            for text in ("first words", "second words", "third words"):
                sent = httpx.post(
                    f"{gateway.url}/v1/messages",
                    json={"chat_id": chat, "text": text},
                    headers=AUTH,
                    timeout=60,
                )
                assert sent.status_code == 200, sent.text
            keys.append(str(sent.json()["session_key"]))
        yield Live(gateway, keys)
    finally:
        code = gateway.stop()
    assert code == 0
    assert '"level":"error"' not in gateway.log_path.read_text()


def _with_real_keys(strategy: Any, keys: list[str]) -> Any:
    """Half the cases get a seeded key for their `{key}` path parameter."""

    def maybe_real(case: Any) -> Any:
        if not case.path_parameters or "key" not in case.path_parameters:
            return st.just(case)

        def put(key: str | None) -> Any:
            if key is not None:
                case.path_parameters = {**case.path_parameters, "key": key}
            return case

        return st.one_of(st.none(), st.sampled_from(keys)).map(put)

    return strategy.flatmap(maybe_real)


def _fuzz_one(live: Live, strategy: Any, mode: GenerationMode, examples: int) -> None:
    """`examples` generated cases of one operation in one mode; raises on the first failure."""

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def one(case: Any) -> None:
        response = case.call(base_url=live.gateway.url, headers=AUTH, timeout=60)
        live.cases += 1
        live.statuses[response.status_code] = live.statuses.get(response.status_code, 0) + 1
        where = f"{case.method} {case.formatted_path} {mode.value}"
        assert response.status_code < 500, f"{where}: {response.text[:500]}"
        if response.status_code >= 400:
            error = response.json()["error"]
            assert isinstance(error["code"], str), where
            assert isinstance(error["message"], str), where

    one()


def _fuzz(live: Live, examples: int) -> None:
    api = schemathesis.openapi.from_url(f"{live.gateway.url}/openapi.json", headers=AUTH)
    results = list(api.get_all_operations())
    operations = [result.ok() for result in results if isinstance(result, Ok)]
    assert len(operations) == len(results), "the schema has operations schemathesis rejects"
    # An event stream never ends, and a case reads its whole body; the feed's inputs are
    # covered by tests/api/test_api_events.py.
    operations = [op for op in operations if op.path not in _STREAMS]
    assert len(operations) >= 14  # every route of the DESIGN table is described
    failures: list[str] = []
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            strategy = _with_real_keys(operation.as_strategy(generation_mode=mode), live.keys)
            try:
                _fuzz_one(live, strategy, mode, examples)
            except Unsatisfiable:
                # Nothing to negate (an operation without parameters or body).
                assert mode is GenerationMode.NEGATIVE, operation.label
            except AssertionError as exc:
                failures.append(str(exc)[:800])
    # Shown with `pytest -s`: the figures docs/RELIABILITY.md records.
    print(f"fuzz: {len(operations)} operations, {live.cases} cases, statuses {live.statuses}")
    assert not failures, "\n\n".join(failures)


def test_no_generated_request_gets_a_5xx(live: Live) -> None:
    _fuzz(live, int(os.environ.get("FUZZ_EXAMPLES_QUICK", "6")))
    assert live.cases > 0
    assert any(200 <= status < 300 for status in live.statuses)  # some cases got through


@pytest.mark.slow
def test_no_generated_request_gets_a_5xx_long(live: Live, request: pytest.FixtureRequest) -> None:
    if not selected_by_marker(request, "slow"):
        pytest.skip("opt-in: run with -m slow (examples per operation and mode: FUZZ_EXAMPLES)")
    _fuzz(live, int(os.environ.get("FUZZ_EXAMPLES", "200")))
