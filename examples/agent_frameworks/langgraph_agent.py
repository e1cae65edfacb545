"""The calculator agent written with LangGraph's prebuilt ReAct agent and LangChain's
``ChatOpenAI``: ``run`` calls the model plainly, ``run_streaming`` with ``streaming=True``
(every call then sends ``stream: true``)."""

from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent

SYSTEM = "Call multiply, then give the final number as <answer>NUMBER</answer>."


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers exactly."""
    return a * b


async def answer(row, llm, streaming):
    model = ChatOpenAI(
        model=llm.model, base_url=llm.base_url, api_key=llm.api_key, streaming=streaming
    )
    agent = create_react_agent(model, [multiply], prompt=SYSTEM)
    state = await agent.ainvoke({"messages": [("user", row["prompt"])]}, {"recursion_limit": 8})
    return state["messages"][-1].content


async def run(row, llm):
    return await answer(row, llm, streaming=False)


async def run_streaming(row, llm):
    return await answer(row, llm, streaming=True)
