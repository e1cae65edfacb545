"""The user's own agent on ms-swift: a Python agent driving an OpenAI client trains with GRPO
through the core's agent runtime, and its episodes are exactly the tokens swift trains on."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from aworld_train.testing.agents import (
    SHOUT_TOOLS,
    SYSTEM,
    assert_agent_trains,
    mask_segments,
    write_agent_job,
)
from aworld_train.testing.fixtures import read_jsonl, run_cli

TEMPERATURE = 0.9
TOP_K = 50


@pytest.fixture
def agent_job(tmp_path: Path, tiny_model: Path) -> Path:
    """A job file training ``my_agent.py:run`` with GRPO on ms-swift for 3 steps."""
    return write_agent_job(
        tmp_path,
        tiny_model,
        "swift",
        {"template": "qwen", "beta": 0.0},
        max_steps=3,
        save_steps=3,
        max_completion_length=48,
    )


@pytest.mark.slow
def test_a_python_agent_with_an_openai_client_trains_and_a_failing_episode_scores_0(
    agent_job: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir, steps = assert_agent_trains(capsys, agent_job, steps=3)
    assert all(0 < m["agent_turns"] <= 2 for m in steps)
    samples = read_jsonl(run_dir / "samples.jsonl")
    assert samples and all(s["prompt"].startswith("Repeat: ") for s in samples)


@pytest.mark.slow
def test_a_spec_agent_with_a_tool_trains_through_the_runtime(
    agent_job: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The spec form with tools, which swift's own rollouts cannot run: the core's chat loop
    runs each episode over the runtime's endpoint, the tool's schema in its prompt."""
    (agent_job.parent / "tools.py").write_text(
        'def shout(text: str) -> str:\n    """Upper-case a text."""\n    return text.upper()\n'
    )
    job = json.loads(agent_job.read_text())
    job["agent"] = {
        "name": "shouter",
        "system_prompt": SYSTEM,
        "tools": ["tools.py:shout"],
        "max_turns": 2,
    }
    job["config"]["max_steps"] = 2
    agent_job.write_text(json.dumps(job))
    code, _, err = run_cli(capsys, "check", agent_job)
    assert code == 0, err
    code, _, err = run_cli(capsys, "train", agent_job)
    assert code == 0, err
    run_dir = next((agent_job.parent / "runs").iterdir())
    steps = [m for m in read_jsonl(run_dir / "metrics.jsonl") if "loss" in m]
    assert [m["step"] for m in steps] == [1, 2]
    assert all(m["agent_failed"] == 0 and 1 <= m["agent_turns"] <= 2 for m in steps)


def test_the_reward_scores_the_agents_answer_and_a_failed_episode_scores_0() -> None:
    """swift's reward call: each rollout's ``rollout_infos`` carry the episode."""
    from aworld_train.engine import RewardFunction, RewardSpec
    from aworld_train_swift.reward import score_batch

    calls: list[tuple[str, dict[str, Any]]] = []

    def score(
        data_source: str,
        solution_str: str,
        ground_truth: str,
        extra_info: dict[str, Any] | None = None,
    ) -> float:
        calls.append((solution_str, dict(extra_info or {})))
        return 1.0 if ground_truth in solution_str else 0.0

    spec = RewardSpec([RewardFunction("score", score, 1.0)])
    episodes = [
        {"agent_answer": "it is 4", "agent_extra": {"turns": 2}, "agent_failure": None},
        {"agent_answer": "", "agent_extra": {}, "agent_failure": "RuntimeError: planted"},
    ]
    scores = score_batch(
        spec,
        ["completion text", "completion text"],
        {
            "ground_truth": ["4", "4"],
            "extra_info": ['{"index": 0}', '{"index": 1}'],
            "rollout_infos": episodes,
        },
    )
    assert scores == [1.0, 0.0]
    assert calls == [("it is 4", {"index": 0, "turns": 2})]  # the failed one is not scored


