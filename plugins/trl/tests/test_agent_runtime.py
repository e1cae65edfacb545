"""The user's own agent on TRL: a Python agent driving an OpenAI client trains with GRPO through
the core's agent runtime, its episodes are exactly the tokens TRL trains on, and each bad agent
is one line from ``check``."""

from __future__ import annotations

import logging
import math
import subprocess
import sys
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


@pytest.fixture
def agent_job(tmp_path: Path, tiny_model: Path) -> Path:
    """A job file training ``my_agent.py:run`` with GRPO for 4 steps."""
    return write_agent_job(tmp_path, tiny_model, "trl", {"beta": 0.0})


@pytest.mark.slow
def test_a_python_agent_with_an_openai_client_trains_and_a_failing_episode_scores_0(
    agent_job: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert_agent_trains(capsys, agent_job, steps=4)


@pytest.mark.parametrize(
    ("agent", "message"),
    [
        ("raises", "agent 'raises' on train.jsonl row 0: KeyError: 'no_such_column'"),
        (
            "never_calls",
            "agent 'never_calls' on train.jsonl row 0: the agent finished without "
            "calling its model",
        ),
        ("exits", "agent 'exits' on train.jsonl row 0 ended the process (exit 3)"),
        (
            "returns_a_number",
            "returns_a_number() returned int: a Python agent returns the final answer as a string",
        ),
        (
            "asks_for_two",
            "agent 'asks_for_two' on train.jsonl row 0: the training endpoint refused POST "
            "chat/completions: n=2 is not supported by the training endpoint",
        ),
        (
            "legacy",
            "agent 'legacy' on train.jsonl row 0: the training endpoint does not serve POST "
            "/v1/completions: it serves POST chat/completions, POST responses and GET models",
        ),
        (
            "wrong_signature",
            "TypeError: wrong_signature() takes 1 positional argument but 2 were given",
        ),
        ("no_such_function", "no_such_function"),
    ],
)
def test_each_bad_agent_is_one_line_from_check(
    agent_job: Path, capsys: pytest.CaptureFixture[str], agent: str, message: str
) -> None:
    agents = agent_job.parent / "bad_agents.py"
    code, out, err = run_cli(capsys, "check", agent_job, "--agent", f"{agents}:{agent}")
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], err
    assert not (agent_job.parent / "runs").exists()


