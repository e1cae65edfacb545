"""What the engine sends the service, without a service: SFT's prompt weighted 0, the batches a
resumed run takes, the group advantages and the seeds that keep groups apart."""

from __future__ import annotations

from pathlib import Path

from aworld_train.engine import TrainConfig
from aworld_train.engine.runtime import load_tokenizer
from aworld_train_tinker.config import Section, resolve
from aworld_train_tinker.grpo import advantages
from aworld_train_tinker.rows import batch_indices, prompt_ids, sft_example
from aworld_train_tinker.sampling import sample_seed


def test_sft_weights_the_answer_and_its_end_only(served_model: Path) -> None:
    tokenizer = load_tokenizer(served_model)
    row = {"prompt": "Repeat: 7", "ground_truth": "7"}
    tokens, weights = sft_example(tokenizer, row, "Answer with the digit.")
    prompt = prompt_ids(tokenizer, "Repeat: 7", "Answer with the digit.")
    assert tokens[: len(prompt)] == prompt and weights[: len(prompt)] == [0.0] * len(prompt)
    answer = tokens[len(prompt) :]
    assert tokenizer.decode(answer) == "7<|im_end|>" and weights[len(prompt) :] == [1.0, 1.0]


def test_a_resumed_run_takes_the_batches_the_interrupted_one_would_have() -> None:
    steps = [batch_indices(10, 4, step, seed=3) for step in range(1, 6)]
    assert steps == [batch_indices(10, 4, step, seed=3) for step in range(1, 6)]
    first_epoch = [i for batch in steps[:2] for i in batch] + steps[2][:2]
    assert sorted(first_epoch) == list(range(10)), "each row once per epoch"
    assert steps != [batch_indices(10, 4, step, seed=4) for step in range(1, 6)]


def test_group_advantages() -> None:
    assert advantages([1.0, 1.0, 1.0], scale=True) == [0.0, 0.0, 0.0]
    assert advantages([1.0, 0.0], scale=False) == [0.5, -0.5]
    assert advantages([1.0, 0.0], scale=True) == [1.0, -1.0]


def test_every_group_samples_with_seeds_of_its_own() -> None:
    job = resolve(TrainConfig(batch_size=8, num_generations=4, model="m"), Section(), None)
    seeds = [sample_seed(job, step, prompt) for step in (1, 2) for prompt in (0, 1)]
    assert all(b - a >= job.num_generations for a, b in zip(seeds, seeds[1:]))
