"""The plugin's agent loop run by VeRL's own ``AgentLoopWorker`` on the CPU, multi-turn, with the
calculator example's real MCP server over stdio and VeRL's reward loop scoring each episode.

Only the token generator is fake: :class:`ScriptedTokenClient` stands in for vLLM (no GPU here).
It answers a question with a tool call, and the tool's result with that result as the answer, so
the answer can only be right when the tool really ran.
"""

from __future__ import annotations

import asyncio
import importlib.util
import re
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import LocalActorHandle, dataset, make_ctx

from aworld_train.agent import load_agent
from aworld_train.reward import resolve_reward
from aworld_train.tools import close_sessions, resolve_tools
from aworld_train_verl import agent_loop, engine

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "calculator_agent"

SLOW_TOOL = '''
import time


def wait(seconds: float) -> str:
    """Wait, then say so.

    Args:
        seconds: how long.
    """
    time.sleep(seconds)
    return "waited"
'''


@pytest.fixture(scope="module")
def tool_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example's tiny model: a chat template that renders tools and tool calls."""
    from transformers import AutoTokenizer

    from aworld_train.testing import build_tiny_model

    spec = importlib.util.spec_from_file_location("calculator_prepare", EXAMPLE / "prepare.py")
    prepare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(prepare)
    model = build_tiny_model(tmp_path_factory.mktemp("tool-model"),
                             extra_tokens=("<tool_call>", "</tool_call>", "<answer>", "</answer>"))
    tokenizer = AutoTokenizer.from_pretrained(model)
    tokenizer.chat_template = prepare.CHAT_TEMPLATE
    tokenizer.save_pretrained(model)
    return model


CRASHING_SERVER = '''
import os

from mcp.server.fastmcp import FastMCP

server = FastMCP("crashing", log_level="WARNING")


@server.tool()
def crash() -> str:
    """Stop the server."""
    os._exit(1)


server.run("stdio")
'''


@pytest.fixture
def tools(tmp_path: Path) -> Any:
    """The example's calculator MCP server (stdio), a slow Python tool, and an MCP server that
    dies when its tool is called."""
    (tmp_path / "slow_tools.py").write_text(SLOW_TOOL)
    (tmp_path / "crashing.py").write_text(CRASHING_SERVER)
    spec = load_agent(EXAMPLE / "agent.yaml", EXAMPLE)
    spec.tools = [f"{tmp_path / 'slow_tools.py'}:wait"]
    spec.mcp_config["mcpServers"]["crashing"] = {"command": "python", "args": [str(tmp_path / "crashing.py")]}
    spec.mcp_servers.append("crashing")
    resolved = resolve_tools(spec, EXAMPLE)
    yield spec, resolved
    close_sessions()


class ScriptedTokenClient:
    """A fake in place of vLLM's server manager (no GPU here), scripted per episode: a question
    "What is A * B?" gets a multiply call, a tool response gets its number as the answer, and
    "Wait S seconds" gets an answer and a call of the slow tool in one turn.

    It records, per request, the token ids and log-probs it returned."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.returned: dict[str, list[tuple[list[int], list[float]]]] = defaultdict(list)
        self.prompts: dict[str, list[str]] = defaultdict(list)

    def _reply(self, prompt: str) -> str:
        responses = re.findall(r"<tool_response>\n(.*?)\n</tool_response>", prompt, re.DOTALL)
        if responses:
            return f"The product is <answer>{responses[-1].strip()}</answer>"
        question = prompt.rsplit("<|im_start|>user\n", 1)[-1]
        if match := re.search(r"What is (\d+) \* (\d+)\?", question):
            a, b = match.groups()
            return f'<tool_call>\n{{"name": "multiply", "arguments": {{"a": {a}, "b": {b}}}}}\n</tool_call>'
        if "Crash" in question:
            return '<answer>7</answer><tool_call>{"name": "crash", "arguments": {}}</tool_call>'
        seconds = re.search(r"Wait (\d+) seconds", question).group(1)
        return f'<answer>7</answer><tool_call>{{"name": "wait", "arguments": {{"seconds": {seconds}}}}}</tool_call>'

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        prompt = self.tokenizer.decode(prompt_ids)
        self.prompts[request_id].append(prompt)
        ids = self.tokenizer.encode(self._reply(prompt), add_special_tokens=False) + [self.tokenizer.eos_token_id]
        turn = len(self.returned[request_id])
        log_probs = [-(turn + 1) - position / 1000 for position in range(len(ids))]
        self.returned[request_id].append((ids, log_probs))
        return TokenOutput(token_ids=ids, log_probs=log_probs, stop_reason="completed")


def rollout(tmp_path: Path, model: Path, spec: Any, resolved: Any, rows: list[dict[str, Any]]) -> tuple[Any, Any, Any]:
    """Check the job with the engine's hooks, then run VeRL's agent-loop worker on its data with
    VeRL's reward loop; returns the worker's output, the fake client, and the composed config."""
    from verl import DataProto
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    from aworld_train_verl.agent import load_tokenizer

    ctx = make_ctx(tmp_path / "run", model, batch_size=len(rows), num_generations=1, max_prompt_length=2048,
                   max_completion_length=512, verl={"reward": {"num_workers": 1}})
    ctx.results["tools"] = resolved
    ctx.results["agent"] = engine.check_agent(spec, ctx)
    ctx.results["dataset"] = engine.check_dataset(dataset(rows), None, ctx)
    ctx.results["reward"] = engine.check_reward(resolve_reward("answer_match"), ctx)
    cfg = engine.check_config(ctx.config, ctx).config
    assert cfg.actor_rollout_ref.rollout.agent.agent_loop_config_path == str(tmp_path / "run" / "agent_loop.yaml")
    assert (tmp_path / "run" / "agent_tools.pkl").stat().st_mode & 0o077 == 0, "secrets stay the owner's"

    tokenizer = load_tokenizer(str(model))
    data = RLHFDataset(data_files=[cfg.data.train_files], tokenizer=tokenizer, config=cfg.data)
    batch = DataProto.from_single_dict(collate_fn([data[i] for i in range(len(data))]))
    batch.non_tensor_batch["uid"] = np.array([str(uuid.uuid4()) for _ in range(len(batch))], dtype=object)
    assert set(batch.non_tensor_batch["agent_name"]) == {"aworld_train_agent"}
    client = ScriptedTokenClient(tokenizer)

    async def run() -> Any:
        worker = AgentLoopWorker(cfg, llm_client=client,
                                 reward_loop_worker_handles=[LocalActorHandle(RewardLoopWorker(cfg))])
        return await worker.generate_sequences(batch)

    return asyncio.run(run()), client, cfg


def model_tokens(output: Any, i: int) -> tuple[list[int], list[float], list[int]]:
    """Sample ``i``'s response tokens under mask 1, their log-probs, and the tokens under mask 0."""
    responses = output.batch["responses"][i]
    mask = output.batch["response_mask"][i].bool()
    valid = output.batch["attention_mask"][i][-responses.numel():].bool()
    log_probs = output.batch["rollout_log_probs"][i]
    return responses[mask].tolist(), log_probs[mask].tolist(), responses[valid & ~mask].tolist()


