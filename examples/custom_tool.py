"""Writing a tool: a function the OpenAI-compatible agent's model may call.

Name it in the configuration (the module must be importable, e.g. on PYTHONPATH):

    agent:
      kind: openai
      openai:
        model: gpt-4o-mini
        tools: ["custom_tool:lookup_order", "custom_tool:convert"]

Its type hints become the JSON schema the model sees, its docstring the descriptions; the
arguments the model sends are checked against the same definition before the function runs.

    python examples/custom_tool.py     # prints the schemas the model gets
"""

from __future__ import annotations

import json
from typing import Literal

from sessiongate.agents.tools import ToolContext, load_tools, tool

ORDERS = {"1001": "shipped", "1002": "waiting for stock"}


def lookup_order(order_id: str, include_items: bool = False) -> dict[str, object]:
    """Look an order up by its id.

    Args:
        order_id: the id printed on the receipt, digits only
        include_items: whether to list the order's items too
    """
    found = {"order_id": order_id, "status": ORDERS.get(order_id, "unknown")}
    if include_items:
        found["items"] = ["kettle"] if order_id == "1001" else []
    return found


@tool(name="convert_length", timeout_seconds=5)
async def convert(amount: float, unit: Literal["cm", "in"], context: ToolContext) -> str:
    """Convert a length between centimetres and inches.

    Args:
        amount: the length to convert
        unit: the unit `amount` is in
    """
    return f"{amount * 2.54:.2f} cm" if unit == "in" else f"{amount / 2.54:.2f} in"


def main() -> None:
    for loaded in load_tools(["custom_tool:lookup_order", "custom_tool:convert"]):
        print(json.dumps(loaded.spec(), indent=2))


if __name__ == "__main__":
    main()
