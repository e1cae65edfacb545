"""train: GRPO and SFT of a LoRA adapter through the service.

Each GRPO step saves the adapter for sampling, samples ``num_generations`` completions of each
prompt with the service's sampler (tokens and their log-probabilities as returned), scores them
here with the job's reward, and sends every completion with its group's advantage to
``forward_backward`` (the ``importance_sampling`` or ``ppo`` loss), then ``optim_step``. SFT sends
prompt and answer with the prompt's tokens weighted 0 (``cross_entropy``).
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any

from aworld_train.engine import RewardSpec, RunContext, append_samples

from aworld_train_tinker.calls import wait
from aworld_train_tinker.checkpoints import download_adapter, open_training_client, save_checkpoint
from aworld_train_tinker.config import TinkerJob
from aworld_train_tinker.rows import batch_indices, prompt_ids, sft_example
from aworld_train_tinker.service import service_url


def total_steps(job: TinkerJob, rows: int) -> int:
    per_step = job.prompts_per_step if job.algorithm == "grpo" else job.batch_size
    return job.max_steps or max(1, math.ceil(job.num_epochs * rows / per_step))


def run_training(
    system_prompt: str | None,
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
    per_step = job.prompts_per_step if job.algorithm == "grpo" else job.batch_size
    for step in range(done + 1, total + 1):
        began = time.monotonic()
        batch = [rows[i] for i in batch_indices(len(rows), per_step, step, job.seed)]
        if job.algorithm == "grpo":
            assert reward is not None  # check_reward refuses GRPO without one
            datums, metrics, samples = grpo_batch(
                client, batch, reward, system_prompt, tokenizer, job, step, url
            )
        else:
            datums, metrics, samples = sft_batch(batch, system_prompt, tokenizer), {}, []
        if datums:
            metrics["loss"] = train_step(
                client, datums, job, job.learning_rate_at(step, total), url
            )
        metrics["learning_rate"] = job.learning_rate_at(step, total)
        metrics["step_seconds"] = time.monotonic() - began
        if step % job.logging_steps == 0 or step == total:
            ctx.metrics.log(step, metrics)
            append_samples(ctx.run_dir, step, samples[: job.log_samples])
        if job.save_steps and step % job.save_steps == 0:
            save_checkpoint(client, job, ctx.run_dir, step, url)
    download_adapter(service, client, job, ctx.run_dir, url)
    return ctx.metrics.last()


def train_step(
    client: Any, datums: list[Any], job: TinkerJob, learning_rate: float, url: str
) -> float:
    """One ``forward_backward`` and ``optim_step``; returns the loss: GRPO's objective as the
    advantages' scaling aggregates it, SFT's per answer token."""
    from tinker import types

    backward = client.forward_backward(datums, job.loss_fn)
    step = client.optim_step(types.AdamParams(learning_rate=learning_rate))
    result = wait(backward, "forward_backward", url, job.request_timeout)
    wait(step, "optim_step", url, job.request_timeout)
    # The service returns each token's loss; its metrics may be empty (SkyRL tx's are).
    total = weights = 0.0
    for datum, output in zip(datums, result.loss_fn_outputs):
        losses = _values(output["elementwise_loss"])
        mask = _weights(datum)
        total += sum(loss * w for loss, w in zip(losses, mask))
        weights += sum(mask)
    if job.algorithm == "grpo":
        return total
    return total / weights if weights else 0.0


def _weights(datum: Any) -> list[float]:
    """Which tokens the loss counts: SFT's weights, GRPO's completion tokens."""
    inputs = datum.loss_fn_inputs
    if "weights" in inputs:
        return [float(w) for w in _values(inputs["weights"])]
    return [float(a != 0.0) for a in _values(inputs["advantages"])]


def _values(data: Any) -> list[float]:
    return data.tolist() if hasattr(data, "tolist") else list(data)


def _datum(tokens: list[int], **per_token: list[float]) -> Any:
    """A ``Datum`` predicting ``tokens[1:]`` from ``tokens[:-1]``, each per-token input shifted
    alike."""
    from tinker import types

    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={"target_tokens": tokens[1:], **{k: v[1:] for k, v in per_token.items()}},
    )


def sft_batch(batch: list[dict[str, Any]], system_prompt: str | None, tokenizer: Any) -> list[Any]:
    data = []
    for row in batch:
        tokens, weights = sft_example(tokenizer, row, system_prompt)
        data.append(_datum(tokens, weights=weights))
    return data


def grpo_batch(
    client: Any,
    batch: list[dict[str, Any]],
    reward: RewardSpec,
    system_prompt: str | None,
    tokenizer: Any,
    job: TinkerJob,
    step: int,
    url: str,
) -> tuple[list[Any], dict[str, float], list[dict[str, Any]]]:
    """Sample a group per prompt, score it, and turn it into datums with group advantages."""
    from tinker import types

    sampler = wait(
        client.save_weights_and_get_sampling_client_submit(),
        "saving the adapter for sampling",
        url,
        job.request_timeout,
    )
    prompts = [prompt_ids(tokenizer, row["prompt"], system_prompt) for row in batch]
    futures = [
        sampler.sample(
            prompt=types.ModelInput.from_ints(ids),
            num_samples=job.num_generations,
            sampling_params=types.SamplingParams(
                max_tokens=job.max_completion_length,
                temperature=job.temperature,
                stop=[tokenizer.eos_token_id],
                seed=sample_seed(job, step, index),
            ),
        )
        for index, ids in enumerate(prompts)
    ]
    scores, lengths, samples, groups = [], [], [], []
    extra: dict[str, list[float]] = {}
    for row, ids, future in zip(batch, prompts, futures):
        sequences = wait(future, "sample", url, job.request_timeout).sequences
        group = []
        for sequence in sequences:
            text = tokenizer.decode(sequence.tokens, skip_special_tokens=True)
            result = reward.score(
                row.get("data_source") or "", text, str(row["ground_truth"]), row.get("extra_info")
            )
            group.append(result.score)
            for name, value in result.metrics.items():
                extra.setdefault(name, []).append(value)
            lengths.append(len(sequence.tokens))
            rewards = {
                name.removeprefix("rewards/"): value
                for name, value in result.metrics.items()
                if name.startswith("rewards/")
            }
            samples.append(
                {"prompt": row["prompt"], "completion": text, "reward": result.score,
                 "rewards": rewards}
            )  # fmt: skip
        scores.extend(group)
        groups.append((ids, sequences, advantages(group, job.scale_rewards)))
    data = []
    for ids, sequences, group_advantages in groups:
        for sequence, advantage in zip(sequences, group_advantages):
            if advantage == 0.0:
                continue  # no signal: the whole group scored alike
            tokens = len(sequence.tokens)
            scaled = advantage * aggregation_scale(job, tokens, lengths)
            prompt_zeros = [0.0] * len(ids)
            data.append(
                _datum(
                    ids + list(sequence.tokens),
                    logprobs=prompt_zeros + list(sequence.logprobs),
                    advantages=prompt_zeros + [scaled] * tokens,
                )
            )
    metrics = {
        "reward": statistics.fmean(scores),
        "reward_std": statistics.pstdev(scores),
        "completion_length": statistics.fmean(lengths),
        "trained_completions": float(len(data)),
        **{name: statistics.fmean(values) for name, values in extra.items()},
    }
    return data, metrics, samples


def aggregation_scale(job: TinkerJob, tokens: int, lengths: list[int]) -> float:
    """The factor on a completion's advantage that makes the service's per-token sum the
    job's ``loss_aggregation`` over the batch (``lengths``: every completion's tokens)."""
    if job.loss_aggregation == "token-mean":
        return 1.0 / max(sum(lengths), 1)
    if job.loss_aggregation == "seq-mean-token-mean":
        return 1.0 / (max(tokens, 1) * len(lengths))
    if job.loss_aggregation == "seq-mean-token-sum-norm":
        return 1.0 / (job.max_completion_length * len(lengths))
    return 1.0 / len(lengths)  # seq-mean-token-sum


def sample_seed(job: TinkerJob, step: int, prompt: int) -> int:
    """The seed of one prompt's group: reproducible, and apart from every other group's by
    ``num_generations`` (SkyRL tx seeds the group's n-th sample with seed + n)."""
    group = (step - 1) * job.prompts_per_step + prompt
    return (job.seed * 1_000_003 + group * job.num_generations) % 2**31


def advantages(scores: list[float], scale: bool) -> list[float]:
    """Each score minus its group's mean, divided by the group's deviation when ``scale``."""
    mean = statistics.fmean(scores)
    deviation = statistics.pstdev(scores)
    if deviation == 0.0:
        return [0.0] * len(scores)
    return [(score - mean) / (deviation if scale else 1.0) for score in scores]
