"""The user's rows: loaded into one ``datasets.Dataset`` (``loading``), each row checked and
made canonical (``rows``)."""
