"""The job file: fields, relative paths, flags that replace fields, and its errors; the job
resolved once (:func:`~aworld_train.job.spec.resolve_job`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from aworld_train.errors import JobError
from aworld_train.errors import ConfigError
from aworld_train.job.config import JOB_FIELDS
from aworld_train.job.spec import Job, load_job, resolve_job


def test_job_file_fields_and_base_dir(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(
        "engine: toy\n"
        "agent: {name: adder}\n"
        "train_dataset: data/train.jsonl\n"
        "reward: rewards.py:score\n"
        "columns: {prompt: question, ground_truth: answer}\n"
        "config: {max_steps: 5, toy: {temperature: 0.5}}\n"
    )
    job = load_job(tmp_path / "job.yaml")
    base = tmp_path.resolve()
    assert job.engine == "toy"
    assert job.agent == {"name": "adder"}
    assert job.train_dataset == str(base / "data" / "train.jsonl"), "from the file's folder"
    assert job.reward == f"{base / 'rewards.py'}:score"
    assert job.base_dir == base
    assert job.columns == {"prompt": "question", "ground_truth": "answer"}
    assert job.config == {"max_steps": 5, "toy": {"temperature": 0.5}}
    assert job.run_path == str(base / "runs")
    assert job.test_dataset is None


def test_flags_replace_fields_and_become_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "job.yaml").write_text("engine: toy\ntrain_dataset: a.jsonl\nreward: exact_match\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "b.jsonl").write_text("")
    monkeypatch.chdir(elsewhere)
    job = load_job(
        tmp_path / "job.yaml",
        engine="twin",
        train_dataset="b.jsonl",
        reward="mine.py:score",
        test_dataset=None,
    )
    assert job.engine == "twin"
    assert job.train_dataset == str((elsewhere / "b.jsonl").resolve())
    assert job.reward == f"{(elsewhere / 'mine.py').resolve()}:score"
    assert job.test_dataset is None, "a flag left unset keeps the file's field"
    assert load_job(None, train_dataset="b.jsonl", reward="answer_match").reward == "answer_match"


def test_job_file_missing(tmp_path: Path) -> None:
    with pytest.raises(JobError, match=r"job file not found: .*nope\.yaml"):
        load_job(tmp_path / "nope.yaml")


def test_job_file_with_a_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text("engine: toy\ntrain_dataset: [a.jsonl\nreward: x\n")
    with pytest.raises(JobError, match=r"job\.yaml:\d+: invalid YAML"):
        load_job(tmp_path / "job.yaml")


def test_job_file_with_an_unknown_field_suggests_one(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text("engine: toy\ntrain_datset: a.jsonl\n")
    with pytest.raises(JobError) as raised:
        load_job(tmp_path / "job.yaml")
    message = str(raised.value)
    assert "job.yaml: unknown job field 'train_datset' (did you mean 'train_dataset'?)" in message
    assert all(field in message for field in JOB_FIELDS)


def test_job_file_that_is_not_a_mapping(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text("- engine\n")
    with pytest.raises(JobError, match="job file must hold a mapping, not a list"):
        load_job(tmp_path / "job.yaml")


def test_job_without_a_training_dataset(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text("engine: toy\n")
    with pytest.raises(JobError, match="no train_dataset"):
        load_job(tmp_path / "job.yaml")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("engine: 7\n", "'engine' must be an engine name (a string), got int 7"),
        ("engine: ''\n", "'engine' must be an engine name (a string), got str ''"),
        ("run_path: [a, b]\n", "'run_path' must be a string path, got list ['a', 'b']"),
        ("run_path: 3\n", "'run_path' must be a string path, got int 3"),
        (
            "columns: [prompt]\n",
            "'columns' must be a mapping of column names to column names "
            "(strings), got list ['prompt']",
        ),
        ("columns: {prompt: 3}\n", "'columns' must be a mapping of column names"),
        (
            "agent: 5\n",
            "'agent' must be an agent file, a module:factory or file.py:factory "
            "reference, or a mapping, got int 5",
        ),
        ("agent: [a]\n", "'agent' must be an agent file"),
        (
            "reward: 3\n",
            "'reward' must be a reward name, a file.py[:function] or module:function "
            "reference, a mapping {name, weight}, or a list of these, got int 3",
        ),
        ("reward: [exact_match, 3]\n", "'reward' must be a reward name"),
        ("reward: [[exact_match]]\n", "'reward' must be a reward name"),
        (
            "train_dataset: 3\n",
            "'train_dataset' must be a dataset file path or a list of rows (mappings), got int 3",
        ),
        ("train_dataset: {prompt: a}\n", "'train_dataset' must be a dataset file path"),
        ("train_dataset: [a.jsonl]\n", "'train_dataset' must be a dataset file path"),
        (
            "train_dataset: a.jsonl\ntest_dataset: true\n",
            "'test_dataset' must be a dataset file path or a list of rows (mappings), got bool",
        ),
        (
            "config: [max_steps]\n",
            "'config' must be a mapping of config keys or a config file "
            "path, got list ['max_steps']",
        ),
        ("config: 3\n", "'config' must be a mapping of config keys or a config file path, got int"),
    ],
)
def test_job_field_of_the_wrong_type_names_the_file_and_field(
    tmp_path: Path, text: str, message: str
) -> None:
    (tmp_path / "job.yaml").write_text(text)
    with pytest.raises(JobError) as raised:
        load_job(tmp_path / "job.yaml")
    assert str(raised.value).startswith(f"{tmp_path / 'job.yaml'}: {message}")


def test_a_long_value_is_shortened_in_the_message(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(f"run_path: {list(range(10_000))}\n")
    with pytest.raises(JobError) as raised:
        load_job(tmp_path / "job.yaml")
    assert len(str(raised.value)) < 200 and "..." in str(raised.value)


def test_a_flag_of_the_wrong_type() -> None:
    with pytest.raises(
        JobError,
        match=r"^job: 'engine' must be an engine name \(a string\), "
        r"got int 7$",
    ):
        load_job(None, engine=7, train_dataset="a.jsonl")


def test_job_fields_of_the_accepted_types(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(
        "engine: toy\n"
        "agent: agent.py:make\n"
        "train_dataset: [{prompt: a, ground_truth: b}]\n"
        "reward: [exact_match, {name: answer_match, weight: 0.5}]\n"
        "config: config.yaml\n"
        "run_path: out/runs\n"
    )
    (tmp_path / "config.yaml").write_text("max_steps: 3\n")
    job = load_job(tmp_path / "job.yaml")
    base = tmp_path.resolve()
    assert job.train_dataset == [{"prompt": "a", "ground_truth": "b"}]
    assert job.reward == ["exact_match", {"name": "answer_match", "weight": 0.5}]
    assert (job.config, job.run_path, job.agent) == (
        str(base / "config.yaml"),
        str(base / "out" / "runs"),
        f"{base / 'agent.py'}:make",
    )


def test_null_fields_keep_their_defaults(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(
        "engine: null\ntrain_dataset: a.jsonl\nrun_path: null\ncolumns: null\nconfig: ~\n"
    )
    job = load_job(tmp_path / "job.yaml")
    assert (job.engine, job.columns, job.config) == (None, None, None)
    assert job.run_path == str(tmp_path.resolve() / "runs")


def test_a_saved_job_loads_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a run directory saves: absolute paths, the agent and config as mappings."""
    from aworld_train.job.config import load_config

    data_file = tmp_path / "data" / "train.jsonl"
    data_file.parent.mkdir()
    saved = tmp_path / "runs" / "run-1" / "job.yaml"
    saved.parent.mkdir(parents=True)
    saved.write_text(
        "engine: toy\n"
        "agent: {name: agent, max_turns: 1}\n"
        f"train_dataset: {data_file}\n"
        "test_dataset: null\n"
        f"reward: [{tmp_path / 'rewards.py'}:score, {{name: exact_match, weight: 0.5}}]\n"
        "columns: {prompt: question}\n"
        "config:\n"
        "  algorithm: grpo\n  max_steps: 5\n  seed: 42\n  learning_rate: 1.0e-05\n"
        "  trust_remote_code: true\n  reward_timeout: 30.0\n"
        "  resources: {nnodes: 1}\n  toy: {temperature: 0.5}\n"
        f"run_path: {tmp_path / 'runs'}\n"
    )
    monkeypatch.chdir(tmp_path / "data")  # "from any folder"
    job = load_job(saved)
    assert job.train_dataset == str(data_file)
    assert job.run_path == str(tmp_path / "runs")
    config = load_config(job.config, engine_names=("toy",), engine=job.engine)
    assert (config.max_steps, config.trust_remote_code, config.reward_timeout) == (5, True, 30.0)
    assert config.engine_section() == {"temperature": 0.5}
    assert load_config(config.to_dict(), engine_names=("toy",), engine="toy") == config


