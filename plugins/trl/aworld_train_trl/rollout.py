"""GRPO rollouts through the agent runtime: the user's agent, as it is, on TRL.

Every agent but a plain prompt runs here: an AWorld agent, a Python agent, and the spec form
with tools, whose tools the runtime's own chat loop calls.

TRL's ``GRPOTrainer`` takes a ``rollout_func(prompts, trainer)`` that returns, per prompt,
``prompt_ids``, ``completion_ids`` and ``logprobs``; other keys reach the reward functions, and
``env_mask`` marks the completion tokens the model did not write (0), which TRL leaves out of the
loss. Here each prompt is one episode of the agent (:class:`~aworld_train.engine.AgentRuntime`);
its model calls are answered by TRL's own model, with TRL's own generation settings, batched over
the episodes that ask at the same time, or by a vLLM engine the engine runs beside the trainer
(``trl.use_vllm`` on a CPU, where TRL's own vLLM needs CUDA), whose weights are loaded from the
policy before each step. The reward scores the agent's answer
(``agent_answer``); a failed episode (``agent_failure``) scores 0.

TRL hands ``rollout_func`` the prompts only; the agent gets the whole row, so
:class:`AgentGRPOTrainer` keeps the rows of the batch being generated. An episode the agent cut
into segments (it rewrote its conversation) gives TRL its last segment, and the trainer adds the
others as rows of their own after scoring (:mod:`aworld_train_trl.segments`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.engine.runtime import (
    AgentRuntime,
    BatchedGenerate,
    ChatRenderer,
    Generated,
    Limits,
    model_name,
    vllm_generation,
)

if TYPE_CHECKING:
    from aworld_train.engine import AgentSpec, ToolSet
    from aworld_train.engine.runtime import EpisodeResult

    from aworld_train_trl.agent import TrlAgent


def prompt_agent(agent: TrlAgent) -> AgentSpec:
    """A plain prompt as an agent the runtime runs: one turn, its messages the row's prompt
    (the dataset already holds the system prompt)."""
    from aworld_train.engine import AgentSpec

    return AgentSpec(name="prompt", max_turns=1)


def agent_trainer_class() -> type:
    """TRL's ``GRPOTrainer``, keeping the rows whose completions it is generating."""
    from trl import GRPOTrainer

    from aworld_train_trl.segments import SegmentRow, add_segment_rows

    class AgentGRPOTrainer(GRPOTrainer):
        rollout_rows: list[dict[str, Any]] = []
        rollout_segments: list[SegmentRow] = []

        def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> Any:
            self.rollout_rows, self.rollout_segments = inputs, []
            batch = super()._generate_and_score_completions(inputs)
            if self.rollout_segments:
                batch = add_segment_rows(self, batch, self.rollout_segments)
            return batch

    return AgentGRPOTrainer


