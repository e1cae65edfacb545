"""The job's reward as VeRL loads it: ``reward.custom_reward_function.{path,name}``.

A single function with weight 1 that another process can import is wired as it is: a file by
its path, a module function as ``pkg://module`` when a new Python process finds the module as
it is (installed, or on ``PYTHONPATH``). Anything else (several weighted functions, a lambda or
closure, a module found only through this process's own ``sys.path``, such as one beside the
user's script, or any reward of an agent with tools) gets a small module in the run directory,
``verl_reward.py``, that combines them, putting each module's folder on ``sys.path`` first; callables it cannot import are stored beside
it with cloudpickle, which Ray already uses. For an agent the plugin's agent loop runs, the module
scores the agent's answer (``agent_answer`` in the episode's extra fields, with the fields the
agent returned beside it, ``agent_extra``, in ``extra_info``) rather than the decoded episode,
scores 0 an episode the loop records as failed (``agent_failure``) and reports ``agent_failed``
(1 or 0) for every episode.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import numbers
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.engine import RewardError

from aworld_train_verl.vault import Vault

if TYPE_CHECKING:
    from aworld_train.engine import RewardFunction, RewardSpec

MODULE_NAME = "verl_reward.py"
PICKLE_NAME = "verl_reward_functions.pkl"
FUNCTION_NAME = "compute_score"
#: Seconds VeRL's loader may take to load the reward and build its reward manager in the child.
LOAD_SECONDS = 20.0

_MODULE_TEMPLATE = '''"""The reward of this run as VeRL calls it: the weighted sum of the job's reward functions.

Written by aworld-train-verl; VeRL loads it from reward.custom_reward_function.{{path,name}}.
"""

import importlib
import importlib.util
import sys
from pathlib import Path

FUNCTIONS = {functions}
EPISODES = {episodes}


def _load(ref, root, index):
    if ref is None:
        from aworld_train_verl.vault import loads

        return loads(Path(__file__).with_name({pickle_name!r}).read_bytes())[index]
    target, name = ref.rsplit(":", 1)
    if target.endswith(".py"):
        spec = importlib.util.spec_from_file_location(f"verl_reward_{{index}}", target)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        if root is not None and root not in sys.path:
            sys.path.insert(0, root)  # first, as in the script that imported it
        module = importlib.import_module(target)
    return getattr(module, name)


_LOADED = [(name, weight, _load(ref, root, index)) for index, (name, weight, ref, root) in enumerate(FUNCTIONS)]


def {function_name}(data_source, solution_str, ground_truth, extra_info=None, **_):
    total = 0.0
    metrics = {{}}
    if EPISODES and isinstance((extra_info or {{}}).get("agent_answer"), str):
        # The agent's answer is what it returned, not the decoded episode; its extra fields too.
        solution_str = extra_info["agent_answer"]
        extra_info = {{**extra_info, **(extra_info.get("agent_extra") or {{}})}}
    for name, weight, fn in _LOADED:
        result = fn(data_source, solution_str, ground_truth, extra_info)
        if isinstance(result, dict):
            score = float(result["score"])
            metrics.update({{k: v for k, v in result.items() if k != "score"}})
        else:
            score = float(result)
        metrics[f"rewards/{{name}}"] = score
        total += weight * score
    if EPISODES:
        # The functions still run on a failed episode, so that every episode reports the same keys.
        failed = bool((extra_info or {{}}).get("agent_failure"))
        metrics["agent_failed"] = 1.0 if failed else 0.0
        if failed:
            total = 0.0
    return {{"score": total, **metrics}}
'''


@dataclass
class VerlReward:
    """Where VeRL finds the reward: ``reward.custom_reward_function.{path,name}``."""

    path: str
    name: str

    @property
    def overrides(self) -> dict[str, Any]:
        return {
            "reward.custom_reward_function.path": self.path,
            "reward.custom_reward_function.name": self.name,
        }


def _direct(function: RewardFunction) -> VerlReward | None:
    """The function's own location, when VeRL can load it as it is."""
    if function.ref is None or function.weight != 1.0:
        return None
    target, name = function.ref.rsplit(":", 1)
    if target.endswith(".py"):
        return VerlReward(path=str(Path(target).resolve()), name=name)
    if import_root(function.ref) is not None:
        return None
    return VerlReward(path=f"pkg://{target}", name=name)


