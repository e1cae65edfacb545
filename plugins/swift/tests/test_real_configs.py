"""ms-swift's own GRPO settings as its example scripts write them: ``check`` builds swift's
arguments for the job's world size, and a setting whose package is missing is one line naming
the package (ms-swift itself ends in ``PackageNotFoundError`` / ``ImportError``)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from aworld_train.testing.fixtures import hide_packages


def check(
    tmp_path: Path,
    model: Path,
    swift: dict[str, Any],
    processes: int,
    capsys: pytest.CaptureFixture[str],
) -> str | None:
    """``aworld-train check`` on a GRPO job with ``swift`` as its section: ``None`` when it
    passes, else its one error line."""
    from aworld_train.cli import main

    rows = [{"prompt": f"Repeat: {i}", "ground_truth": str(i)} for i in range(8)]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (tmp_path / "rewards.py").write_text(
        "def exact(data_source, solution_str, ground_truth, extra_info=None):\n"
        "    return float(solution_str.strip() == ground_truth)\n"
    )
    job = {
        "engine": "swift",
        "agent": {"name": "solver", "model": str(model)},
        "train_dataset": "train.jsonl",
        "reward": "rewards.py:exact",
        "config": {
            "algorithm": "grpo",
            "max_steps": 1,
            "resources": {"gpus_per_node": processes},
            "swift": {"template": "qwen", **swift},
        },
    }
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(job))
    capsys.readouterr()
    try:
        main(["check", str(tmp_path / "job.yaml")])
        return None
    except SystemExit as exc:
        if not exc.code:
            return None
    err = capsys.readouterr().err
    return next((line for line in err.splitlines() if line.startswith("error:")), err[-600:])


@pytest.fixture(autouse=True)
def cpu_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")


# examples/train/grpo/internal/rloo.sh and reinforce_plus_plus.sh: NPROC_PER_NODE=8,
# per_device_train_batch_size 2, gradient_accumulation_steps 4, num_generations 16.
RLOO_BATCH = {
    "per_device_train_batch_size": 2,
    "gradient_accumulation_steps": 4,
    "num_generations": 16,
}


def test_the_generation_batch_is_checked_for_the_jobs_world_size(
    tiny_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """8 processes generate 2 x 8 x 4 = 64 completions a step, 4 groups of 16: swift accepts
    it; one process generates 8, which swift refuses, naming num_generations."""
    assert check(tmp_path, tiny_model, RLOO_BATCH, 8, capsys) is None
    refused = check(tmp_path, tiny_model, RLOO_BATCH, 1, capsys)
    assert refused is not None and "num_generations (16)" in refused, refused


@pytest.mark.parametrize(
    ("setting", "package"),
    [
        ({"deepspeed": "zero2"}, "deepspeed"),
        ({"attn_impl": "flash_attention_2"}, "flash-attn"),
        ({"use_liger_kernel": True}, "liger-kernel"),
    ],
)
def test_a_setting_whose_package_is_missing_is_one_line_naming_it(
    setting: dict[str, Any],
    package: str,
    tiny_model: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hide_packages(monkeypatch, package.replace("-", "_"))
    refused = check(
        tmp_path,
        tiny_model,
        {**setting, "num_generations": 4, "per_device_train_batch_size": 4},
        1,
        capsys,
    )
    assert refused is not None and f"pip install {package}" in refused, refused
    assert "PackageNotFoundError" not in refused


# --- ms-swift's own example scripts (real_configs/) -------------------------------------------

HERE = Path(__file__).parent / "real_configs"
CONFIGS = sorted(path.name for path in HERE.iterdir() if path.suffix == ".yaml")

# Each refusal, with words both verdicts give (ms-swift's and check's). Every other config is
# accepted by both. This machine has no GPU stack: vLLM, DeepSpeed, flash-attn and math_verify
# are not installed.
EXPECTED: dict[str, str] = {
    "grpo.yaml": "math_verify",  # swift:accuracy needs it
    "grpo_gspo.yaml": "math_verify",
    "grpo_lora.yaml": "math_verify",
    # report_to swanlab (and vLLM, DeepSpeed, flash-attn besides).
    "grpo_rloo.yaml": "swanlab",
    "grpo_reinforce_plus_plus.yaml": "swanlab",
    "grpo_sapo.yaml": "swanlab",
    "dpo_full.yaml": "deepspeed",
    # Keys ms-swift 4.6 does not have: swift's parser leaves them over (remaining_argv).
    "grpo_external_reward_func.yaml": "train_type",
    "dpo_swift2.yaml": "model_id_or_path",
}

# A local stand-in for examples/train/grpo/plugin/plugin.py: the reward names the scripts use.
PLUGIN_FILE = """from swift.rewards import ORM, orms


