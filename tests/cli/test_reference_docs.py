"""The site's generated reference pages say what the code serves (regenerate them with
`python -m sessiongate.cli._reference_docs docs/reference`)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sessiongate.cli._reference_docs import (
    render_http_reference,
    render_metrics_reference,
    served_documents,
)

ROOT = Path(__file__).resolve().parents[2]
REGENERATE = "python -m sessiongate.cli._reference_docs docs/reference"


@pytest.fixture(scope="module")
def served():
    return served_documents()


def test_the_http_reference_is_current(served):
    schema, _ = served
    page = (ROOT / "docs" / "reference" / "http.md").read_text()
    assert page == render_http_reference(schema), f"run: {REGENERATE}"


def test_the_metrics_reference_is_current(served):
    _, metrics = served
    page = (ROOT / "docs" / "reference" / "metrics.md").read_text()
    assert page == render_metrics_reference(metrics), f"run: {REGENERATE}"


def test_every_route_is_in_the_http_reference(served):
    schema, _ = served
    page = render_http_reference(schema)
    for path, item in schema["paths"].items():
        for method in item:
            assert f"## `{method.upper()} {path}`" in page


def test_the_example_alerts_name_only_metrics_that_exist(served):
    _, metrics = served
    exported = {line.split(" ")[2] for line in metrics.splitlines() if line.startswith("# TYPE ")}
    rules = yaml.safe_load((ROOT / "deploy" / "prometheus" / "alerts.yml").read_text())
    named = set()
    for group in rules["groups"]:
        for rule in group["rules"]:
            assert {"alert", "expr", "labels", "annotations"} <= set(rule), rule
            named.update(word for word in _words(rule["expr"]) if word.startswith("sessiongate_"))
    assert named, "the rules name sessiongate metrics"
    histogram_parts = ("_bucket", "_sum", "_count")
    for name in named:
        base = next((name[: -len(s)] for s in histogram_parts if name.endswith(s)), name)
        assert name in exported or base in exported, f"{name} is not exported"


def _words(expr: str) -> list[str]:
    word, words = [], []
    for char in expr + " ":
        if char.isalnum() or char == "_":
            word.append(char)
        elif word:
            words.append("".join(word))
            word = []
    return words
