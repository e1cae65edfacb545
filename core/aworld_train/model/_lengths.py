"""Prompt lengths: :func:`check_lengths` renders the longest prompts of each dataset as training
renders them and compares them, with the completion budget, to the model's positions
(:func:`max_positions`).

numpy and pyarrow are imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.errors import ModelError
from aworld_train.model._files import ModelFiles, first_line, transformers_available
from aworld_train.model._tokenizer import checked_tokenizer

if TYPE_CHECKING:
    import datasets
    import numpy as np


# Where config.json gives the longest sequence, by model family; multimodal models nest it.
_POSITION_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "max_sequence_length",
    "n_ctx",
)


def check_lengths(
    model: str,
    datasets: dict[str, datasets.Dataset | None],
    system_prompt: str | None,
    tool_schemas: list[dict[str, Any]],
    max_completion_length: int | None,
    max_turns: int = 1,
    trust_remote_code: bool = False,
) -> None:
    """Check that every prompt, rendered as training renders it, fits the model with its
    completion.

    A prompt is rendered as the engines render it: the system prompt prepended as a system
    message (unless the row starts with its own), ``tools=tool_schemas`` given to the chat
    template, and the generation prompt added; a tokenizer without a chat template gets the
    plain text (``system_prompt``, a blank line, the prompt). Its tokens plus
    ``max_completion_length`` must fit the model's positions (``max_position_embeddings``, or
    ``n_positions``, ``max_seq_len``... in ``config.json``).

    Room for tool results: ``max_completion_length`` is the budget of the whole completion, so
    with tools it counts every turn, every tool call and every tool result with its chat-template
    framing together, as TRL and VeRL bound an episode (TRL drops a tool result that would pass
    either the budget or the positions). A prompt that fits with the whole budget therefore never
    loses a tool result to the positions; ``max_turns`` only shares the budget out.

    The long prompts are found cheaply, a batch of rows at a time (:func:`_first_too_long`): on
    data well within the model's positions nothing is tokenized.

    :param model: the model as :func:`~aworld_train.model.preflight_model` returned it; a hub
        id is not checked.
    :param datasets: each dataset by the role messages name it by (``train_dataset``); a
        ``None`` dataset is skipped.
    :param tool_schemas: the agent's OpenAI-style tool schemas (empty without tools).
    :param max_completion_length: the completion budget in tokens; ``None`` checks the prompt
        alone (the engine's default is not known here).
    :param max_turns: the agent's most model turns, named in the message when there are tools.
    :param trust_remote_code: passed to the tokenizer.
    :raises ModelError: naming the dataset and row, the lengths and the config key; or the
        budget alone when it leaves no room for a prompt.
    """
    folder = Path(model)
    budget = max_completion_length or 0
    if (limit := _prompt_room(folder, budget)) is None:
        return
    positions, where = limit
    renderer = _Renderer(
        checked_tokenizer(folder, trust_remote_code), system_prompt, tool_schemas, str(folder)
    )
    for role, dataset in datasets.items():
        if dataset is None or "prompt" not in dataset.column_names or not len(dataset):
            continue
        too_long = _first_too_long(dataset, renderer, positions - budget, role)
        if too_long is None:
            continue
        row, tokens = too_long
        shared = " for every turn and tool result" if tool_schemas and max_turns > 1 else ""
        raise ModelError(
            f"{role} row {row}: the prompt ({renderer.describe()}) is {tokens} tokens"
            f"{_past_positions(tokens, budget, shared, positions, where)}"
        )


def _prompt_room(folder: Path, budget: int) -> tuple[int, str] | None:
    """The positions of the local model in ``folder`` and where its config says so; ``None``
    when nothing can be checked (a hub id, no transformers, no positions in its config).

    :raises ModelError: when the completion ``budget`` alone fills the positions.
    """
    if not folder.is_dir() or not transformers_available():
        return None
    found = max_positions(folder)
    if found is None:
        return None
    positions, key = found
    where = f"{key} in {folder / 'config.json'}"
    if budget >= positions:
        raise ModelError(
            f"max_completion_length {budget} leaves no room for a prompt within the "
            f"model's {positions} positions ({where}): lower max_completion_length"
        )
    return positions, where


def _past_positions(tokens: int, budget: int, shared: str, positions: int, where: str) -> str:
    """The rest of the message for a prompt of ``tokens`` that does not fit: its total with the
    completion budget (``shared`` by every turn, when it is), the positions and the fix."""
    if not budget:
        return f", past the model's {positions} positions ({where}): shorten the prompt"
    return (
        f"; with max_completion_length {budget}{shared} that is {tokens + budget}, past the "
        f"model's {positions} positions ({where}): shorten the prompt or max_completion_length"
    )


def max_positions(folder: Path) -> tuple[int, str] | None:
    """The longest sequence the model in ``folder`` takes, and the ``config.json`` key that
    says so (``text_config.max_position_embeddings`` for a multimodal model); ``None`` when
    the config names none."""
    config = ModelFiles(folder).config()
    for section, prefix in ((config, ""), (config.get("text_config"), "text_config.")):
        if not isinstance(section, dict):
            continue
        for key in _POSITION_KEYS:
            value = section.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value, prefix + key
    return None


@dataclass
class _Renderer:
    """Counts a prompt's tokens as training renders it."""

    tokenizer: Any
    system_prompt: str | None
    tools: list[dict[str, Any]]
    folder: str

    @property
    def chat(self) -> bool:
        return bool(getattr(self.tokenizer, "chat_template", None))

    def describe(self) -> str:
        """What the count includes: ``system prompt, 3 tool schemas, chat template``."""
        parts = ["system prompt"] if self.system_prompt else []
        if self.tools:
            parts.append(f"{len(self.tools)} tool schema{'s' if len(self.tools) > 1 else ''}")
        parts.append("chat template" if self.chat else "plain text")
        return ", ".join(parts)

    def count(self, prompt: Any) -> int:
        """The prompt's tokens: chat messages (or a string) rendered with the system prompt,
        the tool schemas and the generation prompt."""
        if not self.chat:
            text = _text(prompt)
            return len(
                self.tokenizer(f"{self.system_prompt}\n\n{text}" if self.system_prompt else text)[
                    "input_ids"
                ]
            )
        return len(
            self.tokenizer.apply_chat_template(
                self._messages(prompt),
                tools=self.tools or None,
                add_generation_prompt=True,
                tokenize=True,
                return_dict=True,
            )["input_ids"]
        )

    def framing(self) -> tuple[int, int]:
        """The tokens a prompt has besides its text: those of a one-message prompt with empty
        text (system prompt, tool schemas, markup, generation prompt), and those each further
        message adds (the first message's, when the template renders no pair of messages)."""
        first = self.count("")
        try:
            pair = self.count(
                [{"role": "user", "content": ""}, {"role": "assistant", "content": ""}]
            )
        except Exception:  # a template that wants other roles or order: a generous figure
            return first, first
        return first, max(pair - first, 1)

    def content_tokens(self, prompts: list[Any]) -> list[int]:
        """Each prompt's text tokenized alone, in one batch."""
        encoded = self.tokenizer([_text(prompt) for prompt in prompts], add_special_tokens=False)
        return [len(ids) for ids in encoded["input_ids"]]

    def _messages(self, prompt: Any) -> list[dict[str, Any]]:
        messages = (
            [{"role": "user", "content": prompt}]
            if isinstance(prompt, str)
            else [{"role": m["role"], "content": m["content"]} for m in prompt]
        )
        if self.system_prompt and (not messages or messages[0]["role"] != "system"):
            messages.insert(0, {"role": "system", "content": self.system_prompt})
        return messages


def _text(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    return "\n\n".join(str(message.get("content") or "") for message in prompt)


# Rows are read, and those in doubt tokenized without the template, this many at a time.
_BATCH_ROWS = 8192


def _first_too_long(
    dataset: datasets.Dataset, renderer: _Renderer, room: int, role: str
) -> tuple[int, int] | None:
    """A row whose rendered prompt passes ``room`` tokens (the longest of the first batch of
    rows that has one), and its exact count; ``None`` when every prompt fits.

    Every row gets an upper bound of its tokens without rendering it, the template's framing
    (measured once: system prompt, tool schemas, the markup of each message) plus the UTF-8
    bytes of its text, read from the Arrow column, since a byte-level BPE tokenizer never makes
    more tokens than bytes. Rows whose bound fits are done. The rest get a tighter bound, their
    text tokenized in one batch without the template; only rows still in doubt are rendered,
    longest bound first, and the first that does not fit is reported. On data well within the
    model's positions nothing is tokenized.
    """
    import numpy as np

    first, each = _rendered(lambda: renderer.framing(), renderer, f"{role}: the prompts")
    offset = 0
    for table in dataset.with_format("arrow").iter(batch_size=_BATCH_ROWS):
        column = table["prompt"]
        sizes, messages = _prompt_sizes(column)
        # A message's text may join its markup into fewer tokens, never more: one to spare each.
        frame = first + each * (messages - 1) + messages
        doubtful = np.flatnonzero(sizes + frame > room)
        if doubtful.size:
            prompts = column.take(doubtful).to_pylist()
            bounds = np.asarray(renderer.content_tokens(prompts)) + frame[doubtful]
            for at in np.argsort(-bounds, kind="stable"):
                if bounds[at] <= room:
                    break
                row = offset + int(doubtful[at])
                prompt = prompts[at]
                tokens = _rendered(
                    lambda: renderer.count(prompt),  # noqa: B023 - called at once
                    renderer,
                    f"{role} row {row}: the prompt",
                )
                if tokens > room:
                    return row, tokens
        offset += len(table)
    return None


def _rendered(count: Callable[[], Any], renderer: _Renderer, what: str) -> Any:
    """``count()``, with a failure of the chat template (the model's own Jinja code) as one
    line naming what was rendered."""
    try:
        return count()
    except Exception as exc:  # jinja2 and transformers raise many kinds
        raise ModelError(
            f"{what} cannot be rendered with the chat template of "
            f"{renderer.folder}: {first_line(exc)}"
        ) from None


def _prompt_sizes(column: Any) -> tuple[np.ndarray, np.ndarray]:
    """Each prompt's text in UTF-8 bytes (every message's content; the messages joined by a
    blank line, as :func:`_text` joins them) and its number of messages, from an Arrow column
    of strings or of lists of messages."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        sizes = pc.fill_null(pc.binary_length(column), 0).to_numpy(zero_copy_only=False)
        return sizes.astype(np.int64), np.ones(len(column), dtype=np.int64)
    count = pc.fill_null(pc.list_value_length(column), 0).to_numpy(zero_copy_only=False)
    content = pc.list_flatten(column).field("content")
    length = pc.fill_null(pc.binary_length(content), 0).to_numpy(zero_copy_only=False)
    parents = pc.list_parent_indices(column).to_numpy(zero_copy_only=False)
    total = np.bincount(parents, weights=length, minlength=len(column)).astype(np.int64)
    count = count.astype(np.int64)
    return total + 2 * np.maximum(count - 1, 0), count
