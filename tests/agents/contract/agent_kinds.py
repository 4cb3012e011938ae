"""The agent kinds the contract suite runs, and the settings that make each one talk to the
fake model server (shared by the suite's fixtures and tests)."""

from __future__ import annotations

from pathlib import Path

FRAMEWORKS = Path(__file__).resolve().parents[1] / "frameworks"
# The kinds every agent runs the suite as, with the module each one needs.
KINDS = {
    "openai": "openai",
    "openai-agents": "agents",
    "pydantic-ai": "pydantic_ai",
    "langgraph": "langgraph",
}
ENTRIES = {
    "openai-agents": "bots:support_agent",
    "pydantic-ai": "bots:pydantic_agent",
    "langgraph": "bots:order_graph",
}


def agent_settings(kind: str, base_url: str) -> dict:
    if kind == "openai":
        return {
            "agent": {
                "openai": {
                    "base_url": base_url,
                    "model": "fake-model",
                    "max_retries": 0,
                    "tools": ["bots:lookup_order", "bots:delete_file"],
                }
            }
        }
    return {"agents": {"main": {"kind": kind, "entry": ENTRIES[kind]}}}
