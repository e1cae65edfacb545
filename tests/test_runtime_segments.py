"""An agent that rewrites the conversation it had sent (as smolagents does on every call) makes
an episode of several segments, each its request's conversation rendered as a prompt of its own
and the tokens generated for it; an engine that trains an episode as one sequence refuses it in
one line naming the message that changed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers", reason="the chat template renders the segments")

from aworld_train.agent import load_agent  # noqa: E402
from aworld_train.runtime import AgentRuntime, ChatRenderer, Generated, Limits  # noqa: E402

REWRITING_AGENT = '''
from openai import AsyncOpenAI


async def run(row, llm):
    """Each call re-renders the memory: the model's last turn comes back as user text."""
    client = AsyncOpenAI(base_url=llm.base_url, api_key=llm.api_key, max_retries=0)
    memory = [{"role": "system", "content": "Think step by step."}]
    task = {"role": "user", "content": row["prompt"]}
    said = ""
    for _ in range(3):
        messages = [*memory, task] + ([{"role": "user", "content": "Earlier: " + said}] if said else [])
        reply = await client.chat.completions.create(model=llm.model, messages=messages)
        said = reply.choices[0].message.content
    return said
'''


@pytest.fixture
def tokenizer(tiny_model: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model)


@pytest.fixture
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from aworld_train.testing.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def runtime(tmp_path: Path, tokenizer: Any, one_sequence: str = "") -> AgentRuntime:
    pytest.importorskip("openai")
    (tmp_path / "rewriting.py").write_text(REWRITING_AGENT)
    turn = list(tokenizer("7", add_special_tokens=False)["input_ids"]) + [tokenizer.eos_token_id]

    async def generate(prompt_ids: list[int], max_tokens: int) -> Generated:
        return Generated(turn, [-0.5] * len(turn))

    return AgentRuntime(
        load_agent(f"{tmp_path / 'rewriting.py'}:run"),
        None,
        ChatRenderer(tokenizer),
        generate,
        Limits(max_turns=4, max_tokens=64, timeout=60, one_sequence=one_sequence),
    )


def test_each_rewritten_request_starts_a_segment_rendered_as_the_agent_sent_it(
    tmp_path: Path, tokenizer: Any
) -> None:
    result = runtime(tmp_path, tokenizer).run([{"prompt": "Repeat: 7"}])[0]
    assert result.failure is None and result.answer == "7" and result.turns == 3
    renderer = ChatRenderer(tokenizer)
    system = {"role": "system", "content": "Think step by step."}
    task = {"role": "user", "content": "Repeat: 7"}
    prompts = [
        [system, task],
        [system, task, {"role": "user", "content": "Earlier: 7"}],
        [system, task, {"role": "user", "content": "Earlier: 7"}],
    ]
    # The second request rewrote the first (the model's turn became user text): a new segment;
    # the third repeats the second's conversation without the model's turn: a new one again.
    assert len(result.segments) == 3 and result.trajectory is result.segments[-1]
    for segment, messages in zip(result.segments, prompts):
        assert segment.prompt_ids == renderer.prompt_ids(messages, None)
        assert segment.mask == [1] * len(segment.response_ids) and segment.logprobs[0] == -0.5
    assert result.rewrite == ("message 2 (assistant) was '7' and is now 'Earlier: 7' (user)")


def test_an_engine_that_trains_one_sequence_refuses_the_rewrite_naming_the_message(
    tmp_path: Path, tokenizer: Any
) -> None:
    result = runtime(tmp_path, tokenizer, one_sequence="swift").run([{"prompt": "Repeat: 7"}])[0]
    assert result.failure == (
        "the agent rewrote the conversation it had sent (message 2 (assistant) was '7' and is "
        "now 'Earlier: 7' (user)); engine 'swift' trains an episode as one token sequence; "
        "engines that train each model call as a row (none installed here) can train it: see "
        "docs/agents.md"
    )
    assert len(result.segments) == 1


ID_RENDERING_AGENT = '''
from openai import AsyncOpenAI

TOOLS = [{"type": "function", "function": {"name": "multiply", "parameters": {"type": "object",
          "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}}]


async def run(row, llm):
    """As smolagents does: each call's id comes back in the agent's context as text."""
    client = AsyncOpenAI(base_url=llm.base_url, api_key=llm.api_key, max_retries=0)
    task = {"role": "user", "content": row["prompt"]}
    memory, ids = [], []
    for _ in range(2):
        reply = await client.chat.completions.create(
            model=llm.model, messages=[task, *memory], tools=TOOLS
        )
        calls = reply.choices[0].message.tool_calls
        ids += [call.id for call in calls]
        memory.append({"role": "user", "content": f"Calling tools: {[call.id for call in calls]}"})
    return " ".join(ids)
'''


def test_tool_call_ids_are_numbered_in_the_episode_so_a_replayed_episode_has_the_same_tokens(
    tmp_path: Path, tokenizer: Any
) -> None:
    pytest.importorskip("openai")
    (tmp_path / "ids.py").write_text(ID_RENDERING_AGENT)
    call = '<tool_call>\n{"name": "multiply", "arguments": {"a": 2, "b": 3}}\n</tool_call>'
    turn = list(tokenizer(call, add_special_tokens=False)["input_ids"]) + [tokenizer.eos_token_id]

    async def generate(prompt_ids: list[int], max_tokens: int) -> Generated:
        return Generated(turn, [-0.5] * len(turn))

    agents = AgentRuntime(
        load_agent(f"{tmp_path / 'ids.py'}:run"),
        None,
        ChatRenderer(tokenizer),
        generate,
        Limits(max_turns=4, max_tokens=256, timeout=60),
    )
    first, again = agents.run([{"prompt": "What is 2 * 3?"}] * 2)
    assert first.failure is None and first.answer == "call_0 call_1"
    assert [s.prompt_ids for s in first.segments] == [s.prompt_ids for s in again.segments]
