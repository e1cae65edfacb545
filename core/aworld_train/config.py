"""Config: the engine-neutral training keys, one section per engine, and ``-o`` overrides.

The common keys have one schema (a pydantic model: each key's type and range, stated once),
checked before any engine code runs, so ``batch_size: 0`` or ``learning_rate: .nan`` fails in
``check`` with one line naming the key.
"""

# The schema's pydantic types are built when it is first needed (pydantic stays out of the
# import), so the type checker sees them as values: it checks the rest of the module.
# mypy: disable-error-code="valid-type"

from __future__ import annotations

import copy
import functools
import math
import reprlib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from aworld_train.errors import ConfigError, PluginError, did_you_mean
from aworld_train.settings import (
    ALL_LINEAR,
    LOSS_AGGREGATIONS,
    LR_SCHEDULERS,
    PRECISIONS,
    TRACKERS,
    Lora,
)

ALGORITHMS = ("grpo", "ppo", "sft", "dpo")
SEED_MAX = 2**32 - 1  # numpy's and CUDA's generators take 32-bit seeds
REWARD_TIMEOUT_MAX = 600.0
# The top-level keys of VeRL's own config (its composed ppo_trainer.yaml): named in the hint for
# a whole VeRL config given to another engine.
VERL_TOP_LEVEL_KEYS = frozenset({
    "actor_rollout_ref", "critic", "custom_reward_function", "data", "distillation",
    "global_profiler", "ray_kwargs", "reward", "reward_model", "sandbox_fusion", "trainer",
    "transfer_queue",
})
_VERL_HINT = "this looks like a whole VeRL config: run it with --engine verl, or put it under 'verl:'"


def _unknown_key_hint(key: str, engine: str | None) -> str:
    """What to add to "unknown config key": a job field given as a config key (``-o reward=``)
    is pointed to where it belongs; a key of VeRL's own config names VeRL, on another engine."""
    from aworld_train.job import JOB_FIELDS  # the job module imports this one

    if key in JOB_FIELDS:  # VeRL has a 'reward' key too, but a job's reward is meant here
        flag = f"--{key.replace('_', '-')} or " if key in _JOB_FLAGS else ""
        return f"; '{key}' is a field of the job, not of its config: give it as {flag}a top-level key of the job file"
    if key in VERL_TOP_LEVEL_KEYS and engine != "verl":
        return f"; {_VERL_HINT}"
    return ""


# The job fields `check` and `train` take as options of their own.
_JOB_FLAGS = frozenset({"agent", "train_dataset", "test_dataset", "reward", "config"})


@dataclass(frozen=True)
class ConfigLayout:
    """How an engine's own config files look, so that one given whole works as its section.

    An engine returns one from its ``config_layout`` hook. With it, a top-level config key the
    core does not know and the layout claims moves into the engine's section, as if written
    under ``<engine>:``; ``algorithm`` given as a mapping is claimed the same way when
    ``section_keys`` lists it.

    :ivar section_keys: the names at the top of the engine's own config file that belong in its
        section (VeRL: ``data``, ``actor_rollout_ref``, ``trainer``, ...).
    :ivar model_key: the dotted key inside the section that names the policy model
        (``actor_rollout_ref.model.path``); the core takes it out of the section and makes it
        the one model of the job, with the common ``model`` and the agent's.
    :ivar takes_any: every top-level key the core does not know belongs to the section: the
        engine owns its config format (a ``TrainerProcessor``).
    """

    section_keys: frozenset[str] = frozenset()
    model_key: str | None = None
    takes_any: bool = False

    def claims(self, key: str, value: Any) -> bool:
        """Whether the top-level ``key`` (with ``value``) belongs in the engine's section.

        :param key: a top-level key that is neither a common key, ``resources`` nor a section
            name, or ``algorithm``.
        """
        if key == "algorithm":  # the common key when it names one; VeRL's section when a mapping
            return isinstance(value, dict) and (self.takes_any or key in self.section_keys)
        # Hydra's ``+key`` (add) and ``++key`` (add or override) name the same section.
        return self.takes_any or key.lstrip("+") in self.section_keys


