"""`core/jsontext.py`: the reused encoder writes what `json.dumps` writes."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from sessiongate.core.jsontext import json_encoder

VALUES = [
    {"text": 'a "quoted" é\n\u2028 line', "n": 3, "x": 2.5, "none": None, "ok": True},
    {"nested": [{"a": []}, {}], "big": 10**20, "neg": -0.0},
    "plain",
    [1, "two", None],
    {},
]


@pytest.mark.parametrize("value", VALUES)
def test_it_writes_what_json_dumps_writes(value):
    compact = json_encoder(separators=(",", ":"))
    spaced = json_encoder(default=str)
    assert compact(value) == json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    assert spaced(value) == json.dumps(value, ensure_ascii=False, default=str)


def test_default_turns_other_values_into_json_and_without_one_they_are_refused():
    when = datetime(2026, 1, 1, tzinfo=UTC)
    assert json_encoder(default=str)({"at": when}) == json.dumps({"at": str(when)})
    with pytest.raises(TypeError, match="datetime"):
        json_encoder()({"at": when})
