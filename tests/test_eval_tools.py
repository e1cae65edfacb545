"""``aworld-train eval`` runs an agent with tools through the agent runtime, as training runs it,
for real: the tiny
tool-calling model is taught a few exchanges (after each prompt, the call it makes; after the
tool's result, what it writes next), then evaluated on a job with a Python tool and the
calculator example's MCP server. The tools really run (a file the Python tool writes, a value
only it can return, the server's product), their results are in the next turn's input, the
turns stop at ``max_turns``, and an unknown tool, bad arguments or bad JSON do not stop the eval.

Needs torch and transformers: run in the TRL venv (the Makefile's EXTRA_TESTS_trl).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch", reason="eval generates with transformers")
pytest.importorskip("mcp", reason="the job uses the calculator's MCP server")

from aworld_train.cli import main  # noqa: E402
from aworld_train.evaluation import evaluate, open_target  # noqa: E402
from aworld_train.runtime import ChatRenderer, prompt_messages  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "calculator_agent"
MAX_TURNS = 3

TOOLS_PY = '''
from pathlib import Path

HERE = Path(__file__).parent


def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: the key.
    """
    with open(HERE / "calls.log", "a") as log:
        log.write(key + "\\n")
    if key == "again":
        return "again"
    return (HERE / "secret.txt").read_text().strip()
