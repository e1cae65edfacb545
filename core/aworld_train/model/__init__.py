"""The policy model, checked before any engine loads it.

- :mod:`~aworld_train.model._folder`: :func:`preflight_model` tells a local model folder from a
  hub id and checks the folder without running anything from it.
- :mod:`~aworld_train.model._weights`: the weight files complete, and their tensors
  (:func:`check_weights`) the ones ``config.json`` describes.
- :mod:`~aworld_train.model._tokenizer`: the tokenizer, loaded once per process
  (:func:`load_tokenizer`) and checked against the embeddings.
- :mod:`~aworld_train.model._lengths`: every prompt, rendered as training renders it, fits the
  model with its completion (:func:`check_lengths`, :func:`max_positions`).
- :mod:`~aworld_train.model._lora`: LoRA's ``target_modules`` name modules of the model
  (:func:`check_lora_targets`).
- :mod:`~aworld_train.model._meta` builds the model on torch's meta device for those checks;
  :mod:`~aworld_train.model._files` reads the folder's JSON files as data.

Heavy libraries (torch, transformers, numpy, pyarrow) are imported inside the functions.
"""

from aworld_train.model._files import REMOTE_CODE_FILES
from aworld_train.model._folder import preflight_model
from aworld_train.model._lengths import check_lengths, max_positions
from aworld_train.model._lora import check_lora_targets
from aworld_train.model._tokenizer import load_tokenizer
from aworld_train.model._weights import check_weights

__all__ = [
    "REMOTE_CODE_FILES",
    "check_lengths",
    "check_lora_targets",
    "check_weights",
    "load_tokenizer",
    "max_positions",
    "preflight_model",
]
