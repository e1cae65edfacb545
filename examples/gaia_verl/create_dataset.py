"""Write the GAIA example's datasets as VeRL reads them, and the tiny offline model it checks with.

Run it from anywhere: ``python examples/gaia_verl/create_dataset.py``. It writes
``data/train.parquet`` and ``data/test.parquet`` in this folder, in the layout AWorld's
``create_dataset.py`` writes for GAIA (``prompt`` as chat messages, ``data_source``,
``ability``, ``reward_model: {style, ground_truth}``, ``extra_info: {index, task_id, level}``,
``agent_name``), and ``build/model``. Files that exist are left alone.

The tiny model is random: it lets ``check`` (and the pipeline tests) run without a model hub,
not learn the task. To train, point ``actor_rollout_ref.model.path`` in ``grpo_trainer.yaml``
at a tool-calling model folder such as a downloaded Qwen/Qwen3-0.6B.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
MODEL = HERE / "build" / "model"
DATA = HERE / "data"

# Each question needs the MCP server's facts (server.py) and, for most, its calculator.
# (question, answer, GAIA level)
TRAIN = [
    (
        "How many years passed between the completion of the Eiffel Tower and the opening of the "
        "Golden Gate Bridge?",
        "48",
        1,
    ),
    (
        "What is the combined height in metres of the Eiffel Tower and the Statue of Liberty?",
        "423",
        1,
    ),
    ("Which is taller, Big Ben or the Statue of Liberty? Answer with its name.", "Big Ben", 1),
    ("How many years older is Big Ben than the Sydney Opera House?", "114", 1),
    (
        "In which cities are the Eiffel Tower and Big Ben? Answer as a comma-separated list in that "
        "order.",
        "Paris, London",
        2,
    ),
    (
        "How many times the height of Big Ben is the Burj Khalifa? Round to one decimal place.",
        "8.6",
        2,
    ),
]
TEST = [
    (
        "How many years after the Statue of Liberty was completed did the Burj Khalifa open?",
        "124",
        1,
    ),
    ("By how many metres is the Burj Khalifa taller than the Eiffel Tower?", "498", 1),
]

AGENT_NAME = "gaia_agent"  # the name main.py gives the agent


def rows(questions: list[tuple[str, str, int]], split: str) -> list[dict]:
    """One VeRL-layout row per question."""
    return [
        {
            "prompt": [{"role": "user", "content": question}],
            "data_source": "gaia",
            "ability": "tool_use",
            "reward_model": {"style": "rule", "ground_truth": answer},
            "extra_info": {
                "index": index,
                "task_id": f"landmarks-{split}-{index:03d}",
                "level": level,
            },
            "agent_name": AGENT_NAME,
        }
        for index, (question, answer, level) in enumerate(questions)
    ]


def main() -> None:
    import datasets
    from aworld_train.testing import build_tiny_model

    for split, questions in (("train", TRAIN), ("test", TEST)):
        path = DATA / f"{split}.parquet"
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            datasets.Dataset.from_list(rows(questions, split)).to_parquet(str(path))
    if not (MODEL / "config.json").is_file():
        # A chat template that renders the tools (check refuses a model that would never see
        # them); 4096 positions hold the prompt with the tools' schemas (the byte-level
        # tokenizer spends a token per character) and a few turns.
        build_tiny_model(
            MODEL, extra_tokens=("<answer>", "</answer>"), max_positions=4096, tools=True
        )
    print(f"data: {DATA}\nmodel: {MODEL}")


if __name__ == "__main__":
    main()
