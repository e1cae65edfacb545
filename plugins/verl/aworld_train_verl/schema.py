"""The values the ``verl:`` section may hold: each key's type, read from the dataclass VeRL turns
its config node into (the node's ``_target_``, e.g. ``verl.workers.config.RolloutConfig``), and
the names VeRL looks up in its registries (rollout backends, advantage estimators, ...).

Reading them means importing VeRL (seconds), yet they depend only on the installed VeRL and the
``verl.plugins`` that register more names: they are kept as JSON under
``~/.cache/aworld-train/`` (``$XDG_CACHE_HOME``) per VeRL version, so checking values needs
neither VeRL nor torch once the cache exists.

Types are stored as small JSON terms (``"int"``, ``"any"``, ``{"union": [...]}``,
``{"literal": [...]}``, ``{"list": ...}``) and checked strictly by
:func:`aworld_train.engine.check_value`: an int is accepted where VeRL declares a float (``top_p:
1`` and ``top_p: 1.0`` alike), a bool never where it declares an int, anything where it declares
``Any``, and NaN or an infinity nowhere. A key no dataclass declares is checked against the type of its default.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aworld_train.engine import ConfigError, check_value, did_you_mean
from aworld_train.engine.launch import cached
from aworld_train.engine.settings import first_non_finite, fits, yaml_repr

from aworld_train_verl.composition import base_config, cache_key

if TYPE_CHECKING:
    from omegaconf import DictConfig

#: The keys VeRL resolves by name, and what the names are: each is read from VeRL's own registry.
REGISTRIES = {
    "algorithm.adv_estimator": "advantage estimators",
    "actor_rollout_ref.actor.policy_loss.loss_mode": "policy losses",
    "actor_rollout_ref.rollout.name": "rollout backends",
    "reward.reward_manager.name": "reward managers",
    # Both are handed to verl.trainer.ppo.core_algos.kl_penalty, which fails on any other name only
    # when it first computes a KL (the first actor update, or the first KL penalty in the reward).
    "actor_rollout_ref.actor.kl_loss_type": "KL estimators (core_algos.kl_penalty)",
    "algorithm.kl_penalty": "KL estimators (core_algos.kl_penalty)",
    # A name or a list of names; verl.utils.tracking.Tracking asserts each when the trainer starts.
    "trainer.logger": "trackers (verl.utils.tracking.Tracking)",
}

# Keys VeRL's code takes in a form besides its default's type, with that form as a JSON term:
# ``Tracking`` wraps a single tracker name in a list (VeRL's own scripts write
# ``trainer.logger=console``).
ALSO_TAKES: dict[str, Any] = {"trainer.logger": "str"}

# Where VeRL's KL estimators are named: the function that dispatches on the name.
KL_MODULE = "verl/trainer/ppo/core_algos.py"
KL_FUNCTION = "kl_penalty_forward"

# A registry that applies only while another key has a value: (that key, the value).
REGISTRY_CONDITIONS = {"reward.reward_manager.name": ("reward.reward_manager.source", "register")}

# Counts and rates VeRL takes without a range check and fails on later (in Ray, on the GPU):
# (what the key ends with, the lowest value, whether the lowest is allowed, the highest value or
# None). The first rule that matches applies; every default of VeRL's config passes.
RANGES: tuple[tuple[str, float, bool, float | None], ...] = (
    ("batch_size", 1, True, None),
    ("batch_size_per_gpu", 1, True, None),
    ("ppo_epochs", 1, True, None),
    ("total_epochs", 1, True, None),
    ("trainer.nnodes", 1, True, None),
    ("trainer.n_gpus_per_node", 1, True, None),
    ("rollout.n", 1, True, None),
    ("temperature", 0, True, None),
    ("top_p", 0, False, 1),
    ("gpu_memory_utilization", 0, False, 1),
    ("optim.lr", 0, True, None),
)


@dataclass(frozen=True)
class Schema:
    """What VeRL's code says of its config keys.

    :ivar types: each key's type as a JSON term (see :func:`type_term`), for the keys a
        dataclass declares.
    :ivar owners: for the same keys, the dataclass and field that declare it (for messages).
    :ivar choices: the names each key of :data:`REGISTRIES` accepts.
    """

    types: dict[str, Any]
    owners: dict[str, str]
    choices: dict[str, list[str]]


@functools.lru_cache(maxsize=1)
def schema() -> Schema:
    """The schema of the installed VeRL: read from the cache, else built (importing VeRL) and
    cached."""

    def make() -> str:
        return json.dumps(dataclasses.asdict(build(base_config())), sort_keys=True)

    def valid(text: str) -> bool:
        try:
            return set(json.loads(text)) == {f.name for f in dataclasses.fields(Schema)}
        except ValueError:
            return False

    return Schema(**json.loads(cached("verl-schema.json", make, valid, key=cache_key())))


def build(base: DictConfig) -> Schema:
    """Read each key's type and the registries' names from VeRL's code (imports VeRL)."""
    types: dict[str, Any] = {}
    owners: dict[str, str] = {}
    for key, owner, hint in _declared(base):
        term = type_term(hint)
        if term is not None:
            types[key] = term
            owners[key] = owner
    return Schema(types=types, owners=owners, choices=registry_names())


