"""``aworld-train new-engine NAME``: a third-party engine distribution, ready to install.

The generated engine fine-tunes a causal LM on ``prompt`` + ``ground_truth`` with plain PyTorch
(``algorithm: sft``), logs the loss and the reward of a greedy sample, and passes the
conformance suite as generated. Its author replaces the training loop with their engine's.
"""

from __future__ import annotations

import re
from pathlib import Path

from aworld_train.errors import JobError

_PYPROJECT = '''[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "aworld-train-{name}"
version = "0.1.0"
description = "The {name} engine for aworld-train."
requires-python = ">=3.10"
dependencies = ["aworld-train", "torch", "transformers"]

[project.optional-dependencies]
test = ["pytest", "tokenizers"]

[project.entry-points."aworld_train.engines"]
{name} = "{package}.engine"

[tool.setuptools]
packages = ["{package}"]
'''

_ENGINE = '''"""The {name} engine: hook implementations for aworld-train.

Heavy libraries are imported inside the hooks, so listing engines stays instant.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from aworld_train import hookimpl
from aworld_train.errors import AgentError, ConfigError, DatasetError, RewardError, did_you_mean
from aworld_train.plugins import installed_versions


@dataclass
class Settings:
    """The keys of this engine's ``{name}:`` config section."""

    max_length: int = 128
    weight_decay: float = 0.0


@hookimpl
def engine_versions() -> dict[str, str]:
    return installed_versions("torch", "transformers")


@hookimpl
def check_agent(agent: Any, ctx: Any) -> None:
    if agent.uses_tools:
        raise AgentError("the {name} engine does not support tools yet")
    if not (agent.model or ctx.config.model):
        raise AgentError("no model: set 'model' in the agent or the config")


@hookimpl
def check_dataset(train_dataset: Any, test_dataset: Any, ctx: Any) -> None:
    # The core passes None for a dataset the user did not give; this engine needs one.
    if train_dataset is None:
        raise DatasetError("the {name} engine needs a train_dataset")


@hookimpl
def check_reward(reward: Any, ctx: Any) -> None:
    if reward is None:
        raise RewardError("the {name} engine needs a reward")


@hookimpl
def check_config(config: Any, ctx: Any) -> Settings:
    if config.algorithm != "sft":
        raise ConfigError(f"the {name} engine trains algorithm 'sft', not '{{config.algorithm}}'")
    known = [f.name for f in fields(Settings)]
    section = config.engine_section()  # the section named after this engine's entry point
    for key in section:
        if key not in known:
            raise ConfigError(f"config: unknown {name} key '{{key}}'{{did_you_mean(key, known)}}")
    return Settings(**section)


@hookimpl
def train(ctx: Any) -> dict[str, float]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    config, settings = ctx.config, ctx.results["config"]
    agent, dataset, reward = ctx.results["agent"], ctx.results["dataset"], ctx.results["reward"]
    torch.manual_seed(config.seed)
    tokenizer = AutoTokenizer.from_pretrained(agent.model)
    model = AutoModelForCausalLM.from_pretrained(agent.model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate or 1e-4,
                                  weight_decay=settings.weight_decay)
    steps, batch_size = config.max_steps or len(dataset), config.batch_size or 4
    ctx.metrics.start(steps)
    for step in range(1, steps + 1):
        rows = [dataset[(step * batch_size + i) % len(dataset)] for i in range(batch_size)]
        texts = [_prompt_text(tokenizer, agent, row["prompt"]) + row["ground_truth"] for row in rows]
        batch = tokenizer(texts, return_tensors="pt", padding=True, truncation=True,
                          max_length=settings.max_length)
        labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
        loss = model(**batch, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if step % (config.logging_steps or 1) == 0 or step == steps:
            ctx.metrics.log(step, {{"loss": loss.item(), "reward": _sample_reward(
                model, tokenizer, agent, rows[0], reward, config.max_completion_length or 8)}})
    model.save_pretrained(ctx.run_dir / "model")
    tokenizer.save_pretrained(ctx.run_dir / "model")
    return ctx.metrics.last()


def _prompt_text(tokenizer: Any, agent: Any, prompt: Any) -> str:
    messages = [{{"role": "user", "content": prompt}}] if isinstance(prompt, str) else list(prompt)
    if agent.system_prompt:
        messages = [{{"role": "system", "content": agent.system_prompt}}, *messages]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def _sample_reward(model: Any, tokenizer: Any, agent: Any, row: dict, reward: Any, length: int) -> float:
    import torch

    inputs = tokenizer(_prompt_text(tokenizer, agent, row["prompt"]), return_tensors="pt")
    with torch.no_grad():
        output = model.generate(**inputs, max_new_tokens=length, do_sample=False,
                                pad_token_id=tokenizer.pad_token_id)
    completion = tokenizer.decode(output[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True)
    return reward.score(row["data_source"], completion, row["ground_truth"], row["extra_info"]).score
'''

_TEST = '''from aworld_train.testing.conformance import EngineConformance


class TestConformance(EngineConformance):
    engine_name = "{name}"
    engine_section = {{"max_length": 64}}
    common_config = {{**EngineConformance.common_config, "algorithm": "sft"}}
'''

_README = '''# aworld-train-{name}

The `{name}` engine for [aworld-train](https://pypi.org/project/aworld-train/).

```bash
pip install -e '.[test]'
aworld-train engines            # lists {name}
pytest tests                    # the aworld-train conformance suite
aworld-train train job.yaml --engine {name}
```

Replace the training loop in `{package}/engine.py` with your engine's; keep the hooks.
'''


def scaffold_engine(name: str, directory: Path | None = None) -> Path:
    """Write the distribution ``aworld-train-NAME`` into ``directory`` (default
    ``./aworld-train-NAME``) and return its folder.

    :raises JobError: for a name that is not an identifier or a folder that already exists.
    """
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise JobError(f"engine name '{name}' must be lowercase letters, digits and underscores")
    target = Path(directory) if directory is not None else Path(f"aworld-train-{name}")
    if target.exists() and any(target.iterdir()):
        raise JobError(f"{target} already exists and is not empty; nothing was written")
    package = f"aworld_train_{name}"
    files = {
        "pyproject.toml": _PYPROJECT,
        "README.md": _README,
        f"{package}/__init__.py": '"""The {name} engine for aworld-train."""\n',
        f"{package}/engine.py": _ENGINE,
        "tests/test_conformance.py": _TEST,
    }
    for relative, template in files.items():
        path = target / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(template.format(name=name, package=package), encoding="utf-8")
    return target
