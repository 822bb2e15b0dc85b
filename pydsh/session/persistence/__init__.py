"""session/persistence"""
