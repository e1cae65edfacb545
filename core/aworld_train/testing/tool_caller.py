"""A tiny tool-calling model that calls its tool only sometimes: where a GRPO run that should learn
to call the tool starts.

:func:`teach_sometimes_calling` trains a tiny tool model (``build_tiny_model(..., tools=True)``)
for a few plain torch steps on every exchange two ways: the model calls the tool, then answers
with the tool's result; or it answers at once with a wrong guess. Both answers follow the same
prompt and start with different tokens, and their losses are weighted ``call_share`` and
``1 - call_share``: cross-entropy is lowest at the weighted frequencies, so the model's first
token picks the call with about that probability, while the rest of either answer is learnt
exactly. Only the model's own turns are trained; the prompt and the tool's result are context,
as in GRPO's loss.

:func:`multiplication_exchanges` makes such exchanges from the calculator example's rows
("What is 6411 * 876?"), the guess a product of rounded factors, as one guesses without a
calculator.

:func:`teach_exchange` teaches one exchange with no guess: the model always calls the tool.

:func:`tool_learning_job` puts them together: the questions, the taught model and the job file
of a GRPO run through the agent runtime in which the model should learn to call the tool.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_QUESTION = re.compile(r"What is (\d+) \* (\d+)\?")


@dataclass(frozen=True)
class ToolExchange:
    """One prompt and the ways the model is taught to answer it.

    :ivar messages: the prompt's chat messages, as the agent sends them (system prompt first).
    :ivar call: the tool call, ``{"name": ..., "arguments": {...}}``.
    :ivar result: the tool's result text for that call.
    :ivar answer: the model's turn after the result (it scores 1).
    :ivar guess: the model's turn when it answers at once (it scores 0); ``None``: the model
        is taught to call the tool only.
    """

    messages: list[dict[str, Any]]
    call: dict[str, Any]
    result: str
    answer: str
    guess: str | None = None


def multiplication_exchanges(
    rows: Sequence[dict[str, Any]], system_prompt: str | None
) -> list[ToolExchange]:
    """Exchanges for rows whose prompt is "What is A * B?": call ``multiply(a=A, b=B)``, answer
    ``<answer>A*B</answer>``; the guess is the product of A rounded to hundreds and B to tens
    (never the right product)."""
    exchanges = []
    for row in rows:
        found = _QUESTION.fullmatch(str(row["prompt"]))
        if found is None:
            raise ValueError(f"not a multiplication question: {row['prompt']!r}")
        a, b = int(found[1]), int(found[2])
        guess = max(round(a, -2), 100) * max(round(b, -1), 10)
        if guess == a * b:
            guess += 10
        messages = [{"role": "user", "content": row["prompt"]}]
        if system_prompt:
            messages.insert(0, {"role": "system", "content": system_prompt})
        exchanges.append(
            ToolExchange(
                messages=messages,
                call={"name": "multiply", "arguments": {"a": a, "b": b}},
                result=str(a * b),
                answer=f"<answer>{a * b}</answer>",
                guess=f"<answer>{guess}</answer>",
            )
        )
    return exchanges


def teach_sometimes_calling(
    model: str | Path,
    exchanges: Sequence[ToolExchange],
    schemas: list[dict[str, Any]],
    *,
    call_share: float = 0.4,
    steps: int = 300,
    learning_rate: float = 3e-3,
    seed: int = 0,
) -> dict[str, Any]:
    """Teach the tool model in ``model`` (saved back in place) to answer each exchange's prompt
    by calling the tool with probability ``call_share``, by guessing otherwise (an exchange
    without a guess: by calling the tool).

    :param schemas: the tools' schemas, as the agent shows them to the model.
    :returns: ``loss`` (the last step's, weighted), ``rest_loss`` (its mean over every answer
        token but the first), ``exact`` (whether each of those tokens is the model's most likely
        one, so that greedy decoding writes either answer in full) and ``call_probability``: per exchange, the probability of the
        call's first token after the prompt.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    taught = _TaughtSequences(tokenizer, schemas, call_share)
    for exchange in exchanges:
        taught.add(exchange)
    input_ids, attention, targets, token_weights, rest = taught.tensors()

    torch.manual_seed(seed)
    policy = AutoModelForCausalLM.from_pretrained(model)
    policy.train()
    loss, losses, logits = _fit(
        policy, input_ids, attention, targets, token_weights, steps, learning_rate
    )
    rest_loss = float((losses.detach() * rest).sum() / rest.sum())
    # Whether the most likely token is the taught one everywhere but at the parting.
    right = (logits.detach().argmax(-1) == targets) | (rest == 0)
    policy.eval()
    with torch.no_grad():
        probabilities = [
            float(policy(input_ids=torch.tensor([prompt])).logits[0, -1].softmax(-1)[start])
            for prompt, start in zip(taught.prompts, taught.call_starts)
        ]
    policy.save_pretrained(model)
    return {
        "loss": float(loss.item()),
        "rest_loss": rest_loss,
        "exact": bool(right.all()),
        "call_probability": probabilities,
    }


