"""Agents built with the frameworks' own code, as a user's module would build them, pointed
at the fake OpenAI-compatible server (`BASE_URL`, set by the tests before the gateway
starts). Loaded by entry point (`bots:support_agent`), so the tests go through the same path
a user's configuration does."""

from __future__ import annotations

BASE_URL = "http://127.0.0.1:9/v1"  # replaced by the tests
ORDERS = {"A-1": "shipped", "B-2": "waiting for stock"}
CALLS: list[str] = []  # each tool call made, in order (a resumed turn must not repeat one)
CLIENTS: list[object] = []  # HTTP clients the agents made, closed by the tests' teardown


def lookup_order(order_id: str) -> str:
    """Look an order up by its id.

    Args:
        order_id: the id printed on the receipt
    """
    CALLS.append(order_id)
    if order_id == "BOOM":
        raise RuntimeError("the order system is down")
    return f"order {order_id}: {ORDERS.get(order_id, 'unknown')}"


def delete_file(path: str) -> str:
    """Delete a file.

    Args:
        path: the file's path
    """
    CALLS.append(f"delete {path}")
    return f"deleted {path}"


def support_agent():
    """An OpenAI Agents SDK agent with one tool and a handoff to a billing agent."""
    from openai import AsyncOpenAI

    import agents

    agents.set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=BASE_URL, api_key="test-key", max_retries=0)
    CLIENTS.append(client)
    model = agents.OpenAIChatCompletionsModel(model="fake-model", openai_client=client)
    settings = agents.ModelSettings(include_usage=True)
    billing = agents.Agent(
        name="billing", instructions="You handle refunds.", model=model, model_settings=settings
    )
    return agents.Agent(
        name="support",
        instructions="You answer order questions.",
        model=model,
        model_settings=settings,
        tools=[agents.function_tool(lookup_order), agents.function_tool(delete_file)],
        handoffs=[billing],
    )


def guarded_agent():
    """The Agents SDK agent with `delete_file` marked `needs_approval` in code."""
    import agents

    agent = support_agent()
    marked = agents.function_tool(delete_file, needs_approval=True)
    return agent.clone(tools=[agents.function_tool(lookup_order), marked])


def pydantic_agent():
    """A pydantic-ai agent with the same tool."""
    from openai import AsyncOpenAI
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    client = AsyncOpenAI(base_url=BASE_URL, api_key="test-key", max_retries=0)
    CLIENTS.append(client)
    model = OpenAIChatModel("fake-model", provider=OpenAIProvider(openai_client=client))
    agent = Agent(model, instructions="You answer order questions.")
    agent.tool_plain(lookup_order)
    agent.tool_plain(delete_file)
    return agent


def guarded_pydantic():
    """The pydantic-ai agent with `delete_file` a deferred tool (`requires_approval=True`)."""
    from openai import AsyncOpenAI
    from pydantic_ai import Agent, DeferredToolRequests
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    client = AsyncOpenAI(base_url=BASE_URL, api_key="test-key", max_retries=0)
    CLIENTS.append(client)
    model = OpenAIChatModel("fake-model", provider=OpenAIProvider(openai_client=client))
    agent = Agent(
        model, instructions="You answer order questions.", output_type=[str, DeferredToolRequests]
    )
    agent.tool_plain(lookup_order)
    agent.tool_plain(requires_approval=True)(delete_file)
    return agent


def order_graph(checkpointer: object = None):
    """A LangGraph graph: a chat model node with the tool bound, and a tool node."""
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    tools = [tool(lookup_order), tool(delete_file)]
    model = ChatOpenAI(
        model="fake-model",
        base_url=BASE_URL,
        api_key="test-key",
        max_retries=0,
        stream_usage=True,
    ).bind_tools(tools)

    async def call_model(state: MessagesState) -> dict:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", call_model)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=checkpointer)


def interrupting_delete(path: str) -> str:
    """Delete a file, once a person agreed (LangGraph's `interrupt()`).

    Args:
        path: the file's path
    """
    from langgraph.types import interrupt

    decision = interrupt({"name": "delete_file", "args": {"path": path}})
    if not decision.get("approved"):
        return str(decision.get("message") or "denied")
    return delete_file(path)


def guarded_graph(checkpointer: object = None):
    """The LangGraph graph whose `delete_file` tool calls `interrupt()` first."""
    from langchain_core.tools import StructuredTool, tool
    from langchain_openai import ChatOpenAI
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    guarded = StructuredTool.from_function(interrupting_delete, name="delete_file")
    tools = [tool(lookup_order), guarded]
    model = ChatOpenAI(
        model="fake-model",
        base_url=BASE_URL,
        api_key="test-key",
        max_retries=0,
        stream_usage=True,
    ).bind_tools(tools)

    async def call_model(state: MessagesState) -> dict:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", call_model)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=checkpointer)


SAVER: list[object] = []  # the checkpointer a graph keeps across the tests' restarts


def saved_guarded_graph():
    """`guarded_graph` compiled with its own checkpointer (kept by this module, as a durable
    one is kept by its database across a restart)."""
    from langgraph.checkpoint.memory import InMemorySaver

    if not SAVER:
        SAVER.append(InMemorySaver())
    return guarded_graph(SAVER[0])
