"""Starting the processes that train and ending them: the launcher (``launcher``), worker
processes (``workers``), the user's code run in a forked child (``isolation``), the agent and
its tools sent to other processes (``shipping``), the thread policy (``threads``), other
libraries' logging kept quiet (``quiet``), and how an engine's exception ends ``train``
(``failure``)."""
