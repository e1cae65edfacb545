"""The README's Python example, run as written on data whose columns have other names."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

README = Path(__file__).resolve().parents[3] / "README.md"


def _python_example() -> str:
    section = README.read_text(encoding="utf-8").split("## Python", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


def test_the_readme_python_example_trains(
    tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "data").mkdir()
    rows = [{"question": f"Repeat: {d}", "answer": str(d)} for d in range(8)]
    (tmp_path / "data" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "agent.yaml").write_text("name: repeater\nsystem_prompt: Answer with the digit.\n")
    (tmp_path / "rewards.py").write_text(
        "def score(data_source, solution_str, ground_truth, extra_info=None):\n"
        "    return 1.0 if solution_str.strip() == ground_truth else 0.0\n"
    )
    (tmp_path / "config.yaml").write_text(
        yaml.safe_dump(
            {
                "model": str(tiny_model),
                "max_steps": 2,
                "batch_size": 4,
                "num_generations": 2,
                "max_completion_length": 4,
                "logging_steps": 1,
            }
        )
    )
    monkeypatch.chdir(tmp_path)

    exec(compile(_python_example(), str(README), "exec"), {})

    (run_dir,) = (tmp_path / "runs").iterdir()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    steps = [
        json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()
    ]
    assert sorted(set(steps)) == [1, 2]  # the trainer logs its summary at the last step too
