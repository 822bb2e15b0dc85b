"""``pydsh batch``: many agent tasks, each its own root session, on this machine or a Ray cluster.

See ``README.md`` beside this file; the command line is :mod:`pydsh.batch.cli`, one task's life is
:mod:`pydsh.batch.worker`, and the shared rate-limit pause is the ``batch-route-gate`` plugin
(:mod:`pydsh.batch.gate`).
"""
