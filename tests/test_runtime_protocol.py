"""The endpoint speaks what OpenAI clients send, tested with the real ``openai`` client and the
tiny model generating greedily: a plain, a streamed and a Responses API request of the same
tool-calling conversation record the same tokens; stop sequences, log-probs, ``tool_choice``
and ``GET models`` behave as the OpenAI API does."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openai")
pytest.importorskip("torch", reason="the tiny model generates with transformers")

from aworld_train.runtime._endpoint import shared_endpoint  # noqa: E402
from aworld_train.runtime._episode import Episode, Generated, Limits  # noqa: E402
from aworld_train.runtime._trajectory import ChatRenderer  # noqa: E402

SYSTEM = "Use the calculator."
QUESTION = "What is 12 * 34?"
MULTIPLY = {
    "type": "function",
    "function": {
        "name": "multiply",
        "description": "Multiply two numbers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
    },
}
CALL = {"name": "multiply", "arguments": {"a": 12, "b": 34}}
ANSWER = "<answer>408</answer>"


@pytest.fixture(scope="module")
def taught(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny tool model, taught to call ``multiply`` on the question and then answer."""
    from aworld_train.testing.tiny_model import build_tiny_model
    from aworld_train.testing.tool_caller import teach_exchange

    model = build_tiny_model(tmp_path_factory.mktemp("taught") / "model", tools=True)
    prompt = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    teach_exchange(model, prompt, [MULTIPLY], {"type": "function", "function": CALL}, "408", ANSWER)
    return model


@pytest.fixture(scope="module")
def greedy(taught: Path) -> tuple[ChatRenderer, Callable[[list[int], int], Awaitable[Generated]]]:
    """The chat renderer and a generate function: the tiny model, greedy, with log-probs."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(taught)
    model = AutoModelForCausalLM.from_pretrained(taught).eval()

    async def generate(prompt_ids: list[int], max_tokens: int) -> Generated:
        with torch.no_grad():
            output = model.generate(
                torch.tensor([prompt_ids]),
                max_new_tokens=max_tokens,
                do_sample=False,
                output_scores=True,
                return_dict_in_generate=True,
                pad_token_id=tokenizer.pad_token_id,
            )
        ids = output.sequences[0, len(prompt_ids) :].tolist()
        logprobs = [
            float(torch.log_softmax(score[0].float(), -1)[token])
            for score, token in zip(output.scores, ids)
        ]
        end = ids.index(tokenizer.eos_token_id) + 1 if tokenizer.eos_token_id in ids else len(ids)
        return Generated(ids[:end], logprobs[:end])

    return ChatRenderer(tokenizer), generate


def run_episode(
    greedy: tuple[ChatRenderer, Any], agent: Callable[[Any], Awaitable[Any]]
) -> tuple[Episode, Any]:
    """Serve one episode and run ``agent(client)`` against it with the real AsyncOpenAI."""
    from openai import AsyncOpenAI

    renderer, generate = greedy

    async def main() -> tuple[Episode, Any]:
        endpoint = await shared_endpoint()
        episode = Episode(renderer, generate, Limits(max_turns=4, max_tokens=256), model="tiny")
        with endpoint.serve(episode) as url:
            client = AsyncOpenAI(base_url=url, api_key="-", max_retries=0)
            result = await agent(client)
        return episode, result

    return asyncio.run(main())


def recorded(episode: Episode) -> list[tuple[list[int], list[int], list[int], list[float]]]:
    return [(s.prompt_ids, s.response_ids, s.mask, s.logprobs) for s in episode.segments]


async def plain_chat(client: Any) -> list[Any]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": QUESTION},
    ]
    first = await client.chat.completions.create(model="tiny", messages=messages, tools=[MULTIPLY])
    message = first.choices[0].message
    messages.append(message.model_dump(exclude_none=True))
    call = message.tool_calls[0]
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "408"})
    second = await client.chat.completions.create(model="tiny", messages=messages, tools=[MULTIPLY])
    return [first, second]


async def streamed_chat(client: Any) -> list[Any]:
    """The same conversation streamed: the chunks are joined as LangChain and the OpenAI SDK's
    helpers join them."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": QUESTION},
    ]
    turns = []
    for _ in range(2):
        stream = await client.chat.completions.create(
            model="tiny",
            messages=messages,
            tools=[MULTIPLY],
            stream=True,
            stream_options={"include_usage": True},
        )
        content, calls, finish, usage = "", {}, None, None
        async for chunk in stream:
            usage = chunk.usage or usage
            for choice in chunk.choices:
                content += choice.delta.content or ""
                for call in choice.delta.tool_calls or []:
                    joined = calls.setdefault(call.index, {"id": call.id, "name": "", "args": ""})
                    joined["name"] += call.function.name or ""
                    joined["args"] += call.function.arguments or ""
                finish = choice.finish_reason or finish
        turns.append((content, calls, finish, usage))
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c["args"]},
                }
                for c in calls.values()
            ]
        messages.append(message)
        for c in calls.values():
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": "408"})
    return turns


