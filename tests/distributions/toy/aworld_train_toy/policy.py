"""The toy policy: for each prompt, softmax logits over a fixed list of candidate answers.

A step samples ``batch_size`` training examples, draws one answer for each from the policy,
scores it with the job's reward, and moves the logits along the REINFORCE gradient with the
batch's mean reward as baseline:

    logits[prompt][j] += lr * (reward - baseline) * (1[j == answer] - p_j) / temperature / batch
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.errors import ConfigError, TrainingError, did_you_mean

if TYPE_CHECKING:
    import datasets
    from aworld_train.job.config import TrainConfig
    from aworld_train.plugins.context import RunContext
    from aworld_train.reward import RewardResult, RewardSpec

SECTION_KEYS = ("candidates", "temperature")
POLICY_FILE = "policy.json"


@dataclass(frozen=True)
class Example:
    """One training row as the toy engine uses it."""

    prompt: str  # the prompt text, or the JSON of its chat messages
    data_source: str
    ground_truth: str
    extra_info: dict[str, Any]


@dataclass(frozen=True)
class ToySettings:
    candidates: tuple[str, ...]
    temperature: float
    seed: int
    max_steps: int
    learning_rate: float
    batch_size: int
    logging_steps: int
    save_steps: int | None


class ToyReward:
    """The job's reward applied to one example and one candidate answer."""

    def __init__(self, spec: RewardSpec) -> None:
        self.spec = spec

    def __call__(self, example: Example, answer: str) -> RewardResult:
        return self.spec.score(
            example.data_source, answer, example.ground_truth, example.extra_info
        )


def to_examples(dataset: datasets.Dataset) -> list[Example]:
    return [
        Example(
            prompt=row["prompt"] if isinstance(row["prompt"], str) else json.dumps(row["prompt"]),
            data_source=row["data_source"],
            ground_truth=row["ground_truth"],
            extra_info=dict(row["extra_info"] or {}),
        )
        for row in dataset.to_list()  # one Arrow conversion, not one per row
    ]


def settings_from_config(config: TrainConfig, engine: str, examples: list[Example]) -> ToySettings:
    """Validate the engine's own section and fill the common keys' toy defaults.

    :raises ConfigError: for an unknown key of the section, a bad value, or an algorithm other
        than GRPO (the only one the toy engine has).
    """
    if config.algorithm != "grpo":
        raise ConfigError(
            f"config: algorithm '{config.algorithm}' is not supported by the "
            f"{engine} engine (only grpo)"
        )
    section = config.engine_section(engine)
    for key in section:
        if key not in SECTION_KEYS:
            raise ConfigError(
                f"config: unknown {engine} key '{engine}.{key}'{did_you_mean(key, SECTION_KEYS)}; "
                f"known keys: {', '.join(SECTION_KEYS)}"
            )
    candidates = section.get("candidates")
    if candidates is None:
        candidates = list(dict.fromkeys(example.ground_truth for example in examples))
    if not (
        isinstance(candidates, list) and candidates and all(isinstance(c, str) for c in candidates)
    ):
        raise ConfigError(
            f"config: '{engine}.candidates' must be a non-empty list of strings, got {candidates!r}"
        )
    temperature = section.get("temperature", 1.0)
    if (
        isinstance(temperature, bool)
        or not isinstance(temperature, (int, float))
        or temperature <= 0
    ):
        raise ConfigError(
            f"config: '{engine}.temperature' must be a positive number, got {temperature!r}"
        )
    for key in ("max_steps", "batch_size", "logging_steps", "save_steps"):
        value = getattr(config, key)
        if value is not None and value < 1:
            raise ConfigError(f"config: '{key}' must be at least 1, got {value}")
    return ToySettings(
        candidates=tuple(candidates),
        temperature=float(temperature),
        seed=config.seed,
        max_steps=config.max_steps or 50,
        learning_rate=config.learning_rate if config.learning_rate is not None else 1.0,
        batch_size=config.batch_size or 8,
        logging_steps=config.logging_steps or 1,
        save_steps=config.save_steps,
    )


class Policy:
    """Per-prompt logits over the candidates; a prompt never seen starts uniform."""

    def __init__(
        self,
        candidates: tuple[str, ...],
        temperature: float,
        logits: dict[str, list[float]] | None = None,
    ) -> None:
        self.candidates = candidates
        self.temperature = temperature
        self.logits = logits if logits is not None else {}

    def probabilities(self, prompt: str) -> list[float]:
        logits = self.logits.setdefault(prompt, [0.0] * len(self.candidates))
        scaled = [value / self.temperature for value in logits]
        top = max(scaled)
        weights = [math.exp(value - top) for value in scaled]
        total = sum(weights)
        return [weight / total for weight in weights]

    def greedy(self, prompt: str) -> str:
        probabilities = self.probabilities(prompt)
        return self.candidates[probabilities.index(max(probabilities))]


