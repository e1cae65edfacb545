"""Generating and scoring a model already in memory: :func:`generate_and_score`, which
``aworld-train eval`` runs once the model is loaded and an engine may call during training.

A prompt is rendered as the engines render it for generation: the agent's system prompt as a
system message (unless the row starts with its own), the model's chat template with the
generation prompt; a tokenizer without a chat template gets the plain text (system prompt, a
blank line, the prompt). A completion is at most ``max_new_tokens`` tokens, ends at the
tokenizer's end-of-sequence token and is decoded without special tokens: the text the reward
sees in training. Generation is greedy (one completion per prompt, so an eval repeated gives
the same numbers) unless ``samples`` asks for several, which are sampled at the agent's
temperature and top-p. A ``vllm.LLM`` generates with vLLM
(:mod:`aworld_train.vllm_generation`), a ``transformers`` model in batches of left-padded
prompts.

Every other agent (an AWorld agent, a Python agent, the spec form with tools) runs as training
runs it: through the agent runtime (:mod:`aworld_train.runtime`), one episode per completion,
its model calls answered by the model under evaluation (batched over the episodes that ask at
once), its tools called between turns, at most ``max_turns`` turns within ``max_new_tokens``
tokens. The reward scores the agent's answer; a failed episode scores 0 (see
:func:`_agent_episodes`).

torch, transformers and rich are imported inside the functions; so is the agent runtime, which
only agents need.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train import vllm_generation
from aworld_train.errors import DatasetError
from aworld_train.evaluation._results import EvalResult, score_completions
from aworld_train.run.metrics import count_lines

if TYPE_CHECKING:
    from aworld_train.agent import AgentSpec
    from aworld_train.reward import RewardSpec
    from aworld_train.runtime import EpisodeResult
    from aworld_train.tools import ToolSet


#: The temperature of sampled completions when the agent sets none (the engines' default).
DEFAULT_TEMPERATURE = 1.0


def generate_and_score(
    model: Any,
    tokenizer: Any,
    rows: list[dict[str, Any]],
    *,
    agent: AgentSpec,
    reward: RewardSpec,
    max_new_tokens: int,
    samples: int = 1,
    batch_size: int = 16,
    tools: ToolSet | None = None,
    progress: bool = False,
    seed: int = 42,
) -> EvalResult:
    """Generate ``samples`` completions for each row's prompt and score them with ``reward``.

    :param model: a ``transformers`` causal LM (on the device it should run on) or a
        ``vllm.LLM``.
    :param rows: canonical dataset rows (``prompt``, ``ground_truth``, ``data_source``,
        ``extra_info``).
    :param agent: gives the system prompt and, for sampling, the temperature and top-p; an
        agent of its own code (AWorld, Python) runs, one episode per completion.
    :param samples: 1: one greedy completion; K > 1: K sampled completions and pass@K.
    :param tools: the agent's tools: with any, each completion is an episode of the spec
        form's chat loop of at most ``agent.max_turns`` turns (see :func:`_agent_episodes`); the
        caller opens and closes their MCP sessions.
    :param progress: draw a progress bar (on a terminal only).
    :param seed: seeds sampling, so a sampled eval repeated gives the same numbers.
    :returns: the result, named after ``model``'s folder, its dataset unnamed: the caller names
        both.
    :raises RewardError: when a reward function fails, naming it and the row.
    """
    started = time.perf_counter()
    schemas = tools.schemas() if tools is not None and len(tools) else None
    sampling = _Sampling(samples, agent.llm_temperature, agent.llm_top_p, seed, greedy=samples == 1)
    with _progress_bar(progress, len(rows)) as advance:
        if agent.runs_itself or schemas:
            episodes = _agent_episodes(
                model, tokenizer, rows, agent, tools, max_new_tokens, sampling, batch_size
            )
            advance(len(rows))
            result = _score_episodes(rows, episodes, reward)
        else:
            prompts = [
                render_prompt(tokenizer, row["prompt"], agent.system_prompt, index)
                for index, row in enumerate(rows)
            ]
            completions = _generate(
                model, tokenizer, prompts, max_new_tokens, sampling, batch_size, advance
            )
            result = score_completions(rows, _decoded(tokenizer, completions), reward)
    result.model = _model_name(model)
    result.seconds = time.perf_counter() - started
    return result


def _score_episodes(
    rows: list[dict[str, Any]], episodes: list[list[EpisodeResult]], reward: RewardSpec
) -> EvalResult:
    """Score each row's episodes on their answers, a failed episode as a failure, each record
    with what its episodes did."""
    result = score_completions(
        rows,
        [[episode.answer for episode in row] for row in episodes],
        reward,
        failed=[[episode.failure is not None for episode in row] for row in episodes],
    )
    for record, row in zip(result.records, episodes, strict=True):
        record.update(_episode_record(row))
    return result


def _decoded(tokenizer: Any, completions: list[list[list[int]]]) -> list[list[str]]:
    """Each row's completions as text, cut at the end-of-sequence token."""
    eos = tokenizer.eos_token_id
    return [
        [tokenizer.decode(_until_eos(ids, eos), skip_special_tokens=True) for ids in row]
        for row in completions
    ]