def responses_tools() -> list[dict[str, Any]]:
    return [{"type": "function", **MULTIPLY["function"]}]


async def responses_api(client: Any) -> list[Any]:
    """The Responses API as the Agents SDK calls it: instructions, input items, the model's
    function call and its output sent back as items."""
    items: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    first = await client.responses.create(
        model="tiny", instructions=SYSTEM, input=items, tools=responses_tools()
    )
    call = next(item for item in first.output if item.type == "function_call")
    items += [item.model_dump(exclude_none=True) for item in first.output]
    items.append({"type": "function_call_output", "call_id": call.call_id, "output": "408"})
    second = await client.responses.create(
        model="tiny", instructions=SYSTEM, input=items, tools=responses_tools()
    )
    return [first, second]


async def responses_chained(client: Any) -> list[Any]:
    """The Responses API with ``previous_response_id`` and streamed events."""
    first = None
    async with client.responses.stream(
        model="tiny",
        instructions=SYSTEM,
        input=[{"role": "user", "content": QUESTION}],
        tools=responses_tools(),
    ) as stream:
        first = await stream.get_final_response()
    call = next(item for item in first.output if item.type == "function_call")
    second = await client.responses.create(
        model="tiny",
        instructions=SYSTEM,
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "408"}],
        tools=responses_tools(),
    )
    return [first, second]


def test_plain_streamed_and_responses_requests_record_the_same_tokens(greedy: Any) -> None:
    plain, (first, second) = run_episode(greedy, plain_chat)
    assert first.choices[0].finish_reason == "tool_calls"
    call = first.choices[0].message.tool_calls[0].function
    assert (call.name, json.loads(call.arguments)) == (CALL["name"], CALL["arguments"])
    assert second.choices[0].message.content == ANSWER
    assert [segment.mask.count(0) > 0 for segment in plain.segments] == [True]  # the tool result

    streamed, turns = run_episode(greedy, streamed_chat)
    assert recorded(streamed) == recorded(plain)
    assert [finish for _, _, finish, _ in turns] == ["tool_calls", "stop"]
    assert turns[1][0] == ANSWER and turns[1][3].completion_tokens == second.usage.completion_tokens

    for agent in (responses_api, responses_chained):
        episode, (first, second) = run_episode(greedy, agent)
        assert recorded(episode) == recorded(plain), agent.__name__
        assert [item.type for item in first.output] == ["function_call"]
        assert second.output_text == ANSWER and second.status == "completed"


def test_a_stop_sequence_ends_the_turn_and_the_recorded_tokens_are_the_models_own(
    greedy: Any,
) -> None:
    async def stopping(client: Any) -> Any:
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
        return await client.chat.completions.create(
            model="tiny", messages=messages, tools=[MULTIPLY], stop=['"multiply"'], logprobs=True
        )

    unstopped, _ = run_episode(greedy, plain_chat)
    episode, reply = run_episode(greedy, stopping)
    renderer, _ = greedy
    segment, full = episode.segments[0], unstopped.segments[0]
    kept = len(segment.response_ids)
    assert 0 < kept < full.response_ids.index(renderer.eos_token_id)
    assert segment.response_ids == full.response_ids[:kept]  # a prefix of what the model wrote
    assert segment.logprobs == full.logprobs[:kept] and segment.mask == [1] * kept
    text = renderer.decode(segment.response_ids)
    assert text.endswith('"multiply"') and '"multiply"' not in reply.choices[0].message.content
    assert reply.choices[0].message.content == renderer.strip_special(text[: -len('"multiply"')])
    assert reply.choices[0].finish_reason == "stop"
    assert [t.logprob for t in reply.choices[0].logprobs.content] == segment.logprobs
    assert "".join(t.token for t in reply.choices[0].logprobs.content) == text


def test_tool_choice_none_returns_the_call_as_text_and_models_lists_the_policy(
    greedy: Any,
) -> None:
    async def no_tools(client: Any) -> Any:
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
        listed = [model.id async for model in client.models.list()]
        reply = await client.chat.completions.create(
            model="tiny", messages=messages, tools=[MULTIPLY], tool_choice="none"
        )
        return listed, reply

    _, (listed, reply) = run_episode(greedy, no_tools)
    assert listed == ["tiny"]
    message = reply.choices[0].message
    assert message.tool_calls is None and "<tool_call>" in message.content
    assert json.loads(message.content.split("<tool_call>")[1].split("</tool_call>")[0]) == CALL
