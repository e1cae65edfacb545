"""GRPO's completions, a group per prompt, from the service's sampler: the prompt's tokens
sampled directly for a single-turn agent, or the user's agent run by the core's agent runtime
(tools, several turns, an AWorld or Python agent), its model calls answered by the sampler with
the exact tokens and log-probabilities it returned."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from aworld_train.engine import AgentSpec, ToolSet
from aworld_train.engine.runtime import AgentRuntime, ChatRenderer, Generated, Limits, model_name

from aworld_train_tinker.calls import wait
from aworld_train_tinker.config import TinkerJob
from aworld_train_tinker.rows import prompt_ids


@dataclass
class Segment:
    """Tokens trained as one sequence: the prompt, then the response with the policy's tokens
    marked 1 (the tools' and the environment's 0) and the log-prob each was sampled with."""

    prompt: list[int]
    response: list[int]
    mask: list[int]
    logprobs: list[float]


@dataclass
class Completion:
    """One try at a prompt: what the reward scores and what trains."""

    text: str
    segments: list[Segment]
    failure: str | None = None

    @property
    def tokens(self) -> int:
        return sum(sum(segment.mask) for segment in self.segments)


def uses_runtime(agent: AgentSpec, tools: ToolSet) -> bool:
    """Whether the agent needs the runtime: tools, several turns, or code of its own."""
    return bool(tools) or agent.max_turns > 1 or agent.runs_itself


def sample_groups(
    sampler: Any, batch: list[dict[str, Any]], agent: AgentSpec, tokenizer: Any,
    job: TinkerJob, step: int, url: str,
) -> list[list[Completion]]:  # fmt: skip
    """Each prompt rendered and sampled ``num_generations`` times in one call."""
    from tinker import types

    prompts = [prompt_ids(tokenizer, row["prompt"], agent.system_prompt) for row in batch]
    futures = [
        sampler.sample(
            prompt=types.ModelInput.from_ints(ids),
            num_samples=job.num_generations,
            sampling_params=_params(job, tokenizer, job.max_completion_length,
                                    sample_seed(job, step, index)),
        )
        for index, ids in enumerate(prompts)
    ]  # fmt: skip
    groups = []
    for ids, future in zip(prompts, futures):
        sequences = wait(future, "sample", url, job.request_timeout).sequences
        groups.append(
            [
                Completion(
                    tokenizer.decode(s.tokens, skip_special_tokens=True),
                    [Segment(ids, list(s.tokens), [1] * len(s.tokens), list(s.logprobs))],
                )
                for s in sequences
            ]
        )
    return groups


def episode_groups(
    sampler: Any, batch: list[dict[str, Any]], agent: AgentSpec, tools: ToolSet,
    tokenizer: Any, job: TinkerJob, url: str,
) -> list[list[Completion]]:  # fmt: skip
    """``num_generations`` episodes of the agent per prompt, run all at once."""

    async def generate(prompt: list[int], max_tokens: int) -> Generated:
        from tinker import types

        future = sampler.sample(
            prompt=types.ModelInput.from_ints(prompt),
            num_samples=1,
            sampling_params=_params(job, tokenizer, max_tokens, None),
        )
        # The SDK's futures block: wait in a thread, so the runtime keeps serving the others.
        result = await asyncio.to_thread(wait, future, "sample", url, job.request_timeout)
        sequence = result.sequences[0]
        return Generated(list(sequence.tokens), list(sequence.logprobs))

    runtime = AgentRuntime(
        agent, tools, ChatRenderer(tokenizer), generate,
        Limits(max_turns=agent.max_turns, max_tokens=job.max_completion_length,
               timeout=job.request_timeout),
        model=model_name(job.base_model),
    )  # fmt: skip
    rows = [row for row in batch for _ in range(job.num_generations)]
    episodes = runtime.run(rows)
    completions = [
        Completion(
            episode.answer,
            [Segment(s.prompt_ids, s.response_ids, s.mask, s.logprobs) for s in episode.segments],
            episode.failure,
        )
        for episode in episodes
    ]
    size = job.num_generations
    return [completions[i : i + size] for i in range(0, len(completions), size)]


def _params(job: TinkerJob, tokenizer: Any, max_tokens: int, seed: int | None) -> Any:
    from tinker import types

    return types.SamplingParams(
        max_tokens=max_tokens,
        temperature=job.temperature,
        stop=[tokenizer.eos_token_id],
        seed=seed,
    )


def sample_seed(job: TinkerJob, step: int, prompt: int) -> int:
    """The seed of one prompt's group: reproducible, and apart from every other group's by
    ``num_generations`` (SkyRL tx seeds the group's n-th sample with seed + n)."""
    group = (step - 1) * job.prompts_per_step + prompt
    return (job.seed * 1_000_003 + group * job.num_generations) % 2**31
