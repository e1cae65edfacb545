"""The job as the user gives it: one :class:`~aworld_train.job.spec.Job` (``spec``), the user's
files read safely (``files``), ``file.py:name`` references (``references``), the job a run
saves (``saved``), and the did-you-means of misspelt names (``spelling``)."""
