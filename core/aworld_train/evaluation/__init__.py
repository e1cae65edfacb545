"""Evaluation: score a model on a dataset with the job's own reward, its prompts built as
training builds them.

:func:`generate_and_score` takes a model already in memory (an engine may call it during
training); :func:`evaluate` is what ``aworld-train eval`` and ``AgentTrainer.evaluate()`` run:
it reads a run directory (or a job file), loads the model it is asked for, scores the dataset
and writes ``eval/<model>-<dataset>.json`` and ``.samples.jsonl``.

One concern a module:

- :mod:`~aworld_train.evaluation._generation`: prompts rendered, completions generated (greedy,
  or K sampled) and scored, an agent of its own code run through the agent runtime.
- :mod:`~aworld_train.evaluation._results`: the scores summed up (:class:`EvalResult`, pass@K)
  and the result's files.
- :mod:`~aworld_train.evaluation._target`: what is evaluated: the run or job file, the model
  ``--model`` names, the rows of ``--dataset``, and what to evaluate when a run left no model.
- :mod:`~aworld_train.evaluation._loading`: the model found, checked and loaded (a LoRA adapter
  merged onto its base), and the backend that generates, vLLM or transformers.
- :mod:`~aworld_train.evaluation._runner`: :func:`evaluate`, all of the above in order.

Heavy libraries (torch, transformers, datasets, vllm) are imported inside the functions.
"""

from aworld_train.evaluation._generation import (
    DEFAULT_TEMPERATURE,
    generate_and_score,
    render_prompt,
)
from aworld_train.evaluation._loading import BACKENDS, choose_backend, load_model
from aworld_train.evaluation._results import (
    PASS_SCORE,
    EvalResult,
    difference,
    result_stem,
    score_completions,
    write_result,
)
from aworld_train.evaluation._runner import evaluate
from aworld_train.evaluation._target import (
    DEFAULT_MAX_NEW_TOKENS,
    EvalTarget,
    eval_hint,
    load_rows,
    open_target,
    resolve_model,
)

__all__ = [
    "BACKENDS",
    "DEFAULT_MAX_NEW_TOKENS",
    "DEFAULT_TEMPERATURE",
    "PASS_SCORE",
    "EvalResult",
    "EvalTarget",
    "choose_backend",
    "difference",
    "eval_hint",
    "evaluate",
    "generate_and_score",
    "load_model",
    "load_rows",
    "open_target",
    "render_prompt",
    "resolve_model",
    "result_stem",
    "score_completions",
    "write_result",
]