@dataclass
class Resources:
    """Where the job runs. Engines map these onto their own distributed runtime."""

    nnodes: int = 1
    gpus_per_node: int | None = None  # None: whatever the engine finds visible
    ray_address: str | None = None  # VeRL: the Ray cluster to join
    # The memory of one cluster GPU in GB, which ``check`` sizes the job against when the GPU
    # it trains on is not the one visible here. None: the visible GPU, if any.
    gpu_memory_gb: float | None = None


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

    algorithm: str = "grpo"
    model: str | None = None
    learning_rate: float | None = None
    max_steps: int | None = None
    num_epochs: float | None = None
    batch_size: int | None = None
    num_generations: int | None = None
    max_prompt_length: int | None = None
    max_completion_length: int | None = None
    seed: int = 42
    logging_steps: int | None = None
    save_steps: int | None = None
    trust_remote_code: bool = False
    reward_timeout: float = 5.0
    precision: str = "auto"
    lora: Lora | None = None
    report_to: tuple[str, ...] = ()
    kl_coef: float | None = None
    lr_scheduler: str | None = None
    warmup_ratio: float | None = None
    loss_aggregation: str | None = None
    clip_ratio: float | None = None
    entropy_coef: float | None = None
    eval_steps: int | None = None
    eval_limit: int | None = None
    log_samples: int | None = None
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
        ``precision`` and ``report_to`` at their defaults, which keeps a saved job short;
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
            key: getattr(self.resources, key)
            for key in RESOURCE_KEYS
            if getattr(self.resources, key) is not None
        }
        data.update({name: dict(section) for name, section in self.sections.items()})
        return data


COMMON_KEYS = tuple(
    f.name for f in fields(TrainConfig) if f.name not in ("resources", "sections", "engine", "explicit")
)
RESOURCE_KEYS = tuple(f.name for f in fields(Resources))
LORA_KEYS = ("rank", "alpha", "dropout", "target_modules")
_OMIT_AT_DEFAULT = ("trust_remote_code", "reward_timeout", "precision", "report_to")
# The keys that take one of a few names: a misspelt one gets a did-you-mean.
_CHOICES = {"precision": PRECISIONS, "lr_scheduler": LR_SCHEDULERS,
            "loss_aggregation": LOSS_AGGREGATIONS, "report_to": TRACKERS}


def first_non_finite(value: Any) -> float | None:
    """The first NaN or infinity anywhere in ``value`` (mappings, lists and tuples walked), or
    ``None``: what every engine refuses in its own section, whatever the field's type."""
    if isinstance(value, float):
        return None if math.isfinite(value) else value
    items = value.values() if isinstance(value, Mapping) else value
    if isinstance(value, (Mapping, list, tuple)):
        return next((bad for item in items if (bad := first_non_finite(item)) is not None), None)
    return None


def describe_value(value: Any) -> str:
    """``int 7``, ``str 'yes'``, ``list [1, 2, ...]``: a value for an error line, kept short."""
    return f"{type(value).__name__} {reprlib.repr(value)}"


