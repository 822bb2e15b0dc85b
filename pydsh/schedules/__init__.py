"""Reminders: prompts delivered into a session at a time or on an interval (DeepSeek Harness's schedules)."""
