"""subagents"""
