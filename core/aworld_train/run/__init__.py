"""A run and what it leaves: its directory and manifest (``directory``, ``manifest``, ``files``),
what it logs while it trains (``metrics``, ``samples``, ``trackers``), what is drawn from it
(``plots``), how an exception inside the engine ends it (``failure``), resuming it
(``resume``), the note that says how its last checkpoint converts into a model where it does
not load as it is (``export``), and the one rule that keeps secrets out of all of it
(``redaction``)."""