def _declared(base: DictConfig) -> Iterator[tuple[str, str, Any]]:
    """Each leaf key of ``base`` that a VeRL dataclass declares: its key, ``Class.field`` and
    type hint. A node names its dataclass with ``_target_``; a node without one inherits it from
    its parent's field type."""
    from omegaconf import DictConfig

    def walk(node: DictConfig, prefix: str, cls: type | None) -> Iterator[tuple[str, str, Any]]:
        target = node.get("_target_") if "_target_" in node else None
        if isinstance(target, str):
            cls = _dataclass(target)
        hints = _hints(cls) if cls is not None else {}
        for name in node.keys():
            name = str(name)
            if name == "_target_":
                continue
            try:
                child = node._get_node(name)
            except Exception:  # noqa: BLE001 - a node that cannot be read has no type here
                continue
            hint = hints.get(name)
            if isinstance(child, DictConfig):
                yield from walk(child, f"{prefix}{name}.", _nested_dataclass(hint))
            elif hint is not None and cls is not None:
                yield f"{prefix}{name}", f"{cls.__name__}.{name}", hint

    yield from walk(base, "", None)


def _dataclass(target: str) -> type | None:
    from hydra.utils import get_class

    try:
        cls = get_class(target)
    except Exception:  # noqa: BLE001 - a target that does not import declares nothing here
        return None
    return cls if isinstance(cls, type) and dataclasses.is_dataclass(cls) else None


def _hints(cls: type) -> dict[str, Any]:
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - an annotation that does not resolve declares nothing
        return {}
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.name in hints}


def _nested_dataclass(hint: Any) -> type | None:
    """The dataclass a field holds (``X`` or ``Optional[X]``), or ``None``."""
    for candidate in (hint, *typing.get_args(hint)):
        if isinstance(candidate, type) and dataclasses.is_dataclass(candidate):
            return candidate
    return None


def type_term(hint: Any) -> Any:
    """A type hint as a JSON term, or ``None`` when it cannot be checked here (a dataclass, a
    class of VeRL's own)."""
    import enum
    import types as pytypes

    # ``Any`` is a declaration too: VeRL takes anything there (``target_modules`` is a name or a
    # list), so the type of its default must not narrow it.
    scalars = {
        int: "int",
        float: "float",
        str: "str",
        bool: "bool",
        type(None): "null",
        typing.Any: "any",
    }
    if hint in scalars:
        return scalars[hint]
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return {"literal": [member.value for member in hint]}
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Literal:
        return (
            {"literal": list(args)} if all(isinstance(a, (str, int, bool)) for a in args) else None
        )
    if origin in (typing.Union, pytypes.UnionType):
        terms = [type_term(arg) for arg in args]
        return None if any(t is None for t in terms) else {"union": terms}
    if hint in (list, tuple) or origin in (list, tuple):
        return {"list": None}
    if hint is dict or origin is dict:
        return {"dict": None}
    return None