def _agent_episodes(
    model: Any,
    tokenizer: Any,
    rows: list[dict[str, Any]],
    agent: AgentSpec,
    tools: ToolSet | None,
    max_new_tokens: int,
    sampling: _Sampling,
    batch_size: int,
) -> list[list[EpisodeResult]]:
    """Per row, ``sampling.samples`` episodes of the agent with ``model`` as its policy."""
    from aworld_train.runtime import (
        AgentRuntime,
        BatchedGenerate,
        ChatRenderer,
        Generated,
        Limits,
    )

    turn = _Sampling(1, sampling.temperature, sampling.top_p, sampling.seed, sampling.greedy)

    def generate_batch(prompts: list[list[int]], max_tokens: int) -> list[Generated]:
        eos = tokenizer.eos_token_id
        generated = _generate(
            model, tokenizer, prompts, max_tokens, turn, batch_size, lambda _: None
        )
        return [
            Generated(ids, [0.0] * len(ids))
            for ids in (_through_eos(row[0], eos) for row in generated)
        ]

    generate = BatchedGenerate(generate_batch)
    runtime = AgentRuntime(
        agent,
        tools,
        ChatRenderer(tokenizer),
        generate,
        Limits(max_turns=agent.max_turns, max_tokens=max_new_tokens),
        model=_model_name(model),
    )
    generate.runtime = runtime
    results = runtime.run([row for row in rows for _ in range(sampling.samples)])
    return [results[i : i + sampling.samples] for i in range(0, len(results), sampling.samples)]


def _episode_record(episodes: list[EpisodeResult]) -> dict[str, Any]:
    """What ``.samples.jsonl`` keeps of a row's episodes: the conversation after the prompt,
    and why an episode failed."""
    kept = [
        {"messages": e.messages, **({"failure": e.failure} if e.failure else {})} for e in episodes
    ]
    if len(kept) == 1:
        return {
            "episode": kept[0]["messages"],
            **({"failure": kept[0]["failure"]} if "failure" in kept[0] else {}),
        }
    return {"episodes": kept}


def render_prompt(
    tokenizer: Any, prompt: Any, system_prompt: str | None, row: int = 0
) -> list[int]:
    """The token ids of one prompt as training renders it for generation.

    :param prompt: a string, or a list of ``{role, content}`` messages.
    :raises DatasetError: for chat messages and a tokenizer without a chat template.
    """
    if getattr(tokenizer, "chat_template", None):
        messages = (
            [{"role": "user", "content": prompt}]
            if isinstance(prompt, str)
            else [{"role": m["role"], "content": m["content"]} for m in prompt]
        )
        if system_prompt and messages[0]["role"] != "system":
            messages.insert(0, {"role": "system", "content": system_prompt})
        encoded = tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=True, return_dict=True
        )
        return list(encoded["input_ids"])
    if not isinstance(prompt, str):
        raise DatasetError(
            f"row {row}: the prompt is a list of chat messages but the model has "
            "no chat template: give prompts as plain strings"
        )
    text = f"{system_prompt}\n\n{prompt}" if system_prompt else prompt
    return list(tokenizer(text)["input_ids"])


@dataclass(frozen=True)
class _Sampling:
    """How completions are drawn: ``samples`` per prompt, greedy (one) or at a temperature and
    top-p (a tool loop's later turns draw one per episode, still sampled)."""

    samples: int
    temperature: float | None
    top_p: float | None
    seed: int
    greedy: bool