class Match(ORM):
    def __call__(self, completions, solution=None, **kwargs):
        return [float(str(c).strip() == str(s).strip()) for c, s in zip(completions, solution)]


class Short(ORM):
    def __call__(self, completions, **kwargs):
        return [float(len(str(c)) < 64) for c in completions]


orms["external_r1v_acc"] = Match
orms["external_math_acc"] = Match
orms["external_math_format"] = Short
"""
# What ms-swift's trainer imports for a setting, beyond what building its arguments checks.
NEEDS: dict[str, dict[Any, str]] = {
    "use_vllm": {True: "vllm"},
    "deepspeed": {"zero1": "deepspeed", "zero2": "deepspeed", "zero3": "deepspeed"},
    "attn_impl": {"flash_attn": "flash_attn", "flash_attention_2": "flash_attn"},
    "use_liger_kernel": {True: "liger_kernel"},
}


def algorithm_of(config: dict[str, Any]) -> str:
    return str(config.get("rlhf_type") or "sft")


def read_config(name: str, folder: Path, model: Path) -> dict[str, Any]:
    """The config file as a mapping, its placeholders (``MODEL``, ``PLUGIN``, ``PROMPT``)
    replaced by the tiny model and files written into ``folder``."""
    (folder / "plugin.py").write_text(PLUGIN_FILE)
    (folder / "prompt.txt").write_text("Answer with the digit.\n")
    text = (HERE / name).read_text().replace("MODEL", str(model))
    text = text.replace("PLUGIN", str(folder / "plugin.py")).replace(
        "PROMPT", str(folder / "prompt.txt")
    )
    return yaml.safe_load(text)


def as_argv(config: dict[str, Any]) -> list[str]:
    """The config as ms-swift's ``--config`` turns a file into arguments (swift.cli.main's
    ``parse_yaml_args``)."""
    argv: list[str] = []
    for key, value in config.items():
        argv.append(f"--{key}")
        argv += [str(item) for item in value] if isinstance(value, list) else [str(value)]
    return argv


def swifts_verdict(name: str, model: Path, folder: Path) -> str | None:
    """ms-swift's own verdict on the file: ``None`` when its code accepts it, else every reason
    it fails for, joined. Its parser reads the arguments (what is left over is refused, as
    ``swift rlhf``/``swift sft`` refuse it), the argument class is built for the script's
    ``NPROC_PER_NODE`` (as ``build_arguments`` does), then the packages its trainer imports
    and each reward in ``reward_funcs`` created as the GRPO trainer creates it."""
    from aworld_train_swift.config import own_process_group, world_size
    from swift.arguments import RLHFArguments, SftArguments
    from swift.rewards import orms
    from swift.utils import import_external_file, parse_args

    config = read_config(name, folder, model)
    environment = config.pop("ENV", None) or {}
    rows = [
        {
            "messages": [
                {"role": "user", "content": f"Repeat: {i}"},
                {"role": "assistant", "content": str(i)},
            ],
            "solution": str(i),
            "rejected_response": str((i + 1) % 10),
        }
        for i in range(8)
    ]
    data = folder / "swift-data.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    given = {key: value for key, value in config.items() if value is not None}
    given.update(
        dataset=[str(data)],
        output_dir=str(folder / "swift-output"),
        template="qwen",
        model_type="qwen2",
        check_model=False,
        use_cpu=True,
    )
    if "model_id_or_path" in given:  # ms-swift 2's name for the model: swift 4 needs `model`
        given["model"] = str(model)
    reasons: list[str] = []
    cls = SftArguments if algorithm_of(config) == "sft" else RLHFArguments
    try:
        # ms-swift sets RANK, WORLD_SIZE, MASTER_PORT ... as it parses: keep them in here.
        with world_size(int(environment.get("NPROC_PER_NODE", 1))), own_process_group():
            _, remaining = parse_args(cls, as_argv(given))
        if remaining:
            reasons.append(f"ValueError: remaining_argv: {remaining}")
    except (Exception, SystemExit) as error:  # noqa: BLE001 - swift raises, argparse exits
        reasons.append(f"{type(error).__name__}: {' '.join(str(error).split())}")
    for key, value in given.items():
        package = NEEDS.get(key, {}).get(value) if not isinstance(value, list) else None
        if package and importlib.util.find_spec(package) is None:
            reasons.append(f"{key}={value} needs {package}, which is not installed")
    trackers = given.get("report_to", [])
    for tracker in [trackers] if isinstance(trackers, str) else trackers:
        if tracker in ("swanlab", "wandb", "mlflow") and importlib.util.find_spec(tracker) is None:
            reasons.append(f"report_to {tracker}: {tracker} is not installed")
    for plugin in given.get("external_plugins", []):
        import_external_file(plugin)
    for reward in given.get("reward_funcs", []):
        try:
            orms[reward]()
        except (AssertionError, ImportError, KeyError) as error:
            reasons.append(f"reward {reward}: {type(error).__name__}: {error}")
    return "; ".join(reasons) or None


def write_job(folder: Path, model: Path, name: str) -> tuple[Path, list[str]]:
    """A job beside the config: the tiny model, a few rows (a rejected reply for DPO) as its
    train and test set, the
    config file as the job's ``config:`` with the script's ``reward_funcs`` written as the
    job's reward (``swift:<name>``) and its ``NPROC_PER_NODE`` as ``resources.gpus_per_node``.

    :returns: the job file and the ``-o`` options ``check`` gets.
    """
    config = read_config(name, folder, model)
    environment = config.pop("ENV", None) or {}
    rewards = config.pop("reward_funcs", None) or []
    config["template"] = "qwen"
    (folder / name).write_text(yaml.safe_dump(config, sort_keys=False))
    rows = [
        {"prompt": f"Repeat: {i}", "ground_truth": str(i), "rejected": str((i + 1) % 10)}
        for i in range(8)
    ]
    (folder / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    # The scripts evaluate (eval_steps): the job has a test set, as their datasets do.
    job: dict[str, Any] = {
        "engine": "swift",
        "agent": {"name": "solver"},
        "train_dataset": "train.jsonl",
        "test_dataset": "train.jsonl",
        "config": name,
    }
    if rewards:
        job["reward"] = [f"swift:{reward}" for reward in rewards]
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    options = ["-o", f"algorithm={algorithm_of(config)}"]
    if "NPROC_PER_NODE" in environment:
        options += ["-o", f"resources.gpus_per_node={environment['NPROC_PER_NODE']}"]
    return path, options


def checks_verdict(
    capsys: pytest.CaptureFixture[str], folder: Path, model: Path, name: str
) -> str | None:
    """``aworld-train check`` on the config through the CLI: ``None`` when it passes, else its
    one error line."""
    from aworld_train.testing.fixtures import run_cli

    job, options = write_job(folder, model, name)
    code, out, err = run_cli(capsys, "check", job, *options)
    if code == 0:
        return None
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, err
    return errors[0]


@pytest.fixture(scope="module")
def long_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model with room for the scripts' lengths (up to 8,192 completion tokens)."""
    from aworld_train.engine.testing import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("long-model"), max_positions=32768)