@pytest.mark.slow
def test_a_bad_agent_is_one_line_on_the_terminal_and_training_logs_each_agents_fault_once(
    agent_job: Path, tiny_model: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The terminal sees what the checked episode's child process logs too, which the
    in-process runs above cannot capture: the error line and nothing else. Training logs the
    first failed episode of a run, once."""
    from aworld_train.agent import load_agent
    from aworld_train.runtime import AgentRuntime, ChatRenderer, Generated, Limits
    from transformers import AutoTokenizer

    agents = agent_job.parent / "bad_agents.py"
    result = subprocess.run(
        [
            str(Path(sys.executable).with_name("aworld-train")),
            "check",
            str(agent_job),
            "--agent",
            f"{agents}:never_calls",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "error: agent 'never_calls' on train.jsonl row 0: the agent finished without calling "
        "its model"
    ], result.stderr

    async def generate(prompt_ids: list[int], max_tokens: int) -> Generated:
        return Generated([0], [0.0])

    runtime = AgentRuntime(
        load_agent(f"{agents}:never_calls"),
        None,
        ChatRenderer(AutoTokenizer.from_pretrained(tiny_model)),
        generate,
        Limits(max_turns=2, max_tokens=64, timeout=30),
    )
    with caplog.at_level(logging.WARNING, logger="aworld_train.runtime"):
        results = runtime.run([{"prompt": "Repeat: 1"}, {"prompt": "Repeat: 2"}])
    assert [r.failure for r in results] == ["the agent finished without calling its model"] * 2
    assert [r.getMessage() for r in caplog.records] == [
        "agent 'never_calls' failed an episode after 0 turn(s): the agent finished without "
        "calling its model (scored 0)"
    ]


def test_an_agent_in_several_processes_is_refused_weights_sharded_over_them(
    agent_job: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each process generates for its own episodes, a different number of calls: FSDP would
    have each call wait for every process."""
    code, _, err = run_cli(
        capsys, "check", agent_job, "-o", "resources.gpus_per_node=2", "-o", "trl.fsdp=full_shard"
    )
    assert code == 2
    assert err.strip().startswith(
        "error: config trl.fsdp: agent 'run' runs its episodes in each of the 2 processes"
    ), err


@pytest.mark.slow
def test_an_agent_that_hangs_is_stopped_at_the_time_limit(
    agent_job: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from aworld_train.runtime import standin

    monkeypatch.setattr(standin, "CHECK_TIMEOUT", 3.0)
    agents = agent_job.parent / "bad_agents.py"
    code, _, err = run_cli(capsys, "check", agent_job, "--agent", f"{agents}:hangs")
    assert code == 2
    assert err.strip() == (
        "error: agent 'hangs' on train.jsonl row 0: the agent did not finish within 3 s"
    )


def test_the_tokens_trl_trains_on_are_the_generated_ids_and_the_rendered_tool_messages(
    agent_job: Path, tiny_model: Path
) -> None:
    """One multi-turn episode through TRL's own trainer and rollout_func: model tokens exactly as
    generated (mask 1), the tool message as the chat template renders it (mask 0), and the
    log-probs the model recomputes equal to the recorded ones."""
    import torch
    from aworld_train.agent import load_agent
    from aworld_train.runtime import ChatRenderer
    from aworld_train_trl.rollout import AgentRollout, agent_trainer_class
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    spec = load_agent("my_agent.py:run", agent_job.parent)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    rollout = AgentRollout(spec, None, tokenizer, str(tiny_model), max_tokens=64)
    args = GRPOConfig(
        output_dir=str(agent_job.parent / "out"),
        use_cpu=True,
        bf16=False,
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=64,
        report_to="none",
        beta=0.0,
    )
    trainer = agent_trainer_class()(
        model=str(tiny_model),
        reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
        args=args,
        train_dataset=_rows(),
        processing_class=tokenizer,
        rollout_func=rollout,
    )
    trainer.rollout_rows = [{"prompt": "Repeat: 4", "ground_truth": "4"}]
    output = rollout(["Repeat: 4"], trainer)

    prompt, completion = output["prompt_ids"][0], output["completion_ids"][0]
    mask, logprobs = output["env_mask"][0], output["logprobs"][0]
    assert output["agent_failure"] == [None] and output["agent_turns"] == [2]
    assert len(completion) == len(mask) == len(logprobs)
    # Two model turns around one environment segment: 1...1 0...0 1...1
    segments = mask_segments(mask)
    assert [value for value, _, _ in segments] == [1, 0, 1]
    (_, a, b), (_, c, d), (_, e, f) = segments
    first_turn = tokenizer.decode(completion[a:b], skip_special_tokens=True)
    renderer = ChatRenderer(tokenizer)
    tool_message = {"role": "tool", "name": "shout", "content": first_turn.strip().upper()}
    assert completion[c:d] == renderer.context_ids([tool_message], None, turn_ended=True) or (
        completion[c:d] == renderer.context_ids([tool_message], None, turn_ended=False)
    )
    assert prompt == renderer.prompt_ids(
        [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Repeat: 4"}],
        SHOUT_TOOLS,
    )

    # The policy, run over the whole sequence, gives the model tokens the recorded log-probs.
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32).eval()
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1].float()
    recomputed = (
        torch.log_softmax(logits / trainer.temperature, dim=-1)
        .gather(-1, torch.tensor(completion).unsqueeze(-1))
        .squeeze(-1)
    )
    gaps = [abs(recomputed[i].item() - logprobs[i]) for i in range(len(completion)) if mask[i]]
    assert max(gaps) < 1e-4, f"log-prob gap {max(gaps):.2e}"
    assert all(logprobs[i] == 0.0 for i in range(len(completion)) if not mask[i])
    assert all(math.isfinite(value) for value in logprobs)

    # What samples.jsonl keeps of the episode for aworld-train view: the same tokens, mask and
    # log-probs, each token's text, and the conversation with the tool's result.
    (record,) = rollout.records(1)
    assert record["mask"] == mask and len(record["tokens"]) == len(completion)
    assert record["logprobs"] == [round(value, 4) for value in logprobs]
    assert "".join(record["tokens"][c:d]) == tokenizer.decode(completion[c:d])
    assert record["prompt_text"] == tokenizer.decode(prompt, skip_special_tokens=False)
    assert tool_message["content"] in [
        m.get("content") for m in record["messages"] if m["role"] == "tool"
    ]


def _rows() -> Any:
    import datasets

    return datasets.Dataset.from_list([{"prompt": "Repeat: 4", "ground_truth": "4"}] * 2)


@pytest.mark.slow
def test_the_calculator_examples_aworld_agent_trains_unchanged(tmp_path: Path) -> None:
    """The example's AWorld ``Agent`` (its MCP server over stdio, the object as the example
    builds it) runs through AWorld's own Runners in every GRPO episode."""
    pytest.importorskip("aworld", reason="AWorld agents need aworld-train[aworld]")
    from aworld_train import AgentTrainer
    from aworld_train.engine.testing import build_tiny_model

    example = Path(__file__).resolve().parents[3] / "examples" / "calculator_agent"
    model = build_tiny_model(
        tmp_path / "model", extra_tokens=("<answer>", "</answer>"), max_positions=4096, tools=True
    )
    rows = [
        {"prompt": f"What is {a} * {b}?", "ground_truth": str(a * b)}
        for a, b in ((12, 34), (56, 78))
    ]
    trainer = AgentTrainer(
        agent=f"{example / 'aworld_agent.py'}:calculator_agent",
        train_dataset=rows,
        reward_func="answer_match",
        train_engine_name="trl",
        run_path=tmp_path / "runs",
        config={
            "algorithm": "grpo",
            "model": str(model),
            "max_steps": 1,
            "batch_size": 2,
            "num_generations": 2,
            "max_completion_length": 32,
            "logging_steps": 1,
            "trl": {"beta": 0.0},
        },
    )
    assert trainer.hand_off.agent.episodes is not None
    assert trainer.hand_off.agent.episodes.form == "aworld"
    trainer.train()
    steps = [m for m in read_jsonl(trainer.run_dir.path / "metrics.jsonl") if "loss" in m]
    assert [m["step"] for m in steps] == [1]
    # Every episode reached the policy: the stand-in's answer in check and the policy's here.
    assert steps[0]["agent_failed"] < 1.0