def _generate(
    model: Any,
    tokenizer: Any,
    prompts: list[list[int]],
    max_new_tokens: int,
    sampling: _Sampling,
    batch_size: int,
    advance: Callable[[int], None],
) -> list[list[list[int]]]:
    """Each prompt's completions' token ids, by vLLM or ``transformers``."""
    if _is_vllm(model):
        return _generate_vllm(model, prompts, max_new_tokens, sampling, advance)
    return _generate_transformers(
        model, tokenizer, prompts, max_new_tokens, sampling, batch_size, advance
    )


def _through_eos(ids: list[int], eos: int | None) -> list[int]:
    """A turn's tokens through its end-of-sequence token, which the trajectory keeps."""
    return ids[: ids.index(eos) + 1] if eos is not None and eos in ids else ids


def _generate_transformers(
    model: Any,
    tokenizer: Any,
    prompts: list[list[int]],
    max_new_tokens: int,
    sampling: _Sampling,
    batch_size: int,
    advance: Callable[[int], None],
) -> list[list[list[int]]]:
    """Each prompt's completions' token ids, prompts of similar length batched together
    (less padding), left-padded, as TRL generates without vLLM.

    A model in training mode (an engine evaluating mid-training) is put back in it, and the
    random state sampling seeds is restored, so training goes on as if nothing had run."""
    import torch
    from transformers import GenerationConfig

    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    settings: dict[str, Any] = {"do_sample": False}
    if not sampling.greedy:
        settings = {
            "do_sample": True,
            "num_return_sequences": sampling.samples,
            "temperature": sampling.temperature or DEFAULT_TEMPERATURE,
            "top_p": 1.0 if sampling.top_p is None else sampling.top_p,
            "top_k": 0,
        }
    # A config of its own: the folder's generation_config.json (a repetition penalty, sampling
    # defaults) shapes neither training's generations nor these.
    config = GenerationConfig(
        max_new_tokens=max_new_tokens,
        pad_token_id=pad,
        eos_token_id=tokenizer.eos_token_id,
        **settings,
    )
    device = next(model.parameters()).device
    order = sorted(range(len(prompts)), key=lambda index: len(prompts[index]))
    completions: list[list[list[int]]] = [[] for _ in prompts]
    training = model.training
    model.eval()
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), torch.no_grad():
        torch.manual_seed(sampling.seed)
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            width = max(len(prompts[index]) for index in batch)
            ids = [[pad] * (width - len(prompts[i])) + prompts[i] for i in batch]
            mask = [[0] * (width - len(prompts[i])) + [1] * len(prompts[i]) for i in batch]
            generated = model.generate(
                input_ids=torch.tensor(ids, device=device),
                attention_mask=torch.tensor(mask, device=device),
                generation_config=config,
            )
            new = generated[:, width:].tolist()
            for position, index in enumerate(batch):
                completions[index] = new[
                    position * sampling.samples : (position + 1) * sampling.samples
                ]
            advance(len(batch))
    model.train(training)
    return completions


def _generate_vllm(
    llm: Any,
    prompts: list[list[int]],
    max_new_tokens: int,
    sampling: _Sampling,
    advance: Callable[[int], None],
) -> list[list[list[int]]]:

    generated = vllm_generation.generate(
        llm,
        prompts,
        max_new_tokens,
        n=sampling.samples,
        seed=sampling.seed,
        temperature=0.0 if sampling.greedy else sampling.temperature or DEFAULT_TEMPERATURE,
        top_p=1.0 if sampling.greedy or sampling.top_p is None else sampling.top_p,
    )
    advance(len(prompts))
    return [[completion.token_ids for completion in row] for row in generated]


def _until_eos(ids: list[int], eos: int | None) -> list[int]:
    """A completion's tokens up to its end-of-sequence token: what follows is padding."""
    return ids[: ids.index(eos)] if eos is not None and eos in ids else ids


def _is_vllm(model: Any) -> bool:
    return type(model).__module__.startswith("vllm")


def _model_name(model: Any) -> str:
    config = getattr(model, "config", None)
    return Path(str(getattr(config, "_name_or_path", "") or "model")).name


@contextlib.contextmanager
def _progress_bar(enabled: bool, total: int) -> Iterator[Callable[[int], None]]:
    """A rich progress bar over the rows on a terminal (stderr), else plain lines as training
    prints them (a log file, CI); it gives the function that advances it by a number of rows."""
    if not enabled:
        yield lambda rows: None
        return
    if not sys.stderr.isatty():
        yield count_lines("evaluating", total)
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("generating", total=total)
        yield lambda rows: bar.advance(task, rows)
