"""Agents and the agent loop. Plugins reach the public parts (model selection among them) through
``pydsh.plugin``."""
