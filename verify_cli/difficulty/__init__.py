"""Difficulty: each task's pass rate under a model, with honest statistics, and the data set
re-bucketed by it. The ``verify-cli difficulty`` command is a thin layer over :func:`run_difficulty`.
"""
