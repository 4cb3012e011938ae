"""A support bot on pydantic-ai, with one tool, behind the gateway.

The gateway runs the agent's own `agent.iter(...)` for each turn, node by node: the history
goes in as `message_history` (converted from the transcript, the one history), the session
context as `instructions`, and each model response and tool result is stored as its node
completes. Install the bridge and name the agent:

    pip install 'sessiongate[pydantic-ai]'

    # sessiongate.yaml (this folder on PYTHONPATH)
    agents:
      support:
        kind: pydantic-ai
        entry: "support_pydantic_ai:agent"
        system_prompt: "You are the support desk of Example Ltd."
    bindings:
      - {platform: telegram, chat_id: "-1001234567890", agent: support}

The model server is any OpenAI-compatible one: `SUPPORT_BOT_BASE_URL` (default
`http://127.0.0.1:8080/v1`), `SUPPORT_BOT_MODEL` and `OPENAI_API_KEY` (a local server needs
none).
"""

from __future__ import annotations

import os

from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

ORDERS = {"1001": "shipped on Monday", "1002": "waiting for stock"}


def order_status(order_id: str) -> str:
    """The status of an order.

    Args:
        order_id: the order number printed on the receipt
    """
    return f"order {order_id}: {ORDERS.get(order_id, 'no such order')}"


client = AsyncOpenAI(
    base_url=os.environ.get("SUPPORT_BOT_BASE_URL", "http://127.0.0.1:8080/v1"),
    api_key=os.environ.get("OPENAI_API_KEY", "not-needed"),
)
agent = Agent(
    OpenAIChatModel(
        os.environ.get("SUPPORT_BOT_MODEL", "gpt-4o-mini"),
        provider=OpenAIProvider(openai_client=client),
    ),
    instructions="Answer questions about orders. Look an order up before you answer.",
)
agent.tool_plain(order_status)
