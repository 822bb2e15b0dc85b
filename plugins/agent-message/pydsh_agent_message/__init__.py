"""pydsh-agent-message: cross-session messaging between the root sessions of one pydsh process (spec 09)."""
