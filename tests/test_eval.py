"""``aworld-train eval`` and ``show`` on a real TRL run of the tiny model: base and final scores
that a plain transformers greedy loop (:mod:`aworld_train.testing.eval_reference`, which
ms-swift's eval test shares) reproduces exactly; sampled completions
with pass@K; every bad input one line and exit 2; ``AgentTrainer.evaluate()``.

Needs torch and the TRL engine (run in the TRL venv: the Makefile's EXTRA_TESTS_trl).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="eval generates with transformers")
pytest.importorskip("aworld_train_trl", reason="the run evaluated here trains on TRL")

from aworld_train import AgentTrainer  # noqa: E402
from aworld_train.testing.eval_reference import (  # noqa: E402
    EVAL_REWARD,
    TEST_ROWS,
    assert_eval_reproduces,
    varied_model,
)
from aworld_train.testing.fixtures import (  # noqa: E402
    read_jsonl,
    repeat_digit_job,
    tiny_model,  # noqa: E402, F401
)
from helpers import run_cli  # noqa: E402


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> AgentTrainer:  # noqa: F811
    """A 4-step TRL GRPO run of the (varied) tiny model with a test set."""
    folder = tmp_path_factory.mktemp("eval")
    model = varied_model(tiny_model, folder / "varied-model")
    job = repeat_digit_job(folder, model, "trl", {"beta": 0.0})
    # fp32 on any device: the reference loop loads the final model in fp32.
    job["config"] = dict(job["config"], precision="fp32")
    (folder / "test.jsonl").write_text("".join(json.dumps(row) + "\n" for row in TEST_ROWS))
    trainer = AgentTrainer(
        **dict(job, test_dataset="test.jsonl", reward_func=EVAL_REWARD, show_progress=False)
    )
    trainer.train()
    return trainer


@pytest.fixture
def run(trained: AgentTrainer, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The run, with the GPU hidden from eval where there is one: eval then generates on the
    CPU as the reference loop does (a GPU's kernels round differently)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    return trained.run_dir.path


def one_line_error(capsys: pytest.CaptureFixture[str], *args: str | Path) -> str:
    """The command's one error line, after checking it exits 2 with nothing else on stderr."""
    code, out, err = run_cli(capsys, *args)
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def test_compare_reproduces_a_plain_greedy_loop(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(capsys, "eval", run, "--compare", "--json")
    assert code == 0, err
    assert_eval_reproduces(run, json.loads(out))


def test_a_repeated_eval_gives_the_same_numbers(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = json.loads(run_cli(capsys, "eval", run, "--limit", "4", "--json")[1])
    again = json.loads(run_cli(capsys, "eval", run, "--limit", "4", "--json")[1])
    first.pop("seconds"), again.pop("seconds")
    assert first == again and first["rows"] == 4 and first["model"] == "final"


def test_samples_give_k_completions_their_mean_and_pass_at_k(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(
        capsys, "eval", run, "--samples", "3", "--limit", "5", "--dataset", "train", "--json"
    )
    assert code == 0, err
    result = json.loads(out)
    assert (result["dataset"], result["rows"], result["samples"]) == ("train-first5", 5, 3)
    records = read_jsonl(run / "eval" / "final-train-first5-k3.samples.jsonl")
    assert [len(r["completions"]) for r in records] == [3] * 5
    scores = [score for record in records for score in record["scores"]]
    assert result["mean_reward"] == pytest.approx(mean(scores))
    # A row passes when one of its completions gets every reward's full score.
    passed = [
        any(all(v >= 1.0 for v in rewards.values()) for rewards in record["rewards"])
        for record in records
    ]
    assert [r["passed"] for r in records] == passed
    assert result["pass_at_k"] == sum(passed) / 5
    # Sampling is seeded: the same command gives the same completions.
    run_cli(capsys, "eval", run, "--samples", "3", "--limit", "5", "--dataset", "train")
    assert read_jsonl(run / "eval" / "final-train-first5-k3.samples.jsonl") == records


def test_the_table_names_both_models_and_the_difference(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(capsys, "eval", run, "--compare", "--limit", "2")
    assert code == 0
    header = next(line for line in out.splitlines() if "base" in line)
    assert "final" in header and "difference" in header
    assert "reward length" in out and "mean reward" in out
    assert f"samples: {run / 'eval' / 'final-test-first2.samples.jsonl'}" in out


def test_a_job_file_evaluates_its_model_into_eval_beside_it(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = run / "job.yaml"
    folder = run.parent.parent / "job-file"
    folder.mkdir(exist_ok=True)
    shutil.copy(job, folder / "job.yaml")
    code, out, err = run_cli(capsys, "eval", folder / "job.yaml", "--limit", "3", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["model"] == "base" and result["rows"] == 3
    assert json.loads((folder / "eval" / "base-test-first3.json").read_text()) == result
    assert one_line_error(capsys, "eval", folder / "job.yaml", "--compare").endswith(
        "is a job file: it has a base model only; evaluate a run directory for its final "
        "model, or give --model PATH (with --compare, it is compared with base)"
    )
    # ...and so it is.
    code, out, err = run_cli(
        capsys,
        "eval",
        folder / "job.yaml",
        "--compare",
        "--model",
        run / "model",
        "--limit",
        "2",
        "--json",
    )
    assert code == 0, err
    compared = json.loads(out)
    name = next(key for key in compared if key.startswith("model@"))
    assert set(compared) == {"base", name, "difference"}
    assert compared[name]["rows"] == compared["base"]["rows"] == 2


def test_evaluate_from_python(trained: AgentTrainer) -> None:
    result = trained.evaluate("base", limit=3)
    assert (result.model, result.dataset, result.rows, len(result.records)) == (
        "base",
        "test-first3",
        3,
        3,
    )
    same = trained.inference("base", limit=3)
    assert same.summary() | {"seconds": 0} == result.summary() | {"seconds": 0}


def test_generate_and_score_leaves_a_model_in_training_as_it_was(run: Path) -> None:
    """An engine may score its model mid-training: it stays in training mode, and sampling
    leaves the global random state where it was."""
    import torch
    from aworld_train.agent import load_agent
    from aworld_train.evaluation import generate_and_score
    from aworld_train.reward import resolve_reward
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(run / "model").train()
    tokenizer = AutoTokenizer.from_pretrained(run / "model")
    torch.manual_seed(1)
    expected = torch.rand(3)
    torch.manual_seed(1)
    result = generate_and_score(
        model,
        tokenizer,
        TEST_ROWS[:3],
        agent=load_agent({"name": "tiny"}),
        reward=resolve_reward(EVAL_REWARD, run.parent.parent),
        max_new_tokens=4,
        samples=2,
    )
    assert model.training and torch.equal(torch.rand(3), expected)
    assert (result.rows, result.samples, result.model) == (3, 2, "model")
    assert [len(record["completions"]) for record in result.records] == [2, 2, 2]


# --- where models come from, what results are filed as --------------------------------------


def job_copy(run: Path, folder: Path, **changes: object) -> Path:
    """The run's job.yaml copied into ``folder`` with top-level ``changes`` (``config_model``
    sets the config's model)."""
    import yaml

    job = yaml.safe_load((run / "job.yaml").read_text())
    if "config_model" in changes:
        job["config"]["model"] = changes.pop("config_model")
    job.update(changes)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "job.yaml").write_text(yaml.safe_dump(job))
    return folder / "job.yaml"


def test_a_job_file_reads_its_relative_model_from_its_own_folder(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import yaml

    base = yaml.safe_load((run / "job.yaml").read_text())["config"]["model"]
    shutil.copytree(base, tmp_path / "rd" / "build" / "model")
    job = job_copy(run, tmp_path / "rd", config_model="build/model")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, out, err = run_cli(capsys, "eval", job, "--limit", "2", "--json")
    assert code == 0, err
    assert json.loads(out)["model"] == "base"


def test_a_missing_model_folder_is_one_line_and_no_hub_is_asked(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    monkeypatch.chdir(tmp_path)
    started = time.monotonic()
    assert one_line_error(capsys, "eval", run, "--model", "nonexist") == (
        f"error: model folder nonexist not found in {tmp_path.resolve()} (a hub id is written "
        "'organisation/name')"
    )
    job = job_copy(run, tmp_path / "rd", config_model="build/model")
    error = one_line_error(capsys, "eval", job)
    assert error.startswith("error: model build/model is neither a folder in ")
    assert time.monotonic() - started < 20


def test_json_stays_json_when_the_reward_prints(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "loud.py").write_text(
        "print('importing the reward')\n"
        "def loud(data_source, solution_str, ground_truth, extra_info=None):\n"
        "    print('scoring', solution_str)\n"
        "    return float(solution_str.strip() == ground_truth)\n"
    )
    job = job_copy(run, tmp_path, reward=[str(tmp_path / "loud.py") + ":loud"])
    code, out, err = run_cli(capsys, "eval", job, "--limit", "2", "--json")
    assert code == 0, err
    assert json.loads(out)["rows"] == 2
    assert "importing the reward" in err and "scoring" in err


def test_a_lora_adapter_folder_loads_onto_the_job_base_model(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fresh adapter (its B matrices zero) merged into the base model is the base model."""
    import yaml
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = yaml.safe_load((run / "job.yaml").read_text())["config"]["model"]
    adapter = tmp_path / "checkpoint-2"
    get_peft_model(
        AutoModelForCausalLM.from_pretrained(base), LoraConfig(r=2, target_modules="all-linear")
    ).save_pretrained(adapter)
    assert not (adapter / "config.json").exists()
    code, out, err = run_cli(capsys, "eval", run, "--model", adapter, "--limit", "3", "--json")
    assert code == 0, err
    scored = json.loads(out)
    code, out, err = run_cli(capsys, "eval", run, "--model", "base", "--limit", "3", "--json")
    assert code == 0, err
    assert scored["mean_reward"] == json.loads(out)["mean_reward"]
    assert scored["model"].startswith("checkpoint-2@")


def test_different_evaluations_are_filed_apart(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "run"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("eval", "checkpoints"))
    shutil.copytree(run / "model", tmp_path / "fake" / "base")  # a folder named base
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "train.jsonl").write_text(
        "".join(json.dumps(row) + "\n" for row in TEST_ROWS)
    )
    monkeypatch.chdir(tmp_path)
    evaluations = [
        ("--model", "base", "--limit", "2"),
        ("--model", "fake/base", "--limit", "2"),
        ("--limit", "2"),
        (),
        ("--dataset", "train", "--limit", "2"),
        ("--dataset", "x/train.jsonl", "--limit", "2"),
        ("--samples", "2", "--limit", "2"),
    ]
    for args in evaluations:
        code, _, err = run_cli(capsys, "eval", copy, *args, "--json")
        assert code == 0, (args, err)
    files = sorted(path.name for path in (copy / "eval").glob("*.json"))
    assert len(files) == len(evaluations), files
    base = json.loads((copy / "eval" / "base-test-first2.json").read_text())
    assert base["model"] == "base"
    assert json.loads((copy / "eval" / "final-test.json").read_text())["rows"] == len(TEST_ROWS)
    assert {
        "final-test-first2.json",
        "final-train-first2.json",
        "final-test-first2-k2.json",
    } <= set(files)


# --- bad input: one line, exit 2 -----------------------------------------------------------


def test_a_run_without_a_final_model_names_its_last_checkpoint(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "run"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("model", "eval"))
    checkpoint = copy / "checkpoints" / "checkpoint-4"
    error = one_line_error(capsys, "eval", copy)
    assert error == (
        f"error: run {copy.resolve()} (completed) has no final model (model/); "
        f"its last checkpoint is {checkpoint.resolve()}: evaluate it "
        f"with --model {checkpoint.resolve()}"
    )
    code, out, err = run_cli(capsys, "eval", copy, "--model", checkpoint, "--limit", "2", "--json")
    assert code == 0, err
    name = json.loads(out)["model"]
    assert name.startswith("checkpoint-4@")
    assert (copy / "eval" / f"{name}-test-first2.json").is_file()


def test_a_dataset_without_ground_truth(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "questions.jsonl"
    data.write_text(
        json.dumps({"prompt": "Repeat: 1", "ground_truth": "1"})
        + "\n"
        + json.dumps({"prompt": "Repeat: 2"})
        + "\n"
    )
    error = one_line_error(capsys, "eval", run, "--dataset", data)
    assert error.startswith(f"error: {data}:2: ") and "ground_truth" in error


def test_a_model_folder_that_does_not_load(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    remote = tmp_path / "remote-code"
    shutil.copytree(run / "model", remote)
    config = json.loads((remote / "config.json").read_text())
    config["auto_map"] = {"AutoModelForCausalLM": "modeling_evil.Model"}
    (remote / "config.json").write_text(json.dumps(config))
    (remote / "modeling_evil.py").write_text("raise SystemExit('code from the folder ran')\n")
    error = one_line_error(capsys, "eval", run, "--model", remote)
    assert str(remote) in error and "trust_remote_code" in error

    broken = tmp_path / "broken"
    shutil.copytree(run / "model", broken)
    (broken / "model.safetensors").write_bytes(b"not safetensors")
    error = one_line_error(capsys, "eval", run, "--model", broken)
    assert str(broken) in error


def test_a_target_that_is_neither_run_nor_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert one_line_error(capsys, "eval", tmp_path) == (
        f"error: {tmp_path} is neither a run directory (one holding manifest.json and "
        "job.yaml) nor a job file (.yaml, .yml or .json)"
    )


def test_a_job_without_a_test_set(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    job = yaml.safe_load((run / "job.yaml").read_text())
    del job["test_dataset"]
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(job))
    assert one_line_error(capsys, "eval", tmp_path / "job.yaml") == (
        f"error: {tmp_path / 'job.yaml'}: the job has no test_dataset; evaluate on --dataset "
        "train or --dataset PATH"
    )


# --- show --------------------------------------------------------------------------------


def test_show_prints_status_metrics_evals_samples_and_plots(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from aworld_train.run.samples import append_samples

    copy = tmp_path / "run"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("model", "checkpoints"))
    (copy / "samples.jsonl").unlink(missing_ok=True)
    append_samples(
        copy,
        3,
        [{"prompt": "Repeat: 7", "completion": "7", "reward": 1.0, "rewards": {"score": 1.0}}],
    )
    append_samples(
        copy,
        4,
        [{"prompt": "Repeat: 8", "completion": "x", "reward": 0.0, "rewards": {"score": 0.0}}],
    )
    run_cli(capsys, "eval", copy, "--model", "base", "--limit", "2")
    code, out, err = run_cli(capsys, "show", copy, "--samples", "1")
    assert code == 0, err
    manifest = json.loads((copy / "manifest.json").read_text())
    assert f"run:      {copy.resolve()}" in out
    assert "engine:   trl" in out and "status:   completed (started " in out
    assert f"final metrics: loss {manifest['final_metrics']['loss']:.4g}" in out
    assert "  base-test-first2.json: base on test-first2: 2 rows, mean reward " in out
    assert "last rollout samples (1 of 2):\n  step 4, reward 0: 'Repeat: 8' -> 'x'" in out
    assert f"plot:     {(copy / 'reward.png').resolve()}" in out

    assert one_line_error(capsys, "show", tmp_path) == (
        f"error: {tmp_path} is not a run directory (it holds no manifest.json)"
    )
