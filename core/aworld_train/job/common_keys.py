"""The common settings carried onto each engine's own keys: :class:`CommonKeys` sets an engine's
keys from the common ones and refuses a section key that says otherwise, and the helpers the
engines built on transformers share (their ``loss_type`` and ``lr_scheduler_type`` names, the
common keys only GRPO uses). Which keys an engine has for each common key, it declares
itself (:mod:`aworld_train.job.declaration`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from aworld_train.errors import ConfigError

# The loss_type of the trainers built on transformers (TRL's, ms-swift's GRPO) for each common
# loss_aggregation they have: grpo averages each sequence's tokens then the sequences, dapo
# every token of the batch alike, dr_grpo sums each sequence over max_completion_length.
# seq-mean-token-sum has none.
TRAINER_LOSS_TYPES = {
    "token-mean": "dapo",
    "seq-mean-token-mean": "grpo",
    "seq-mean-token-sum-norm": "dr_grpo",
}
# The common lr_scheduler of each of transformers' lr_scheduler_type names that has one.
TRAINER_SCHEDULERS = {
    "constant": "constant",
    "constant_with_warmup": "constant",
    "linear": "linear",
    "cosine": "cosine",
}

# The common loss_aggregation of each of those loss_type names.
TRAINER_AGGREGATIONS = {loss: name for name, loss in TRAINER_LOSS_TYPES.items()}


def plain_value(value: Any) -> Any:
    """An enum's value (transformers' ``SchedulerType``), or ``value``."""
    return getattr(value, "value", value)


def same_value(given: Any, expected: Any) -> bool:
    """Equal as an engine reads them: an enum as its value, 1 and 1.0 alike, a list and a tuple
    alike, a bool only as a bool."""
    given, expected = plain_value(given), plain_value(expected)
    if isinstance(expected, (list, tuple)):
        return isinstance(given, (list, tuple)) and list(given) == list(expected)
    if isinstance(expected, bool) or isinstance(given, bool):
        return given is expected
    return bool(given == expected)


def _shown(value: Any) -> str:
    """A value as the job writes it: a ``Lora`` as its mapping, a tuple as a list."""
    from aworld_train.job.strict import yaml_repr

    if hasattr(value, "to_dict"):
        return repr(value.to_dict())
    return yaml_repr(list(value) if isinstance(value, tuple) else value)


def disagreement(name: str, value: Any, key: str, given: Any, engine_value: Any) -> ConfigError:
    """The one error for a common key and an engine section's own key set differently.

    :param name: the common key (``kl_coef``, ``lora.rank``).
    :param value: the common key's value.
    :param key: the section's key as the job writes it (``trl.beta``).
    :param given: the section key's value.
    :param engine_value: what the common key sets the engine's key to.
    """
    own = key.split(".", 1)[-1]
    sets = "" if own == name else f" ({name} sets {own} to {_shown(engine_value)})"
    return ConfigError(
        f"config {name}: {_shown(value)} and {key}: {_shown(given)} disagree{sets}: set one of them"
    )


class CommonKeys:
    """The common keys of a job carried onto an engine's own keys, each checked against the
    engine's section: a key both give must say the same, either alone decides.

    :ivar arguments: the engine's keys the common keys set, in order.
    """

    def __init__(
        self,
        section_name: str,
        section: Mapping[str, Any],
        same: Callable[[Any, Any], bool] = same_value,
    ) -> None:
        """:param section_name: the section's name, as the job writes it (``trl``).
        :param section: the section's keys; a null one counts as unset.
        :param same: when the section's value (first) says what the engine's value does."""
        self.section_name = section_name
        self.section = {key: value for key, value in section.items() if value is not None}
        self.arguments: dict[str, Any] = {}
        self._same = same

    def check(
        self,
        name: str,
        value: Any,
        key: str,
        engine_value: Any,
        agrees: Callable[[Any], bool] | None = None,
    ) -> None:
        """Refuse the section's ``key`` when it disagrees with the common key ``name``.

        :param agrees: whether a section value agrees, where equality to ``engine_value`` is
            not the rule (VeRL's mixed-precision mapping).
        :raises ConfigError: :func:`disagreement`'s line.
        """
        given = self.section.get(key)
        if given is None or (agrees(given) if agrees else self._same(given, engine_value)):
            return
        raise disagreement(name, value, f"{self.section_name}.{key}", given, engine_value)

    def carry(
        self,
        name: str,
        value: Any,
        key: str,
        engine_value: Any,
        agrees: Callable[[Any], bool] | None = None,
    ) -> Any:
        """Set the engine's ``key`` to ``engine_value`` for the common key ``name`` (whose
        value is ``value``), after :meth:`check`; returns ``engine_value``."""
        self.check(name, value, key, engine_value, agrees)
        self.arguments[key] = engine_value
        return engine_value


def trainer_scheduler(
    common: CommonKeys, lr_scheduler: str, warmup: str | None, engine: str
) -> str:
    """transformers' ``lr_scheduler_type`` for the common ``lr_scheduler``: ``constant`` with a
    warmup is ``constant_with_warmup`` (transformers' ``constant`` ignores the warmup).

    :param warmup: the run's warmup as a message names it (``warmup_ratio 0.1``), or ``None``.
    :param engine: the engine's name for the message (``TRL``, ``ms-swift``).
    :raises ConfigError: for ``constant`` with a warmup where the section's own
        ``lr_scheduler_type`` is ``constant``.
    """
    if lr_scheduler != "constant" or not warmup:
        return lr_scheduler
    if plain_value(common.section.get("lr_scheduler_type")) == "constant":
        raise ConfigError(
            f"config lr_scheduler: constant with {warmup} is {engine}'s constant_with_warmup, but "
            f"{common.section_name}.lr_scheduler_type is constant (no warmup): set one of them"
        )
    return "constant_with_warmup"


def trainer_loss_type(aggregation: str, refusal: str) -> str:
    """The ``loss_type`` of a trainer built on transformers for the common ``loss_aggregation``.

    :param refusal: the engine's line for an aggregation with none, in which ``{aggregation}``
        stands for it and ``{choices}`` for those there are, each with its ``loss_type``.
    :raises ConfigError: that line.
    """
    if aggregation not in TRAINER_LOSS_TYPES:
        choices = ", ".join(f"{name} ({loss})" for name, loss in TRAINER_LOSS_TYPES.items())
        raise ConfigError(refusal.format(aggregation=aggregation, choices=choices))
    return TRAINER_LOSS_TYPES[aggregation]


def common_aggregation(loss_type: Any, keep: bool = False) -> Any:
    """The common ``loss_aggregation`` of a trainer's ``loss_type``; for one with none,
    ``None``, or the ``loss_type`` itself where ``keep``."""
    return TRAINER_AGGREGATIONS.get(loss_type, loss_type if keep else None)


def common_scheduler(scheduler: Any, keep: bool = False) -> Any:
    """The common ``lr_scheduler`` of transformers' ``lr_scheduler_type`` (an enum read as its
    value); for one with none, ``None``, or the name itself where ``keep``."""
    name = plain_value(scheduler)
    return TRAINER_SCHEDULERS.get(name, name if keep else None)


# The common keys only GRPO uses: SFT and DPO train without rollouts, a KL penalty or clipping.
GRPO_ONLY = ("kl_coef", "loss_aggregation", "clip_ratio", "entropy_coef", "log_samples")


def refuse_grpo_only(algorithm: str, values: Mapping[str, Any], engine: str) -> None:
    """For an algorithm other than ``grpo``, refuse a common key of :data:`GRPO_ONLY` the job
    sets (0 for ``entropy_coef`` or ``log_samples`` turns it off, and asks for nothing).

    :param values: the job's value of each common key (a ``TrainConfig`` field), by name.
    :param engine: the engine's name, as the message says it.
    :raises ConfigError: naming the key, the engine and the algorithm.
    """
    if algorithm == "grpo":
        return
    for name in GRPO_ONLY:
        value = values.get(name)
        if value is not None and not (name in ("entropy_coef", "log_samples") and value == 0):
            raise ConfigError(
                f"config {name}: the {engine} engine uses it for grpo only, not for "
                f"{algorithm}: leave it out"
            )
