"""The ``swift:`` section's schema: ms-swift's own argument dataclass and registries.

Each key must be a field of the dataclass swift parses for the algorithm (``SftArguments`` for
SFT, ``RLHFArguments`` for GRPO and DPO). Its value is validated by pydantic against that
field's type, strictly (``"8"`` is not an integer, ``true`` is not a number, ``.nan`` and
``.inf`` are refused), and, where swift takes a name, against the names swift accepts: a
``Literal``, an enum, a field's ``choices`` metadata, or one of swift's registries (model types,
templates, tuners, callbacks, optimizers, loss types, ...).

An ms-swift config file (the arguments at its top level, ``model`` naming the model) may be a
job's whole ``config:``: :func:`section_keys` names what the core moves into the ``swift:``
section, and :data:`MODEL_KEY` is one of the places that name the job's model.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from dataclasses import dataclass
from typing import Any

from aworld_train.engine import ConfigError, check_value, did_you_mean
from aworld_train.engine.hf import all_argument_names, arguments_class
from aworld_train.engine.settings import JOB_FIELDS

# The argument dataclass swift parses each algorithm this engine trains into.
ARGUMENT_CLASSES = {
    "sft": "swift.arguments:SftArguments",
    "grpo": "swift.arguments:RLHFArguments",
    "dpo": "swift.arguments:RLHFArguments",
}
ALGORITHMS = tuple(ARGUMENT_CLASSES)
# The argument that names the policy model in an ms-swift config file.
MODEL_KEY = "model"
# Arguments this engine sets from the job itself: the section may leave them null (as an
# ms-swift config file may) but not give them a value.
MANAGED = {
    "model": "the config's `model` key or the agent's model",
    "dataset": "the job's train_dataset",
    "val_dataset": "the job's test_dataset",
    "output_dir": "the run directory (checkpoints/)",
    "rlhf_type": "the config's `algorithm` key",
    "reward_funcs": "the job's reward",
    "reward_weights": "the weights of the job's reward",
    "resume_from_checkpoint": "`aworld-train train --resume RUN`",
}
# Keys that hold a credential. swift writes its arguments to args.json and pickles them into
# every training_args.bin, so these never become arguments: training reads them from the
# environment variable swift (or the library it calls) looks up instead.
SECRETS = {
    "hub_token": ("MODELSCOPE_API_TOKEN", "HF_TOKEN"),  # ModelScope, or the Hub with use_hf
    "swanlab_token": ("SWANLAB_API_KEY", "SWANLAB_API_KEY"),
}
# Credentials swift takes only as arguments (no environment variable reads them): they would be
# written to args.json and pickled into every checkpoint, so they are refused.
_UNSAFE = ("swanlab_secret", "swanlab_webhook_url")
# The loss types ms-swift 4.6's trainers branch on. They are not listed anywhere importable
# (an unknown one fails in the first training step), so they are stated here.
LOSS_TYPES = {
    "grpo": ("grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo", "real", "fipo"),
    "dpo": (
        "sigmoid",
        "robust",
        "exo_pair",
        "hinge",
        "ipo",
        "bco_pair",
        "sppo_hard",
        "nca_pair",
        "aot",
        "aot_unpaired",
        "apo_zero",
        "apo_down",
        "discopop",
        "sft",
    ),
}
# Keys that make swift import the user's files, which may register more names.
_PLUGIN_KEYS = ("external_plugins", "custom_register_path")
# Show every choice in an error when there are at most this many.
_LIST_UP_TO = 20


@dataclass(frozen=True)
class Field:
    """One key of the section: its type and, where swift takes a name, the names it accepts.

    :ivar registry: whether the names come from a registry that a plugin file may extend.
    """

    name: str
    hint: Any
    choices: tuple[str, ...] | None = None
    registry: bool = False


def section_keys() -> frozenset[str]:
    """The top-level keys of an ms-swift config file that belong in the ``swift:`` section: the
    arguments of every dataclass this engine parses an algorithm into.

    ``columns``, an argument but also a field of the job file, is left out: at the top of a
    job's config it is a misplaced job field, not swift's column mapping. The names are read
    from swift's argument classes once per ms-swift version (no model, no GPU), with swift's
    import-time log lines kept off the terminal.
    """
    import functools
    import os
    from pathlib import Path

    from aworld_train_swift.logs import log_to_file

    quiet = functools.partial(log_to_file, Path(os.devnull))
    return all_argument_names("ms-swift", ARGUMENT_CLASSES, quiet) - set(JOB_FIELDS)


def reward_funcs_moved(value: Any) -> str:
    """Where ``swift.reward_funcs`` goes instead: ms-swift's own rewards are named in the job's
    reward as ``swift:<name>``, beside (and weighted like) the job's own functions."""
    names = [value] if isinstance(value, str) else list(value or [])
    written = ", ".join(f"swift:{name}" for name in names) or "swift:accuracy"
    return (
        f"config key 'swift.reward_funcs' is {value!r}: name ms-swift's rewards in the job's "
        f"reward instead, reward: [{written}] (beside the job's own file.py:function, with "
        "weights as {name: swift:format, weight: 0.5}); leave swift.reward_funcs out"
    )


