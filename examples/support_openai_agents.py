"""A support bot on the OpenAI Agents SDK, with one tool, behind the gateway.

The gateway runs the SDK's own `Runner.run_streamed` for each turn; the transcript stays the
one history (the SDK reads it through a `Session` of the gateway's), and every model response,
tool call and tool result is stored as it completes. Install the bridge and name the agent:

    pip install 'sessiongate[openai-agents]'

    # sessiongate.yaml (this folder on PYTHONPATH)
    agents:
      support:
        kind: openai-agents
        entry: "support_openai_agents:agent"
        system_prompt: "You are the support desk of Example Ltd."
    bindings:
      - {platform: telegram, chat_id: "-1001234567890", agent: support}

The model server is any OpenAI-compatible one: `SUPPORT_BOT_BASE_URL` (default
`http://127.0.0.1:8080/v1`), `SUPPORT_BOT_MODEL` and `OPENAI_API_KEY` (a local server needs
none). The SDK's tracing is turned off here, since it would post traces to OpenAI.
"""

from __future__ import annotations

import os

from openai import AsyncOpenAI

import agents

ORDERS = {"1001": "shipped on Monday", "1002": "waiting for stock"}


def order_status(order_id: str) -> str:
    """The status of an order.

    Args:
        order_id: the order number printed on the receipt
    """
    return f"order {order_id}: {ORDERS.get(order_id, 'no such order')}"


agents.set_tracing_disabled(True)
client = AsyncOpenAI(
    base_url=os.environ.get("SUPPORT_BOT_BASE_URL", "http://127.0.0.1:8080/v1"),
    api_key=os.environ.get("OPENAI_API_KEY", "not-needed"),
)
agent = agents.Agent(
    name="support",
    instructions="Answer questions about orders. Look an order up before you answer.",
    model=agents.OpenAIChatCompletionsModel(
        model=os.environ.get("SUPPORT_BOT_MODEL", "gpt-4o-mini"), openai_client=client
    ),
    model_settings=agents.ModelSettings(include_usage=True),
    tools=[agents.function_tool(order_status)],
)
