from aworld_train import AgentTrainer

trainer = AgentTrainer(
    agent="agent.yaml",
    train_dataset="data/train.jsonl",
    reward_func="rewards.py:score",
    config="config.yaml",
    columns={"prompt": "question", "ground_truth": "answer"},
    run_path="runs",
    train_engine_name="trl",
)  # runs every check
trainer.train()  # with a progress bar