def validate_section(section: dict[str, Any], algorithm: str) -> dict[str, Any]:
    """Check every key and value of the ``swift:`` section.

    :param algorithm: the config's ``algorithm``: ``sft``, ``grpo`` or ``dpo``.
    :returns: the section with its values as swift takes them (a number YAML read as text,
        ``1e-4``, becomes a number; one item where a list is expected becomes a list).
    :raises ConfigError: naming the key, with a suggestion or the accepted values; for an
        algorithm this engine does not train.
    """
    if algorithm not in ALGORITHMS:
        raise ConfigError(
            f"config key 'algorithm': the swift engine trains {list(ALGORITHMS)}, not "
            f"'{algorithm}'" + did_you_mean(algorithm, ALGORITHMS)
        )
    cls = arguments_class(ARGUMENT_CLASSES, algorithm)
    fields = section_fields(algorithm)
    plugins = any(section.get(key) for key in _PLUGIN_KEYS)
    # What the engine itself sets a managed argument to, where a config file may repeat it.
    wired = {"rlhf_type": algorithm}
    checked = {}
    for key, value in section.items():
        if key in MANAGED:
            if value is None or wired.get(key) == value:
                continue  # the engine fills it in
            if key == "reward_funcs":
                raise ConfigError(reward_funcs_moved(value))
            engine_value = f" ({wired[key]!r})" if key in wired else ""
            raise ConfigError(
                f"config key 'swift.{key}' is {value!r}, but aworld-train sets it from "
                f"{MANAGED[key]}{engine_value}; leave it out or null"
            )
        if key in _UNSAFE:
            raise ConfigError(
                f"config key 'swift.{key}' holds a credential that ms-swift would write to "
                "args.json and into every checkpoint; aworld-train does not pass it on"
            )
        if key not in fields:
            raise ConfigError(
                f"config key 'swift.{key}' is not an argument of ms-swift's {cls.__name__}"
                + did_you_mean(key, fields)
            )
        field = fields[key]
        checked[key] = validate_value(field, value)
        if field.choices is not None and not (field.registry and plugins):
            _check_choices(field, checked[key])
    return checked


def validate_value(field: Field, value: Any) -> Any:
    """``value`` as ``field``'s type holds it, or as swift's own command line would also read
    it (:func:`_other_readings`).

    :raises ConfigError: naming the key and what its type needs.
    """
    return check_value(
        field.hint, value, f"config key 'swift.{field.name}'", readings=_other_readings(value)
    )


@functools.cache
def section_fields(algorithm: str) -> dict[str, Field]:
    """Every field of swift's argument dataclass for ``algorithm``, with its choices."""
    cls = arguments_class(ARGUMENT_CLASSES, algorithm)
    hints = typing.get_type_hints(cls)
    registries = registry_choices(algorithm)
    fields = {}
    for item in dataclasses.fields(cls):
        if not item.init:
            continue
        hint = hints.get(item.name, Any)
        choices, registry = _fixed_choices(hint, item.metadata), False
        if item.name in registries:
            choices, registry = registries[item.name], True
        fields[item.name] = Field(item.name, hint, choices, registry)
    return fields


def registry_choices(algorithm: str) -> dict[str, tuple[str, ...]]:
    """The names swift accepts for the fields that name an entry of one of its registries."""
    from swift.agent_template import agent_template_map
    from swift.arguments.base_args.base_args import get_supported_tuners
    from swift.callbacks import callbacks_map
    from swift.loss import loss_map
    from swift.model import MODEL_MAPPING
    from swift.optimizers import optimizers_map
    from swift.template import TEMPLATE_MAPPING
    from transformers.integrations.integration_utils import INTEGRATION_TO_CALLBACK
    from transformers.trainer_utils import SchedulerType

    model_types, templates = tuple(MODEL_MAPPING), tuple(TEMPLATE_MAPPING)
    return {
        "model_type": model_types,
        "ref_model_type": model_types,
        "reward_model_type": model_types,
        "teacher_model_type": model_types,
        "template": templates,
        "reward_template": templates,
        "agent_template": tuple(agent_template_map),
        "tuner_type": tuple(sorted(get_supported_tuners())),
        "callbacks": tuple(callbacks_map),
        "optimizer": tuple(optimizers_map),
        "loss_type": LOSS_TYPES.get(algorithm, tuple(loss_map)),
        "lr_scheduler_type": tuple(s.value for s in SchedulerType),
        "report_to": ("none", "all", *INTEGRATION_TO_CALLBACK),
    }


def _fixed_choices(hint: Any, metadata: Any) -> tuple[str, ...] | None:
    """The names a field takes from its ``choices`` metadata or an enum in its type (a
    ``Literal`` is checked by pydantic itself)."""
    if metadata.get("choices"):
        return tuple(str(choice) for choice in metadata["choices"])
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        for option in typing.get_args(hint):
            if isinstance(option, type) and issubclass(option, enum.Enum):
                return tuple(str(member.value) for member in option)
    return None


def _check_choices(field: Field, value: Any) -> None:
    """:raises ConfigError: when a name in ``value`` is not one of ``field.choices``."""
    assert field.choices is not None
    names = value if isinstance(value, list) else [value]
    for name in names:
        if isinstance(name, str) and name not in field.choices:
            accepted = (
                f"choose one of {list(field.choices)}"
                if len(field.choices) <= _LIST_UP_TO
                else f"ms-swift knows {len(field.choices)} of them"
            )
            suggestion = did_you_mean(name, field.choices)
            raise ConfigError(
                f"config key 'swift.{field.name}': ms-swift has no {field.name} {name!r}"
                f"{suggestion}; {accepted}"
            )


def _other_readings(value: Any) -> list[Any]:
    """What swift's own command line would also take ``value`` for: a number written as text
    (YAML reads ``1e-4`` as a string), one item where a list is expected."""
    readings: list[Any] = []
    if isinstance(value, str):
        try:
            readings.append(float(value))
        except ValueError:
            pass
    if not isinstance(value, list):
        readings.append([value])
    return readings
