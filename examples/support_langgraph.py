"""A support bot on LangGraph, with one tool, behind the gateway.

A compiled graph whose state has `messages`: a chat model node with the tool bound, and
LangGraph's own `ToolNode`. The gateway runs `graph.astream(...)` for each turn with the
session's model context (this graph has no checkpointer, so the transcript is the one
history) and stores each model message and tool result as it completes. Install the bridge
and name the graph:

    pip install 'sessiongate[langgraph]' langchain-openai

    # sessiongate.yaml (this folder on PYTHONPATH)
    agents:
      support:
        kind: langgraph
        entry: "support_langgraph:graph"
        system_prompt: "You are the support desk of Example Ltd."
    bindings:
      - {platform: telegram, chat_id: "-1001234567890", agent: support}

The model server is any OpenAI-compatible one: `SUPPORT_BOT_BASE_URL` (default
`http://127.0.0.1:8080/v1`), `SUPPORT_BOT_MODEL` and `OPENAI_API_KEY` (a local server needs
none).
"""

from __future__ import annotations

import os
from typing import Any

from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

ORDERS = {"1001": "shipped on Monday", "1002": "waiting for stock"}


@tool
def order_status(order_id: str) -> str:
    """The status of an order.

    Args:
        order_id: the order number printed on the receipt
    """
    return f"order {order_id}: {ORDERS.get(order_id, 'no such order')}"


model = ChatOpenAI(
    model=os.environ.get("SUPPORT_BOT_MODEL", "gpt-4o-mini"),
    base_url=os.environ.get("SUPPORT_BOT_BASE_URL", "http://127.0.0.1:8080/v1"),
    api_key=os.environ.get("OPENAI_API_KEY", "not-needed"),
    stream_usage=True,
).bind_tools([order_status])


async def call_model(state: MessagesState) -> dict[str, Any]:
    return {"messages": [await model.ainvoke(state["messages"])]}


builder = StateGraph(MessagesState)
builder.add_node("model", call_model)
builder.add_node("tools", ToolNode([order_status]))
builder.add_edge(START, "model")
builder.add_conditional_edges("model", tools_condition)
builder.add_edge("tools", "model")
graph = builder.compile()
