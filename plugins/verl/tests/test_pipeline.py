"""The pipeline a GPU run goes through, proven on the CPU with VeRL's own workers.

The job is checked by the engine's hooks; then VeRL's ``RLHFDataset`` reads the converted
parquet, VeRL's ``AgentLoopWorker`` runs its single-turn agent loop on it, VeRL's
``RewardLoopWorker`` scores each output with the user's reward as wired into the saved config,
and VeRL's GRPO advantage estimator turns the scores into advantages.

Only the token generator is fake: :class:`FakeTokenClient` stands in for vLLM, which needs a
GPU. It answers each prompt twice, first right and then wrong, so the rewards and the GRPO
advantages have known signs.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
from aworld_train.agent import AgentSpec
from aworld_train.reward import RewardFunction, RewardSpec
from conftest import Checks, LocalActorHandle, dataset, make_ctx, repeat_rows


class FakeTokenClient:
    """A fake in place of vLLM's server manager (no GPU here): it answers "Repeat: d" with the
    digit the first time it sees a prompt and with the next digit after that."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.seen: Counter[str] = Counter()
        self.calls = 0

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any
    ) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        self.calls += 1
        prompt = self.tokenizer.decode(prompt_ids)
        digit = int(re.findall(r"Repeat: (\d)", prompt)[-1])
        answer = digit if self.seen[prompt] == 0 else (digit + 1) % 10
        self.seen[prompt] += 1
        ids = self.tokenizer.encode(str(answer), add_special_tokens=False) + [
            self.tokenizer.eos_token_id
        ]
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), stop_reason="completed")


def test_agent_loop_reward_loop_and_grpo_on_cpu(
    tmp_path: Path, tiny_model: Path, reward_file: Path
) -> None:
    import importlib.util

    from aworld_train_verl.agent import load_tokenizer
    from verl import DataProto
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
    from verl.trainer.ppo.core_algos import AdvantageEstimator
    from verl.trainer.ppo.ray_trainer import compute_advantage
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    spec = importlib.util.spec_from_file_location("pipeline_rewards", reward_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    reward = RewardSpec(
        [RewardFunction("rewards.py:exact", module.exact, 1.0, f"{reward_file}:exact")]
    )
    checks = Checks(make_ctx(tmp_path / "run", tiny_model, verl={"reward": {"num_workers": 1}}))
    cfg = checks.check_job(
        AgentSpec(system_prompt="Answer with the digit."), dataset(repeat_rows(4)), reward
    ).config
    n = int(cfg.actor_rollout_ref.rollout.n)
    assert n == 2

    tokenizer = load_tokenizer(str(tiny_model))
    data = RLHFDataset(data_files=[cfg.data.train_files], tokenizer=tokenizer, config=cfg.data)
    batch = DataProto.from_single_dict(collate_fn([data[i] for i in range(len(data))]))
    batch.non_tensor_batch["uid"] = np.array(
        [str(uuid.uuid4()) for _ in range(len(batch))], dtype=object
    )
    batch = batch.repeat(repeat_times=n, interleave=True)
    client = FakeTokenClient(tokenizer)

    async def rollout() -> Any:
        reward_worker = RewardLoopWorker(cfg)
        worker = AgentLoopWorker(
            cfg, llm_client=client, reward_loop_worker_handles=[LocalActorHandle(reward_worker)]
        )
        return await worker.generate_sequences(batch)

    output = asyncio.run(rollout())
    assert client.calls == 4 * n

    scores = output.batch["rm_scores"].sum(dim=-1).tolist()
    # The two samples of a prompt run concurrently: either may reach the fake first and answer
    # right, so each pair holds one right and one wrong answer in either order.
    pairs = [sorted(scores[i : i + n]) for i in range(0, len(scores), n)]
    assert pairs == [[0.0, 1.0]] * 4, "one answer to each prompt is right, the other wrong"
    assert output.non_tensor_batch["acc"].tolist() == scores

    trained = batch.union(output)
    trained.batch["token_level_rewards"] = trained.batch["rm_scores"]
    advantaged = compute_advantage(trained, adv_estimator=AdvantageEstimator.GRPO, num_repeat=n)
    mask = advantaged.batch["response_mask"].bool()
    per_sample = [advantaged.batch["advantages"][i][mask[i]] for i in range(len(advantaged))]
    for i, values in enumerate(per_sample):
        assert values.numel() > 0
        assert (values > 0).all() if scores[i] == 1.0 else (values < 0).all()
