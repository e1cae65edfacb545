"""The canonical dataset as VeRL reads it: parquet, loaded back with VeRL's own ``RLHFDataset``.

Each row becomes ``prompt`` (a list of chat messages, the agent's system prompt first),
``data_source``, ``reward_model: {style: rule, ground_truth}`` and ``extra_info`` (with
``index``), plus ``agent_name`` for an agent with tools (the agent loop that runs the row);
other columns (``ability``, ...) pass through.

A dataset already in VeRL's layout brings ``reward_model`` and ``agent_name`` columns of its
own; the engine's win. ``reward_model`` is built from the canonical ground truth, the one
``check`` ran the reward on (and which a ``columns:`` mapping may have taken from elsewhere).
``agent_name`` names the agent loop that runs the job's agent: a name from another setup
(AWorld Train's ``gaia_agent``) is no loop VeRL knows here, and an agent without tools runs
VeRL's default loop, which a row without ``agent_name`` gets.
"""

from __future__ import annotations

import contextlib
import io
import logging
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.engine import DatasetError
from aworld_train.engine.hf import quiet_progress_bars

if TYPE_CHECKING:
    import datasets

SHOWN_INDICES = 10
SAMPLE_ROWS = 4
#: The columns the engine writes itself: the canonical ones, and those VeRL's layout has that
#: the engine wires (a dataset in VeRL's layout has its own; see the module docstring).
ENGINE_COLUMNS = (
    "prompt",
    "ground_truth",
    "data_source",
    "extra_info",
    "reward_model",
    "agent_name",
)


@dataclass
class VerlData:
    """The converted datasets.

    :ivar train_file: the training parquet file.
    :ivar test_file: the test parquet file, or ``None``.
    :ivar rows: the number of training rows VeRL reads.
    :ivar overlong: the training rows whose prompt exceeds ``max_prompt_length`` (VeRL drops them).
    :ivar samples: the first few usable training rows in VeRL's layout, for the reward check.
    """

    train_file: Path
    test_file: Path | None
    rows: int
    overlong: list[int] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list, repr=False)

    @property
    def overrides(self) -> dict[str, Any]:
        """The VeRL keys that point at these files (when to validate is the config's: eval_steps)."""
        return {
            "data.train_files": str(self.train_file),
            # VeRL builds a validation set even when it never validates: the training file serves.
            "data.val_files": str(self.test_file or self.train_file),
        }


def to_messages(prompt: Any, system_prompt: str | None) -> list[dict[str, str]]:
    """A canonical prompt as chat messages: a string becomes one user message."""
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
    messages = [{"role": str(m["role"]), "content": str(m["content"])} for m in messages]
    if system_prompt and not (messages and messages[0]["role"] == "system"):
        messages.insert(0, {"role": "system", "content": system_prompt})
    return messages


def verl_rows(
    dataset: datasets.Dataset, split: str, system_prompt: str | None, agent_name: str | None = None
) -> list[dict[str, Any]]:
    """The rows of ``dataset`` in VeRL's layout; ``agent_name`` picks the agent loop of each."""
    rows = []
    for index, row in enumerate(dataset):
        extra_info = dict(row.get("extra_info") or {})
        extra_info.setdefault("index", index)
        extra_info.setdefault("split", split)
        passthrough = {k: v for k, v in row.items() if k not in ENGINE_COLUMNS}
        rows.append(
            {
                **passthrough,
                "prompt": to_messages(row["prompt"], system_prompt),
                "data_source": str(row.get("data_source") or "aworld_train"),
                "reward_model": {"style": "rule", "ground_truth": str(row["ground_truth"])},
                "extra_info": extra_info,
                **({"agent_name": agent_name} if agent_name else {}),
            }
        )
    return rows


def write_parquet(rows: list[dict[str, Any]], path: Path) -> Path:
    import datasets

    path.parent.mkdir(parents=True, exist_ok=True)
    with quiet_progress_bars():
        datasets.Dataset.from_list(rows).to_parquet(str(path))
    return path


def overlong_rows(
    rows: list[dict[str, Any]],
    tokenizer: Any,
    max_prompt_length: int,
    tools: list[dict[str, Any]] | None = None,
) -> dict[int, int]:
    """The rows whose prompt, rendered as the rollout renders it (chat template, the agent's
    system prompt and tool schemas), exceeds the limit: row index → its tokens."""
    too_long = {}
    for index, row in enumerate(rows):
        ids = tokenizer.apply_chat_template(
            row["prompt"], add_generation_prompt=True, tokenize=True, tools=tools
        )
        if hasattr(ids, "keys"):
            ids = ids["input_ids"]
        if len(ids) > max_prompt_length:
            too_long[index] = len(ids)
    return too_long


@contextlib.contextmanager
def _private_datasets_cache() -> Iterator[None]:
    """Keep the Hugging Face datasets cache that ``RLHFDataset`` fills out of the home folder."""
    import datasets.config

    saved = datasets.config.HF_DATASETS_CACHE
    with tempfile.TemporaryDirectory(prefix="aworld-train-verl-") as cache:
        datasets.config.HF_DATASETS_CACHE = Path(cache)
        try:
            yield
        finally:
            datasets.config.HF_DATASETS_CACHE = saved