def test_a_tool_episode_trains_on_the_models_exact_tokens(tmp_path: Path, tool_model: Path, tools: Any) -> None:
    spec, resolved = tools
    rows = [{"prompt": f"What is {a} * {b}?", "ground_truth": str(a * b), "data_source": "calculator"}
            for a, b in ((6411, 876), (123, 456))]
    output, client, _ = rollout(tmp_path, tool_model, spec, resolved, rows)

    assert len(client.returned) == 2, "one episode per row"
    assert all(len(turns) == 2 for turns in client.returned.values()), "a tool call, then the answer"
    # The answer turn saw the product, which only the MCP server computed.
    second_prompts = sorted(prompts[1] for prompts in client.prompts.values())
    shown = [re.findall(r"<tool_response>\n(.*?)\n</tool_response>", prompt) for prompt in second_prompts]
    assert sorted(shown) == sorted([[row["ground_truth"]] for row in rows])

    tokenizer = client.tokenizer
    returned = {tuple(i for ids, _ in turns for i in ids): [lp for _, lps in turns for lp in lps]
                for turns in client.returned.values()}
    for i in range(2):
        generated, log_probs, environment = model_tokens(output, i)
        assert tuple(generated) in returned, "mask 1 covers exactly the tokens the client returned"
        assert log_probs == pytest.approx(returned[tuple(generated)])
        shown = tokenizer.decode(environment)
        assert "<tool_response>" in shown and "<tool_call>" not in shown
        assert tokenizer.decode(generated).count("<tool_call>") == 1

    scores = output.batch["rm_scores"].sum(dim=-1).tolist()
    assert scores == [1.0, 1.0], "VeRL's reward loop scores the final answer with the job's reward"
    assert output.non_tensor_batch["agent_failed"].tolist() == [0.0, 0.0]
    assert output.non_tensor_batch["tool_calls"].tolist() == [1, 1]
    assert output.non_tensor_batch["__num_turns__"].tolist() == [4, 4]


def test_a_tool_that_times_out_or_whose_server_dies_ends_its_episode_with_reward_0(
    tmp_path: Path, tool_model: Path, tools: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec, resolved = tools
    monkeypatch.setattr(agent_loop, "DEFAULT_TIMEOUT", 0.5)
    rows = [{"prompt": "What is 12 * 34?", "ground_truth": "408", "data_source": "calculator"},
            {"prompt": "Wait 3 seconds", "ground_truth": "7", "data_source": "calculator"},
            {"prompt": "Crash now", "ground_truth": "7", "data_source": "calculator"}]
    output, client, _ = rollout(tmp_path, tool_model, spec, resolved, rows)

    failures = output.non_tensor_batch["agent_failure"].tolist()
    assert failures[0] is None
    assert "tool 'wait' did not answer within 0.5 s" in failures[1]
    assert "tool 'crash' of MCP server 'crashing'" in failures[2]
    assert output.non_tensor_batch["agent_failed"].tolist() == [0.0, 1.0, 1.0]
    # The failed turns hold a right answer, yet the failed episodes score 0.
    for i in (1, 2):
        generated, _, environment = model_tokens(output, i)
        assert "<answer>7</answer>" in client.tokenizer.decode(generated) and environment == []
    assert output.batch["rm_scores"].sum(dim=-1).tolist() == [1.0, 0.0, 0.0]


def test_tool_calls_are_read_as_the_chat_template_writes_them() -> None:
    content, calls = agent_loop.parse_tool_calls(
        'Let me compute.\n<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>'
        '<tool_call>{"name": "multiply", "arguments": {"a": 3}}</tool_call><|im_end|>'
    )
    assert content == "Let me compute."
    assert calls == [{"name": "add", "arguments": {"a": 1, "b": 2}}, {"name": "multiply", "arguments": {"a": 3}}]
    _, calls = agent_loop.parse_tool_calls("<tool_call>{not json}</tool_call>")
    assert "not valid JSON" in calls[0]["error"]
    assert agent_loop.parse_tool_calls("<answer>3</answer>") == ("<answer>3</answer>", [])