def import_root(ref: str | None) -> str | None:
    """The folder a new Python process must put on ``sys.path`` to import the module of a
    ``package.module:function`` reference, or ``None`` when it needs none (a file reference, an
    installed module, one on ``PYTHONPATH``, or one whose file cannot be found)."""
    if ref is None or ref.rsplit(":", 1)[0].endswith(".py"):
        return None
    target = ref.rsplit(":", 1)[0]
    module = sys.modules.get(target)
    origin = getattr(module, "__file__", None)
    if origin is None:
        try:
            spec = importlib.util.find_spec(target)
        except (ImportError, ValueError):
            return None
        origin = spec.origin if spec is not None else None
    if origin is None or not Path(origin).is_file():
        return None
    # a.b.c is a/b/c.py or a/b/c/__init__.py below the root.
    depth = target.count(".") + (Path(origin).name == "__init__.py")
    root = Path(origin).resolve().parents[depth]
    return None if root in _new_process_path() else str(root)


@functools.lru_cache(maxsize=1)
def _new_process_path() -> frozenset[Path]:
    """The folders on a new Python process's ``sys.path``, as VeRL's processes start (the
    installed packages, ``.pth`` entries, ``PYTHONPATH``), less its working directory."""
    code = "import json, sys; print(json.dumps(sys.path[1:]))"
    try:
        listed = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
        )
        return frozenset(Path(entry).resolve() for entry in json.loads(listed.stdout) if entry)
    except (OSError, ValueError, subprocess.SubprocessError):
        return frozenset()  # every module then gets its folder put on the path, which is harmless


def wire(
    spec: RewardSpec, run_dir: Path, episodes: bool = False, vault: Vault | None = None
) -> VerlReward:
    """Point VeRL at the job's reward, writing a combining module into ``run_dir`` when needed.

    :param episodes: the rollout runs the plugin's agent loop, whose failed episodes score 0.
    :param vault: keeps the job's secrets out of the pickled callables.
    :raises RewardError: when a callable can be neither imported nor pickled.
    """
    if len(spec.functions) == 1 and not episodes:
        direct = _direct(spec.functions[0])
        if direct is not None:
            return direct
    run_dir.mkdir(parents=True, exist_ok=True)
    unimportable = [f for f in spec.functions if f.ref is None]
    if unimportable:
        try:
            payload = (vault or Vault()).dumps(
                [f.fn if f.ref is None else None for f in spec.functions]
            )
        except Exception as error:  # noqa: BLE001 - pickling fails in many ways
            raise RewardError(
                f"reward '{unimportable[0].name}' cannot be shipped to VeRL's reward workers: "
                f"{error}; define it in a file and give 'file.py:function'"
            ) from error
        (run_dir / PICKLE_NAME).write_bytes(payload)
    functions = [(f.name, float(f.weight), f.ref, import_root(f.ref)) for f in spec.functions]
    module = run_dir / MODULE_NAME
    module.write_text(
        _MODULE_TEMPLATE.format(
            functions=repr(functions),
            pickle_name=PICKLE_NAME,
            function_name=FUNCTION_NAME,
            episodes=episodes,
        ),
        encoding="utf-8",
    )
    return VerlReward(path=str(module), name=FUNCTION_NAME)


