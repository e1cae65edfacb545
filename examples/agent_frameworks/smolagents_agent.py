"""The calculator agent written with smolagents' ``ToolCallingAgent`` and ``OpenAIServerModel``.

smolagents keeps its memory as steps and renders them anew for every model call (its tool calls
come back as assistant text, their results as user messages), so each call is a segment of its
own: it trains on the engines that train segments (``aworld-train engines``, docs/agents.md).
"""

from smolagents import OpenAIServerModel, ToolCallingAgent, tool


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers exactly.

    Args:
        a: the first factor.
        b: the second factor.
    """
    return a * b


def run(row, llm):
    model = OpenAIServerModel(model_id=llm.model, api_base=llm.base_url, api_key=llm.api_key)
    agent = ToolCallingAgent(tools=[multiply], model=model, max_steps=3, verbosity_level=0)
    return str(agent.run(row["prompt"]))
