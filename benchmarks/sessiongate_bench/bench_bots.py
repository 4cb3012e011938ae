"""The agents the agent kinds section runs, one of each kind, each with the same tool, built
as a user's module would build them and loaded through `entry` like one.

They talk to the benchmark's model server at `$SESSIONGATE_BENCH_MODEL_URL`. A framework's
object is built once per process and shared by every session (its state is the transcript);
`close_clients()` closes their HTTP clients.
"""

from __future__ import annotations

import os
import time
from typing import Any

from sessiongate.gateway.agent import TurnRequest, TurnResult

__all__ = [
    "RAN",
    "langgraph_graph",
    "openai_agents_agent",
    "order_status",
    "pydantic_ai_agent",
    "python_agent",
    "refund_order",
]

ORDERS = {"1001": "shipped"}
# perf_counter() at each run of `refund_order` (the approval latency's end).
RAN: list[float] = []
_BUILT: dict[str, Any] = {}
_CLIENTS: list[Any] = []


def base_url() -> str:
    return os.environ.get("SESSIONGATE_BENCH_MODEL_URL", "http://127.0.0.1:9/v1")


def order_status(order_id: str) -> str:
    """The status of an order.

    Args:
        order_id: the order number
    """
    return f"order {order_id}: {ORDERS.get(order_id, 'unknown')}"


def refund_order(order_id: str) -> str:
    """Refund an order (needs a person's approval).

    Args:
        order_id: the order number
    """
    RAN.append(time.perf_counter())
    return f"order {order_id}: refunded"


class PythonAgent:
    """A sessiongate agent of one's own code: one chat completion per turn over httpx."""

    def __init__(self) -> None:
        import httpx

        self._http = httpx.AsyncClient(base_url=base_url(), timeout=60)

    async def run_turn(self, request: TurnRequest) -> TurnResult:
        messages = [{"role": "system", "content": request.system_prompt}, *request.messages]
        response = await self._http.post(
            "/chat/completions",
            json={"model": request.model or "bench", "messages": messages},
        )
        response.raise_for_status()
        return TurnResult(str(response.json()["choices"][0]["message"]["content"]))

    async def summarize(self, messages: list[dict[str, Any]]) -> str:
        return ""

    async def aclose(self) -> None:
        return None

    async def close(self) -> None:
        await self._http.aclose()


def python_agent() -> PythonAgent:
    if "python" not in _BUILT:
        _BUILT["python"] = agent = PythonAgent()
        _CLIENTS.append(agent)
    built: PythonAgent = _BUILT["python"]
    return built


def _openai_client() -> Any:
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=base_url(), api_key="bench", max_retries=0)
    _CLIENTS.append(client)
    return client


def openai_agents_agent() -> Any:
    """An OpenAI Agents SDK agent with the tool."""
    if "openai-agents" not in _BUILT:
        import agents

        agents.set_tracing_disabled(True)
        model = agents.OpenAIChatCompletionsModel(model="bench", openai_client=_openai_client())
        _BUILT["openai-agents"] = agents.Agent(
            name="support",
            instructions="You answer order questions.",
            model=model,
            model_settings=agents.ModelSettings(include_usage=True),
            tools=[agents.function_tool(order_status)],
        )
    return _BUILT["openai-agents"]


def pydantic_ai_agent() -> Any:
    """A pydantic-ai agent with the tool."""
    if "pydantic-ai" not in _BUILT:
        from pydantic_ai import Agent
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        provider = OpenAIProvider(openai_client=_openai_client())
        agent = Agent(
            OpenAIChatModel("bench", provider=provider), instructions="You answer order questions."
        )
        agent.tool_plain(order_status)
        _BUILT["pydantic-ai"] = agent
    return _BUILT["pydantic-ai"]


def langgraph_graph() -> Any:
    """A LangGraph graph: a chat model node with the tool bound, and a tool node."""
    if "langgraph" not in _BUILT:
        from langchain_core.tools import tool
        from langchain_openai import ChatOpenAI
        from langgraph.graph import START, MessagesState, StateGraph
        from langgraph.prebuilt import ToolNode, tools_condition

        tools = [tool(order_status)]
        chat = ChatOpenAI(
            model="bench", base_url=base_url(), api_key="bench", max_retries=0, stream_usage=True
        )
        _CLIENTS.append(chat.root_async_client)
        model = chat.bind_tools(tools)

        async def call_model(state: MessagesState) -> dict[str, Any]:
            return {"messages": [await model.ainvoke(state["messages"])]}

        builder = StateGraph(MessagesState)
        builder.add_node("model", call_model)
        builder.add_node("tools", ToolNode(tools))
        builder.add_edge(START, "model")
        builder.add_conditional_edges("model", tools_condition)
        builder.add_edge("tools", "model")
        _BUILT["langgraph"] = builder.compile()
    return _BUILT["langgraph"]


async def close_clients() -> None:
    for client in _CLIENTS:
        await client.close()
    _CLIENTS.clear()
    _BUILT.clear()