def python_type(term: Any) -> Any:
    """The type hint a JSON term stands for (the inverse of :func:`type_term`)."""
    scalars = {
        "int": int,
        "float": float,
        "str": str,
        "bool": bool,
        "null": type(None),
        "any": typing.Any,
    }
    if isinstance(term, str):
        return scalars[term]
    if "literal" in term:
        return typing.Literal[tuple(term["literal"])]
    if "union" in term:
        return typing.Union[tuple(python_type(t) for t in term["union"])]
    if "list" in term:
        return list[Any]
    return dict[Any, Any]


def registry_names() -> dict[str, list[str]]:
    """The names VeRL's registries hold now, for each key of :data:`REGISTRIES` (imports VeRL,
    which also loads the ``verl.plugins`` that register more)."""
    import verl.experimental.reward_loop.reward_manager  # noqa: F401 - registers the built-in managers
    from verl.experimental.reward_loop.reward_manager.registry import REWARD_MANAGER
    from verl.trainer.ppo.core_algos import (
        ADV_ESTIMATOR_REGISTRY,
        POLICY_LOSS_REGISTRY,
        AdvantageEstimator,
    )
    from verl.utils.tracking import Tracking
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    estimators = kl_estimators()
    names = {
        "algorithm.adv_estimator": {e.value for e in AdvantageEstimator}
        | set(ADV_ESTIMATOR_REGISTRY),
        "actor_rollout_ref.actor.policy_loss.loss_mode": set(POLICY_LOSS_REGISTRY),
        "actor_rollout_ref.rollout.name": set(RolloutReplicaRegistry._registry),
        "reward.reward_manager.name": set(REWARD_MANAGER),
        "actor_rollout_ref.actor.kl_loss_type": estimators,
        "algorithm.kl_penalty": estimators,
        # "tracking" is VeRL's deprecated name for wandb, still taken.
        "trainer.logger": {*Tracking.supported_backend, "tracking"},
    }
    return {key: sorted(str(n) for n in found) for key, found in names.items() if found}


def kl_estimators() -> set[str]:
    """The KL estimator names ``core_algos.kl_penalty`` computes, read from the source of the
    function it dispatches to (VeRL keeps them as string comparisons there, not in a registry):
    every name a branch compares against, less those whose branch only raises
    (``full``: ``NotImplementedError``), each also with the ``+`` suffix ``kl_penalty`` strips
    (the straight-through variant). Empty when the source does not read so (then no check)."""
    import ast
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("verl")
    if spec is None or spec.origin is None:
        return set()
    source = Path(spec.origin).parent.parent / KL_MODULE
    try:
        tree = ast.parse(source.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return set()
    function = next(
        (
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef) and node.name == KL_FUNCTION
        ),
        None,
    )
    if function is None:
        return set()
    names: set[str] = set()
    for branch in (node for node in ast.walk(function) if isinstance(node, ast.If)):
        if all(isinstance(statement, ast.Raise) for statement in branch.body):
            continue
        for constant in ast.walk(branch.test):
            if isinstance(constant, ast.Constant) and isinstance(constant.value, str):
                names.add(constant.value)
    return names | {f"{name}+" for name in names}


def check_values(values: Mapping[str, Any], origins: Mapping[str, str], base: DictConfig) -> None:
    """Check each value the user set: its type (VeRL's dataclass field, else its default's),
    the names VeRL's registries accept, finite numbers, and the ranges of :data:`RANGES`.

    :param values: dotted key → value, as the overrides will apply them.
    :param origins: dotted key → where the user set it (only these keys are checked).
    :param base: VeRL's composed default config.
    :raises ConfigError: naming the first key whose value VeRL would reject.
    """
    known = schema()
    for key, origin in origins.items():
        if key.startswith("+") or key not in values:
            continue
        value = values[key]
        if isinstance(value, str) and "${" in value:
            continue  # an interpolation: VeRL's own checks see what it resolves to
        number = first_non_finite(value)
        if number is not None:
            raise ConfigError(f"{origin}: {yaml_repr(number)} is not a finite number")
        section = _section_keys(base, key)
        if section is not None:
            raise ConfigError(
                f"{origin}: '{key}' is a section of VeRL's config, not a value; set its keys "
                f"({', '.join(section[:5])}{', ...' if len(section) > 5 else ''})"
            )
        if key in ALSO_TAKES and fits(python_type(ALSO_TAKES[key]), value):
            pass
        elif key in known.types:
            check_value(
                python_type(known.types[key]),
                value,
                origin,
                because=f"as VeRL's {known.owners[key]} declares",
            )
        else:
            _check_default_type(value, key, origin, base)
        if key in known.choices and value is not None and _registry_applies(key, values, base):
            for name in value if isinstance(value, (list, tuple)) else [value]:
                _check_choice(name, key, known.choices[key], origin)
        _check_range(value, key, origin)


