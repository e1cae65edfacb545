"""Evaluation during training and rollout samples, through VeRL's own code on the CPU.

A job with a test set and two weighted rewards is checked by the engine's hooks; VeRL's
``AgentLoopWorker`` and ``RewardLoopWorker`` run on the validation file the engine wrote (a fake
token client stands in for vLLM, as in the pipeline test); VeRL's trainer code turns the scores
into its validation metrics and writes its rollout dump; the engine turns those into
``eval_reward`` / ``eval_<name>`` and ``samples.jsonl``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from aworld_train.agent import AgentSpec
from aworld_train.errors import TrainingError
from aworld_train.evaluation import eval_hint
from aworld_train.reward import RewardFunction, RewardSpec
from aworld_train.run.export import ExportNote, read_export_note
from aworld_train.run.samples import read_samples
from aworld_train_verl import export, launch, training
from aworld_train_verl.training import Evaluation, RolloutSamples
from conftest import Checks, LocalActorHandle, dataset, make_ctx, repeat_rows
from test_pipeline import FakeTokenClient


def rewards(reward_file: Path, *weighted: tuple[str, float]) -> RewardSpec:
    spec = importlib.util.spec_from_file_location("training_rewards", reward_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return RewardSpec(
        [
            RewardFunction(name, getattr(module, name), weight, f"{reward_file}:{name}")
            for name, weight in weighted
        ]
    )


def checked(
    tmp_path: Path, model: Path, reward: RewardSpec, test_rows: int = 6, **config: Any
) -> Checks:
    checks = Checks(
        make_ctx(tmp_path / "run", model, verl={"reward": {"num_workers": 1}}, **config)
    )
    checks.check_agent(AgentSpec(system_prompt="Answer with the digit."))
    checks.check_dataset(dataset(repeat_rows(8)), dataset(repeat_rows(test_rows)))
    checks.check_reward(reward)
    checks.check_config()
    return checks


def validate(checks: Checks, model: Path) -> tuple[dict[str, Any], Any, Any, list[str], list[str]]:
    """One validation pass as VeRL's trainer runs it: the agent loop and the reward loop on the
    validation file, then the trainer's own metric code. Returns the metrics, the worker's
    input and output batches, and the decoded prompts and responses."""
    from aworld_train_verl.agent import load_tokenizer
    from verl import DataProto
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    cfg = checks.config.config
    tokenizer = load_tokenizer(str(model))
    data = RLHFDataset(data_files=[cfg.data.val_files], tokenizer=tokenizer, config=cfg.data)
    batch = DataProto.from_single_dict(collate_fn([data[i] for i in range(len(data))]))
    batch.non_tensor_batch["uid"] = np.array(
        [str(uuid.uuid4()) for _ in range(len(batch))], dtype=object
    )

    async def run() -> Any:
        worker = AgentLoopWorker(
            cfg,
            llm_client=FakeTokenClient(tokenizer),
            reward_loop_worker_handles=[LocalActorHandle(RewardLoopWorker(cfg))],
        )
        return await worker.generate_sequences(batch)

    output = asyncio.run(run())
    scores = output.batch["rm_scores"].sum(dim=-1).tolist()
    extra = {
        key: list(values)
        for key, values in output.non_tensor_batch.items()
        if key.startswith("rewards/") or key in ("acc", "length")
    }
    metrics = PPOTrainer._val_metrics_update(
        None,
        list(batch.non_tensor_batch["data_source"]),
        list(batch.non_tensor_batch["uid"]),
        {"reward": scores, **extra},
        list(output.non_tensor_batch["__num_turns__"]),
    )
    prompts = [tokenizer.decode(ids, skip_special_tokens=True) for ids in output.batch["prompts"]]
    responses = [
        tokenizer.decode(ids, skip_special_tokens=True) for ids in output.batch["responses"]
    ]
    return metrics, batch, output, prompts, responses


def test_verls_validation_metrics_become_eval_reward_and_eval_per_reward(
    tmp_path: Path, tiny_model: Path, reward_file: Path
) -> None:
    checks = checked(
        tmp_path, tiny_model, rewards(reward_file, ("exact", 1.0), ("with_metrics", 0.5))
    )
    metrics, _, output, _, _ = validate(checks, tiny_model)
    assert {"val-core/repeat/reward/mean@1", "val-aux/repeat/rewards/exact/mean@1"} <= set(
        metrics
    ), sorted(metrics)

    translated = Evaluation.of(checks.config, checks.dataset).translate(metrics)
    exact = [float(v) for v in output.non_tensor_batch["rewards/exact"]]
    # Every prompt is answered right once by the fake client: a validation pass answers each once.
    assert exact == [1.0] * 6
    assert translated == pytest.approx(
        {"eval_reward": 1.0 + 0.5 * 0.5, "eval_exact": 1.0, "eval_with_metrics": 0.5}
    )


def test_one_reward_called_directly_is_also_eval_of_its_name(
    tmp_path: Path, tiny_model: Path, reward_file: Path
) -> None:
    checks = checked(tmp_path, tiny_model, rewards(reward_file, ("exact", 1.0)))
    metrics, _, _, _, _ = validate(checks, tiny_model)
    assert Evaluation.of(checks.config, checks.dataset).translate(metrics) == pytest.approx(
        {"eval_reward": 1.0, "eval_exact": 1.0}
    )


def test_eval_limit_keeps_the_first_rows_of_the_test_set(
    tmp_path: Path, tiny_model: Path, reward_file: Path
) -> None:
    import pyarrow.parquet as pq

    checks = checked(
        tmp_path, tiny_model, rewards(reward_file, ("exact", 1.0)), test_rows=6, eval_limit=4
    )
    rows = pq.read_table(checks.config.config.data.val_files).to_pylist()
    assert [row["reward_model"]["ground_truth"] for row in rows] == ["0", "1", "2", "3"]


def test_a_test_set_without_eval_steps_is_scored_and_saved_after_the_last_step_only(
    tmp_path: Path, tiny_model: Path, reward_file: Path
) -> None:
    checks = checked(tmp_path, tiny_model, rewards(reward_file, ("exact", 1.0)), max_steps=3)
    assert checks.config.config.trainer.test_freq == 3
    assert checks.config.config.trainer.save_freq == 3, (
        "the run's model is converted from the last checkpoint"
    )
    assert checks.config.config.trainer.val_before_train is False
    checks = checked(tmp_path, tiny_model, rewards(reward_file, ("exact", 1.0)), eval_steps=2)
    assert checks.config.config.trainer.test_freq == 2


def test_evaluation_means_pool_the_rows_of_every_data_source() -> None:
    names = Evaluation(weights={"a": 3, "b": 1}, sole_reward=None)
    assert names.translate(
        {
            "val-core/a/reward/mean@1": 1.0,
            "val-core/b/reward/mean@1": 0.0,
            "val-aux/a/rewards/exact/mean@1": 0.5,
            "val-aux/b/rewards/exact/mean@1": 0.5,
            "val-aux/a/reward/std@1": 0.1,
            "actor/pg_loss": 0.2,
        }
    ) == {"eval_reward": 0.75, "eval_exact": 0.5}
    assert names.translate({"critic/score/mean": 0.5}) == {}


def test_verls_rollout_dump_becomes_samples(
    tmp_path: Path, tiny_model: Path, reward_file: Path
) -> None:
    """VeRL's own dump writer, as its trainer calls it for trainer.rollout_data_dir."""
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    checks = checked(tmp_path, tiny_model, rewards(reward_file, ("exact", 1.0)), log_samples=2)
    _, batch, output, prompts, responses = validate(checks, tiny_model)
    scores = output.batch["rm_scores"].sum(dim=-1).tolist()
    gts = [item["ground_truth"] for item in batch.non_tensor_batch["reward_model"]]
    dump = checks.config.config.trainer.rollout_data_dir
    assert dump == str(checks.ctx.run_dir / "rollouts")
    for step in (1, 2):
        PPOTrainer._write_generations(
            prompts,
            responses,
            gts,
            scores,
            {"uid": [str(i) for i in range(len(scores))]},
            dump,
            step,
        )

    samples = RolloutSamples.of(checks.config, checks.ctx)
    samples.copy(before=2)  # step 2's dump may still be being written while its line is read
    assert {row["step"] for row in read_samples(checks.ctx.run_dir)} == {1}
    samples.copy()
    written = read_samples(checks.ctx.run_dir)
    assert [row["step"] for row in written] == [1, 1, 2, 2]
    assert written[0] == {
        "step": 1,
        "prompt": prompts[0],
        "completion": responses[0],
        "reward": scores[0],
        "rewards": {"exact": scores[0]},
    }
    assert "Repeat:" in written[0]["prompt"] and written[0]["completion"].strip().isdigit()