class AgentRollout:
    """TRL's ``rollout_func`` for the agent ``spec``.

    :param spec: the agent.
    :param tools: its tools (the spec form calls them).
    :param tokenizer: the policy's tokenizer.
    :param model: the policy's folder or hub id (the name agents call it by).
    :param max_tokens: the most response tokens of an episode (``max_completion_length``).
    :param scratch: with vLLM rollouts, where the policy's weights pass to the vLLM engine;
        ``None`` for TRL's own model generating.
    """

    def __init__(
        self,
        spec: AgentSpec,
        tools: ToolSet | None,
        tokenizer: Any,
        model: str,
        max_tokens: int,
        scratch: Path | None = None,
    ) -> None:
        self.trainer: Any = None
        self.model = model
        self.scratch = scratch
        self.llm: Any = None
        self._synced_step: int | None = None
        self.generate = BatchedGenerate(self._generate_batch)
        self.runtime = AgentRuntime(
            spec,
            tools,
            ChatRenderer(tokenizer),
            self.generate,
            Limits(max_turns=spec.max_turns, max_tokens=max_tokens),
            model=model_name(model),
        )
        self.generate.runtime = self.runtime
        self.latest: list[EpisodeResult] = []  # the episodes of the batch generated last

    def records(self, count: int) -> list[dict[str, Any]]:
        """The first ``count`` episodes of the batch generated last, token by token
        (:meth:`~aworld_train.engine.EpisodeResult.record`), for ``samples.jsonl``."""
        return [result.record(self.runtime.renderer) for result in self.latest[:count]]

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        self.trainer = trainer
        if self.scratch is not None:
            self._sync_vllm(self.scratch)
        rows = getattr(trainer, "rollout_rows", None) or [{"prompt": p} for p in prompts]
        results = self.runtime.run([dict(row, prompt=prompt) for row, prompt in zip(rows, prompts)])
        self.latest = results
        if hasattr(trainer, "rollout_segments"):  # TRL's row is the last; the trainer adds these
            from aworld_train_trl.segments import SegmentRow

            trainer.rollout_segments = [
                SegmentRow(index, segment)
                for index, result in enumerate(results)
                for segment in result.segments[:-1]
            ]
        return {
            "prompt_ids": [r.trajectory.prompt_ids for r in results],
            "completion_ids": [r.trajectory.response_ids for r in results],
            "logprobs": [r.trajectory.logprobs for r in results],
            "env_mask": [r.trajectory.mask for r in results],
            "agent_answer": [r.answer for r in results],
            "agent_extra": [r.extra for r in results],
            "agent_failure": [r.failure for r in results],
            "agent_turns": [r.turns for r in results],
            "agent_tool_calls": [r.tool_messages for r in results],
            "agent_segments": [len(r.segments) for r in results],
        }

    def _generate_batch(self, prompts: list[list[int]], max_tokens: int) -> list[Generated]:
        if self.llm is None:
            return generate_with_trainer(self.trainer, prompts, max_tokens)
        greedy = self.trainer.generation_config.do_sample is False
        generated = vllm_generation.generate(
            self.llm,
            prompts,
            max_tokens,
            temperature=0.0 if greedy else self.trainer.temperature,
            top_p=self.trainer.top_p,
        )
        return [row[0] for row in generated]

    def _sync_vllm(self, scratch: Path) -> None:
        """Start the vLLM engine on the first rollout; before each later step's, load the
        policy's weights into it, so that the rollouts come from the model being trained."""
        step = self.trainer.state.global_step
        if self.llm is None:
            self.llm = vllm_generation.start_engine(self.model, seed=self.trainer.args.seed)
        elif step != self._synced_step:
            model = self.trainer.accelerator.unwrap_model(self.trainer.model)
            vllm_generation.sync_weights(self.llm, model, scratch)
        self._synced_step = step


def generate_with_trainer(
    trainer: Any, prompts: list[list[int]], max_tokens: int
) -> list[Generated]:
    """Continue each prompt with TRL's model and generation settings, as TRL's own
    transformers path does (left-padded batch, one ``generate`` call), keeping the log-prob of
    each sampled token after TRL's logits processing (temperature, top-p, ...)."""
    import torch
    from transformers import GenerationConfig
    from trl.models import unwrap_model_for_generation

    tokenizer = trainer.processing_class
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    width = max(len(prompt) for prompt in prompts)
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    attention = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    config = GenerationConfig(
        **{
            **trainer.generation_config.to_dict(),
            "max_new_tokens": max_tokens,
            "output_scores": True,
            "return_dict_in_generate": True,
        }
    )
    device = trainer.accelerator.device
    with (
        unwrap_model_for_generation(
            trainer.model_wrapped, trainer.accelerator, generation_kwargs=trainer.generation_kwargs
        ) as model,
        torch.no_grad(),
    ):
        output = model.generate(
            input_ids=ids.to(device), attention_mask=attention.to(device), generation_config=config
        )
    completions = output.sequences[:, width:].cpu()
    # scores: one (batch, vocab) tensor per generated position, after logits processing.
    logprobs = torch.stack([torch.log_softmax(s.float(), dim=-1) for s in output.scores], dim=1)
    chosen = logprobs.gather(-1, completions.unsqueeze(-1).to(logprobs.device)).squeeze(-1).cpu()
    eos = set(trainer.eos_token_ids)
    results = []
    for row, row_logprobs in zip(completions.tolist(), chosen.tolist()):
        end = next((i + 1 for i, token in enumerate(row) if token in eos), len(row))
        results.append(Generated(row[:end], row_logprobs[:end]))
    return results