@pytest.mark.parametrize("name", CONFIGS)
def test_check_gives_swifts_own_verdict(
    name: str, long_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "swift").mkdir()
    swift = swifts_verdict(name, long_model, tmp_path / "swift")
    check = checks_verdict(capsys, tmp_path, long_model, name)
    assert (swift is None) == (check is None), f"ms-swift: {swift}\ncheck: {check}"
    if name in EXPECTED:
        word = EXPECTED[name]
        assert word in str(swift) and word in str(check), f"ms-swift: {swift}\ncheck: {check}"


def test_the_suite_holds_a_dozen_of_swifts_configs() -> None:
    assert len(CONFIGS) >= 12
    assert set(EXPECTED) <= set(CONFIGS)


@pytest.mark.parametrize(
    ("algorithm", "key", "value"),
    [
        ("grpo", "max_completion_length", 32768),
        ("sft", "max_length", 8192),
    ],
)
def test_the_swift_sections_length_keys_are_checked_against_the_models_positions(
    algorithm: str,
    key: str,
    value: int,
    tiny_model: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``swift.max_completion_length`` (GRPO) and ``swift.max_length`` (SFT) past a model of
    1,024 positions are one line naming the swift key, though the common keys are unset; 512
    fits."""
    from aworld_train.testing.fixtures import run_cli

    rows = [{"prompt": f"Repeat: {i}", "ground_truth": str(i)} for i in range(4)]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    for size, fits in ((value, False), (512, True)):
        job = {
            "engine": "swift",
            "agent": {"name": "solver"},
            "train_dataset": "train.jsonl",
            "reward": "exact_match",
            "config": {
                "algorithm": algorithm,
                "model": str(tiny_model),
                "max_steps": 1,
                "swift": {"template": "qwen", key: size},
            },
        }
        (tmp_path / "job.yaml").write_text(yaml.safe_dump(job))
        code, _, err = run_cli(capsys, "check", tmp_path / "job.yaml")
        if fits:
            assert code == 0, err
        else:
            errors = [line for line in err.splitlines() if line.startswith("error:")]
            assert code == 2 and len(errors) == 1, err
            assert f"swift.{key}" in errors[0] and str(size) in errors[0], errors[0]
            assert "1024 positions" in errors[0], errors[0]