def test_a_job_file_holds_every_field_of_the_job_but_the_resolved_jobs_own() -> None:
    from dataclasses import fields

    own = ("overrides", "base_dir", "written_config", "as_written")
    assert JOB_FIELDS == tuple(f.name for f in fields(Job) if f.name not in own)


def test_resolve_job_makes_the_paths_absolute_and_leaves_names(tmp_path: Path) -> None:
    base = tmp_path.resolve()
    (base / "agent.yaml").write_text("name: a\n")
    job = Job(
        agent="agent.yaml",
        train_dataset="data/train.jsonl",
        test_dataset=[{"prompt": "p"}],
        reward=["r.py:f", {"name": "lib/r.py", "weight": 2}, "exact_match", "pkg.rewards:score"],
        config={"max_steps": 5},
        run_path="out",
        base_dir=base,
    )
    resolved = resolve_job(job)
    assert resolved.agent == str(base / "agent.yaml")
    assert resolved.train_dataset == str(base / "data" / "train.jsonl")
    assert resolved.test_dataset == [{"prompt": "p"}], "rows in memory stay as they are"
    assert resolved.reward == [
        f"{base}/r.py:f",
        {"name": f"{base}/lib/r.py", "weight": 2},
        "exact_match",
        "pkg.rewards:score",
    ]
    assert resolved.config == {"max_steps": 5}
    assert resolved.run_path == str(base / "out")
    assert resolved.base_dir == base
    assert job.train_dataset == "data/train.jsonl", "a new job: the given one is unchanged"
    assert resolved.as_written == job, "error lines can name an input as written"
    assert resolve_job(resolved) is resolved, "a resolved job is resolved once"
    assert resolve_job(Job(agent="pkg.agents:make")).agent == "pkg.agents:make"


