"""MCP resources: what configured MCP servers publish, listed and read by the model through three shared tools."""
