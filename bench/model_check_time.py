"""Time the model folder's consistency check adds to ``aworld-train check``.

What is timed is what the check does beyond loading the tokenizer, which the checks did before:
the safetensors headers read and compared with the model ``config.json`` builds on the meta
device (``aworld_train.model._weights.check_weights``), and the tokenizer's ids and tokens against
``vocab_size`` (``_check_config_ids``, ``_check_tokenizer_fits``). Two folders:

- the tiny model of the tests (``build_tiny_model``: Qwen2, hidden 64, 2 layers);
- a larger Qwen2 (hidden 1024, 16 layers, intermediate 2816, vocabulary 32,000, tied
  embeddings: ~240M parameters, bf16), written once with random weights in a temporary folder,
  with the tiny model's tokenizer.

For each, ``cold`` is the first check in a fresh interpreter that has loaded the tokenizer (as
the checks have when the step runs): it includes importing torch and transformers' model code,
which the engines' own checks import anyway. ``warm`` is the median of repeated checks in that
process, split into reading the headers, building on the meta device, and comparing.

With ``--engine``, the whole ``aworld-train check`` of a small GRPO job on the tiny model is
also timed with and without the ``weights`` step, each run a fresh process, the two
interleaved: what the step adds once the engine's own checks have imported what they need.
Figures print as JSON.

    .venvs/trl/bin/python bench/model_check_time.py [--repeats 10] [--engine trl --runs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Run in a fresh interpreter per folder: the first check pays the imports, the rest do not.
MEASURE = r"""
import json, statistics, sys, time
from pathlib import Path

from aworld_train.model import _files as f
from aworld_train.model import _meta as meta, _tokenizer as t, _weights as w

folder, repeats = Path(sys.argv[1]), int(sys.argv[2])
tokenizer = t.load_tokenizer(folder)  # loaded by the model step before the weights step
files = f.ModelFiles(folder)
vocab = f.vocab_size_of(files.config())


def timed(call):
    started = time.perf_counter()
    result = call()
    return time.perf_counter() - started, result


def tokens():
    t.check_config_ids(folder, f.ModelFiles(folder), vocab)
    t.check_tokenizer_fits(folder, tokenizer, vocab)


torch_loaded = "torch" in sys.modules
cold, detail = timed(lambda: w.check_weights(folder))
runs = {"check_weights": [], "headers": [], "meta_build": [], "compare": [], "tokens": []}
for _ in range(repeats):
    runs["check_weights"].append(timed(lambda: w.check_weights(folder))[0])
    seconds, stored = timed(lambda: w._stored_shapes(folder, f.ModelFiles(folder)))
    runs["headers"].append(seconds)
    seconds, model = timed(lambda: meta.meta_model(str(folder), False))
    runs["meta_build"].append(seconds)
    runs["compare"].append(timed(lambda: w._compare_weights(model, stored))[0])
    runs["tokens"].append(timed(tokens)[0])
print(json.dumps({"detail": detail, "torch_imported_before": torch_loaded,
                  "cold_s": round(cold, 4),
                  "warm_median_s": {k: round(statistics.median(v), 5) for k, v in runs.items()}}))
"""


def write_larger(folder: Path, tokenizer_from: Path) -> Path:
    """A Qwen2 of hidden 1024 and 16 layers, random bf16 weights saved as save_pretrained
    saves them (tied embeddings stored once), with the tiny model's tokenizer."""
    import shutil

    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, Qwen2Config

    config = Qwen2Config(
        hidden_size=1024,
        intermediate_size=2816,
        num_hidden_layers=16,
        num_attention_heads=16,
        num_key_value_heads=16,
        vocab_size=32000,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=258,
        eos_token_id=258,
        pad_token_id=256,
    )
    config.architectures = ["Qwen2ForCausalLM"]
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    folder.mkdir(parents=True, exist_ok=True)
    generator = torch.Generator().manual_seed(0)
    seen: set[int] = set()
    tensors = {}
    for name, tensor in model.state_dict(keep_vars=True).items():
        if id(tensor) in seen:  # the tied output head is stored once, as save_pretrained does
            continue
        seen.add(id(tensor))
        tensors[name] = (torch.randn(tuple(tensor.shape), generator=generator) * 0.02).to(
            torch.bfloat16
        )
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    config.save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tokenizer_from / name, folder / name)
    return folder


# The whole check, in a fresh interpreter, with or without the weights step.
WHOLE = r"""
import sys, time
started = time.perf_counter()
from aworld_train import checks
from aworld_train.cli import main
if sys.argv[1] == "without":
    checks.CHECKS = tuple(step for step in checks.CHECKS if step.module != "weights")
try:
    main(["check", sys.argv[2], "--engine", sys.argv[3]])
except SystemExit as exit_:
    assert not exit_.code, exit_.code
print(f"SECONDS {time.perf_counter() - started}")
"""


def whole_check(job: Path, engine: str, runs: int) -> dict[str, object]:
    """Median wall seconds of ``aworld-train check`` with and without the weights step."""
    seconds: dict[str, list[float]] = {"with": [], "without": []}
    for _ in range(runs):
        for variant in ("with", "without"):
            done = subprocess.run(
                [sys.executable, "-c", WHOLE, variant, str(job), engine],
                capture_output=True,
                text=True,
                check=True,
            )
            seconds[variant].append(float(done.stdout.rsplit("SECONDS ", 1)[1]))
    medians = {k: round(statistics.median(v), 2) for k, v in seconds.items()}
    return {
        "engine": engine,
        "runs_s": seconds,
        "median_s": medians,
        "added_s": round(medians["with"] - medians["without"], 2),
    }


def write_job(folder: Path, model: Path) -> Path:
    """A small GRPO job on ``model`` (ms-swift is told the ChatML template)."""
    rows = "".join(
        json.dumps({"prompt": f"Repeat: {d}", "ground_truth": str(d)}) + "\n" for d in range(8)
    )
    (folder / "train.jsonl").write_text(rows)
    job = {
        "agent": {"name": "repeat"},
        "train_dataset": "train.jsonl",
        "reward": "exact_match",
        "config": {
            "model": str(model),
            "max_steps": 1,
            "batch_size": 4,
            "num_generations": 2,
            "max_completion_length": 8,
            "swift": {"template": "qwen"},
        },
    }
    (folder / "job.yaml").write_text(json.dumps(job))
    return folder / "job.yaml"


def measure(folder: Path, repeats: int) -> dict[str, object]:
    result = subprocess.run(
        [sys.executable, "-c", MEASURE, str(folder), str(repeats)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--engine", help="also time the whole check on this engine")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from aworld_train.testing import build_tiny_model

    with tempfile.TemporaryDirectory(prefix="model-check-") as work:
        tiny = build_tiny_model(Path(work) / "tiny")
        started = time.perf_counter()
        larger = write_larger(Path(work) / "qwen2-1024x16", tiny)
        written = time.perf_counter() - started
        size_mb = (larger / "model.safetensors").stat().st_size / 2**20
        figures = {
            "tiny": measure(tiny, args.repeats),
            "qwen2_hidden1024_16layers": {
                **measure(larger, args.repeats),
                "weights_mb": round(size_mb),
                "written_once_s": round(written, 1),
            },
        }
        if args.engine:
            job = write_job(Path(work), tiny)
            figures["whole_check"] = whole_check(job, args.engine, args.runs)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