def test_resolve_job_merges_the_overrides_into_the_config_file(tmp_path: Path) -> None:
    """The config file read once, with the overrides merged in; what the config check reads
    (``written_config``) is the file as written, named as the job names it."""
    (tmp_path / "config.yaml").write_text("max_steps: 5\ntoy: {temperature: 0.5}\n")
    job = Job(config="config.yaml", overrides=("toy.temperature=0.7",), base_dir=tmp_path)
    resolved = resolve_job(job)
    assert resolved.config == {"max_steps": 5, "toy": {"temperature": 0.7}}
    assert resolved.overrides == ("toy.temperature=0.7",), "kept, to name them in errors"
    assert resolved.written_config == (
        {"max_steps": 5, "toy": {"temperature": 0.5}},
        str(tmp_path / "config.yaml"),
    )
    plain = resolve_job(Job(config="config.yaml", base_dir=tmp_path))
    assert plain.config == str(tmp_path.resolve() / "config.yaml"), "no override: the file"
    with pytest.raises(ConfigError, match=r"missing\.yaml"):
        resolve_job(Job(config="missing.yaml", base_dir=tmp_path))
    with pytest.raises(ConfigError, match="override 'max_steps' is not KEY=VALUE"):
        resolve_job(Job(config="config.yaml", overrides=("max_steps",), base_dir=tmp_path))


def test_flags_and_overrides_make_one_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "job.yaml").write_text("train_dataset: a.jsonl\nrun_path: out\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    job = load_job(
        tmp_path / "job.yaml", ("max_steps=2",), run_path="runs", test_dataset="missing.jsonl"
    )
    assert job.overrides == ("max_steps=2",)
    assert job.run_path == str(elsewhere.resolve() / "runs"), "a flag is relative to the cwd"
    assert job.test_dataset == str(elsewhere.resolve() / "missing.jsonl"), (
        "a flag's file is the current folder's even before it exists"
    )
    assert load_job(tmp_path / "job.yaml").run_path == str(tmp_path.resolve() / "out"), (
        "the file's is relative to the file's folder"
    )
