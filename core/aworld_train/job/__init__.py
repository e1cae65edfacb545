"""The job as the user gives it, and the settings it trains with.

- ``spec``: one :class:`~aworld_train.job.spec.Job`, from a job file with flags or from
  ``AgentTrainer(...)``; ``saved``: the job a run keeps as ``job.yaml``.
- ``config``: the engine-neutral keys, one section per engine, ``-o`` overrides; ``rules``: each
  key's rule; ``layout``: an engine's own config file read whole; ``strict``: an engine
  section's values checked against the engine's own types.
- ``settings``: the common settings' allowed values; ``declaration``: how an engine declares its
  own keys for them, once; ``common_keys``: carrying them onto an engine's keys;
  ``optional_packages``: what a setting needs installed.
- ``files``: the user's YAML and JSON read safely; ``references``: ``file.py:name``;
  ``spelling``: the did-you-means of misspelt names.
"""