def load_back(path: Path, tokenizer: Any, data_config: Any, expected_rows: int) -> None:
    """Read ``path`` with VeRL's own ``RLHFDataset`` and check every row made it, as chat messages.

    :raises DatasetError: naming the file when VeRL cannot read it or loses rows.
    """
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    config = OmegaConf.merge(
        data_config, {"filter_overlong_prompts": False, "dataloader_num_workers": 0}
    )
    try:
        with (
            contextlib.redirect_stdout(io.StringIO()),
            _private_datasets_cache(),
            quiet_progress_bars(),
        ):
            dataset = RLHFDataset(data_files=[str(path)], tokenizer=tokenizer, config=config)
            first = dataset[0] if len(dataset) else None
    except Exception as error:  # noqa: BLE001 - datasets and pyarrow raise many kinds
        raise DatasetError(f"{path}: VeRL's RLHFDataset cannot read it: {error}") from error
    if len(dataset) != expected_rows:
        raise DatasetError(
            f"{path}: VeRL's RLHFDataset read {len(dataset)} rows of {expected_rows}"
        )
    if first is not None and not isinstance(first["raw_prompt"], list):
        raise DatasetError(
            f"{path}: VeRL's RLHFDataset reads row 0's prompt as {type(first['raw_prompt']).__name__}, not chat messages"
        )


def describe_overlong(
    too_long: dict[int, int], max_prompt_length: int, role: str, tools: bool
) -> str:
    """``train_dataset row 3: the prompt ... is 80 tokens, past data.max_prompt_length=64 (2 rows: 3, 17)``."""
    first = next(iter(too_long))
    indices = list(too_long)
    shown = ", ".join(str(i) for i in indices[:SHOWN_INDICES])
    more = f" and {len(indices) - SHOWN_INDICES} more" if len(indices) > SHOWN_INDICES else ""
    rendered = (
        "with the chat template, system prompt and tool schemas"
        if tools
        else "with the chat template and system prompt"
    )
    return (
        f"{role} row {first}: the prompt ({rendered}) is {too_long[first]} tokens, past "
        f"data.max_prompt_length={max_prompt_length} ({len(indices)} row(s): {shown}{more})"
    )


def convert(
    train_dataset: datasets.Dataset,
    test_dataset: datasets.Dataset | None,
    *,
    tokenizer: Any,
    data_config: Any,
    system_prompt: str | None,
    folder: Path,
    logger: logging.Logger,
    agent_name: str | None = None,
    tools: list[dict[str, Any]] | None = None,
) -> VerlData:
    """Write each dataset as VeRL's parquet into ``folder`` and prove VeRL reads it.

    :param data_config: the composed config's ``data`` section.
    :param agent_name: the agent loop every row names, or ``None`` for VeRL's default.
    :param tools: the tool schemas the rollout renders into every prompt.
    :raises DatasetError: for prompts longer than ``data.max_prompt_length`` (unless VeRL is told
        to drop them, which is then logged as a warning naming the rows), or a file VeRL cannot read.
    """
    max_prompt_length = int(data_config.max_prompt_length)
    files: dict[str, Path | None] = {"train": None, "test": None}
    overlong: list[int] = []
    samples: list[dict[str, Any]] = []
    for split, dataset in (("train", train_dataset), ("test", test_dataset)):
        if dataset is None:
            continue
        rows = verl_rows(dataset, split, system_prompt, agent_name)
        too_long = overlong_rows(rows, tokenizer, max_prompt_length, tools)
        if too_long:
            message = describe_overlong(
                too_long, max_prompt_length, f"{split}_dataset", bool(tools)
            )
            if not data_config.filter_overlong_prompts:
                raise DatasetError(
                    f"{message}; VeRL would drop or cut them: shorten them, raise config key "
                    f"'max_prompt_length', or set verl.data.filter_overlong_prompts: true to drop them"
                )
            if len(too_long) == len(rows):
                raise DatasetError(
                    f"{message}; that is every row, and VeRL drops them all "
                    f"(data.filter_overlong_prompts): raise config key 'max_prompt_length'"
                )
            logger.warning("%s; VeRL drops them (data.filter_overlong_prompts=true)", message)
        path = write_parquet(rows, folder / f"{split}.parquet")
        load_back(path, tokenizer, data_config, expected_rows=len(rows))
        files[split] = path
        if split == "train":
            overlong = list(too_long)
            samples = [row for index, row in enumerate(rows) if index not in too_long][:SAMPLE_ROWS]
    assert files["train"] is not None
    return VerlData(
        train_file=files["train"],
        test_file=files["test"],
        rows=len(train_dataset) - len(overlong),
        overlong=overlong,
        samples=samples,
    )


def check_response_room(
    agent: Any,
    datasets_by_role: dict[str, datasets.Dataset | None],
    budget: int,
    core_budget: int | None,
    origin: str,
) -> None:
    """The core compared each prompt plus the completion budget it knows (config
    ``max_completion_length``, else the agent's ``llm_max_tokens``) with the model's positions;
    VeRL generates up to ``data.max_response_length`` tokens, which its default or the
    ``verl:`` section may set otherwise: then compare again with VeRL's budget.

    :param origin: where VeRL's budget comes from, for the message.
    :raises ModelError: the core's message (naming the row), after ``origin``.
    """
    from aworld_train.engine import ModelError
    from aworld_train.engine.hf import check_lengths

    if budget == core_budget:
        return
    present = {role: dataset for role, dataset in datasets_by_role.items() if dataset is not None}
    try:
        check_lengths(
            agent.model,
            present,
            agent.system_prompt,
            agent.tools.schemas() if agent.tools is not None else [],
            budget,
            agent.max_turns,
            agent.trust_remote_code,
        )
    except ModelError as error:
        raise ModelError(f"{origin}: {error}") from None
