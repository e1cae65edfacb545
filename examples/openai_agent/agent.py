"""A calculator agent written with the OpenAI SDK alone, as a user writes one: no framework.

aworld-train calls ``run(row, llm)`` once per episode. ``llm.base_url`` is the policy being
trained (during training) or evaluated (during ``aworld-train eval``); outside aworld-train the
same function runs against any OpenAI-compatible server. The final answer is what the reward
scores.
"""

import json

from openai import AsyncOpenAI

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "multiply",
            "description": "Multiply two integers exactly.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        },
    }
]

SYSTEM = (
    "Never do arithmetic in your head: call multiply, then give the final number as "
    "<answer>NUMBER</answer>."
)


def multiply(a: int, b: int) -> int:
    return a * b


async def run(row, llm):
    client = AsyncOpenAI(base_url=llm.base_url, api_key=llm.api_key)
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": row["prompt"]}]
    for _ in range(4):
        reply = await client.chat.completions.create(
            model=llm.model, messages=messages, tools=TOOLS, max_tokens=128
        )
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return message.content or ""
        for call in message.tool_calls:
            try:
                result = str(multiply(**json.loads(call.function.arguments)))
            except (TypeError, ValueError) as error:
                result = f"Error: {error}"
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return ""
