"""Pytest fixtures and helpers an engine's own tests share: the tiny offline model, a small
"Repeat: <digit>" GRPO job for :class:`~aworld_train.AgentTrainer`, and the reward file that job
scores with, which records every call and can interrupt a run the way Ctrl-C would.

An engine's ``conftest.py`` imports the fixtures it uses (pytest collects them from there) and
builds its ``job`` fixture with :func:`repeat_digit_job`::

    from aworld_train.testing.fixtures import repeat_digit_job, tiny_model  # noqa: F401

    @pytest.fixture
    def job(tmp_path, tiny_model):
        return repeat_digit_job(tmp_path, tiny_model, "my-engine", {"beta": 0.0})

Importing this module is cheap: the model is built only when a test asks for it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

# The job's reward file, rewards.py. `score` appends each call to calls.jsonl beside it, so a
# test can check what the engine passed per completion (and whether the training process got
# the job's hub token through its environment, HF_TOKEN). When a file named `interrupt` exists
# beside it and a run has saved checkpoint-2, it removes the file and sends SIGINT to its own
# process, as a user's Ctrl-C would arrive mid-training. `length` returns a metric beside its
# score.
REWARD_FILE = """
import json, os, signal
from pathlib import Path

HERE = Path(__file__).parent


def score(data_source, solution_str, ground_truth, extra_info=None):
    with (HERE / "calls.jsonl").open("a") as handle:
        handle.write(json.dumps({"ground_truth": ground_truth, "extra_info": extra_info,
                                 "solution": solution_str, "data_source": data_source,
                                 "hf_token": os.environ.get("HF_TOKEN")}) + "\\n")
    marker = HERE / "interrupt"
    if marker.exists() and list((HERE / "runs").glob("*/checkpoints/checkpoint-2")):
        marker.unlink()
        os.kill(os.getpid(), signal.SIGINT)
    return 1.0 if solution_str.strip() == ground_truth else 0.0


def length(data_source, solution_str, ground_truth, extra_info=None):
    return {"score": min(len(solution_str), 4) / 4, "chars": float(len(solution_str))}

"""

# A job's common keys that every engine must honour alike (issue "One job, one meaning"): no KL
# penalty, a constant rate, fp32 and a rank-8 LoRA adapter with the core's defaults.
COMMON_KEYS_JOB: dict[str, Any] = {
    "kl_coef": 0.0,
    "lr_scheduler": "constant",
    "precision": "fp32",
    "lora": {"rank": 8},
}
# What the manifest's ``settings`` must show for COMMON_KEYS_JOB, on every engine.
COMMON_KEYS_EFFECTIVE: dict[str, Any] = {
    "kl_coef": 0.0,
    "lr_scheduler": "constant",
    "precision": "fp32",
    "lora": {"rank": 8, "alpha": 16.0, "dropout": 0.0, "target_modules": "all-linear"},
}

# The digits of the job's 16 training rows, in order.
DIGITS = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3]


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny offline model (:func:`~aworld_train.testing.build_tiny_model`), built once."""
    from aworld_train.testing.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))


