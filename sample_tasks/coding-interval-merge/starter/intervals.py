"""Merge closed integer intervals."""


def merge_intervals(intervals):
    """Return the sorted list of merged (start, end) tuples. See prompt.md."""
    raise NotImplementedError
