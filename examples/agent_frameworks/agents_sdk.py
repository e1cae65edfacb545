"""The calculator agent written with the OpenAI Agents SDK, in its default form: the SDK's
default client, ``Agent(model=name)``, which calls the Responses API.

aworld-train calls ``run(row, llm)`` once per episode; outside aworld-train the same code runs
against any OpenAI-compatible server. The episode's model name (``llm.model``) is unique per
episode, so the default client (one for the whole process) reaches each episode's own policy.
"""

from agents import Agent, Runner, function_tool, set_default_openai_client, set_tracing_disabled
from openai import AsyncOpenAI

SYSTEM = "Call multiply, then give the final number as <answer>NUMBER</answer>."


@function_tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers exactly."""
    return a * b


async def run(row, llm):
    set_tracing_disabled(True)  # no trace upload while training
    set_default_openai_client(AsyncOpenAI(base_url=llm.base_url, api_key=llm.api_key))
    agent = Agent(name="calculator", instructions=SYSTEM, model=llm.model, tools=[multiply])
    result = await Runner.run(agent, row["prompt"], max_turns=4)
    return str(result.final_output)


async def run_chat_completions(row, llm):
    """The same agent on the ``chat/completions`` API, with a client of its own."""
    from agents import OpenAIChatCompletionsModel

    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=llm.base_url, api_key=llm.api_key)
    model = OpenAIChatCompletionsModel(model=llm.model, openai_client=client)
    agent = Agent(name="calculator", instructions=SYSTEM, model=model, tools=[multiply])
    result = await Runner.run(agent, row["prompt"], max_turns=4)
    return str(result.final_output)
