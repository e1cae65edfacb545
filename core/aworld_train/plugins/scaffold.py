"""``aworld-train new-engine NAME``: a third-party engine distribution, ready to install.

The generated engine has the layout of the engines this project ships: ``engine.py`` holds the
hooks, ``config.py`` the engine's settings, ``training.py`` the training; all three are cheap to
import (torch and transformers load when training starts). It fine-tunes a causal LM on
``prompt`` + ``ground_truth`` with transformers' ``Trainer`` (``algorithm: sft``), reports the
trainer's logs through the SDK's ``trainer_callback``, declares the common keys it maps as
``SETTINGS`` (the arguments it trains with come from it) and passes the conformance suite as
generated. It imports nothing of the core but ``aworld_train.engine``, and its own code stays
within :data:`MAX_LINES` lines. Its author replaces ``training.py`` with their engine's and
keeps the hooks.
"""

from __future__ import annotations

import re
from pathlib import Path
from string import Template

from aworld_train.errors import JobError

#: The most lines of code (not blank, not a comment) the generated engine's package may hold.
MAX_LINES = 70

# The templates are string.Template text: $name and $package are filled in, $$ is a dollar.

_PYPROJECT = """[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "aworld-train-$name"
version = "0.1.0"
description = "The $name engine for aworld-train."
readme = "README.md"
requires-python = ">=3.10"
dependencies = ["aworld-train", "torch", "transformers[torch]"]

[project.optional-dependencies]
test = ["aworld-train[testing]"]

[project.entry-points."aworld_train.engines"]
$name = "$package.engine"

[tool.setuptools]
packages = ["$package"]
"""

_INIT = '''"""The $name engine for aworld-train."""
'''

_ENGINE = """\"\"\"The $name engine's hooks, in the order aworld-train calls them.\"\"\"

from typing import Any

from aworld_train.engine import AgentError, AgentSpec, DatasetError, RunContext, ToolSet
from aworld_train.engine import TrainConfig, hookimpl, installed_versions, policy_model

# Both import nothing heavy at their top: torch and transformers load when training starts.
from $package.config import SETTINGS, Settings, settings_from  # the core reads SETTINGS here
from $package.training import run_training


@hookimpl
def check_agent(agent: AgentSpec, config: TrainConfig, tools: ToolSet) -> None:
    policy_model(agent, config)  # one line for the user when the job names no model
    if tools:
        raise AgentError(f"agent '{agent.name}': the $name engine does not call tools yet")


@hookimpl
def check_dataset(train_dataset: Any) -> None:
    if train_dataset is None:
        raise DatasetError("no train_dataset: the $name engine trains on prompts and answers")


@hookimpl
def check_config(config: TrainConfig) -> Settings:
    # engine_section(): the section named after the entry point the engine was selected by.
    return settings_from(config.algorithm, config.engine_section())


@hookimpl
def train(agent: AgentSpec, dataset: Any, engine_config: Settings, ctx: RunContext) -> None:
    run_training(agent, dataset, engine_config, ctx)  # the core keeps the last logged metrics


@hookimpl
def engine_versions() -> dict[str, str]:
    return installed_versions("torch", "transformers")
"""

