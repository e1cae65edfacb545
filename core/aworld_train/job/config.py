"""Config: the engine-neutral training keys, one section per engine, and ``-o`` overrides.

Each common key is declared once, as a field of :class:`TrainConfig` that carries its rule (its
type and range, :mod:`aworld_train.job._rules`); the strict pydantic model that checks a config
is built from those fields. The keys are checked before any engine code runs, so
``batch_size: 0`` or ``learning_rate: .nan`` fails in ``check`` with one line naming the key.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.job._layout import (
    ConfigLayout,
    claim,
    near_miss,
    not_a_section,
    other_engine_section,
    whole_config_hint,
)
from aworld_train.job._rules import checked, config_key, describe_value, rule, rules_of
from aworld_train.job._rules import first_non_finite as first_non_finite  # engines read it here
from aworld_train.errors import ConfigError, PluginError, did_you_mean
from aworld_train.job.files import read_mapping
from aworld_train.job.overrides import merge, parse_overrides
from aworld_train.job.settings import (
    ALL_LINEAR,
    LOSS_AGGREGATIONS,
    LR_SCHEDULERS,
    PRECISIONS,
    TRACKERS,
    Lora,
)

if TYPE_CHECKING:
    from aworld_train.job.declaration import SettingsDeclaration

#: The fields a job file (and a run's ``job.yaml``) holds, those of
#: :class:`~aworld_train.job.spec.Job` but the resolved job's own: named here, below the job, so
#: that an unknown config key that is one of them is pointed to the job.
JOB_FIELDS = (
    "engine",
    "agent",
    "train_dataset",
    "test_dataset",
    "reward",
    "columns",
    "config",
    "run_path",
)
ALGORITHMS = ("grpo", "ppo", "sft", "dpo")
DEVICES = ("auto", "cpu")
SEED_MAX = 2**32 - 1  # numpy's and CUDA's generators take 32-bit seeds
REWARD_TIMEOUT_MAX = 600.0


def _unknown_key_hint(
    key: str, engine: str | None, declarations: Mapping[str, SettingsDeclaration]
) -> str:
    """What to add to "unknown config key": a job field given as a config key (``-o reward=``)
    is pointed to where it belongs; a key of an installed engine's own config file names that
    engine, on another engine."""
    if key in JOB_FIELDS:  # an engine's config may have a 'reward' key too: the job's is meant
        flag = f"--{key.replace('_', '-')} or " if key in _JOB_FLAGS else ""
        return f"; '{key}' is a field of the job, not of its config: give it as {flag}a top-level key of the job file"
    return whole_config_hint(key, engine, declarations)


# The job fields `check` and `train` take as options of their own.
_JOB_FLAGS = frozenset({"agent", "train_dataset", "test_dataset", "reward", "config"})


@dataclass
class Resources:
    """Where the job runs. Engines map these onto their own distributed runtime."""

    nnodes: int = config_key(1, "integer", ge=1)
    # None: whatever the engine finds visible
    gpus_per_node: int | None = config_key(None, "integer", ge=0)
    # VeRL: the Ray cluster to join
    ray_address: str | None = config_key(None, "text", "a Ray address (a string)")
    # The memory of one cluster GPU in GB, which ``check`` sizes the job against when the GPU
    # it trains on is not the one visible here. None: the visible GPU, if any.
    gpu_memory_gb: float | None = config_key(None, "number", "a number of GB > 0", gt=0)
    # What the engine trains on: "auto" a GPU where one is visible (or the cluster's), else the
    # CPU; "cpu" the CPU even beside a GPU, to debug a job anywhere.
    device: str = config_key("auto", "choice", names=DEVICES)


@dataclass
class TrainConfig:
    """The validated config of a job.

    ``None`` means "the engine's default". ``sections`` holds the raw section named after each
    engine (``trl:``, ``swift:``, ``verl:``); the engine validates its own against its schema.

    ``batch_size`` counts samples per optimisation step on one device: for GRPO and PPO that
    is completions (prompts × ``num_generations``), for SFT and DPO rows. Every engine reads it
    so, which keeps one job file meaning the same on each.

    ``trust_remote_code`` lets a model whose folder holds its own code be loaded (that code
    runs); ``reward_timeout`` is how many seconds the reward may take on the sample row during
    the checks. ``engine`` is the engine the job runs on, set by the core, never a job key;
    ``explicit`` is the common keys the job's config named (:meth:`is_set`), also set by the core.

    The keys from ``precision`` on mean the same on every engine (README, "The job file"):
    ``precision`` the dtype training computes in (``auto``: bf16 on a GPU that supports it,
    else fp32), ``lora`` a LoRA adapter to train, ``report_to`` the trackers the engine logs to,
    then the RL knobs, evaluation during training and the rollout samples kept per logged step.
    """

    # The form only: which algorithms an engine trains is the engine's to say (VeRL takes any
    # of its advantage estimators by name), and each engine refuses the rest.
    algorithm: str = config_key(
        "grpo",
        "text",
        "an algorithm name such as " + ", ".join(ALGORITHMS),
        names=ALGORITHMS,
        pattern=r"^[a-z][a-z0-9_]*$",
    )
    model: str | None = config_key(
        None, "text", "a model folder or hub id (a non-empty string)", pattern=r"\S"
    )
    learning_rate: float | None = config_key(None, "number", gt=0)
    max_steps: int | None = config_key(None, "integer", ge=1)
    num_epochs: float | None = config_key(None, "number", gt=0)
    batch_size: int | None = config_key(None, "integer", ge=1)
    num_generations: int | None = config_key(None, "integer", ge=1)
    max_prompt_length: int | None = config_key(None, "integer", ge=1)
    max_completion_length: int | None = config_key(None, "integer", ge=1)
    seed: int = config_key(42, "integer", ge=0, le=SEED_MAX)
    logging_steps: int | None = config_key(None, "integer", ge=1)
    save_steps: int | None = config_key(None, "integer", ge=1)
    trust_remote_code: bool = config_key(False, "flag")
    reward_timeout: float = config_key(
        5.0,
        "number",
        f"a number of seconds > 0 and <= {REWARD_TIMEOUT_MAX:g}",
        gt=0,
        le=REWARD_TIMEOUT_MAX,
    )
    precision: str = config_key("auto", "choice", names=PRECISIONS)
    lora: Lora | None = None  # its keys' rules: LORA_RULES
    report_to: tuple[str, ...] = config_key((), "choices", names=TRACKERS)
    kl_coef: float | None = config_key(None, "number", ge=0)
    lr_scheduler: str | None = config_key(None, "choice", names=LR_SCHEDULERS)
    warmup_ratio: float | None = config_key(None, "number", "a number from 0 to 1", ge=0, le=1)
    loss_aggregation: str | None = config_key(None, "choice", names=LOSS_AGGREGATIONS)
    clip_ratio: float | None = config_key(None, "number", gt=0)
    entropy_coef: float | None = config_key(None, "number", ge=0)
    eval_steps: int | None = config_key(None, "integer", ge=1)
    eval_limit: int | None = config_key(None, "integer", ge=1)
    log_samples: int | None = config_key(None, "integer", "an integer >= 0 (0: none)", ge=0)
    resources: Resources = field(default_factory=Resources)
    sections: dict[str, dict[str, Any]] = field(default_factory=dict)
    engine: str | None = None
    # Not part of what the config means: two configs that say the same compare equal.
    explicit: frozenset[str] | None = field(default=None, compare=False)

    def is_set(self, key: str) -> bool:
        """Whether the job set the common ``key`` itself, rather than leaving it at its default.

        An engine whose own config has a default of its own for the same thing (VeRL's advantage
        estimator) keeps its own where the job set nothing. ``explicit`` holds the common keys
        the job's config named (file, mapping or ``-o``) with a value; for a config built in
        Python (``explicit`` is ``None``), a key counts as set when it differs from its default.
        """
        if self.explicit is not None:
            return key in self.explicit
        return bool(getattr(self, key) != getattr(TrainConfig(), key))

    def engine_section(self, engine: str | None = None) -> dict[str, Any]:
        """The raw section of the engine the job runs on (empty when the job has none).

        :param engine: the section to read; by default ``self.engine``'s. An engine passes its
            own name only where the config has no engine set (a config built by hand).
        :raises PluginError: when ``engine`` differs from the engine the job runs on: the
            section would be read under a name the user cannot know to write.
        """
        if engine is None:
            engine = self.engine
        elif self.engine is not None and engine != self.engine:
            raise PluginError(
                f"engine '{self.engine}' reads the '{engine}' section, but it is installed as "
                f"'{self.engine}': its section is the one named after its entry point; call "
                "config.engine_section() without a name, or publish the entry point as "
                f"'{engine}'"
            )
        if engine is None:
            return {}
        return dict(self.sections.get(engine, {}))

    def to_dict(self) -> dict[str, Any]:
        """The config as plain data, as a job file would hold it.

        Keys at their "engine default" (``None``) are left out, and so are the safety keys,
        ``precision``, ``report_to`` and ``resources.device`` at their defaults, which keeps a saved job short;
        ``engine`` is not a job key. ``lora`` is written as its mapping, ``report_to`` as a list.
        """
        defaults = TrainConfig()
        data: dict[str, Any] = {}
        for key in COMMON_KEYS:
            value = getattr(self, key)
            if value is None or (key in _OMIT_AT_DEFAULT and value == getattr(defaults, key)):
                continue
            if isinstance(value, Lora):
                value = value.to_dict()
            data[key] = list(value) if isinstance(value, tuple) else value
        data["resources"] = {
            key: value
            for key in RESOURCE_KEYS
            if (value := getattr(self.resources, key)) is not None
            and not (key == "device" and value == defaults.resources.device)
        }
        data.update({name: dict(section) for name, section in self.sections.items()})
        return data


COMMON_KEYS = tuple(
    f.name
    for f in fields(TrainConfig)
    if f.name not in ("resources", "sections", "engine", "explicit")
)
RESOURCE_KEYS = tuple(f.name for f in fields(Resources))
# The ``lora:`` keys' rules; their defaults are :class:`Lora`'s.
LORA_RULES = {
    "rank": rule("integer", ge=1),
    "alpha": rule("number", gt=0),
    "dropout": rule("number", "a number >= 0 and < 1", ge=0, lt=1),
    "target_modules": rule("names", f"'{ALL_LINEAR}' or a non-empty list of module names"),
}
LORA_KEYS = tuple(f.name for f in fields(Lora))
_OMIT_AT_DEFAULT = ("trust_remote_code", "reward_timeout", "precision", "report_to")


def load_config(
    config: dict[str, Any] | str | Path | TrainConfig | None,
    overrides: list[str] | tuple[str, ...] = (),
    engine_names: tuple[str, ...] = (),
    base_dir: Path | None = None,
    engine: str | None = None,
    layout: ConfigLayout | None = None,
    declarations: Mapping[str, SettingsDeclaration] | None = None,
    where: str | None = None,
) -> TrainConfig:
    """Read a config (a dict, or a YAML/JSON path relative to ``base_dir``), apply dotted
    ``overrides``, and check every common key's type and range.

    Integers are strict: ``3.0``, ``"3"`` and ``true`` are not counts, and ``seed: 3.0`` is
    refused rather than truncated. Floats take ints, and strings that read as numbers (PyYAML
    reads ``1e-3`` as a string); NaN and infinities are refused.

    With ``engine`` and ``layout`` set, the top-level keys the layout claims move into the
    engine's section (deep-merged with a section given too), so an engine's own config file
    works whole; the file and the ``-o`` overrides are each merged so, then the overrides win.

    :param engine_names: the names allowed as engine sections (the installed engines).
    :param engine: the engine the job runs on; its section is what
        :meth:`TrainConfig.engine_section` returns.
    :param layout: how the engine's own config files look (its ``config_layout`` hook).
    :param declarations: the installed engines' settings declarations, by name. Given, their
        names are sections too, a key of one's own config file given to another engine is named
        as that engine's, and a mapping under another name (not a common key misspelt) is the
        section of an engine not installed here, so that one job file trains on any engine.
    :param where: how error lines name the config: the file a mapping was read from (a
        resolved job's ``written_config``); by default its file, or ``config``.
    :raises ConfigError: naming the file (or the ``-o`` override) and the key, with the range
        the key takes, or a did-you-mean for an unknown key; or naming both places of a key
        given at the top and in the engine's section with different values.
    """
    data, named = read_config(config, base_dir)
    where = named if where is None else where
    if isinstance(config, TrainConfig) and engine is None:
        engine = config.engine
    engine_names = (*engine_names, *(declarations or {}), *(() if engine is None else (engine,)))
    data = _with_overrides(data, where, parse_overrides(overrides), engine, engine_names, layout)
    sources = {item.partition("=")[0].strip(): f"-o {item}" for item in overrides}
    keys = _TopLevel(where, sources, engine, engine_names, declarations)
    for key, value in data.items():
        keys.take(key, value)
    lora = keys.values.pop("lora", None)
    hint = _algorithm_hint(engine, declarations or {})
    common = checked(
        "TrainConfigKeys", rules_of(TrainConfig), keys.values, where, "", sources, hint
    )
    explicit = frozenset(common) | ({"lora"} if lora is not None else frozenset())
    return TrainConfig(
        **common,
        lora=lora,
        resources=keys.resources,
        sections=keys.sections,
        engine=engine,
        explicit=explicit,
    )


def _with_overrides(
    data: dict[str, Any],
    where: str,
    extra: dict[str, Any],
    engine: str | None,
    engine_names: tuple[str, ...],
    layout: ConfigLayout | None,
) -> dict[str, Any]:
    """``data`` merged with the ``-o`` overrides, each with the keys ``layout`` claims moved."""
    if engine is not None and layout is not None:
        known = {*COMMON_KEYS, "resources", *engine_names} - {"algorithm"}
        commons = (*COMMON_KEYS, "resources")
        data = claim(data, engine, known, commons, layout, where)
        extra = claim(extra, engine, known, commons, layout, "-o")
    return merge(data, extra)


@dataclass
class _TopLevel:
    """The top-level keys of a config, sorted into common keys, ``resources`` and sections."""

    where: str
    sources: dict[str, str]
    engine: str | None
    engine_names: tuple[str, ...]
    declarations: Mapping[str, SettingsDeclaration] | None
    values: dict[str, Any] = field(default_factory=dict)
    resources: Resources = field(default_factory=Resources)
    sections: dict[str, dict[str, Any]] = field(default_factory=dict)

    def take(self, key: Any, value: Any) -> None:
        """File ``key``. :raises ConfigError: for an unknown key or a section not a mapping."""
        _check_name(self.where, "", key)
        if key == "lora":
            if value is not None:  # null: no LoRA
                self.values[key] = _lora(self.where, value, self.sources)
        elif key in COMMON_KEYS:
            if value is not None:  # null keeps the default (seed 42, algorithm grpo)
                self.values[key] = value
        elif key == "resources":
            self.resources = _resources(self.where, value, self.sources)
        elif key in self.engine_names or other_engine_section(
            key, value, self.declarations, (*COMMON_KEYS, "resources")
        ):
            if not isinstance(value, dict):
                raise not_a_section(self.where, key)
            # A copy: an engine that changes its section leaves the user's own mapping as
            # they gave it.
            self.sections[key] = copy.deepcopy(value)
        else:
            allowed = {*COMMON_KEYS, "resources", *self.engine_names}
            hint = _unknown_key_hint(key, self.engine, self.declarations or {})
            raise ConfigError(
                f"{self.where}: unknown config key '{key}'{did_you_mean(key, allowed)}; "
                f"known keys: {', '.join(sorted(allowed))}{hint}"
            )


def read_config(
    config: dict[str, Any] | str | Path | TrainConfig | None, base_dir: Path | None = None
) -> tuple[dict[str, Any], str]:
    """A config as the mapping the user wrote, and how error lines name it (its file, or
    ``config``): what :func:`load_config` reads before any check.

    :raises ConfigError: for a file that cannot be read as a mapping, or another type.
    """
    if config is None:
        return {}, "config"
    if isinstance(config, TrainConfig):
        return config.to_dict(), "config"
    if isinstance(config, dict):
        return config, "config"
    if isinstance(config, (str, Path)):
        path = Path(config) if base_dir is None else base_dir / config
        return read_mapping(path, ConfigError, "config"), str(path)
    raise ConfigError(f"config must be a mapping or a YAML/JSON path, not {type(config).__name__}")


def without_section_key(section: dict[str, Any], dotted: str) -> tuple[bool, Any, dict[str, Any]]:
    """Find the key ``dotted`` (``a.b.c``) in an engine's section, written nested
    (``{a: {b: {c: 1}}}``), as one dotted key (``{"a.b.c": 1}``) or mixed (``{a: {"b.c": 1}}``).

    :returns: ``(True, value, the section without the key)``, or ``(False, None, section)``
        when the section does not hold it; ``section`` itself is left as it is.
    """
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        head = ".".join(parts[:end])
        if head not in section:
            continue
        if end == len(parts):
            return (
                True,
                section[head],
                {key: value for key, value in section.items() if key != head},
            )
        if isinstance(section[head], dict):
            found, value, inner = without_section_key(section[head], ".".join(parts[end:]))
            if found:
                return True, value, {**section, head: inner}
    return False, None, section


def near_common_key(key: str) -> str | None:
    """The common key (or ``resources``) that ``key`` is a near miss of, or ``None``
    (:func:`~aworld_train.job._layout.near_miss`)."""
    return near_miss(key, (*COMMON_KEYS, "resources"))


def _algorithm_hint(
    engine: str | None, declarations: Mapping[str, SettingsDeclaration]
) -> Callable[[str, Any], str]:
    """The hint for an ``algorithm`` mapping: an installed engine's own ``algorithm`` section,
    given to another engine, is named as such."""

    def hint(key: str, value: Any) -> str:
        if key != "algorithm" or not isinstance(value, dict):
            return ""
        return whole_config_hint(key, engine, declarations)

    return hint


def _check_name(where: str, prefix: str, key: Any) -> None:
    if not isinstance(key, str):
        raise ConfigError(
            f"{where}: config key {prefix}{key!r} is not a name (a string); "
            "write the key's name, in quotes if YAML reads it as something else"
        )


def _resources(where: str, value: Any, sources: dict[str, str]) -> Resources:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: 'resources' must be a mapping (nnodes, gpus_per_node, ...)")
    items: dict[str, Any] = {}
    for key, item in value.items():
        _check_name(where, "resources.", key)
        if key not in RESOURCE_KEYS:
            raise ConfigError(
                f"{where}: unknown config key 'resources.{key}'{did_you_mean(key, RESOURCE_KEYS)}"
            )
        if item is not None:  # null keeps the default
            items[key] = item
    return Resources(
        **checked("ResourceKeys", rules_of(Resources), items, where, "resources.", sources)
    )


def _lora(where: str, value: Any, sources: dict[str, str]) -> Lora:
    """The ``lora:`` mapping checked, with the defaults filled (``alpha`` 2 × ``rank``).

    :raises ConfigError: for a value that is not a mapping, an unknown key (did-you-mean), a
        missing ``rank`` or a value out of range, naming ``lora.<key>``.
    """
    if isinstance(value, Lora):  # a TrainConfig given again
        value = value.to_dict()
    origin = sources.get("lora", None if where == "config" else where)
    prefix = f"{origin}: " if origin else ""
    if not isinstance(value, dict):
        raise ConfigError(
            f"{prefix}config 'lora' must be a mapping of {', '.join(LORA_KEYS)} "
            f"(for example lora: {{rank: 8}}), got {describe_value(value)}"
        )
    for key in value:
        _check_name(where, "lora.", key)
        if key not in LORA_KEYS:
            raise ConfigError(
                f"{prefix}unknown config key 'lora.{key}'"
                f"{did_you_mean(key, LORA_KEYS)}; known keys: {', '.join(LORA_KEYS)}"
            )
    items = {key: item for key, item in value.items() if item is not None}
    if "rank" not in items:
        raise ConfigError(
            f"{prefix}config 'lora.rank' is missing: give the adapter's rank, an "
            "integer >= 1 (for example lora: {rank: 8})"
        )
    return Lora(**checked("LoraKeys", LORA_RULES, items, where, "lora.", sources))
