"""``aworld-train view`` without a browser, through the real CLI and real toy-engine runs: what
each route answers, the token, the paths it refuses, a half-written metrics line, the static
export and its one-line refusals."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from aworld_train import AgentTrainer
from aworld_train.run.samples import append_samples
from aworld_train.testing.fixtures import one_error_line
from aworld_train.testing.view import View, running_view
from aworld_train.view._jsonl import MAX_POINTS, PREVIEW_BYTES
from helpers import RewardThatStops, run_cli

SECRET = "sk-view-secret-4242"


@pytest.fixture
def runs(toy_job: dict[str, Any]) -> Path:
    """A runs folder holding one completed toy run of 6 steps, a checkpoint every 2, its agent
    given an API key."""
    toy_job["agent"] = {**toy_job["agent"], "llm_api_key": SECRET}
    toy_job["config"] = {**toy_job["config"], "save_steps": 2}
    AgentTrainer(**toy_job).train()
    return Path(toy_job["run_path"])


def only_run(view: View) -> dict[str, Any]:
    (run,) = view.ask("runs")["runs"]
    return run


def test_the_routes_answer_a_run_its_curves_and_nothing_secret(runs: Path) -> None:
    with running_view(runs) as view:
        assert view.url.startswith("http://127.0.0.1:")
        status, page = view.get("/")
        assert status == 200 and b'src="static/plotly.min.js"' in page
        status, script = view.get("/static/plotly.min.js")
        assert status == 200 and len(script) > 1_000_000  # plotly's own bundle
        run = only_run(view)
        assert run["status"] == "completed" and run["engine"] == "toy"
        assert run["steps_done"] == 6 and run["steps_total"] == 6
        detail = view.ask(f"run?run={run['id']}")
        assert "exact_match" in detail["job"] and "llm_api_key: '***'" in detail["job"]
        assert detail["checkpoints"] == ["checkpoint-2", "checkpoint-4", "checkpoint-6"]
        # Where a trainer engine saves them, the folder itself is no checkpoint.
        (runs / run["id"] / "checkpoints" / "checkpoint-8").mkdir(parents=True)
        assert view.ask(f"run?run={run['id']}")["checkpoints"] == [
            "checkpoint-2",
            "checkpoint-4",
            "checkpoint-6",
            "checkpoints/checkpoint-8",
        ]
        reward = view.ask(f"metrics?run={run['id']}&after=0")["curves"]["reward"]
        assert reward["steps"] == [1, 2, 3, 4, 5, 6]
        for question in ("runs", f"run?run={run['id']}", f"metrics?run={run['id']}&after=0"):
            assert SECRET not in json.dumps(view.ask(question))
        assert view.get("/api/run?run=no-such-run")[0] == 404
        assert view.get("/api/nothing")[0] == 404
        # Read-only: nothing but GET (and HEAD) is answered.
        request = urllib.request.Request(view.url + "api/runs", method="POST", data=b"{}")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 405


def test_no_path_leads_out_of_the_folder(runs: Path, tmp_path: Path) -> None:
    (run_dir,) = runs.iterdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "manifest.json").write_text('{"status": "completed", "engine": "secret"}')
    (outside / "metrics.jsonl").write_text('{"step": 1, "reward": 99.0}\n')
    (runs / "linked").symlink_to(outside, target_is_directory=True)
    (run_dir / "metrics.jsonl").unlink()
    (run_dir / "metrics.jsonl").symlink_to(outside / "metrics.jsonl")
    with running_view(runs) as view:
        assert [run["id"] for run in view.ask("runs")["runs"]] == [run_dir.name]
        for path in (
            "/api/run?run=linked",
            "/api/run?run=..",
            f"/api/run?run={run_dir.name}/../../outside",
            f"/api/run?run={outside}",
            "/static/..%2F__init__.py",
            "/static/index.html",
            "/../manifest.json",
        ):
            assert view.get(path)[0] == 404, path
        assert view.ask(f"metrics?run={run_dir.name}&after=0")["curves"] == {}


def test_a_half_written_line_waits_for_its_end(runs: Path) -> None:
    (run_dir,) = runs.iterdir()
    metrics = run_dir / "metrics.jsonl"
    with metrics.open("a") as handle:
        handle.write('{"step": 7, "rew')
    with running_view(runs) as view:
        answer = view.ask(f"metrics?run={run_dir.name}&after=0")
        assert answer["curves"]["reward"]["steps"][-1] == 6 and answer["next"] == 6
        with metrics.open("a") as handle:
            handle.write('ard": 0.5}\n')
        later = view.ask(f"metrics?run={run_dir.name}&after={answer['next']}")
        assert later["curves"]["reward"] == {"steps": [7], "values": [0.5], "total": 1}


def test_a_step_too_large_to_be_one_is_passed_over(runs: Path) -> None:
    (run_dir,) = runs.iterdir()
    with (run_dir / "metrics.jsonl").open("a") as handle:
        handle.write(json.dumps({"step": 2**64, "reward": 1.0}) + "\n")
    append_samples(run_dir, 2**64, [{"prompt": "huge", "completion": "", "reward": 1.0}])
    with running_view(runs) as view:
        answer = view.ask(f"metrics?run={run_dir.name}&after=0")
        assert answer["curves"]["reward"]["steps"][-1] == 6 and answer["next"] == 6
        (found,) = view.ask(f"samples?run={run_dir.name}&q=huge")["samples"]
        assert found["step"] == 2**64, "shown as written, searched as no step"


def test_a_secret_written_into_job_yaml_by_hand_is_not_shown(runs: Path, tmp_path: Path) -> None:
    (run_dir,) = runs.iterdir()
    job = run_dir / "job.yaml"
    job.write_text(job.read_text() + "api_key: sk-edited-by-hand-77\n")
    with running_view(runs) as view:
        shown = view.ask(f"run?run={run_dir.name}")["job"]
    assert "sk-edited-by-hand-77" not in shown and "api_key: '***'" in shown
    assert "exact_match" in shown, "the rest of the job as saved"
    target = tmp_path / "run.html"
    subprocess.run(
        [sys.executable, "-m", "aworld_train.cli", "view", run_dir, "--html", target],
        check=True,
        capture_output=True,
    )
    assert "sk-edited-by-hand-77" not in target.read_text()


def test_a_token_is_needed_off_loopback_and_on_every_request(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(capsys, "view", runs, "--host", "0.0.0.0")
    assert "--host 0.0.0.0 is reachable from other machines: give --token" in one_error_line(
        code, err
    )
    with running_view(runs, "--host", "0.0.0.0", "--token", "t0ken") as view:
        assert view.url.endswith("?token=t0ken")
        for path in ("/", "/static/app.js", "/api/runs"):
            assert view.get(path, token=False)[0] == 401, path
            assert view.get(path)[0] == 200, path
        status, page = view.get("/")
        assert b"static/app.js?token=t0ken" in page


def test_the_static_export_holds_the_run_and_its_scripts(runs: Path, tmp_path: Path) -> None:
    (run_dir,) = runs.iterdir()
    target = tmp_path / "run.html"
    subprocess.run(
        [sys.executable, "-m", "aworld_train.cli", "view", run_dir, "--html", target],
        check=True,
        capture_output=True,
    )
    page = target.read_text()
    assert "<script src=" not in page and "Plotly" in page
    assert '"metrics?run=.&after=0"' in page and SECRET not in page


def test_what_view_refuses_is_one_line(
    runs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = run_cli(capsys, "view", tmp_path / "missing")
    assert one_error_line(code, err) == (
        f"error: {tmp_path / 'missing'}: not a folder: give a run directory or a folder holding runs"
    )
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    code, _, err = run_cli(capsys, "view")
    assert one_error_line(code, err) == (
        "error: no runs folder here (./runs): give PATH, a run directory or a folder holding runs"
    )
    code, _, err = run_cli(capsys, "view", runs, "--html", tmp_path / "x.html")
    assert one_error_line(code, err) == (
        f"error: {runs} is not a run directory (it holds no manifest.json)"
    )
    (run_dir,) = runs.iterdir()
    target = tmp_path / "no-such-folder" / "run.html"
    code, _, err = run_cli(capsys, "view", run_dir, "--html", target)
    assert one_error_line(code, err) == (
        f"error: --html {target}: cannot write it (No such file or directory)"
    )


def test_a_large_run_is_previewed_first_then_answered_whole(runs: Path) -> None:
    (run_dir,) = runs.iterdir()
    padding = {f"metric_{i}": 0.5 for i in range(20)}
    records = [{"step": step, "reward": step / 30_000, **padding} for step in range(1, 30_001)]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert (run_dir / "metrics.jsonl").stat().st_size > PREVIEW_BYTES
    with running_view(runs) as view:
        question = f"metrics?run={run_dir.name}&after=0"
        preview = view.ask(question)
        assert preview["partial"] and preview["next"] == 0
        steps = preview["curves"]["reward"]["steps"]
        assert MAX_POINTS * 0.9 < len(steps) <= MAX_POINTS and steps == sorted(steps)
        whole = view.ask(question)
        assert "partial" not in whole and whole["next"] == 30_000
        reward = whole["curves"]["reward"]
        assert reward["total"] == 30_000 and len(reward["steps"]) <= MAX_POINTS
        assert reward["steps"][0] == 1 and reward["steps"][-1] == 30_000
        assert only_run(view)["steps_done"] == 30_000


def test_docs_name_every_option_of_view() -> None:
    from aworld_train.cli._view import view_command

    guide = (Path(__file__).resolve().parents[1] / "docs" / "view.md").read_text()
    table = {line.split("`")[1] for line in guide.splitlines() if line.startswith("| `")}
    options = {
        param.opts[0] if param.opts[0].startswith("-") else param.name.upper()
        for param in view_command.params
    }
    named = {option.split()[0] for option in table}
    assert options == named, f"docs/view.md: {sorted(options ^ named)}"


def test_a_resumed_run_reads_resumed_into_and_names_its_chain(toy_job: dict[str, Any]) -> None:
    toy_job["config"] = {"max_steps": 8, "batch_size": 4, "save_steps": 2}
    first = AgentTrainer(**dict(toy_job, reward_func=RewardThatStops(20, KeyboardInterrupt())))
    with pytest.raises(KeyboardInterrupt):
        first.train()
    resumed = AgentTrainer(**toy_job, resume=first.run_dir.path.name)
    resumed.train()
    with running_view(toy_job["run_path"]) as view:
        runs = {run["id"]: run for run in view.ask("runs")["runs"]}
    old, new = runs[first.run_dir.path.name], runs[resumed.run_dir.path.name]
    assert old["status"] == "resumed-into" and old["continued_in"] == new["id"]
    assert new["status"] == "completed" and new["resumed_from"] == old["id"]
    assert new["steps_done"] == 8 and new["steps_total"] == 8


def test_samples_are_searched_by_step_reward_and_text(runs: Path) -> None:
    (run_dir,) = runs.iterdir()
    for step in (1, 2, 3):
        append_samples(
            run_dir,
            step,
            [
                {"prompt": f"What is {step} + 1?", "completion": str(step + 1), "reward": 1.0},
                {"prompt": f"What is {step} + 2?", "completion": "no", "reward": 0.0},
            ],
        )
    with running_view(runs) as view:

        def found(query: str) -> list[tuple[int, str]]:
            answer = view.ask(f"samples?run={run_dir.name}{query}")
            return [(row["step"], row["prompt"]) for row in answer["samples"]]

        assert found("") == [(3, "What is 3 + 2?"), (3, "What is 3 + 1?"), (2, "What is 2 + 2?"),
                             (2, "What is 2 + 1?"), (1, "What is 1 + 2?"), (1, "What is 1 + 1?")]  # fmt: skip
        assert found("&step=2") == [(2, "What is 2 + 2?"), (2, "What is 2 + 1?")]
        assert found("&min_reward=0.5&q=what+IS+1") == [(1, "What is 1 + 1?")]
        assert view.ask(f"sample?run={run_dir.name}&index=0")["completion"] == "2"
        assert view.get(f"/api/sample?run={run_dir.name}&index=6")[0] == 404


@pytest.mark.timeout(120)
def test_fifos_where_a_run_s_files_belong_hang_neither_view_nor_show(
    runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run folder may be anyone's: a FIFO opened for reading blocks until something writes
    to it, so each is passed over as a file that is not there."""
    import os

    (run_dir,) = runs.iterdir()
    for name in ("metrics.jsonl", "samples.jsonl", "job.yaml", "export.json", "eval/final.json"):
        (run_dir / name).unlink(missing_ok=True)
        (run_dir / name).parent.mkdir(exist_ok=True)
        os.mkfifo(run_dir / name)
    code, out, err = run_cli(capsys, "show", run_dir)
    assert code == 0, err
    assert "status:   completed" in out and "final.json: unreadable" in out
    with running_view(runs) as view:
        run = only_run(view)
        assert run["status"] == "completed" and run["steps_done"] in (None, 0)
        detail = view.ask(f"run?run={run['id']}")
        assert detail["job"] in (None, "") and detail["evals"] == []
        assert view.ask(f"metrics?run={run['id']}&after=0")["curves"] == {}
        assert view.ask(f"samples?run={run['id']}")["samples"] == []