def _registry_applies(key: str, values: Mapping[str, Any], base: DictConfig) -> bool:
    """A registry's names apply unless another key says where the name is looked up instead."""
    from omegaconf import OmegaConf

    condition = REGISTRY_CONDITIONS.get(key)
    if condition is None:
        return True
    other, expected = condition
    current = values.get(other, OmegaConf.select(base, other, throw_on_missing=False))
    return current == expected


def check_choice(value: Any, key: str, origin: str) -> None:
    """Check a value set by a common key against VeRL's registry of ``key``."""
    choices = schema().choices.get(key)
    if choices is not None:
        _check_choice(value, key, choices, origin)


def _check_default_type(value: Any, key: str, origin: str, base: DictConfig) -> None:
    """No dataclass declares ``key``: its value must be of its default's type (an int where the
    default is a float), or null.

    An int default takes ints only, 2.0 included: the int keys no dataclass declares are counts,
    sizes, ports and steps (``data.train_batch_size``, ``trainer.total_epochs``,
    ``lora.rank``, ...), which VeRL's code hands to ``range``, integer division, tensor shapes
    and ``%`` checks, where a float fails or silently changes the result. The few timeouts among
    them (``nccl_timeout``) would take a float, but lose nothing to whole seconds."""
    from omegaconf import ListConfig, OmegaConf

    if value is None:
        return
    current = OmegaConf.select(base, key, throw_on_missing=False, throw_on_resolution_failure=False)
    if current is None or isinstance(current, str) and current.startswith("${"):
        return
    hint: Any = None
    for kind, accepted in (
        (bool, bool),
        (int, int),
        (float, float),
        (str, str),
        (ListConfig, list[Any]),
    ):
        if isinstance(current, kind):
            hint = accepted
            break
    if hint is not None:
        check_value(hint, value, origin, because=f"the type of VeRL's default {current!r}")


def _check_choice(value: Any, key: str, choices: list[str], origin: str) -> None:
    if value not in choices:
        what = REGISTRIES.get(key, "choices")
        raise ConfigError(
            f"{origin}: {value!r} is not one of VeRL's {what}{did_you_mean(str(value), choices)}; "
            f"choose from {', '.join(choices)}"
        )


def _check_range(value: Any, key: str, origin: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    for suffix, low, inclusive, high in RANGES:
        if not (key == suffix or key.endswith("." + suffix) or key.endswith("_" + suffix)):
            continue
        too_low = value < low if inclusive else value <= low
        if too_low or (high is not None and value > high):
            bound = f"at least {low:g}" if inclusive else f"above {low:g}"
            bound += f" and at most {high:g}" if high is not None else ""
            raise ConfigError(f"{origin}: must be {bound}, not {value!r}")
        return


def _node(base: DictConfig, key: str) -> Any:
    """The config node at ``key`` (a section or a value node), or ``None``."""
    from omegaconf import DictConfig, OmegaConf

    parent, _, name = key.rpartition(".")
    owner = (
        OmegaConf.select(base, parent, throw_on_missing=False, throw_on_resolution_failure=False)
        if parent
        else base
    )
    try:
        return owner._get_node(name) if isinstance(owner, DictConfig) else None
    except Exception:  # noqa: BLE001 - a key that cannot be read has no node
        return None


def _section_keys(base: DictConfig, key: str) -> list[str] | None:
    """The keys of the section at ``key``, or ``None`` when ``key`` holds a value."""
    from omegaconf import DictConfig

    node = _node(base, key)
    return (
        [str(k) for k in node.keys() if str(k) != "_target_"]
        if isinstance(node, DictConfig)
        else None
    )
