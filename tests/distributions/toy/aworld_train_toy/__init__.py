"""Test-only engine ``toy`` (also installed as ``twin``): a tabular softmax policy over candidate
answers, trained by REINFORCE with a baseline, in pure Python.

It exercises the whole train path of the core — every hook, the engine's own config section,
metrics, checkpoints and resume — in well under a second and without torch.
"""
