"""Agent episodes run by VeRL's own ``AgentLoopWorker`` on the CPU, through the core's agent
runtime, for the agent-loop tests.

Only the token generator is fake: :class:`ScriptedTokenClient` stands in for vLLM (no GPU here).
It answers a question with a tool call, and the tool's result with that result as the answer, so
the answer can only be right when the tool really ran.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from aworld_train.reward import resolve_reward
from conftest import Checks, LocalActorHandle, dataset, make_ctx

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "calculator_agent"


def build_tool_model(folder: Path, num_heads: int = 4) -> Path:
    """The example's tiny model: a chat template that renders tools and tool calls.

    :param num_heads: 2 makes heads 32 wide, which vLLM's CPU build runs.
    """
    from aworld_train.engine.testing import build_tiny_model

    return build_tiny_model(
        folder,
        extra_tokens=("<answer>", "</answer>"),
        max_positions=4096,
        tools=True,
        num_heads=num_heads,
    )


class ScriptedTokenClient:
    """A fake in place of vLLM's server manager (no GPU here), scripted per episode: a question
    "What is A * B?" gets a multiply call, a tool response gets its number as the answer, and
    "Wait S seconds" gets an answer and a call of the slow tool in one turn, and "Sleep S seconds"
    gets an answer after S seconds.

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
        if "Sleep" in question:
            return "<answer>7</answer>"
        seconds = re.search(r"Wait (\d+) seconds", question).group(1)
        return f'<answer>7</answer><tool_call>{{"name": "wait", "arguments": {{"seconds": {seconds}}}}}</tool_call>'

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any
    ) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        prompt = self.tokenizer.decode(prompt_ids)
        self.prompts[request_id].append(prompt)
        if sleep := re.search(r"Sleep (\d+) seconds", prompt.rsplit("<|im_start|>user\n", 1)[-1]):
            await asyncio.sleep(int(sleep.group(1)))
        ids = self.tokenizer.encode(self._reply(prompt), add_special_tokens=False) + [
            self.tokenizer.eos_token_id
        ]
        turn = len(self.returned[request_id])
        log_probs = [-(turn + 1) - position / 1000 for position in range(len(ids))]
        self.returned[request_id].append((ids, log_probs))
        # As vLLM does: log-probs only when the rollout asks for them.
        return TokenOutput(
            token_ids=ids,
            log_probs=log_probs if sampling_params.get("logprobs") else None,
            stop_reason="completed",
        )


def rollout(
    tmp_path: Path, model: Path, spec: Any, resolved: Any, rows: list[dict[str, Any]]
) -> tuple[Any, Any, Any]:
    """Check the job with the engine's hooks, then run VeRL's agent-loop worker on its data with
    VeRL's reward loop; returns the worker's output, the fake client, and the composed config."""
    from aworld_train_verl.agent import load_tokenizer
    from verl import DataProto
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    ctx = make_ctx(
        tmp_path / "run",
        model,
        batch_size=len(rows),
        num_generations=1,
        max_prompt_length=2048,
        max_completion_length=512,
        verl={
            "reward": {"num_workers": 1},
            "actor_rollout_ref": {"rollout": {"calculate_log_probs": True}},
        },
    )
    cfg = (
        Checks(ctx, tools=resolved)
        .check_job(spec, dataset(rows), resolve_reward("answer_match"))
        .config
    )
    assert cfg.actor_rollout_ref.rollout.agent.agent_loop_config_path == str(
        tmp_path / "run" / "agent_loop.yaml"
    )
    shipped = (tmp_path / "run").glob("*.pkl")  # the tool set or the agent, when pickled
    assert all(path.stat().st_mode & 0o077 == 0 for path in shipped), "secrets stay the owner's"

    tokenizer = load_tokenizer(str(model))
    data = RLHFDataset(data_files=[cfg.data.train_files], tokenizer=tokenizer, config=cfg.data)
    batch = DataProto.from_single_dict(collate_fn([data[i] for i in range(len(data))]))
    batch.non_tensor_batch["uid"] = np.array(
        [str(uuid.uuid4()) for _ in range(len(batch))], dtype=object
    )
    assert set(batch.non_tensor_batch["agent_name"]) == {"aworld_train_agent"}
    client = ScriptedTokenClient(tokenizer)

    async def run() -> Any:
        worker = AgentLoopWorker(
            cfg,
            llm_client=client,
            reward_loop_worker_handles=[LocalActorHandle(RewardLoopWorker(cfg))],
        )
        return await worker.generate_sequences(batch)

    return asyncio.run(run()), client, cfg


def model_tokens(output: Any, i: int) -> tuple[list[int], list[float], list[int]]:
    """Sample ``i``'s response tokens under mask 1, their log-probs, and the tokens under mask 0."""
    responses = output.batch["responses"][i]
    mask = output.batch["response_mask"][i].bool()
    valid = output.batch["attention_mask"][i][-responses.numel() :].bool()
    log_probs = output.batch["rollout_log_probs"][i]
    return responses[mask].tolist(), log_probs[mask].tolist(), responses[valid & ~mask].tolist()


def assert_exact_tool_episodes(
    output: Any, client: ScriptedTokenClient, rows: list[dict[str, Any]]
) -> None:
    """Each row's episode called the multiply tool once and answered with what the MCP server
    computed; mask 1 covers exactly the tokens (and log-probs) the client returned, mask 0 the
    tool results; VeRL's reward loop scored each episode 1."""
    assert len(client.returned) == len(rows), "one episode per row"
    assert all(len(turns) == 2 for turns in client.returned.values()), (
        "a tool call, then the answer"
    )
    # The answer turn saw the product, which only the MCP server computed.
    second_prompts = sorted(prompts[1] for prompts in client.prompts.values())
    shown = [
        re.findall(r"<tool_response>\n(.*?)\n</tool_response>", prompt) for prompt in second_prompts
    ]
    assert sorted(shown) == sorted([[row["ground_truth"]] for row in rows])

    tokenizer = client.tokenizer
    returned = {
        tuple(i for ids, _ in turns for i in ids): [lp for _, lps in turns for lp in lps]
        for turns in client.returned.values()
    }
    for i in range(len(rows)):
        generated, log_probs, environment = model_tokens(output, i)
        assert tuple(generated) in returned, "mask 1 covers exactly the tokens the client returned"
        assert log_probs == pytest.approx(returned[tuple(generated)])
        shown = tokenizer.decode(environment)
        assert "<tool_response>" in shown and "<tool_call>" not in shown
        assert tokenizer.decode(generated).count("<tool_call>") == 1

    scores = output.batch["rm_scores"].sum(dim=-1).tolist()
    assert scores == [1.0] * len(rows), (
        "VeRL's reward loop scores the final answer with the job's reward"
    )
    assert output.non_tensor_batch["agent_failed"].tolist() == [0.0] * len(rows)
