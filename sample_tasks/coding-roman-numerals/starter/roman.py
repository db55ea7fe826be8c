"""Roman numeral conversion."""


def to_roman(n):
    """Canonical Roman numeral for 1 <= n <= 3999. See prompt.md."""
    raise NotImplementedError


def from_roman(s):
    """Value of a canonical Roman numeral; ValueError for anything else. See prompt.md."""
    raise NotImplementedError