def _fit(
    policy: Any,
    input_ids: Any,
    attention: Any,
    targets: Any,
    token_weights: Any,
    steps: int,
    learning_rate: float,
) -> tuple[Any, Any, Any]:
    """Train ``policy`` on the batch for ``steps`` Adam steps of the weighted cross-entropy.

    :returns: the last step's weighted loss, its per-token losses and its logits.
    """
    import torch

    optimizer = torch.optim.Adam(policy.parameters(), lr=learning_rate)
    for _ in range(steps):
        logits = policy(input_ids=input_ids, attention_mask=attention).logits[:, :-1]
        losses = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]),
            targets.reshape(-1),
            ignore_index=-100,
            reduction="none",
        ).view_as(targets)
        loss = (losses * token_weights).sum() / token_weights.sum()
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        optimizer.step()
    return loss, losses, logits


class _TaughtSequences:
    """The token sequences :func:`teach_sometimes_calling` trains on: per exchange, the call
    then the answer (weight ``call_share``) and, with a guess, the guess (the rest), each
    labelled on the model's own turns only."""

    def __init__(self, tokenizer: Any, schemas: list[dict[str, Any]], call_share: float) -> None:
        self.tokenizer = tokenizer
        self.schemas = schemas
        self.call_share = call_share
        self.sequences: list[tuple[list[int], list[int], float]] = []  # ids, labels, weight
        self.firsts: list[int] = []  # each sequence's position before its answer's first token
        self.prompts: list[list[int]] = []
        self.call_starts: list[int] = []  # each prompt's call's first token

    def render(self, messages: list[dict[str, Any]]) -> list[int]:
        """The prompt's tokens, the tools' schemas shown, ready for the model's turn."""
        text = self.tokenizer.apply_chat_template(
            messages, tools=self.schemas, add_generation_prompt=True, tokenize=False
        )
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def turn(self, text: str) -> list[int]:
        """The tokens of the model's turn ``text``, ended."""
        ending = text + self.tokenizer.eos_token
        return list(self.tokenizer(ending, add_special_tokens=False)["input_ids"])

    def add(self, exchange: ToolExchange) -> None:
        """Add the exchange's calling sequence and, with a guess, its guessing one."""
        prompt = self.render(exchange.messages)
        call = {"type": "function", "function": exchange.call}
        context = self.render(
            [
                *exchange.messages,
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "name": exchange.call["name"], "content": exchange.result},
            ]
        )
        if context[: len(prompt)] != prompt:
            raise ValueError("the chat template renders the prompt differently after a tool call")
        calling = context + self.turn(exchange.answer)
        call_end = calling.index(self.tokenizer.eos_token_id, len(prompt)) + 1
        labels = [-100] * len(calling)
        labels[len(prompt) : call_end] = calling[len(prompt) : call_end]
        labels[len(context) :] = calling[len(context) :]
        self.sequences.append((calling, labels, self.call_share))
        self.firsts.append(len(prompt) - 1)
        if exchange.guess is not None:
            guessing = prompt + self.turn(exchange.guess)
            labels = [-100] * len(prompt) + guessing[len(prompt) :]
            self.sequences.append((guessing, labels, 1.0 - self.call_share))
            self.firsts.append(len(prompt) - 1)
            if calling[len(prompt)] == guessing[len(prompt)]:
                raise ValueError("the call and the guess start with the same token")
        self.prompts.append(prompt)
        self.call_starts.append(calling[len(prompt)])

    def tensors(self) -> tuple[Any, Any, Any, Any, Any]:
        """The padded batch: input ids, attention mask, next-token targets, each target's
        weight, and the mask of every answer token but the first (where the two ways part)."""
        import torch

        sequences = self.sequences
        width = max(len(ids) for ids, _, _ in sequences)
        pad = self.tokenizer.pad_token_id
        input_ids = torch.tensor([ids + [pad] * (width - len(ids)) for ids, _, _ in sequences])
        attention = torch.tensor(
            [[1] * len(ids) + [0] * (width - len(ids)) for ids, _, _ in sequences]
        )
        labels = torch.tensor([lab + [-100] * (width - len(lab)) for _, lab, _ in sequences])
        weights = torch.tensor([w for _, _, w in sequences]).unsqueeze(1)
        targets = labels[:, 1:]
        # Every token but the first of each answer, where the two ways part: learnt exactly.
        rest = (targets != -100).float()
        rest[torch.arange(len(sequences)), torch.tensor(self.firsts)] = 0.0
        return input_ids, attention, targets, weights * (targets != -100), rest