@pytest.mark.parametrize(
    ("resources", "swift", "message"),
    [
        (
            {"gpus_per_node": 2},
            {"deepspeed": "zero3"},
            "config swift.deepspeed: agent 'run' runs its episodes in each of the 2 processes",
        ),
        (
            {},
            {"multi_turn_scheduler": "math_tip_trick"},
            "config key 'swift.multi_turn_scheduler' is set, but agent 'run' runs its episodes",
        ),
    ],
)
def test_what_an_agent_run_by_the_runtime_cannot_have_is_one_line_from_check(
    agent_job: Path,
    capsys: pytest.CaptureFixture[str],
    resources: dict[str, Any],
    swift: dict[str, Any],
    message: str,
) -> None:
    job = json.loads(agent_job.read_text())
    job["config"]["swift"].update(swift)
    job["config"]["resources"] = resources
    agent_job.write_text(json.dumps(job))
    code, _, err = run_cli(capsys, "check", agent_job)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], err


@pytest.mark.slow
def test_the_tokens_swift_trains_on_are_the_generated_ids_and_the_rendered_tool_messages(
    agent_job: Path,
    tiny_model: Path,
    capsys: pytest.CaptureFixture[str],
    collated: list[tuple[Any, dict[str, Any]]],
) -> None:
    """One GRPO step through the CLI, each sample captured where swift collates what it trains
    on: the prompt is the agent's first request as the chat template renders it, the model's
    tokens are as generated (labelled), the tool message is as the chat template renders it
    (not labelled), and the log-probs the model recomputes equal the recorded ones."""
    import torch
    from aworld_train.runtime import ChatRenderer
    from aworld_train_swift.rollout import TRAJECTORY_KEY
    from transformers import AutoModelForCausalLM, AutoTokenizer

    job = json.loads(agent_job.read_text())
    job["config"].update(max_steps=1, save_steps=1, max_completion_length=64)
    job["config"]["swift"]["temperature"] = TEMPERATURE
    agent_job.write_text(json.dumps(job))
    code, _, err = run_cli(capsys, "train", agent_job)
    assert code == 0, err

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    renderer = ChatRenderer(tokenizer)
    # The first step's samples were generated and collated before any update.
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32).eval()
    two_turns = 0
    for sample, encoded in collated:
        episode = json.loads(sample.messages[-1][TRAJECTORY_KEY])
        prompt, completion, mask = episode["prompt_ids"], episode["response_ids"], episode["mask"]
        # What swift trains on: the episode's tokens, labels on the model's tokens only.
        assert encoded["input_ids"] == prompt + completion
        assert encoded["labels"][len(prompt) :] == [
            token if kept else -100 for token, kept in zip(completion, mask)
        ]
        assert set(encoded["labels"][: len(prompt)]) == {-100}
        if sample.rollout_infos["agent_failure"] is not None:
            assert not any(mask)
            continue
        user = next(m["content"] for m in sample.messages if m["role"] == "user")
        assert prompt == renderer.prompt_ids(
            [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}], SHOUT_TOOLS
        )
        segments = mask_segments(mask)
        assert [value for value, _, _ in segments][:2] == [1, 0]
        (_, a, b), (_, c, d) = segments[:2]
        first_turn = renderer.strip_special(tokenizer.decode(completion[a:b]))
        tool_message = {"role": "tool", "name": "shout", "content": first_turn.upper()}
        ended = completion[b - 1] == renderer.eos_token_id
        assert completion[c:d] == renderer.context_ids([tool_message], None, turn_ended=ended)
        two_turns += len(segments) == 3

        # The policy, run over the whole sequence with swift's sampling settings (its
        # temperature; its top_k of -1 leaves transformers' default of 50), gives the model
        # tokens the log-probs recorded when they were sampled.
        with torch.no_grad():
            logits = model(torch.tensor([prompt + completion])).logits[0, len(prompt) - 1 : -1]
        scaled = logits.float() / TEMPERATURE
        kept_logits = scaled.masked_fill(
            scaled < scaled.topk(TOP_K, dim=-1).values[:, -1:], float("-inf")
        )
        recomputed = (
            torch.log_softmax(kept_logits, dim=-1)
            .gather(-1, torch.tensor(completion).unsqueeze(-1))
            .squeeze(-1)
        )
        recorded = iter(sample.rollout_logprobs[0])
        gaps = [abs(recomputed[i].item() - next(recorded)) for i, kept in enumerate(mask) if kept]
        assert max(gaps) < 1e-4, f"log-prob gap {max(gaps):.2e}"
        assert all(math.isfinite(value) for value in sample.rollout_logprobs[0])
    assert len(collated) == 8 and two_turns, "no two-turn episode to check"