'''

REWARD_PY = """
def score(data_source, solution_str, ground_truth, extra_info=None):
    return 1.0 if ground_truth in solution_str else 0.0
"""


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


def said(content: str) -> dict[str, Any]:
    return {"role": "assistant", "content": content}


def called(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": list(calls)}


def result(name: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "name": name, "content": content}


# Each row's prompt, what the model is taught to do after it, and the row's ground truth. The
# tool results taught are what eval's tool loop gives back, except the secret, which the test
# writes only after teaching: the model cannot have learned it.
BAD_ARGUMENTS = "Error: TypeError: lookup() got an unexpected keyword argument 'wrong'"
UNKNOWN = "Error: unknown tool 'nosuch'; the agent has: lookup, multiply"
LESSONS: list[tuple[str, list[dict[str, Any]], str]] = [
    (
        "Find k.",
        [
            called(call("lookup", key="k")),
            result("lookup", "taught-secret"),
            said("<answer>found</answer>"),
        ],
        "found",
    ),
    (
        "Multiply 12 by 34.",
        [
            called(call("multiply", a=12, b=34)),
            result("multiply", "408"),
            said("<answer>408</answer>"),
        ],
        "408",
    ),
    (
        "Call nothing.",
        [called(call("nosuch", key="k")), result("nosuch", UNKNOWN), said("<answer>none</answer>")],
        "none",
    ),
    (
        "Bad arguments.",
        [
            called(call("lookup", wrong="k")),
            result("lookup", BAD_ARGUMENTS),
            said("<answer>bad</answer>"),
        ],
        "bad",
    ),
    (
        "Bad JSON.",
        [said('<tool_call>\n{"name": "lookup", "arguments": {oops}\n</tool_call>')],
        "oops",
    ),
    # Calls for ever: the loop must stop it at MAX_TURNS turns.
    (
        "Loop.",
        [called(call("lookup", key="again")), result("lookup", "again")] * (MAX_TURNS - 1)
        + [called(call("lookup", key="again"))],
        "never",
    ),
]


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A job file whose agent has a Python tool and the calculator's multiply, and whose tiny
    model has been taught the :data:`LESSONS` on the prompts eval renders."""
    import yaml
    from aworld_train.testing import build_tiny_model
    from aworld_train.tools import resolve_tools

    folder = tmp_path_factory.mktemp("eval-tools")
    model = build_tiny_model(
        folder / "model", extra_tokens=("<answer>", "</answer>"), max_positions=2048, tools=True
    )
    (folder / "tools.py").write_text(TOOLS_PY)
    (folder / "reward.py").write_text(REWARD_PY)
    (folder / "test.jsonl").write_text(
        "".join(
            json.dumps({"prompt": prompt, "ground_truth": truth}) + "\n"
            for prompt, _, truth in LESSONS
        )
    )
    spec = {
        "engine": "trl",
        "agent": {
            "name": "looker",
            "system_prompt": "Use the tools.",
            "tools": ["tools.py:lookup", "multiply"],
            "mcp_config": {
                "mcpServers": {
                    "calculator": {"command": "python", "args": [str(EXAMPLE / "server.py")]}
                }
            },
            "max_turns": MAX_TURNS,
        },
        "train_dataset": "test.jsonl",
        "test_dataset": "test.jsonl",
        "reward": "reward.py:score",
        "config": {"algorithm": "grpo", "model": str(model), "max_completion_length": 400},
    }
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(spec))

    target = open_target(path)
    tools = resolve_tools(target.agent, folder)
    try:
        schemas = tools.schemas()
    finally:
        tools.close()
    assert [schema["function"]["name"] for schema in schemas] == ["lookup", "multiply"]
    _teach(model, [(prompt, turns) for prompt, turns, _ in LESSONS], "Use the tools.", schemas)
    return path


def _teach(
    model: Path,
    lessons: list[tuple[str, list[dict[str, Any]]]],
    system_prompt: str,
    schemas: list[dict[str, Any]],
    steps: int = 400,
) -> None:
    """Overfit the model on each lesson's exchange, on the prompt eval renders: only the
    model's own turns are trained (through their end-of-turn token); the prompt and the tool
    results are context."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    eos = tokenizer.eos_token_id
    sequences = []
    for prompt, turns in lessons:
        prompt_ids = ChatRenderer(tokenizer).prompt_ids(
            prompt_messages(prompt, system_prompt), schemas
        )
        messages = [
            {"role": "system", "content": system_prompt},
            {"role": "user", "content": prompt},
            *turns,
        ]
        text = tokenizer.apply_chat_template(messages, tools=schemas, tokenize=False)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert ids[: len(prompt_ids)] == prompt_ids
        labels = [-100] * len(ids)
        # Label every assistant turn: from after its header through its end-of-turn token.
        header = tokenizer("<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
        start = len(prompt_ids)
        while start < len(ids):
            end = ids.index(eos, start) + 1
            labels[start:end] = ids[start:end]
            follows = next(
                (
                    i
                    for i in range(end, len(ids) - len(header) + 1)
                    if ids[i : i + len(header)] == header
                ),
                None,
            )
            if follows is None:
                break
            start = follows + len(header)
        sequences.append((ids, labels))

    torch.manual_seed(0)
    policy = AutoModelForCausalLM.from_pretrained(model)
    policy.train()
    optimizer = torch.optim.Adam(policy.parameters(), lr=5e-3)
    # One batch, right-padded: each sequence's loss is the mean over its own labelled tokens.
    width = max(len(ids) for ids, _ in sequences)
    pad = tokenizer.pad_token_id
    input_ids = torch.tensor([ids + [pad] * (width - len(ids)) for ids, _ in sequences])
    mask = torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for ids, _ in sequences])
    targets = torch.tensor([labels[1:] + [-100] * (width - len(labels)) for _, labels in sequences])
    counts = (targets != -100).sum(dim=1)
    for _step in range(steps):
        logits = policy(input_ids=input_ids, attention_mask=mask).logits[:, :-1]
        token_losses = torch.nn.functional.cross_entropy(
            logits.transpose(1, 2), targets, ignore_index=-100, reduction="none"
        )
        losses = token_losses.sum(dim=1) / counts
        worst = losses.max().item()
        # Greedy decoding writes the taught turns once every taught token is the most likely
        # one; a loss this low leaves a margin for the eval's batching to round differently.
        labelled = targets != -100
        if worst < 0.03 and bool((logits.argmax(-1) == targets)[labelled].all()):
            break
        optimizer.zero_grad()
        losses.mean().backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        optimizer.step()
    else:
        raise AssertionError(f"the model did not learn the exchanges (worst loss {worst:.3f})")
    policy.save_pretrained(model)


@pytest.fixture(scope="module")
def evaluated(job: Path) -> dict[str, dict[str, Any]]:
    """``evaluate`` on the job's base model, per prompt its record; the secret is written just
    before."""
    folder = job.parent
    (folder / "secret.txt").write_text("7f3a-only-the-tool-knows\n")
    (folder / "calls.log").unlink(missing_ok=True)
    result = evaluate(job)
    assert result.rows == len(LESSONS)
    return {record["prompt"]: record for record in result.records}


def test_a_called_tool_runs_and_its_result_is_in_the_next_turn(
    job: Path, evaluated: dict[str, dict[str, Any]]
) -> None:
    from transformers import AutoTokenizer

    record = evaluated["Find k."]
    episode = record["episode"]
    # The model's call, then the Python tool's result: a value only the tool could return.
    assert episode[0]["tool_calls"] == [call("lookup", key="k")]
    assert episode[1] == result("lookup", "7f3a-only-the-tool-knows")
    assert episode[2]["role"] == "assistant" and "tool_calls" not in episode[2]
    assert "k" in (job.parent / "calls.log").read_text().splitlines()
    # The reward saw the agent's answer: its last turn.
    assert record["completion"] == episode[-1]["content"]

    # The second turn's input, rebuilt the way the chat template renders the conversation, holds
    # the tool's value in its tool-response turn, right after the model's call.
    tokenizer = AutoTokenizer.from_pretrained(open_target(job).base_model)
    rendered = tokenizer.apply_chat_template(
        [
            {"role": "system", "content": "Use the tools."},
            {"role": "user", "content": "Find k."},
            episode[0],
            episode[1],
        ],
        tools=[{"type": "function", "function": {"name": "lookup"}}],
        add_generation_prompt=True,
        tokenize=False,
    )
    assert rendered.endswith(
        "</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n"
        "7f3a-only-the-tool-knows\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_an_mcp_tool_runs_on_the_jobs_server(evaluated: dict[str, dict[str, Any]]) -> None:
    record = evaluated["Multiply 12 by 34."]
    assert record["episode"][0]["tool_calls"] == [call("multiply", a=12, b=34)]
    assert record["episode"][1] == result("multiply", "408")
    # The turn after the server's result gives the answer, and the job's reward scores it.
    assert record["completion"] == "<answer>408</answer>"
    assert record["score"] == 1.0 and record["rewards"] == {"score": 1.0}


def test_max_turns_bounds_an_agent_that_keeps_calling(
    job: Path, evaluated: dict[str, dict[str, Any]]
) -> None:
    episode = evaluated["Loop."]["episode"]
    roles = [message["role"] for message in episode]
    assert roles == ["assistant", "tool"] * (MAX_TURNS - 1) + ["assistant"]
    # The last turn calls again, but no turn is left: that call never runs.
    assert episode[-1]["tool_calls"] == [call("lookup", key="again")]
    calls = (job.parent / "calls.log").read_text().splitlines()
    assert calls.count("again") == MAX_TURNS - 1


def test_bad_calls_give_the_model_the_error_and_the_eval_goes_on(
    evaluated: dict[str, dict[str, Any]],
) -> None:
    # An unknown tool and arguments the tool does not take: the error text is the tool's result,
    # and the model goes on from it.
    unknown = evaluated["Call nothing."]["episode"]
    assert unknown[1] == result("nosuch", UNKNOWN)
    assert unknown[2]["content"] == "<answer>none</answer>"
    bad = evaluated["Bad arguments."]["episode"]
    assert bad[1] == result("lookup", BAD_ARGUMENTS)
    assert bad[2]["content"] == "<answer>bad</answer>"
    # A call whose JSON does not parse is no call: the turn is its text and the episode ends
    # there.
    broken = evaluated["Bad JSON."]
    assert [m["role"] for m in broken["episode"]] == ["assistant"]
    assert "{oops}" in broken["completion"] and broken["score"] == 1.0


def test_the_command_writes_the_episodes(job: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    try:
        main(["eval", str(job), "--json", "--limit", "2"])
    except SystemExit as exc:
        assert not exc.code, capsys.readouterr().err
    summary = json.loads(capsys.readouterr().out)
    assert summary["rows"] == 2 and summary["model"] == "base"
    lines = (job.parent / "eval" / "base-test-first2.samples.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert records[1]["episode"][1] == result("multiply", "408")
