"""train: GRPO and SFT of a LoRA adapter through the service.

Each GRPO step saves the adapter for sampling, samples ``num_generations`` completions of each
prompt with the service's sampler (:mod:`.sampling`), scores them here with the job's reward
and sends them with their group's advantages to ``forward_backward`` (:mod:`.grpo`), then
``optim_step``. SFT sends prompt and answer with the prompt's tokens weighted 0
(``cross_entropy``).
"""

from __future__ import annotations

import math
import time
from typing import Any

from aworld_train.engine import AgentSpec, RewardSpec, RunContext, ToolSet, append_samples

from aworld_train_tinker.calls import wait
from aworld_train_tinker.checkpoints import download_adapter, open_training_client, save_checkpoint
from aworld_train_tinker.config import TinkerJob
from aworld_train_tinker.datum import datum
from aworld_train_tinker.grpo import grpo_data
from aworld_train_tinker.rows import batch_indices, sft_example
from aworld_train_tinker.sampling import episode_groups, sample_groups, uses_runtime
from aworld_train_tinker.service import service_url


def total_steps(job: TinkerJob, rows: int) -> int:
    return job.max_steps or max(1, math.ceil(job.num_epochs * rows / job.prompts_per_step))


def run_training(
    agent: AgentSpec,
    tools: ToolSet,
    rows: list[dict[str, Any]],
    reward: RewardSpec | None,
    job: TinkerJob,
    ctx: RunContext,
    tokenizer: Any,
) -> dict[str, Any]:
    import tinker

    url = service_url(job)
    service = tinker.ServiceClient(base_url=url, api_key=job.api_key())
    client, done = open_training_client(service, job, ctx.resume_from, url)
    total = total_steps(job, len(rows))
    ctx.metrics.start(total, completed=done)
    for step in range(done + 1, total + 1):
        began = time.monotonic()
        batch = [rows[i] for i in batch_indices(len(rows), job.prompts_per_step, step, job.seed)]
        samples: list[dict[str, Any]] = []
        if job.algorithm == "grpo":
            assert reward is not None  # check_reward refuses GRPO without one
            sampler = wait(client.save_weights_and_get_sampling_client_submit(),
                           "saving the adapter for sampling", url, job.request_timeout)  # fmt: skip
            episodes = uses_runtime(agent, tools)
            if episodes:
                groups = episode_groups(sampler, batch, agent, tools, tokenizer, job, url)
            else:
                groups = sample_groups(sampler, batch, agent, tokenizer, job, step, url)
            data, metrics, samples = grpo_data(groups, batch, reward, job, episodes)
        else:
            data, metrics = sft_data(batch, agent.system_prompt, tokenizer), {}
        rate = job.learning_rate_at(step, total)
        # Every group scored alike (no advantage anywhere): nothing to train, a loss of 0.
        metrics["loss"] = train_step(client, data, job, rate, url) if data else 0.0
        metrics.update(learning_rate=rate, step_seconds=time.monotonic() - began)
        if step % job.logging_steps == 0 or step == total:
            ctx.metrics.log(step, metrics)
            append_samples(ctx.run_dir, step, samples[: job.log_samples])
        if job.save_steps and step % job.save_steps == 0:
            save_checkpoint(client, job, ctx.run_dir, step, url)
    download_adapter(service, client, job, ctx.run_dir, url)
    return ctx.metrics.last()


def sft_data(batch: list[dict[str, Any]], system_prompt: str | None, tokenizer: Any) -> list[Any]:
    data = []
    for row in batch:
        tokens, weights = sft_example(tokenizer, row, system_prompt)
        data.append(datum(tokens, weights=weights))
    return data


def train_step(
    client: Any, data: list[Any], job: TinkerJob, learning_rate: float, url: str
) -> float:
    """One ``forward_backward`` and ``optim_step``; returns the loss: GRPO's objective as the
    advantages' scaling aggregates it, SFT's per answer token."""
    from tinker import types

    backward = client.forward_backward(data, job.loss_fn)
    step = client.optim_step(types.AdamParams(learning_rate=learning_rate))
    result = wait(backward, "forward_backward", url, job.request_timeout)
    wait(step, "optim_step", url, job.request_timeout)
    # The service returns each token's loss; its metrics may be empty (SkyRL tx's are).
    losses = [_values(output["elementwise_loss"]) for output in result.loss_fn_outputs]
    if job.algorithm == "grpo":
        return sum(sum(values) for values in losses)
    weights = [_values(example.loss_fn_inputs["weights"]) for example in data]
    total = sum(loss * w for ls, ws in zip(losses, weights) for loss, w in zip(ls, ws))
    count = sum(sum(ws) for ws in weights)
    return total / count if count else 0.0


def _values(data: Any) -> list[float]:
    return [float(x) for x in (data.tolist() if hasattr(data, "tolist") else data)]