_CONFIG = """\"\"\"check_config: the engine's own `$name:` config section, as Settings.\"\"\"

from dataclasses import dataclass, fields
from typing import Any

from aworld_train.engine import ConfigError, EngineKey, SettingsDeclaration, did_you_mean

# Each common key the engine takes, as its own key (a TrainingArguments field), with the engine's
# default where it is not transformers' own: the one place that maps them. The arguments it
# trains with come from it, and `check` names a `$name:` key by its common key on other engines.
SETTINGS = SettingsDeclaration("$name", (
    EngineKey("learning_rate", ("learning_rate",)), EngineKey("max_steps", ("max_steps",)),
    EngineKey("batch_size", ("per_device_train_batch_size",)), EngineKey("save_steps", ("save_steps",)),
    EngineKey("seed", ("seed",)), EngineKey("num_epochs", ("num_train_epochs",), default=1),
    EngineKey("logging_steps", ("logging_steps",), default=10)))


@dataclass
class Settings:
    max_length: int = 128
    weight_decay: float = 0.0


def settings_from(algorithm: str, section: dict[str, Any]) -> Settings:
    if algorithm != "sft":
        raise ConfigError(f"the $name engine trains algorithm 'sft', not '{algorithm}'")
    known = [field.name for field in fields(Settings)]
    for key in sorted(section.keys() - set(known)):  # the first unknown key, if any
        raise ConfigError(f"config: unknown $name key '{key}'{did_you_mean(key, known)}")
    return Settings(**section)
"""

_TRAINING = """\"\"\"train: supervised fine-tuning on prompt + ground_truth with transformers' Trainer.\"\"\"

from typing import Any

from aworld_train.engine import CHECKPOINTS, AgentSpec, RunContext, resume_checkpoint
from aworld_train.engine.hf import trainer_callback

from $package.config import SETTINGS, Settings


def run_training(agent: AgentSpec, dataset: Any, settings: Settings, ctx: RunContext) -> None:
    import transformers

    config, tokenizer = ctx.config, transformers.AutoTokenizer.from_pretrained(agent.model)
    system = [{"role": "system", "content": agent.system_prompt}] if agent.system_prompt else []

    def tokenized(row: dict[str, Any]) -> dict[str, Any]:
        prompt = row["prompt"] if isinstance(row["prompt"], list) else [
            {"role": "user", "content": row["prompt"]}]
        text = tokenizer.apply_chat_template(system + prompt, tokenize=False, add_generation_prompt=True)
        return tokenizer(text + row["ground_truth"] + tokenizer.eos_token, truncation=True,
                         max_length=settings.max_length)

    args = transformers.TrainingArguments(str(ctx.run_dir / CHECKPOINTS), report_to="none",
        weight_decay=settings.weight_decay, **SETTINGS.arguments(config))
    callback = trainer_callback(transformers.TrainerCallback, ctx.metrics.start, ctx.metrics.log)
    trainer = transformers.Trainer(
        transformers.AutoModelForCausalLM.from_pretrained(agent.model), args,
        data_collator=transformers.DataCollatorForLanguageModeling(tokenizer, mlm=False),
        train_dataset=dataset.map(tokenized, remove_columns=dataset.column_names),
        processing_class=tokenizer, callbacks=[callback()])
    trainer.train(resume_from_checkpoint=ctx.resume_from and str(resume_checkpoint(ctx.resume_from)))
    trainer.save_model(str(ctx.run_dir / "model"))
"""

_TEST = """from aworld_train.engine.testing import EngineConformance


class TestConformance(EngineConformance):
    engine_name = "$name"
    engine_section = {"max_length": 64}
    sft_section = {"max_length": 64}
    common_config = {**EngineConformance.common_config, "algorithm": "sft"}
"""

_README = """# aworld-train-$name

The `$name` engine for [aworld-train](https://pypi.org/project/aworld-train/).

```bash
pip install -e '.[test]'
aworld-train engines            # lists $name
pytest tests                    # the aworld-train conformance suite
aworld-train train job.yaml --engine $name
```

`$package/engine.py` holds the hooks, `config.py` the `$name:` config section, `training.py`
the training: replace it with your engine's and keep the hooks. The guide for engine authors
is aworld-train's `docs/engines.md`.
"""


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
        f"{package}/__init__.py": _INIT,
        f"{package}/engine.py": _ENGINE,
        f"{package}/config.py": _CONFIG,
        f"{package}/training.py": _TRAINING,
        "tests/test_conformance.py": _TEST,
    }
    for relative, template in files.items():
        path = target / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(Template(template).substitute(name=name, package=package), encoding="utf-8")
    return target