def test_train_logs_eval_metrics_and_copies_samples_at_each_step(
    tmp_path: Path, tiny_model: Path, reward_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """train() with main_ppo replaced by a child that logs as VeRL does: a step line with its
    validation metrics, and a dump file written for each step."""
    checks = checked(tmp_path, tiny_model, rewards(reward_file, ("exact", 1.0)), log_samples=1)
    dump = Path(checks.config.config.trainer.rollout_data_dir)

    def main_ppo(command: list[str], run_dir: Path, on_step: Any, **_: Any) -> None:
        dump.mkdir()
        for step in (1, 2):
            (dump / f"{step}.jsonl").write_text(
                json.dumps(
                    {
                        "input": f"user\nRepeat: {step}",
                        "output": str(step),
                        "gts": str(step),
                        "score": 1.0,
                        "step": step,
                    }
                )
                + "\n"
            )
            metrics = {"critic/score/mean": 0.5}
            if step == 2:
                metrics["val-core/repeat/reward/mean@1"] = 0.25
            on_step(step, metrics)

    monkeypatch.setattr(launch, "preflight", lambda config, num_cpus, gpus: None)
    monkeypatch.setattr(training, "check_cpu_training", lambda config: None)  # heads 16 wide
    monkeypatch.setattr(launch, "run", main_ppo)
    monkeypatch.setattr(
        export, "export_model", lambda run_dir: None
    )  # no checkpoint here: test_export converts one
    checks.train()
    logged = [
        json.loads(line) for line in (checks.ctx.run_dir / "metrics.jsonl").read_text().splitlines()
    ]
    assert [(row["step"], row.get("eval_reward"), row.get("eval_exact")) for row in logged] == [
        (1, None, None),
        (2, 0.25, 0.25),
    ]
    assert [
        (row["step"], row["prompt"], row["rewards"]) for row in read_samples(checks.ctx.run_dir)
    ] == [(1, "user\nRepeat: 1", {"exact": 1.0}), (2, "user\nRepeat: 2", {"exact": 1.0})]


def save_checkpoint(run_dir: Path, step: int, *, whole: bool = True) -> Path:
    """What VeRL's trainer leaves of a checkpoint: its folder, then, once it is whole, its step
    in the tracker file."""
    folder = run_dir / "checkpoints" / f"global_step_{step}"
    (folder / "actor").mkdir(parents=True)
    if whole:
        (run_dir / "checkpoints" / export.TRACKER).write_text(str(step))
    return folder


def test_a_run_that_stops_before_its_export_names_its_converter_for_eval_and_show(
    tmp_path: Path, tiny_model: Path, reward_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VeRL saves step 1's checkpoint before it logs the step, logs step 2, starts saving
    step 3 and fails: the run's export note names step 1, the last whole checkpoint, with the
    engine's export command, which ``eval`` and ``show`` print without VeRL."""
    checks = checked(tmp_path, tiny_model, rewards(reward_file, ("exact", 1.0)))
    run_dir = checks.ctx.run_dir
    noted: list[ExportNote | None] = []

    def main_ppo(command: list[str], run_dir: Path, on_step: Any, **_: Any) -> None:
        noted.append(read_export_note(run_dir))
        save_checkpoint(run_dir, 1)
        on_step(1, {"critic/score/mean": 0.5})
        noted.append(read_export_note(run_dir))
        on_step(2, {"critic/score/mean": 0.5})
        save_checkpoint(run_dir, 3, whole=False)
        raise TrainingError("VeRL failed")

    monkeypatch.setattr(launch, "preflight", lambda config, num_cpus, gpus: None)
    monkeypatch.setattr(training, "check_cpu_training", lambda config: None)
    monkeypatch.setattr(launch, "run", main_ppo)
    with pytest.raises(TrainingError, match="VeRL failed"):
        checks.train()
    command = f"python -m aworld_train_verl.export {run_dir}"
    assert noted == [None, ExportNote("checkpoints/global_step_1", command)]
    assert eval_hint(run_dir) == (
        f"no model/: {command} converts checkpoints/global_step_1, then aworld-train eval {run_dir}"
    )


def test_the_export_note_waits_for_a_whole_checkpoint(tmp_path: Path) -> None:
    export.note_last_checkpoint(tmp_path)
    save_checkpoint(tmp_path, 2, whole=False)
    export.note_last_checkpoint(tmp_path)
    assert read_export_note(tmp_path) is None, "VeRL has completed no checkpoint"
    (tmp_path / "checkpoints" / export.TRACKER).write_text("4")
    export.note_last_checkpoint(tmp_path)
    assert read_export_note(tmp_path) is None, "the tracker names a folder that is not there"
    save_checkpoint(tmp_path, 4)
    export.note_last_checkpoint(tmp_path)
    note = read_export_note(tmp_path)
    assert note is not None and note.checkpoint == "checkpoints/global_step_4"


def test_the_launch_script_keeps_tracker_files_in_its_run(
    tmp_path: Path, tiny_model: Path, reward_file: Path
) -> None:
    checks = checked(
        tmp_path, tiny_model, rewards(reward_file, ("exact", 1.0)), report_to=("tensorboard",)
    )
    text = (checks.ctx.run_dir / launch.LAUNCH_SCRIPT).read_text()
    assert 'export TENSORBOARD_DIR="$RUN_DIR/tensorboard"\n' in text


def test_verls_tracking_writes_the_reward_to_tensorboard_inside_the_run(
    tmp_path: Path, tiny_model: Path, reward_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VeRL's own Tracking, as its trainer builds it from trainer.logger, in the environment the
    engine gives main_ppo (which Ray hands on to the trainer's actor)."""
    from aworld_train.testing.fixtures import tensorboard_scalars
    from omegaconf import OmegaConf
    from verl.utils.tracking import Tracking

    checks = checked(
        tmp_path, tiny_model, rewards(reward_file, ("exact", 1.0)), report_to=("tensorboard",)
    )
    cfg = checks.config.config
    for name, value in checks.config.variables.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(checks.ctx.run_dir / launch.METRICS_NAME))
    tracking = Tracking(
        project_name=cfg.trainer.project_name,
        experiment_name=cfg.trainer.experiment_name,
        default_backend=list(cfg.trainer.logger),
        config=OmegaConf.to_container(cfg),
    )
    for step, reward in ((1, 0.25), (2, 0.75)):
        tracking.log(data={"critic/score/mean": reward}, step=step)
    tracking.finish()
    scalars = tensorboard_scalars(checks.ctx.run_dir / "tensorboard")
    assert scalars["critic/score/mean"] == [(1, 0.25), (2, 0.75)]
