"""One evaluation from start to end: :func:`evaluate`, what ``aworld-train eval`` and
``AgentTrainer.evaluate()`` run.

The tools (MCP clients on asyncio) are imported only when the agent uses some.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from aworld_train.errors import JobError
from aworld_train.evaluation._generation import generate_and_score
from aworld_train.evaluation._loading import choose_backend, free_gpu, load_model
from aworld_train.evaluation._results import EvalResult, write_result
from aworld_train.evaluation._target import EvalTarget, load_rows, open_target, resolve_model

if TYPE_CHECKING:
    from aworld_train.tools import ToolSet


def evaluate(
    target: str | Path | EvalTarget,
    *,
    model: str | None = None,
    dataset: str = "test",
    limit: int | None = None,
    samples: int = 1,
    progress: bool = False,
    batch_size: int = 16,
    backend: str = "auto",
) -> EvalResult:
    """Score ``model`` of ``target`` on ``dataset`` with the job's reward; write
    ``eval/<model>-<dataset>.json`` (:meth:`EvalResult.summary`) and ``.samples.jsonl`` (the
    records) into the run directory, or beside a job file.

    :param target: a run directory or a job file (or one already opened).
    :param model: see :func:`~aworld_train.evaluation._target.resolve_model`.
    :param dataset: see :func:`~aworld_train.evaluation._target.load_rows`.
    :param samples: 1: one greedy completion per row; K: K sampled ones and pass@K.
    :param backend: what generates: see
        :func:`~aworld_train.evaluation._loading.choose_backend`; the result records it.
    :raises AWorldTrainError: for bad input, in one line (see the functions above).
    """
    opened = target if isinstance(target, EvalTarget) else open_target(target)
    if samples < 1:
        raise JobError(f"samples must be 1 or more, got {samples}")
    model_name, model_path = resolve_model(opened, model)
    dataset_name, rows = load_rows(opened, dataset, limit)
    with _job_tools(opened) as tools:
        use_vllm = choose_backend(backend, model_path) == "vllm"
        loaded, tokenizer = load_model(model_path, opened, use_vllm)
        try:
            result = generate_and_score(
                loaded,
                tokenizer,
                rows,
                agent=opened.agent,
                reward=opened.reward,
                max_new_tokens=opened.max_new_tokens,
                samples=samples,
                batch_size=batch_size,
                tools=tools,
                progress=progress,
                seed=opened.config.seed,
            )
        finally:
            del loaded
            free_gpu(use_vllm)
    result.model, result.dataset = model_name, dataset_name
    result.backend = "vllm" if use_vllm else "transformers"
    write_result(result, opened.out_dir)
    return result


@contextlib.contextmanager
def _job_tools(opened: EvalTarget) -> Iterator[ToolSet | None]:
    """The job's tools for the block (``None`` when the agent uses none), their MCP servers
    started (or reached) as training starts them, then stopped."""
    if not opened.agent.uses_tools:
        yield None
        return
    from aworld_train.tools import resolve_tools

    # A server that fails is one line, before the model loads.
    tools = resolve_tools(opened.agent, opened.job.base_dir)
    try:
        yield tools
    finally:
        tools.close()  # stops the stdio servers the tool calls started
