"""pydsh-team-models: per-teammate model selection for Agent Teams (spec 08 Part B)."""
