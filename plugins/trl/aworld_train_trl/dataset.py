"""check_dataset: canonical rows become TRL's prompt format (GRPO) or prompt/completion (SFT)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aworld_train.engine import DatasetError
from aworld_train.engine.hf import quiet_progress_bars

if TYPE_CHECKING:
    import datasets

    from aworld_train_trl.agent import TrlAgent


# Keyword arguments GRPOTrainer._calculate_rewards gives a reward function next to every
# dataset column: a column of the same name makes that call fail mid-training.
REWARD_ARGUMENTS = ("prompts", "completions")


@dataclass
class TrlDatasets:
    """The training and test datasets in the form the chosen TRL trainer reads.

    :ivar test_rows: SFT's test set as canonical rows (``prompt``, ``ground_truth``, ...), cut
        to ``eval_limit``, which each evaluation scores with the job's reward; ``None`` for
        GRPO (its test set keeps those columns) or rows of ``messages`` / ``text``.
    """

    train: datasets.Dataset
    test: datasets.Dataset | None = None
    test_rows: datasets.Dataset | None = None


def datasets_to_trl(
    train: datasets.Dataset | None,
    test: datasets.Dataset | None,
    agent: TrlAgent,
    algorithm: str,
    eval_limit: int | None = None,
) -> TrlDatasets:
    """Convert the canonical datasets for ``algorithm`` (``grpo`` or ``sft``).

    GRPO keeps every column: ``ground_truth``, ``data_source``, ``extra_info`` and the rest reach
    the reward function as keyword lists. SFT keeps only what ``SFTTrainer`` reads.

    :param train: the training rows, or ``None`` when the job gave none.
    :param eval_limit: evaluate on the first this many test rows only (all when ``None``).
    :raises DatasetError: for no training dataset, or naming the dataset and the row or column
        the engine cannot use.
    """
    if train is None:
        raise DatasetError(
            "no train_dataset: the trl engine trains on rows of prompts (and answers for SFT): "
            "give train_dataset (a .jsonl/.json/.csv/.parquet file, a datasets.Dataset or a "
            "list of dicts)"
        )
    convert = _to_sft if algorithm == "sft" else _to_grpo
    if test is not None and eval_limit is not None and eval_limit < len(test):
        test = test.select(range(eval_limit))
    # SFT's converted test set has lost what the reward reads: keep the canonical rows too.
    scorable = (
        test is not None
        and algorithm == "sft"
        and {"prompt", "ground_truth"} <= set(test.column_names)
    )
    with quiet_progress_bars():
        return TrlDatasets(
            train=convert(train, agent, "train_dataset"),
            test=convert(test, agent, "test_dataset") if test is not None else None,
            test_rows=test if scorable else None,
        )


def _to_grpo(dataset: datasets.Dataset, agent: TrlAgent, role: str) -> datasets.Dataset:
    for column in dataset.column_names:
        if column in REWARD_ARGUMENTS:
            raise DatasetError(
                f"{role} column '{column}': GRPOTrainer passes every column to the reward by "
                f"name, next to its own '{column}' argument: rename the column"
            )

    if agent.episodes is not None:
        # The agent gets the row as the job gave it and writes its own messages.
        return dataset

    def convert(row: dict[str, Any], index: int) -> dict[str, Any]:
        return {"prompt": _prompt(row["prompt"], agent, role, index)}

    return dataset.map(convert, with_indices=True, desc=None)


def _to_sft(dataset: datasets.Dataset, agent: TrlAgent, role: str) -> datasets.Dataset:
    columns = dataset.column_names
    if "messages" in columns:

        def convert(row: dict[str, Any], index: int) -> dict[str, Any]:
            return {"messages": _with_system(_messages(row["messages"], role, index), agent)}

        keep = ["messages"]
    elif "text" in columns:

        def convert(row: dict[str, Any], index: int) -> dict[str, Any]:
            return {"text": row["text"]}

        keep = ["text"]
    else:

        def convert(row: dict[str, Any], index: int) -> dict[str, Any]:
            prompt = _prompt(row["prompt"], agent, role, index)
            answer = str(row["ground_truth"])
            if agent.conversational:
                return {"prompt": prompt, "completion": [{"role": "assistant", "content": answer}]}
            return {"prompt": prompt, "completion": answer}

        keep = ["prompt", "completion"]
    converted = dataset.map(convert, with_indices=True, desc=None)
    return converted.remove_columns([c for c in converted.column_names if c not in keep])


def _prompt(prompt: Any, agent: TrlAgent, role: str, index: int) -> Any:
    if isinstance(prompt, str):
        if agent.conversational:
            return _with_system([{"role": "user", "content": prompt}], agent)
        return f"{agent.system_prompt}\n\n{prompt}" if agent.system_prompt else prompt
    messages = _messages(prompt, role, index)
    if not agent.conversational:
        raise DatasetError(
            f"{role} row {index}: the prompt is a list of chat messages but the model "
            f"{agent.model} has no chat template: give prompts as plain strings or use a model "
            "with a chat template"
        )
    return _with_system(messages, agent)


def _messages(messages: Any, role: str, index: int) -> list[dict[str, str]]:
    if not isinstance(messages, list) or not messages:
        raise DatasetError(f"{role} row {index}: expected a non-empty list of chat messages")
    for message in messages:
        if (
            not isinstance(message, dict)
            or not isinstance(message.get("content"), str)
            or not (isinstance(message.get("role"), str))
        ):
            raise DatasetError(
                f"{role} row {index}: every chat message needs a string `role` and `content`, "
                f"got {message!r}"
            )
    return [{"role": m["role"], "content": m["content"]} for m in messages]


def _with_system(messages: list[dict[str, str]], agent: TrlAgent) -> list[dict[str, str]]:
    if agent.system_prompt and messages[0]["role"] != "system":
        return [{"role": "system", "content": agent.system_prompt}, *messages]
    return messages