def teach_exchange(
    model: Path,
    prompt: list[dict[str, str]],
    functions: list[dict[str, Any]],
    call: dict[str, Any],
    result: str,
    answer: str,
    steps: int = 200,
) -> None:
    """Overfit the model in ``model`` on one exchange: after ``prompt`` it writes ``call`` (a
    chat-template tool call, ``{"type": "function", "function": {...}}``), and after the tool's
    ``result`` it writes ``answer``. Only the model's own two turns are trained."""
    exchange = ToolExchange(messages=prompt, call=call["function"], result=result, answer=answer)
    taught = teach_sometimes_calling(model, [exchange], functions, call_share=1.0, steps=steps)
    assert taught["loss"] < 0.01, (
        f"the model did not learn the exchange (loss {taught['loss']:.3f})"
    )


#: The calculator agent's system prompt in these runs: short, so that the byte-level prompt
#: (the multiply schema included) stays at 572 tokens.
SYSTEM_PROMPT = "Use the calculator."


def tool_learning_job(
    folder: str | Path,
    calculator: str | Path,
    *,
    engine: str,
    steps: int,
    seed: int = 0,
    rows: int = 4,
    teaching_steps: int = 200,
    call_share: float = 0.4,
    learning_rate: float = 3e-5,
) -> tuple[Path, dict[str, Any]]:
    """Write a GRPO job that should learn to call the calculator's ``multiply``, and its start.

    In ``folder``: ``train.jsonl`` (the first ``rows`` questions of the calculator example at
    ``calculator``), ``model`` (a tiny tool model taught by :func:`teach_sometimes_calling` to
    call the tool with probability ``call_share``) and ``job.yaml``: the engine ``engine``, the
    spec-form agent with the example's MCP server (``multiply`` only, 2 turns, temperature 0.5),
    ``answer_match``, 8 completions of one question per step, no KL term (``kl_coef: 0``),
    ``steps`` steps, runs under ``folder/runs``. ``seed`` seeds the model, its teaching and the
    training.

    :returns: the job file and the teaching's figures.
    """
    import json

    import yaml

    from aworld_train.agent import load_agent
    from aworld_train.testing.tiny_model import build_tiny_model
    from aworld_train.tools.toolset import resolve_tools

    folder, calculator = Path(folder), Path(calculator)
    folder.mkdir(parents=True, exist_ok=True)
    lines = (calculator / "data" / "train.jsonl").read_text().splitlines()[:rows]
    (folder / "train.jsonl").write_text("".join(line + "\n" for line in lines))
    agent = _calculator_agent(calculator)
    # The schema exactly as the runtime shows it to the model: the core's own tool resolution.
    tools = resolve_tools(load_agent(agent, folder), folder)
    try:
        schemas = tools.schemas()
    finally:
        tools.close()
    model = build_tiny_model(
        folder / "model",
        extra_tokens=("<answer>", "</answer>"),
        max_positions=2048,
        tools=True,
        seed=seed,
    )
    exchanges = multiplication_exchanges([json.loads(line) for line in lines], SYSTEM_PROMPT)
    taught = teach_sometimes_calling(
        model, exchanges, schemas, call_share=call_share, steps=teaching_steps, seed=seed
    )
    job = _grpo_job(engine, agent, model, steps=steps, learning_rate=learning_rate, seed=seed)
    (folder / "job.yaml").write_text(yaml.safe_dump(job))
    return folder / "job.yaml", taught


def _calculator_agent(calculator: Path) -> dict[str, Any]:
    """The spec-form agent of the job: the calculator example's MCP server, ``multiply``
    only, 2 turns, temperature 0.5."""
    return {
        "name": "calculator-agent",
        "system_prompt": SYSTEM_PROMPT,
        "mcp_config": {
            "mcpServers": {
                "calculator": {"command": "python", "args": [str(calculator / "server.py")]}
            }
        },
        "tools": ["multiply"],
        "max_turns": 2,
        "llm_temperature": 0.5,
    }


def _grpo_job(
    engine: str,
    agent: dict[str, Any],
    model: Path,
    *,
    steps: int,
    learning_rate: float,
    seed: int,
) -> dict[str, Any]:
    """The GRPO job on ``engine``: ``answer_match``, 8 completions of one question per step,
    no KL term, under ``runs``."""
    return {
        "engine": engine,
        "agent": agent,
        "train_dataset": "train.jsonl",
        "reward": "answer_match",
        "config": {
            "algorithm": "grpo",
            "model": str(model),
            "max_steps": steps,
            "batch_size": 8,
            "num_generations": 8,
            "max_completion_length": 192,
            "learning_rate": learning_rate,
            "logging_steps": 1,
            "save_steps": 10**6,
            "seed": seed,
            "kl_coef": 0.0,
        },
        "run_path": "runs",
    }
