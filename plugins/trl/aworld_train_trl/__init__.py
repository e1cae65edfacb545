"""The TRL engine of aworld-train: GRPO and SFT through TRL's ``GRPOTrainer`` and ``SFTTrainer``.

The entry point (group ``aworld_train.engines``, name ``trl``) is :mod:`aworld_train_trl.engine`,
which holds the hook implementations and imports nothing heavy; TRL, transformers, torch and
datasets are imported by the submodules when a hook needs them.
"""

__version__ = "0.1.0"
