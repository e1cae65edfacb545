"""GRPO rollouts through the agent runtime: the user's agent, as it is, on ms-swift.

ms-swift's GRPO trainer takes a multi-turn scheduler by name (its ``multi_turn_scheduler``
argument, a key of its ``multi_turns`` registry). Without vLLM (colocate mode) the trainer hands
the scheduler the batch's requests (``on_trajectory_start``), generates a first turn itself, and
asks ``on_turn_end`` about each turn; what that returns may end the trajectory with its own
``response_token_ids``, ``response_loss_mask`` and ``rollout_logprobs``. :class:`AgentScheduler`
runs every episode of the batch in ``on_trajectory_start`` through the core's
:class:`~aworld_train.engine.AgentRuntime`, each model call answered by the trainer's own model
with swift's own generation settings (:func:`generate_with_trainer`), and ends each trajectory
after its first turn with the episode's tokens. swift's own first turn is then of no use: it is
cut to one token, and its text is replaced by the episode's.

swift encodes what it trains on with its template, from the sample's messages; the agent's
prompt was rendered by the model's chat template (its own system prompt, its tools), which
swift's template does not reproduce. The episode therefore travels in the sample's last
message (:data:`TRAJECTORY_KEY`), and a template registered for the job (the job's template
with one change, :func:`agent_template`) encodes such a sample as exactly the episode's tokens:
the prompt, then the response, labels on the model's tokens only. Every other input it encodes
as the job's template does.

The trainer is only known once swift has built it: the callback :data:`AGENT_CALLBACK` (swift
builds each callback with the trainer) hands it to the scheduler.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aworld_train.engine.runtime import (
    AgentRuntime,
    BatchedGenerate,
    ChatRenderer,
    EpisodeResult,
    Generated,
    Limits,
    model_name,
)

if TYPE_CHECKING:
    from aworld_train.engine import AgentSpec, ToolSet

#: The scheduler's name in swift's ``multi_turns`` registry.
AGENT_SCHEDULER = "aworld_train_agent"
#: The callback's name in swift's ``callbacks_map``.
AGENT_CALLBACK = "aworld_train_agent"
#: The prefix of the template registered for a job whose agent runs episodes.
TEMPLATE_PREFIX = "aworld_agent_"
#: The key of the sample's last message that holds the episode's tokens (JSON).
TRAJECTORY_KEY = "aworld_trajectory"
#: The dataset column holding each row's prompt as the job gave it (JSON), for the agent.
PROMPT_COLUMN = "aworld_prompt"
#: Columns of swift's dataset that are not the row's own.
_SWIFT_COLUMNS = ("solution", PROMPT_COLUMN)


@dataclass
class AgentRollouts:
    """What the scheduler of one run needs: the agent, and the trainer once swift built it.

    :ivar spec: the agent.
    :ivar tools: its tools (the spec form calls them; other forms bring their own).
    :ivar model: the policy's folder or hub id (the name agents call it by).
    :ivar trainer: swift's GRPO trainer, once built.
    :ivar runtime: the agent runtime, started at the first rollout.
    """

    spec: AgentSpec
    tools: ToolSet | None
    model: str
    trainer: Any = None
    runtime: AgentRuntime | None = field(default=None, repr=False)

    def run(self, rows: list[dict[str, Any]]) -> list[EpisodeResult]:
        """One episode per row. swift's metrics get the share that failed (``agent_failed``),
        their mean model turns (``agent_turns``; swift's own ``num_turns`` counts its
        scheduler's turns, one per episode) and their mean tool results
        (``tools/call_frequency``, as the trl engine logs it): it averages each key of its
        record over the logged steps."""
        if self.trainer is None:
            raise RuntimeError("the agent's scheduler ran before swift built its trainer")
        if self.runtime is None:
            self.runtime = self._start(self.trainer)
        results = self.runtime.run(rows)
        mode = "train" if self.trainer.model.training else "eval"
        count = max(len(results), 1)
        metrics = self.trainer._metrics[mode]
        metrics["agent_failed"].append(sum(r.failure is not None for r in results) / count)
        metrics["agent_turns"].append(sum(r.turns for r in results) / count)
        metrics["tools/call_frequency"].append(sum(r.tool_messages for r in results) / count)
        return results

    def filled(self, result: EpisodeResult) -> bool:
        """Whether the episode's response filled its token budget."""
        return (
            self.runtime is not None
            and len(result.trajectory.response_ids) >= self.runtime.limits.max_tokens
        )

    def _start(self, trainer: Any) -> AgentRuntime:
        """The runtime, its model calls answered by ``trainer``'s model, each episode's
        response bounded by ``max_completion_length``; swift's own first turn, which the
        episodes replace, is cut to one token."""
        trainer.request_config.max_tokens = 1
        generate = BatchedGenerate(
            lambda prompts, budget: generate_with_trainer(trainer, prompts, budget)
        )
        runtime = AgentRuntime(
            self.spec,
            self.tools,
            ChatRenderer(trainer.template.tokenizer),
            generate,
            # swift trains an episode as one sequence: an agent that rewrites it is refused.
            Limits(
                max_turns=self.spec.max_turns,
                max_tokens=trainer.args.max_completion_length,
                one_sequence="swift",
            ),
            model=model_name(self.model),
        )
        generate.runtime = runtime
        return runtime


def scheduler_class(rollouts: AgentRollouts) -> type:
    """swift's ``MultiTurnScheduler`` subclass that runs the agent's episodes."""
    from swift.rollout import MultiTurnScheduler

    class AgentScheduler(MultiTurnScheduler):
        """Each trajectory is one episode of the agent, run before swift's first turn."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.episodes: dict[str, EpisodeResult] = {}

        async def on_trajectory_start(self, requests: list[Any]) -> None:
            # swift runs this hook in an event loop of its own with nothing else on it, so the
            # episodes (served from the runtime's own loops) may block it until they end.
            results = rollouts.run([agent_row(request) for request in requests])
            self.episodes = {request.uuid: result for request, result in zip(requests, results)}

        async def on_turn_end(
            self, infer_request: Any, response_choice: Any, current_turn: int
        ) -> dict[str, Any]:
            result = self.episodes.pop(infer_request.uuid)
            trajectory = result.trajectory
            text = self.tokenizer.decode(trajectory.response_ids, skip_special_tokens=True)
            # swift keeps the sample's messages (the reward's and the logs' completion is the
            # last one's text; a message's values are text or lists, so the episode is JSON)
            # and its finish reason from this turn's choice.
            infer_request.messages[-1] = {
                "role": "assistant",
                "content": text,
                TRAJECTORY_KEY: json.dumps(
                    {
                        "prompt_ids": trajectory.prompt_ids,
                        "response_ids": trajectory.response_ids,
                        "mask": trajectory.mask,
                    }
                ),
            }
            response_choice.finish_reason = "length" if rollouts.filled(result) else "stop"
            return {
                "done": True,
                "response_token_ids": trajectory.response_ids,
                "response_loss_mask": trajectory.mask,
                # swift keeps rollout log-probs only for the tokens it trains on (mask 1).
                "rollout_logprobs": [
                    logprob for logprob, kept in zip(trajectory.logprobs, trajectory.mask) if kept
                ],
                "rollout_infos": {
                    "agent_answer": result.answer,
                    "agent_extra": result.extra,
                    "agent_failure": result.failure,
                    "agent_turns": result.turns,
                },
            }

    return AgentScheduler


def agent_row(request: Any) -> dict[str, Any]:
    """The dataset row a swift request was made from, as the job gave it: its prompt and every
    other column (``extra_info`` as a mapping)."""
    columns = dict(request.data_dict or {})
    row = {key: value for key, value in columns.items() if key not in _SWIFT_COLUMNS}
    row["prompt"] = json.loads(columns[PROMPT_COLUMN])
    if isinstance(row.get("extra_info"), str):
        row["extra_info"] = json.loads(row["extra_info"])
    return row


def trajectory_template(base: type) -> type:
    """A subclass of swift's template class ``base`` that encodes a sample carrying an episode
    (:data:`TRAJECTORY_KEY`) as the episode's tokens, and anything else as ``base`` does."""

    class TrajectoryTemplate(base):  # type: ignore[misc, valid-type]
        def _encode(self, inputs: Any) -> dict[str, Any]:
            carried = next(
                (
                    message[TRAJECTORY_KEY]
                    for message in inputs.messages
                    if isinstance(message, dict) and message.get(TRAJECTORY_KEY)
                ),
                None,
            )
            if carried is None:
                return super()._encode(inputs)
            episode = json.loads(carried)
            prompt, response = list(episode["prompt_ids"]), list(episode["response_ids"])
            labels = [-100] * len(prompt) + [
                token if kept else -100 for token, kept in zip(response, episode["mask"])
            ]
            return {
                "input_ids": prompt + response,
                "labels": labels if self.is_training else None,
                "loss_scale": None,
            }

    TrajectoryTemplate.__name__ = f"Trajectory{base.__name__}"
    return TrajectoryTemplate


def agent_template(template: str) -> str:
    """Register, in this process, the template that encodes episodes for a job whose template is
    ``template``; returns its name."""
    from swift.template import TEMPLATE_MAPPING, register_template

    name = f"{TEMPLATE_PREFIX}{template}"
    if name not in TEMPLATE_MAPPING:
        meta = copy.copy(TEMPLATE_MAPPING[template])
        meta.template_type = name
        meta.template_cls = trajectory_template(meta.template_cls)
        register_template(meta)
    return name


def register_rollouts(rollouts: AgentRollouts) -> None:
    """Put the agent's scheduler into swift's ``multi_turns`` and the callback that hands it
    the trainer into ``callbacks_map``, in this process."""
    from swift.callbacks import TrainerCallback, callbacks_map
    from swift.rollout import multi_turns

    multi_turns[AGENT_SCHEDULER] = scheduler_class(rollouts)

    class BindAgent(TrainerCallback):  # type: ignore[misc, valid-type]
        """Hands the trainer swift built to the agent's scheduler."""

        def __init__(self, args: Any, trainer: Any) -> None:
            super().__init__(args, trainer)
            rollouts.trainer = trainer

    callbacks_map[AGENT_CALLBACK] = BindAgent


def generate_with_trainer(
    trainer: Any, prompts: list[list[int]], max_tokens: int
) -> list[Generated]:
    """Continue each prompt with the trainer's model and the generation settings swift's own
    rollouts use (temperature, top-p, top-k, repetition penalty, greedy in evaluation), as its
    transformers engine does (left-padded batch, one ``generate`` call), keeping the log-prob of
    each sampled token after the logits processing."""
    import torch
    from swift.infer_engine.utils import prepare_generation_config

    tokenizer = trainer.template.tokenizer
    # swift's rollout settings, as its own rollouts read them (evaluation decodes greedily).
    request = copy.copy(trainer._get_request_config())
    request.max_tokens = max_tokens
    config = prepare_generation_config(trainer.engine.generation_config, request, tokenizer)
    config.output_scores = True
    config.return_dict_in_generate = True
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    width = max(len(prompt) for prompt in prompts)
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    attention = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    model = trainer.model
    device = trainer.accelerator.device
    training = model.training
    model.eval()
    try:
        with torch.no_grad():
            output = model.generate(
                input_ids=ids.to(device),
                attention_mask=attention.to(device),
                generation_config=config,
            )
    finally:
        model.train(training)
    completions = output.sequences[:, width:].cpu()
    # scores: one (batch, vocab) tensor per generated position, after logits processing.
    logprobs = torch.stack([torch.log_softmax(s.float(), dim=-1) for s in output.scores], dim=1)
    chosen = logprobs.gather(-1, completions.unsqueeze(-1).to(logprobs.device)).squeeze(-1).cpu()
    eos = config.eos_token_id
    eos = set(eos if isinstance(eos, list) else [eos])
    results = []
    for row, row_logprobs in zip(completions.tolist(), chosen.tolist()):
        end = next((i + 1 for i, token in enumerate(row) if token in eos), len(row))
        results.append(Generated(row[:end], row_logprobs[:end]))
    return results