def sample_batch(rows: list[dict[str, Any]], tokenizer: Any) -> Any:
    """A ``DataProto`` like the rollout's output: each row's prompt, answered by its ground truth."""
    import numpy as np
    import torch
    from verl import DataProto

    prompts, responses = [], []
    for row in rows:
        prompt_ids = tokenizer.apply_chat_template(
            row["prompt"], add_generation_prompt=True, tokenize=True
        )
        if hasattr(prompt_ids, "keys"):
            prompt_ids = prompt_ids["input_ids"]
        prompts.append(list(prompt_ids))
        text = row["reward_model"]["ground_truth"] + (tokenizer.eos_token or "")
        responses.append(tokenizer(text, add_special_tokens=False)["input_ids"])
    prompt_len = max(len(p) for p in prompts)
    response_len = max(len(r) for r in responses)
    pad = tokenizer.pad_token_id or 0
    prompt_t = torch.full((len(rows), prompt_len), pad, dtype=torch.long)
    response_t = torch.full((len(rows), response_len), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), prompt_len + response_len), dtype=torch.long)
    for i, (p, r) in enumerate(zip(prompts, responses)):
        prompt_t[i, prompt_len - len(p) :] = torch.tensor(p)
        response_t[i, : len(r)] = torch.tensor(r)
        mask[i, prompt_len - len(p) : prompt_len + len(r)] = 1
    return DataProto.from_dict(
        tensors={
            "prompts": prompt_t,
            "responses": response_t,
            "input_ids": torch.cat([prompt_t, response_t], dim=1),
            "attention_mask": mask,
        },
        non_tensors={
            "data_source": np.array([row["data_source"] for row in rows], dtype=object),
            "reward_model": np.array([row["reward_model"] for row in rows], dtype=object),
            "extra_info": np.array([dict(row["extra_info"]) for row in rows], dtype=object),
        },
    )


def score_with_reward_manager(
    config: Any,
    tokenizer: Any,
    rows: list[dict[str, Any]],
    timeout: float = 5.0,
    environment: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Load the reward through VeRL's own loader and score ``rows`` with its reward manager, in a
    child process (:func:`aworld_train.engine.call_isolated`): the reward is the user's code,
    and one that hangs, exits or crashes must fail the check, not stall or end it.

    :param timeout: seconds the reward may take on each row (config ``reward_timeout``); VeRL's
        loading gets :data:`LOAD_SECONDS` more.
    :param environment: the job's secrets, which pickled rewards read from the environment
        (set in the child only).
    :raises RewardError: naming the function and row, when loading or scoring fails.
    """
    from aworld_train.engine.launch import call_isolated

    # Imported here, before the fork, so that the child spends its time on the reward.
    from verl.trainer.ppo.reward import load_reward_manager  # noqa: F401

    reference = (
        f"{config.reward.custom_reward_function.path}:{config.reward.custom_reward_function.name}"
    )

    def score() -> list[dict[str, Any]]:
        os.environ.update(environment or {})
        return _score(config, tokenizer, rows)

    return call_isolated(
        score,
        timeout=LOAD_SECONDS + timeout * len(rows),
        what=f"reward {reference} in VeRL's reward manager on row {_row_index(rows[0], 0)}",
        error=RewardError,
        hint="set config reward_timeout to allow more",
    )


def _row_index(row: dict[str, Any], position: int) -> Any:
    return row["extra_info"].get("index", position)


def _score(config: Any, tokenizer: Any, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from verl.trainer.ppo.reward import load_reward_manager

    path = config.reward.custom_reward_function.path
    name = config.reward.custom_reward_function.name
    try:
        manager = load_reward_manager(config, tokenizer)
    except Exception as error:  # noqa: BLE001 - VeRL raises FileNotFoundError, RuntimeError, AttributeError
        cause = error.__cause__ or error
        raise RewardError(f"VeRL cannot load the reward {path}:{name}: {cause}") from None
    batch = sample_batch(rows, tokenizer)
    results = []
    for i, row in enumerate(rows):
        try:
            results.append(manager.loop.run_until_complete(manager.run_single(batch[i : i + 1])))
        except Exception as error:  # noqa: BLE001 - the user's reward raises anything
            raise RewardError(
                f"reward {path}:{name} fails in VeRL's {type(manager).__name__} on row "
                f"{_row_index(row, i)}: {type(error).__name__}: {error}"
            ) from None
        score = results[-1]["reward_score"]
        if (
            not isinstance(score, numbers.Real)
            or isinstance(score, bool)
            or not math.isfinite(score)
        ):
            raise RewardError(
                f"reward {path}:{name} returns {score!r} on row {_row_index(row, i)} in VeRL's "
                f"{type(manager).__name__}; return a finite number or a dict with a numeric 'score'"
            )
    return results
