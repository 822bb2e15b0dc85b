"""Plan mode: the agent plans without acting until the user approves its plan."""
