"""check_reward: each canonical reward function becomes an ORM class registered in swift's ``orms``.

ms-swift instantiates every reward named in ``reward_funcs`` from its ``orms`` registry and
calls it with the completions plus every dataset column as a keyword list. One ORM per reward
function lets swift weight them (``reward_weights``) and log each under
``rewards/<ClassName>/mean``; each ORM scores a completion through a one-function
:class:`RewardSpec`, so failures name the function and the row.

ms-swift's own rewards (``reward: swift:accuracy``, or a name an ``external_plugins`` file
registers) go into ``reward_funcs`` by their own registry names, beside the job's; the check
loads the plugin files and creates each once, so a missing dependency is one line.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from aworld_train.engine import (
    AWorldTrainError,
    RewardError,
    RewardFunction,
    RewardSpec,
    did_you_mean,
)
from aworld_train.engine.hf import completion_text

# The prefix of every registry name this engine adds to swift's ``orms``.
ORM_PREFIX = "aworld_"
# This engine's name in an engine reward reference (``swift:accuracy``).
ENGINE = "swift"


@dataclass
class SwiftReward:
    """The rewards ready for swift: registry names and weights, in ``reward_funcs`` order.

    :ivar spec: the job's reward functions.
    :ivar names: the ``orms`` key of each function.
    :ivar weights: the weight of each function.
    """

    spec: RewardSpec
    names: list[str]
    weights: list[float]


def class_name(function: RewardFunction) -> str:
    """A Python identifier for the ORM of ``function``: ``rewards.py:score`` -> ``score``.

    Swift logs each reward under its class name (``rewards/score/mean``).
    """
    tail = function.name.rsplit(":", 1)[-1].rsplit("/", 1)[-1]
    name = re.sub(r"\W", "_", tail) or "reward"
    return name if not name[0].isdigit() else f"r_{name}"


def make_orm(function: RewardFunction, name: str) -> type:
    """An ORM subclass that scores each completion with ``function``."""
    from swift.rewards import ORM

    spec = RewardSpec([RewardFunction(function.name, function.fn, 1.0, function.ref)])

    def __call__(self: Any, completions: list[Any], **columns: Any) -> list[float]:
        return score_batch(spec, completions, columns)

    doc = f"aworld-train reward {function.name}"
    return type(name, (ORM,), {"__call__": __call__, "__doc__": doc})


def score_batch(spec: RewardSpec, completions: list[Any], columns: dict[str, Any]) -> list[float]:
    """Score swift's batch: ``columns`` holds each dataset column as a list, one per completion.

    With an agent run by the agent runtime (:mod:`aworld_train_swift.rollout`), each rollout's
    ``rollout_infos`` carry the episode: the agent's answer is scored instead of the
    completion's text, with the extra fields it returned, and a failed episode scores 0.
    """
    count = len(completions)
    ground_truths = columns.get("ground_truth") or columns.get("solution") or [None] * count
    data_sources = columns.get("data_source") or [""] * count
    extra_infos = columns.get("extra_info") or [None] * count
    episodes = columns.get("rollout_infos") or [None] * count
    scores = []
    for i, completion in enumerate(completions):
        episode = episodes[i] if "agent_answer" in (episodes[i] or {}) else None
        if episode is not None and episode["agent_failure"] is not None:
            scores.append(0.0)
            continue
        info = extra_infos[i]
        if isinstance(info, str):
            info = json.loads(info)
        info = dict(info or {})
        if episode is not None:
            info.update(episode["agent_extra"] or {})
        row = info.get("index", i)
        result = spec.score(
            str(data_sources[i] or ""),
            episode["agent_answer"] if episode is not None else completion_text(completion),
            "" if ground_truths[i] is None else str(ground_truths[i]),
            info,
            row=row if isinstance(row, int) else i,
        )
        scores.append(float(result.score))
    return scores


def register(reward: SwiftReward) -> None:
    """Put the job's ORM classes into swift's ``orms`` registry of this process (swift's own
    rewards are there already, or come with the ``external_plugins`` swift imports)."""
    from swift.rewards import orms

    for function, name in zip(reward.spec.functions, reward.names):
        if function.engine is None:
            orms[name] = make_orm(function, name[len(ORM_PREFIX) :])


def plugin_files(section: dict[str, Any]) -> list[str]:
    """The section's ``external_plugins`` (and swift 3's ``custom_register_path``) as a list."""
    files: list[str] = []
    for key in ("external_plugins", "custom_register_path"):
        value = section.get(key)
        files += [value] if isinstance(value, str) else list(value or [])
    return files


def check_swift_rewards(functions: list[RewardFunction], plugins: list[str]) -> None:
    """Load ``plugins`` as swift does, then create each of swift's rewards ``functions`` names
    once, as swift will when training starts.

    :raises RewardError: for a plugin file that fails to import, a name no registry holds
        (with a did-you-mean), or a reward swift cannot create (a missing package:
        ``accuracy`` needs math_verify).
    """
    from swift.rewards import orms
    from swift.utils import import_external_file

    for plugin in plugins:
        try:
            import_external_file(plugin)
        except AWorldTrainError:
            raise
        except Exception as error:  # noqa: BLE001 - the user's file: name it and what it raised
            raise RewardError(
                f"config key 'swift.external_plugins': {plugin} failed to load: "
                f"{type(error).__name__}: {_first_line(error)}"
            ) from None
    for function in functions:
        if function.name not in orms:
            where = (
                " (nor do the external_plugins files)"
                if plugins
                else ("; a reward of a plugin file needs swift.external_plugins naming the file")
            )
            raise RewardError(
                f"reward '{function.ref}': ms-swift has no reward "
                f"'{function.name}'{did_you_mean(function.name, list(orms))}"
                f"{where}"
            )
        try:
            orms[function.name]()
        except (ImportError, AssertionError) as error:
            # swift's own rewards check their packages when created (MathAccuracy asserts
            # math_verify is installed), which would otherwise fail only when training starts.
            raise RewardError(
                f"reward '{function.ref}': ms-swift cannot create it here: {_first_line(error)}"
            ) from None
        except Exception:  # noqa: BLE001 - a reward that needs swift's arguments: swift's call
            pass


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def reward_to_swift(
    spec: RewardSpec | None, algorithm: str, section: dict[str, Any] | None = None
) -> SwiftReward | None:
    """Name each reward function's ORM and register them in swift's ``orms``.

    The user's functions are not called here: the core has scored the training rows with
    each one, in a child process with a time limit. While training, a function that returns
    ``None`` is refused as in the checks (ms-swift would skip it as "not applicable"; the job
    means the same on every engine). ms-swift's own rewards (``swift:accuracy``) keep their
    registry names and are checked by :func:`check_swift_rewards`.

    :param section: the ``swift:`` section, for its ``external_plugins``.
    :raises RewardError: when GRPO has no reward to score its completions with, or one of
        swift's own rewards cannot be used.
    """
    if spec is None:
        if algorithm == "grpo":
            raise RewardError(
                "no reward: GRPO scores each completion with the job's reward; set reward in "
                "the job (file.py:function, module:function or a built-in name)"
            )
        return None
    own = [function for function in spec.functions if function.engine == ENGINE]
    if own:
        check_swift_rewards(own, plugin_files(section or {}))
    names: list[str] = []
    for position, function in enumerate(spec.functions):
        if function.engine == ENGINE:
            names.append(function.name)
            continue
        base = class_name(function)
        if ORM_PREFIX + base in names:
            base = f"{base}_{position}"
        names.append(ORM_PREFIX + base)
    reward = SwiftReward(spec, names, [f.weight for f in spec.functions])
    register(reward)
    return reward
