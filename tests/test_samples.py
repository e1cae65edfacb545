"""Rollout samples: what engines append to ``<run>/samples.jsonl`` and read back."""

from __future__ import annotations

import json
from pathlib import Path

from aworld_train.run.samples import append_samples, read_samples


def test_samples_append_per_step_and_read_back(tmp_path: Path) -> None:
    assert read_samples(tmp_path) == []
    append_samples(
        tmp_path,
        1,
        [
            {"prompt": "What is 1 + 1?", "completion": "2", "reward": 1, "rewards": {"exact": 1.0}},
            {"prompt": [{"role": "user", "content": "Été?"}], "completion": "oui", "reward": 0.5},
        ],
    )
    append_samples(tmp_path, 2, [])
    append_samples(
        tmp_path,
        3,
        [
            {
                "prompt": "p",
                "completion": "c",
                "reward": float("nan"),
                "rewards": {"exact": float("inf")},
            }
        ],
    )
    assert read_samples(tmp_path) == [
        {
            "step": 1,
            "prompt": "What is 1 + 1?",
            "completion": "2",
            "reward": 1.0,
            "rewards": {"exact": 1.0},
        },
        {
            "step": 1,
            "prompt": [{"role": "user", "content": "Été?"}],
            "completion": "oui",
            "reward": 0.5,
            "rewards": {},
        },
        {"step": 3, "prompt": "p", "completion": "c", "reward": None, "rewards": {"exact": None}},
    ]
    lines = (tmp_path / "samples.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3 and all(json.loads(line) for line in lines), "strict JSON lines"
    assert "NaN" not in lines[2] and "Été" in lines[1]
