"""Starting the processes that train and ending them: the launcher (``launcher``), worker
processes (``workers``), the agent and its tools sent to other processes (``shipping``), and
the thread policy every training process gets (``threads``)."""
