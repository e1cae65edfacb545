"""The calculator agent as agent frameworks write it (``examples/agent_frameworks``), taught to
a tiny model and trained on an engine through the CLI.

:data:`FRAMEWORK_AGENTS` names each tested form. :func:`framework_job` writes a GRPO job of two
steps training one of them on two calculator questions. :func:`teach_framework_agent` records
what the framework sends: it runs the agent through the core's runtime against a scripted
policy (call ``multiply`` with the question's numbers, then answer; smolagents answers through
its ``final_answer`` tool), and teaches the tiny model every model token of the recorded
segments, so that the model then calls the tool itself, in the framework's own conversation, on
nearly every episode.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

#: Each tested form: the example file's agent, and whether the framework rewrites its
#: conversation on every call (one segment per model call).
FRAMEWORK_AGENTS: dict[str, tuple[str, bool]] = {
    "agents_sdk": ("agents_sdk.py:run", False),  # its default form: the Responses API
    "agents_sdk_chat_completions": ("agents_sdk.py:run_chat_completions", False),
    "langgraph": ("langgraph_agent.py:run", False),
    "langgraph_streaming": ("langgraph_agent.py:run_streaming", False),
    "smolagents": ("smolagents_agent.py:run", True),
}

_QUESTION = re.compile(r"What is (\d+) \* (\d+)\?")
#: The most any taught token's loss may be: its probability is then at least 0.95.
TAUGHT_LOSS = 0.05


def framework_job(
    folder: Path, examples: Path, calculator: Path, engine: str, form: str, **config: Any
) -> Path:
    """A job in ``folder`` training the ``form`` agent of ``examples`` with GRPO on ``engine``
    for 2 steps (2 questions of the calculator example at ``calculator``, 2 episodes each; one
    question for an agent that rewrites its conversation, whose ~4k-token prompts make teaching
    the model slow), with a tiny tool model (untaught: :func:`teach_framework_agent` teaches
    it)."""
    from aworld_train.testing.tiny_model import build_tiny_model

    reference, rewrites = FRAMEWORK_AGENTS[form]
    rows = 1 if rewrites else 2
    shutil.copy(examples / reference.split(":")[0], folder)
    # smolagents' system prompt alone is ~8k characters.
    build_tiny_model(
        folder / "model", extra_tokens=("<answer>", "</answer>"), max_positions=16384, tools=True
    )
    lines = (calculator / "data" / "train.jsonl").read_text().splitlines()[:rows]
    (folder / "train.jsonl").write_text("".join(line + "\n" for line in lines))
    job = {
        "engine": engine,
        "agent": reference,
        "train_dataset": "train.jsonl",
        "reward": "answer_match",
        "config": {
            "algorithm": "grpo",
            "model": str(folder / "model"),
            "max_steps": 2,
            "batch_size": 2 * rows,
            "num_generations": 2,
            "learning_rate": 1e-5,
            "max_completion_length": 160,
            "temperature": 0.5,
            "logging_steps": 1,
            "save_steps": 2,
            "seed": 0,
            # The tests compare the recorded log-probs with the policy's own in float32: on a
            # GPU, "auto" would generate in bf16 (~5e-2 apart).
            "precision": "fp32",
            **config,
        },
        "run_path": "runs",
    }
    path = folder / "job.yaml"
    path.write_text(json.dumps(job))
    return path


def train_framework_job(job: Path, capsys: Any) -> tuple[Path, list[dict[str, Any]]]:
    """Train ``job`` (a :func:`framework_job`) through the CLI; its run directory and the
    metrics of its training steps, once it completed its 2 steps without a failed episode."""
    from aworld_train.testing.fixtures import read_jsonl, run_cli

    code, _, err = run_cli(capsys, "train", job)
    assert code == 0, err
    run_dir = next((job.parent / "runs").iterdir())
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "completed"
    steps = [m for m in read_jsonl(run_dir / "metrics.jsonl") if "loss" in m]
    assert [m["step"] for m in steps] == [1, 2]
    assert all(m["agent_failed"] == 0 for m in steps), steps
    return run_dir, steps


def scripted_turn(prompt: str) -> str:
    """What the scripted policy writes after ``prompt`` (the rendered conversation so far):
    a call to ``multiply`` with the last question's numbers, or, once the product is in the
    conversation, the answer (through ``final_answer`` where the agent offers that tool)."""
    a, b = (int(n) for n in _QUESTION.findall(prompt)[-1])
    if str(a * b) not in prompt:
        return _call("multiply", {"a": a, "b": b})
    answer = f"<answer>{a * b}</answer>"
    return _call("final_answer", {"answer": answer}) if '"final_answer"' in prompt else answer


def _call(name: str, arguments: dict[str, Any]) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


def teach_framework_agent(job: Path, steps: int = 300) -> list[Any]:
    """Record the job's agent on each of its rows against the scripted policy, then teach the
    job's model every model token of the recorded segments (saved in place).

    :returns: the recorded episodes (:class:`~aworld_train.runtime.EpisodeResult`).
    :raises AssertionError: when an episode fails or the model does not learn the turns.
    """
    from transformers import AutoTokenizer

    from aworld_train.agent import load_agent
    from aworld_train.runtime import AgentRuntime, ChatRenderer, Generated, Limits

    spec = json.loads(job.read_text())
    model = Path(spec["config"]["model"])
    tokenizer = AutoTokenizer.from_pretrained(model)

    async def scripted(prompt_ids: list[int], max_tokens: int) -> Generated:
        text = scripted_turn(tokenizer.decode(prompt_ids)) + tokenizer.eos_token
        ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
        return Generated(ids, [0.0] * len(ids))

    runtime = AgentRuntime(
        load_agent(spec["agent"], job.parent),
        None,
        ChatRenderer(tokenizer),
        scripted,
        Limits(max_turns=6, max_tokens=1 << 14, timeout=120),
        log_failure=False,
    )
    rows = [json.loads(line) for line in (job.parent / "train.jsonl").read_text().splitlines()]
    results = runtime.run(rows)
    failures = [result.failure for result in results if result.failure]
    assert not failures, failures
    worst = teach_segments(model, [s for r in results for s in r.segments], steps)
    assert worst < TAUGHT_LOSS, (
        f"the model did not learn the agent's turns (a token's loss {worst:.3f})"
    )
    return results


def teach_segments(
    model: Path, segments: list[Any], steps: int, learning_rate: float = 5e-3
) -> float:
    """Train the model in ``model`` (saved back in place) on the model tokens (mask 1) of each
    recorded segment, for at most ``steps`` steps or until every such token's loss is below
    :data:`TAUGHT_LOSS`; the largest token loss of the last step.

    Every token, not the mean: a mean below 0.01 over a hundred tokens still lets one of them
    be a near tie (loss 0.7), which sampling at temperature 0.5 misses half the time and a few
    training steps can flip under greedy decoding."""
    import torch
    from transformers import AutoModelForCausalLM

    sequences = [s.prompt_ids + s.response_ids for s in segments]
    labels = [
        [-100] * len(s.prompt_ids)
        + [t if kept else -100 for t, kept in zip(s.response_ids, s.mask)]
        for s in segments
    ]
    width = max(map(len, sequences))
    ids = torch.tensor([s + [0] * (width - len(s)) for s in sequences])
    attention = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in sequences])
    targets = torch.tensor([label + [-100] * (width - len(label)) for label in labels])[:, 1:]
    torch.manual_seed(0)
    policy = AutoModelForCausalLM.from_pretrained(model)
    policy.train()
    optimizer = torch.optim.Adam(policy.parameters(), lr=learning_rate)
    taught = targets.reshape(-1) != -100
    worst = float("inf")
    for _ in range(steps):
        logits = policy(input_ids=ids, attention_mask=attention).logits[:, :-1]
        losses = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none"
        )[taught]
        worst = losses.max().item()
        if worst < TAUGHT_LOSS:
            break
        optimizer.zero_grad()
        losses.mean().backward()
        optimizer.step()
    policy.save_pretrained(model)
    return worst