def repeat_digit_job(
    folder: Path, model: Path, engine: str, section: dict[str, Any]
) -> dict[str, Any]:
    """``AgentTrainer`` keyword arguments for a tiny GRPO job of 4 steps on ``engine``.

    Writes ``train.jsonl`` (a row per digit of :data:`DIGITS`: "Repeat: d" -> "d", with the
    digit in ``extra_info``) and ``rewards.py`` (:data:`REWARD_FILE`) into ``folder``; runs go
    to ``folder/runs``, a checkpoint every 2 steps.

    :param section: the engine's section of the config.
    """
    rows = [
        {
            "prompt": f"Repeat: {digit}",
            "ground_truth": str(digit),
            "extra_info": {"digit": str(digit)},
        }
        for digit in DIGITS
    ]
    (folder / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (folder / "rewards.py").write_text(REWARD_FILE)
    return {
        "agent": {"name": "tiny", "system_prompt": "Answer with the digit."},
        "config": {
            "algorithm": "grpo",
            "model": str(model),
            "max_steps": 4,
            "batch_size": 4,
            "num_generations": 2,
            "learning_rate": 1e-3,
            "max_completion_length": 4,
            "logging_steps": 1,
            "save_steps": 2,
            engine: section,
        },
        "reward_func": "rewards.py:score",
        "train_dataset": "train.jsonl",
        "run_path": folder / "runs",
        "train_engine_name": engine,
        "base_dir": folder,
    }


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The records of a JSON-lines file (``metrics.jsonl``, ``calls.jsonl``)."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def manifest(run_dir: Path) -> dict[str, Any]:
    """A run directory's ``manifest.json``."""
    return json.loads((run_dir / "manifest.json").read_text())


def assert_interrupted_run_resumes(job: dict[str, Any]) -> Path:
    """Interrupt a run of :func:`repeat_digit_job` after its checkpoint at step 2 (through the
    reward file's ``interrupt`` marker), resume it for 6 steps, and check that the resumed run's
    metrics open with the interrupted run's and go on from step 3, that the two runs name each
    other (``resumed_from``, ``continued_in``) and that a second resume of the first is refused.

    :returns: the resumed run's directory.
    """
    from aworld_train.trainer import AgentTrainer
    from aworld_train.errors import Interrupted, RunDirectoryError

    (job["base_dir"] / "interrupt").touch()
    first = AgentTrainer(**job)
    with pytest.raises(Interrupted):
        first.train()
    first_dir = first.run_dir.path
    assert manifest(first_dir)["status"] == "interrupted"
    before = [m for m in read_jsonl(first_dir / "metrics.jsonl") if "reward" in m]
    assert [m["step"] for m in before] == [1, 2]

    job["config"] = dict(job["config"], max_steps=6)
    second = AgentTrainer(**job, resume=first_dir)
    second.train()
    resumed = [m for m in read_jsonl(second.run_dir.path / "metrics.jsonl") if "reward" in m]
    # The parent's steps open the resumed run's metrics as they were; training went on from 3.
    assert [m["step"] for m in resumed] == [1, 2, 3, 4, 5, 6]
    assert resumed[:2] == before
    assert manifest(second.run_dir.path)["status"] == "completed"
    assert (second.run_dir.path / "checkpoints" / "checkpoint-6").is_dir()
    assert manifest(second.run_dir.path)["resumed_from"] == str(first_dir)
    assert manifest(first_dir)["continued_in"] == str(second.run_dir.path)
    with pytest.raises(RunDirectoryError, match="was already resumed: it continues in"):
        AgentTrainer(**job, resume=first_dir)
    return second.run_dir.path


def check_config_file(
    job: dict[str, Any], capsys: pytest.CaptureFixture[str], engine: str, config: dict[str, Any]
) -> tuple[int, str]:
    """Make ``config`` (an engine's own config file, as a mapping) the whole config of ``job``,
    as ``grpo.yaml`` beside it, and run ``aworld-train check`` on the job as a job file in this
    process.

    :returns: the exit code and what ``check`` wrote to stderr.
    """
    import yaml

    from aworld_train.testing.bad_jobs import BadJobSuite, JobFolder

    (job["base_dir"] / "grpo.yaml").write_text(yaml.safe_dump(config))
    job["config"] = "grpo.yaml"
    runner = type("ConfigFileCheck", (BadJobSuite,), {"engine_name": engine})()
    return runner.run_check(JobFolder.of_trainer_job(job), capsys)


@contextmanager
def compute_dtypes() -> Iterator[set[Any]]:
    """The dtypes of every ``nn.Linear`` output computed with gradients while the block runs:
    what training computes in, whichever precision the engine asked for."""
    import torch

    dtypes: set[Any] = set()

    def record(module: torch.nn.Module, args: Any, output: Any) -> None:
        if isinstance(module, torch.nn.Linear) and torch.is_grad_enabled():
            dtypes.add(output.dtype)

    hook = torch.nn.modules.module.register_module_forward_hook(record)
    try:
        yield dtypes
    finally:
        hook.remove()


def record_sampling(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """From now on, whether each ``generate`` call samples (``do_sample``) is appended to the
    list returned: training's rollouts sample, a greedy evaluation does not."""
    from transformers import GenerationMixin

    sampled: list[bool] = []
    generate = GenerationMixin.generate

    def recording(self: Any, *args: Any, **kwargs: Any) -> Any:
        sampled.append(kwargs["generation_config"].do_sample)
        return generate(self, *args, **kwargs)

    monkeypatch.setattr(GenerationMixin, "generate", recording)
    return sampled


def tensorboard_scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar in the TensorBoard event files under ``folder`` (searched recursively), as
    ``{tag: [(step, value), ...]}`` sorted by step, read with TensorBoard's own reader.

    :raises AssertionError: when ``folder`` holds no event file.
    """
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    files = sorted(Path(folder).rglob("events.out.tfevents.*"))
    assert files, f"no TensorBoard event files under {folder}"
    scalars: dict[str, list[tuple[int, float]]] = {}
    for file in files:
        reader = EventAccumulator(str(file), size_guidance={"scalars": 0})  # 0: keep every one
        reader.Reload()
        for tag in reader.Tags()["scalars"]:
            scalars.setdefault(tag, []).extend(
                (event.step, event.value) for event in reader.Scalars(tag)
            )
    return {tag: sorted(points) for tag, points in scalars.items()}


# Run in a fresh interpreter where ``import peft`` fails (and transformers sees no peft): loads the
# folder with plain transformers and generates a few tokens from a chat prompt.
_LOAD_WITHOUT_PEFT = """
import json, sys
sys.modules["peft"] = None
from transformers import AutoModelForCausalLM, AutoTokenizer
folder = sys.argv[1]
tokenizer = AutoTokenizer.from_pretrained(folder)
model = AutoModelForCausalLM.from_pretrained(folder)
prompt = tokenizer.apply_chat_template([{"role": "user", "content": "Repeat: 7"}],
                                       add_generation_prompt=True, return_tensors="pt",
                                       return_dict=True)
output = model.generate(**prompt, max_new_tokens=4, do_sample=False,
                        pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id)
new = output[0][prompt["input_ids"].shape[1]:]
print(json.dumps({"new_tokens": int(new.shape[0]), "text": tokenizer.decode(new),
                  "peft_loaded": any(name.split(".")[0] == "peft" and module is not None
                                     for name, module in sys.modules.items())}))
"""


def assert_loads_without_peft(folder: Path) -> None:
    """``folder`` is a plain Hugging Face model: in a fresh interpreter where ``import peft``
    fails, ``AutoModelForCausalLM`` and ``AutoTokenizer`` load it (chat template included) and
    it generates from a chat prompt."""
    import subprocess
    import sys

    folder = Path(folder)
    assert not (folder / "adapter_config.json").exists(), f"{folder} is a LoRA adapter, not merged"
    assert (folder / "config.json").is_file(), f"{folder} holds no model (no config.json)"
    result = subprocess.run(
        [sys.executable, "-c", _LOAD_WITHOUT_PEFT, str(folder)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert loaded["new_tokens"] > 0, loaded
    assert not loaded["peft_loaded"], loaded


def run_cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    """Run ``aworld-train ARGS`` in this process: its exit code, stdout and stderr."""
    from aworld_train.cli import main

    capsys.readouterr()
    try:
        main([str(arg) for arg in args])
        code = 0
    except SystemExit as exc:  # as the shell sees it: sys.exit("text") is status 1
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(code: int, err: str) -> str:
    """The one line a refusal writes: asserts that a command exited 2 (``code``) with exactly one
    line on stderr (``err``), starting ``error: ``, and returns it."""
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def hide_packages(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Make ``names`` look uninstalled for the rest of the test, whatever this venv holds:
    importing one raises ``ModuleNotFoundError`` and ``importlib.util.find_spec`` answers
    ``None``, as on a machine without it."""
    import sys

    for name in names:
        monkeypatch.setitem(sys.modules, name, None)