def train_policy(
    settings: ToySettings, examples: list[Example], reward: ToyReward, ctx: RunContext
) -> dict[str, Any]:
    rng = random.Random(settings.seed)
    policy = Policy(settings.candidates, settings.temperature)
    done = 0
    if ctx.resume_from is not None:
        for partial in cut_short(Path(ctx.resume_from)):
            ctx.logger.warning(
                "%s was cut short while being saved (it has no %s): passed over",
                partial,
                POLICY_FILE,
            )
        checkpoint = last_checkpoint(Path(ctx.resume_from))
        if checkpoint is not None:
            done = load_checkpoint(checkpoint, policy, rng)
            ctx.logger.info("resuming from %s at step %d", checkpoint, done)
    ctx.metrics.start(settings.max_steps, completed=done)

    metrics: dict[str, float] = {}
    for step in range(done + 1, settings.max_steps + 1):
        metrics = _step(policy, examples, reward, rng, settings)
        if step % settings.logging_steps == 0 or step == settings.max_steps:
            ctx.metrics.log(step, metrics)
        if settings.save_steps and step % settings.save_steps == 0:
            save_policy(ctx.run_dir / f"checkpoint-{step}", policy, step, rng)
    save_policy(ctx.run_dir / "model", policy, settings.max_steps, rng)
    greedy = [reward(example, policy.greedy(example.prompt)).score for example in examples]
    return {**metrics, "greedy_reward": sum(greedy) / len(greedy)}


def _step(
    policy: Policy,
    examples: list[Example],
    reward: ToyReward,
    rng: random.Random,
    settings: ToySettings,
) -> dict[str, float]:
    batch = [rng.choice(examples) for _ in range(settings.batch_size)]
    drawn = []
    for example in batch:
        probabilities = policy.probabilities(example.prompt)
        answer = rng.choices(range(len(policy.candidates)), weights=probabilities)[0]
        drawn.append((example, answer, probabilities, reward(example, policy.candidates[answer])))
    size = len(drawn)
    baseline = sum(result.score for *_, result in drawn) / size
    loss = 0.0
    extra: dict[str, float] = {}
    for example, answer, probabilities, result in drawn:
        advantage = result.score - baseline
        loss -= advantage * math.log(probabilities[answer]) / size
        logits = policy.logits[example.prompt]
        for j, probability in enumerate(probabilities):
            gradient = ((1.0 if j == answer else 0.0) - probability) / policy.temperature
            logits[j] += settings.learning_rate * advantage * gradient / size
        for key, value in result.metrics.items():
            extra[key] = extra.get(key, 0.0) + value / size
    spread = math.sqrt(sum((result.score - baseline) ** 2 for *_, result in drawn) / size)
    return {"reward": baseline, "reward_std": spread, "loss": loss, **extra}


def save_policy(folder: Path, policy: Policy, step: int, rng: random.Random) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    version, state, gauss = rng.getstate()
    data = {
        "step": step,
        "candidates": list(policy.candidates),
        "temperature": policy.temperature,
        "logits": policy.logits,
        "rng": [version, list(state), gauss],
    }
    # Written whole, then renamed: an interrupted save never leaves half a checkpoint.
    partial = folder / f"{POLICY_FILE}.tmp"
    partial.write_text(json.dumps(data), encoding="utf-8")
    partial.replace(folder / POLICY_FILE)


def cut_short(run_dir: Path) -> list[Path]:
    """The ``checkpoint-N`` folders of ``run_dir`` that a stop left without their policy."""
    return sorted(
        path for path in run_dir.glob("checkpoint-*") if not (path / POLICY_FILE).is_file()
    )


def last_checkpoint(run_dir: Path) -> Path | None:
    """The ``checkpoint-N`` folder of ``run_dir`` with the highest ``N``, or ``None``."""
    found = [
        (int(path.name.removeprefix("checkpoint-")), path)
        for path in run_dir.glob("checkpoint-*")
        if path.name.removeprefix("checkpoint-").isdigit() and (path / POLICY_FILE).is_file()
    ]
    return max(found)[1] if found else None


def load_checkpoint(folder: Path, policy: Policy, rng: random.Random) -> int:
    """Restore the policy and the random state; returns the checkpoint's step.

    :raises TrainingError: when the checkpoint was trained on other candidates.
    """
    data = json.loads((folder / POLICY_FILE).read_text(encoding="utf-8"))
    if tuple(data["candidates"]) != policy.candidates:
        raise TrainingError(
            f"{folder}: the checkpoint's candidates {data['candidates']} differ from this "
            f"job's {list(policy.candidates)}"
        )
    policy.logits = {prompt: list(values) for prompt, values in data["logits"].items()}
    version, state, gauss = data["rng"]
    rng.setstate((version, tuple(state), gauss))
    return int(data["step"])