def parse_overrides(overrides: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """Turn ``["a.b=1", "trl.beta=0.0"]`` into a nested dict; values are parsed as YAML scalars.

    A value that is not valid YAML (or one past the YAML guards in :mod:`aworld_train.files`)
    stays text.

    :raises ConfigError: for an item without ``=`` or with an empty key.
    """
    import yaml

    from aworld_train.files import guarded_yaml_loader

    nested: dict[str, Any] = {}
    for item in overrides:
        key, sep, raw = item.partition("=")
        parts = key.strip().split(".")
        if not sep or not all(parts):
            raise ConfigError(f"override '{item}' is not KEY=VALUE (for example -o max_steps=50)")
        try:
            value = yaml.load(raw, Loader=guarded_yaml_loader()) if raw.strip() else ""
        except (yaml.YAMLError, ValueError):
            value = raw
        node = nested
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override '{item}' sets a key inside '{part}', which is a value")
        node[parts[-1]] = value
    return nested


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge ``extra`` into a copy of ``base``; ``extra`` wins."""
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def load_config(
    config: dict[str, Any] | str | Path | TrainConfig | None,
    overrides: list[str] | tuple[str, ...] = (),
    engine_names: tuple[str, ...] = (),
    base_dir: Path | None = None,
    engine: str | None = None,
    layout: ConfigLayout | None = None,
) -> TrainConfig:
    """Read a config (a dict, or a YAML/JSON path relative to ``base_dir``), apply dotted
    ``overrides``, and check every common key's type and range.

    Integers are strict: ``3.0``, ``"3"`` and ``true`` are not counts, and ``seed: 3.0`` is
    refused rather than truncated. Floats take ints, and strings that read as numbers (PyYAML
    reads ``1e-3`` as a string); NaN and infinities are refused.

    With ``engine`` and ``layout`` set, the top-level keys the layout claims move into the
    engine's section (deep-merged with a section given too), so an engine's own config file
    works whole; the file and the ``-o`` overrides are each merged so, then the overrides win.

    :param engine_names: the names allowed as engine sections (the installed engines and the
        engines this project ships).
    :param engine: the engine the job runs on; its section is what
        :meth:`TrainConfig.engine_section` returns.
    :param layout: how the engine's own config files look (its ``config_layout`` hook).
    :raises ConfigError: naming the file (or the ``-o`` override) and the key, with the range
        the key takes, or a did-you-mean for an unknown key; or naming both places of a key
        given at the top and in the engine's section with different values.
    """
    data, where = read_config(config, base_dir)
    extra = parse_overrides(overrides)
    if isinstance(config, TrainConfig) and engine is None:
        engine = config.engine
    if engine is not None:
        engine_names = (*engine_names, engine)
        if layout is not None:
            data = _claim(data, engine, engine_names, layout, where)
            extra = _claim(extra, engine, engine_names, layout, "-o")
    data = merge(data, extra)
    sources = {item.partition("=")[0].strip(): f"-o {item}" for item in overrides}

    allowed = set(COMMON_KEYS) | {"resources"} | set(engine_names)
    values: dict[str, Any] = {}
    resources = Resources()
    sections: dict[str, dict[str, Any]] = {}
    for key, value in data.items():
        _check_name(where, "", key)
        if key == "lora":
            if value is not None:  # null: no LoRA
                values[key] = _lora(where, value, sources)
        elif key in COMMON_KEYS:
            if value is not None:  # null keeps the default (seed 42, algorithm grpo)
                values[key] = value
        elif key == "resources":
            resources = _resources(where, value, sources)
        elif key in engine_names:
            if not isinstance(value, dict):
                raise _not_a_section(where, key)
            # A copy: the core takes the model key out of it (pop_section_key), and the
            # user's own mapping stays as they gave it.
            sections[key] = copy.deepcopy(value)
        else:
            hint = _unknown_key_hint(key, engine)
            raise ConfigError(
                f"{where}: unknown config key '{key}'{did_you_mean(key, allowed)}; "
                f"known keys: {', '.join(sorted(allowed))}{hint}"
            )
    lora = values.pop("lora", None)
    checked = _validate(_common_schema(), values, where, "", sources)
    explicit = frozenset(checked) | ({"lora"} if lora is not None else frozenset())
    return TrainConfig(**checked, lora=lora, resources=resources, sections=sections,
                       engine=engine, explicit=explicit)


def read_config(config: dict[str, Any] | str | Path | TrainConfig | None,
                base_dir: Path | None = None) -> tuple[dict[str, Any], str]:
    """A config as the mapping the user wrote, and how error lines name it (its file, or
    ``config``): what :func:`load_config` reads before any check.

    :raises ConfigError: for a file that cannot be read as a mapping, or another type.
    """
    from aworld_train.files import read_mapping

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


def pop_section_key(section: dict[str, Any], dotted: str) -> tuple[bool, Any]:
    """Find the key ``dotted`` (``a.b.c``) in an engine's section, written nested
    (``{a: {b: {c: 1}}}``), as one dotted key (``{"a.b.c": 1}``) or mixed (``{a: {"b.c": 1}}``);
    remove it.

    :returns: ``(True, value)``, or ``(False, None)`` when the section does not hold it.
    """
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        head = ".".join(parts[:end])
        if head not in section:
            continue
        if end == len(parts):
            return True, section.pop(head)
        if isinstance(section[head], dict):
            found, value = pop_section_key(section[head], ".".join(parts[end:]))
            if found:
                return True, value
    return False, None


def _claim(data: dict[str, Any], engine: str, engine_names: tuple[str, ...],
           layout: ConfigLayout, where: str) -> dict[str, Any]:
    """``data`` with the top-level keys ``layout`` claims moved into ``engine``'s section.

    :raises ConfigError: for a key given at the top and in the section with different values.
    """
    known = {*COMMON_KEYS, "resources", *engine_names} - {"algorithm"}
    claimed = {key: value for key, value in data.items()
               if isinstance(key, str) and key not in known and layout.claims(key, value)}
    if not claimed:
        return data
    for key in claimed:
        # A key the layout names is the engine's own; one claimed only because the engine
        # takes any key (a processor) may be a common key misspelt, which would do nothing.
        near = None if key.lstrip("+") in layout.section_keys else near_common_key(key)
        if near is not None:
            raise ConfigError(f"{where}: unknown config key '{key}' (did you mean '{near}'?); "
                              f"engine '{engine}' takes keys of its own, but not one this close "
                              "to a common key")
    section = data.get(engine, {})
    if not isinstance(section, dict):
        raise _not_a_section(where, engine)
    kept = {key: value for key, value in data.items() if key not in claimed}
    kept[engine] = _merge_once(claimed, section, where, engine, "")
    return kept


def near_common_key(key: str) -> str | None:
    """The common key (or ``resources``) that ``key`` is a near miss of, or ``None``.

    A near miss is the same key in another case or with ``-``/``_`` dropped or changed
    (``learningRate``), two adjacent letters swapped (``modle``), or, for a common key of six
    or more letters, one edit (``learning_rat``, ``max_step``; two from ten letters on). A key
    that adds whole words to a common key (``clip_ratio_c``) is another key. Looser likeness
    (``did_you_mean``'s) would refuse an engine's own keys such as ``model_path`` or ``mode``.
    """
    commons = (*COMMON_KEYS, "resources")
    if key in commons:
        return None
    word, words = _key_letters(key), key.lstrip("+").lower().replace("-", "_").split("_")
    for common in commons:
        letters, common_words = _key_letters(common), common.split("_")
        if len(words) > len(common_words) and words[:len(common_words)] == common_words:
            continue
        allowed = 2 if len(letters) >= 10 else 1 if len(letters) >= 6 else 0
        if word == letters or _swapped(word, letters) or _edit_distance(word, letters) <= allowed:
            return common
    return None


def _key_letters(key: str) -> str:
    """A key compared by its letters: lower case, without ``+``, ``-`` and ``_``."""
    return key.lower().lstrip("+").replace("-", "").replace("_", "")


def _swapped(word: str, other: str) -> bool:
    """Whether ``word`` is ``other`` with two adjacent letters swapped."""
    differ = [i for i, (a, b) in enumerate(zip(word, other)) if a != b]
    return (len(word) == len(other) and len(differ) == 2 and differ[1] == differ[0] + 1
            and word[differ[0]] == other[differ[1]] and word[differ[1]] == other[differ[0]])


def _edit_distance(word: str, other: str) -> int:
    """Levenshtein distance (insertions, deletions, substitutions)."""
    previous = list(range(len(other) + 1))
    for i, a in enumerate(word, start=1):
        current = [i]
        for j, b in enumerate(other, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a != b)))
        previous = current
    return previous[-1]


def _merge_once(top: dict[str, Any], section: dict[str, Any], where: str, engine: str,
                prefix: str) -> dict[str, Any]:
    """``top`` deep-merged into a copy of ``section``; a key in both must hold one value."""
    merged = dict(section)
    for key, value in top.items():
        dotted = f"{prefix}{key}"
        if key not in merged:
            merged[key] = value
        elif isinstance(value, dict) and isinstance(merged[key], dict):
            merged[key] = _merge_once(value, merged[key], where, engine, f"{dotted}.")
        elif value != merged[key]:
            raise ConfigError(
                f"{where}: config key '{dotted}' is {describe_value(value)} but "
                f"'{engine}.{dotted}' is {describe_value(merged[key])}: give it once, at the "
                f"top or under '{engine}:'"
            )
    return merged


def _not_a_section(where: str, key: str) -> ConfigError:
    return ConfigError(f"{where}: '{key}' must be a mapping of {key} settings")


def _check_name(where: str, prefix: str, key: Any) -> None:
    if not isinstance(key, str):
        raise ConfigError(f"{where}: config key {prefix}{key!r} is not a name (a string); "
                          "write the key's name, in quotes if YAML reads it as something else")


def _resources(where: str, value: Any, sources: dict[str, str]) -> Resources:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: 'resources' must be a mapping (nnodes, gpus_per_node, ...)")
    items: dict[str, Any] = {}
    for key, item in value.items():
        _check_name(where, "resources.", key)
        if key not in RESOURCE_KEYS:
            raise ConfigError(
                f"{where}: unknown config key 'resources.{key}'"
                f"{did_you_mean(key, RESOURCE_KEYS)}"
            )
        if item is not None:  # null keeps the default
            items[key] = item
    return Resources(**_validate(_resources_schema(), items, where, "resources.", sources))


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
        raise ConfigError(f"{prefix}config 'lora' must be a mapping of {', '.join(LORA_KEYS)} "
                          f"(for example lora: {{rank: 8}}), got {describe_value(value)}")
    for key in value:
        _check_name(where, "lora.", key)
        if key not in LORA_KEYS:
            raise ConfigError(f"{prefix}unknown config key 'lora.{key}'"
                              f"{did_you_mean(key, LORA_KEYS)}; known keys: {', '.join(LORA_KEYS)}")
    items = {key: item for key, item in value.items() if item is not None}
    if "rank" not in items:
        raise ConfigError(f"{prefix}config 'lora.rank' is missing: give the adapter's rank, an "
                          "integer >= 1 (for example lora: {rank: 8})")
    return Lora(**_validate(_lora_schema(), items, where, "lora.", sources))


def _validate(schema: Any, values: dict[str, Any], where: str, prefix: str,
              sources: dict[str, str]) -> dict[str, Any]:
    """``values`` checked against ``schema``; the first failure as one line naming the key."""
    from pydantic import ValidationError

    try:
        checked = schema.model_validate(values)
    except ValidationError as exc:
        key = str(exc.errors()[0]["loc"][0])
        value = values[key]
        dotted = prefix + key
        origin = sources.get(dotted, None if where == "config" else where)
        hint = ""
        if key == "algorithm" and isinstance(value, str):
            hint = did_you_mean(value.lower(), ALGORITHMS)
        elif key == "algorithm" and isinstance(value, dict):  # VeRL's own algorithm section
            hint = f"; {_VERL_HINT}"
        elif key in _CHOICES:
            names = [value] if isinstance(value, str) else value if isinstance(value, list) else []
            wrong = [name for name in names if isinstance(name, str) and name not in _CHOICES[key]]
            hint = did_you_mean(wrong[0].lower(), _CHOICES[key]) if wrong else ""
        raise ConfigError(
            (f"{origin}: " if origin else "")
            + f"config '{dotted}' must be {schema.model_fields[key].description}, "
            f"got {describe_value(value)}{hint}"
        ) from None
    return {key: getattr(checked, key) for key in values}


@functools.cache
def _number_types() -> tuple[Any, Any, Any]:
    """Strict pydantic types: an integer >= 1, an integer >= 0, a finite number."""
    from typing import Annotated

    from pydantic import BeforeValidator, Field, StrictInt

    def read_number(value: Any) -> Any:
        # PyYAML reads "1e-3" (no dot) as a string; a string that is not a number is refused.
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                return value
        return value

    count = Annotated[StrictInt, Field(ge=1)]
    natural = Annotated[StrictInt, Field(ge=0)]
    finite = Annotated[float, BeforeValidator(read_number), Field(strict=True,
                                                                  allow_inf_nan=False)]
    return count, natural, finite


@functools.cache
def _common_schema() -> Any:
    """The common keys' types and ranges; ``description`` is how an error line words each."""
    from typing import Annotated

    from typing import Literal

    from pydantic import (
        BaseModel,
        BeforeValidator,
        ConfigDict,
        Field,
        StrictBool,
        StrictInt,
        StrictStr,
    )

    count, natural, finite = _number_types()
    count_rule = "an integer >= 1"

    class CommonKeys(BaseModel):
        model_config = ConfigDict(strict=True, extra="forbid")

        # The form only: which algorithms an engine trains is the engine's to say (VeRL takes
        # any of its advantage estimators by name), and each engine refuses the rest.
        algorithm: Annotated[StrictStr, Field(pattern=r"^[a-z][a-z0-9_]*$")] = Field(
            "grpo", description="an algorithm name such as " + ", ".join(ALGORITHMS))
        model: Annotated[StrictStr, Field(pattern=r"\S")] | None = Field(
            None, description="a model folder or hub id (a non-empty string)")
        learning_rate: Annotated[finite, Field(gt=0)] | None = Field(
            None, description="a finite number > 0")
        max_steps: count | None = Field(None, description=count_rule)
        num_epochs: Annotated[finite, Field(gt=0)] | None = Field(
            None, description="a finite number > 0")
        batch_size: count | None = Field(None, description=count_rule)
        num_generations: count | None = Field(None, description=count_rule)
        max_prompt_length: count | None = Field(None, description=count_rule)
        max_completion_length: count | None = Field(None, description=count_rule)
        seed: Annotated[StrictInt, Field(ge=0, le=SEED_MAX)] = Field(
            42, description=f"an integer from 0 to {SEED_MAX}")
        logging_steps: count | None = Field(None, description=count_rule)
        save_steps: count | None = Field(None, description=count_rule)
        trust_remote_code: StrictBool = Field(False, description="true or false")
        reward_timeout: Annotated[finite, Field(gt=0, le=REWARD_TIMEOUT_MAX)] = Field(
            5.0, description=f"a number of seconds > 0 and <= {REWARD_TIMEOUT_MAX:g}")
        precision: Literal[PRECISIONS] = Field(  # type: ignore[valid-type]
            "auto", description=_one_of(PRECISIONS))
        report_to: Annotated[
            tuple[Literal[TRACKERS], ...], BeforeValidator(_trackers)  # type: ignore[valid-type]
        ] = Field((), description=f"none, or a list of {', '.join(TRACKERS)}")
        kl_coef: Annotated[finite, Field(ge=0)] | None = Field(
            None, description="a finite number >= 0")
        lr_scheduler: Literal[LR_SCHEDULERS] | None = Field(  # type: ignore[valid-type]
            None, description=_one_of(LR_SCHEDULERS))
        warmup_ratio: Annotated[finite, Field(ge=0, le=1)] | None = Field(
            None, description="a number from 0 to 1")
        loss_aggregation: Literal[LOSS_AGGREGATIONS] | None = Field(  # type: ignore[valid-type]
            None, description=_one_of(LOSS_AGGREGATIONS))
        clip_ratio: Annotated[finite, Field(gt=0)] | None = Field(
            None, description="a finite number > 0")
        entropy_coef: Annotated[finite, Field(ge=0)] | None = Field(
            None, description="a finite number >= 0")
        eval_steps: count | None = Field(None, description=count_rule)
        eval_limit: count | None = Field(None, description=count_rule)
        log_samples: natural | None = Field(None, description="an integer >= 0 (0: none)")

    return CommonKeys


def _one_of(names: tuple[str, ...]) -> str:
    return "one of " + ", ".join(names)


def _trackers(value: Any) -> Any:
    """``report_to`` as a tuple: one name is one tracker, ``none`` none; repeats dropped."""
    if value == "none":
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list):
        return tuple(dict.fromkeys(value)) if all(isinstance(v, str) for v in value) else value
    return value


@functools.cache
def _lora_schema() -> Any:
    """The ``lora:`` keys' types and ranges (the defaults are :class:`Lora`'s)."""
    from typing import Annotated

    from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictStr

    count, _, finite = _number_types()
    name = Annotated[StrictStr, Field(pattern=r"\S")]

    def modules(value: Any) -> Any:
        return tuple(value) if isinstance(value, list) else value

    class LoraKeys(BaseModel):
        model_config = ConfigDict(strict=True, extra="forbid")

        rank: count = Field(description="an integer >= 1")
        alpha: Annotated[finite, Field(gt=0)] | None = Field(
            None, description="a finite number > 0")
        dropout: Annotated[finite, Field(ge=0, lt=1)] = Field(
            0.0, description="a number >= 0 and < 1")
        target_modules: name | Annotated[
            tuple[name, ...], Field(min_length=1), BeforeValidator(modules)
        ] = Field(ALL_LINEAR, description=f"'{ALL_LINEAR}' or a non-empty list of module names")

    return LoraKeys


@functools.cache
def _resources_schema() -> Any:
    from typing import Annotated

    from pydantic import BaseModel, ConfigDict, Field, StrictStr

    count, natural, finite = _number_types()

    class ResourceKeys(BaseModel):
        model_config = ConfigDict(strict=True, extra="forbid")

        nnodes: count = Field(1, description="an integer >= 1")
        gpus_per_node: natural | None = Field(None, description="an integer >= 0")
        ray_address: StrictStr | None = Field(None, description="a Ray address (a string)")
        gpu_memory_gb: Annotated[finite, Field(gt=0)] | None = Field(
            None, description="a number of GB > 0")

    return ResourceKeys
