"""Roman numeral conversion."""

_VALUES = [
    (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"),
    (100, "C"), (90, "XC"), (50, "L"), (40, "XL"),
    (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"),
]
_DIGITS = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}


def to_roman(n):
    """Canonical Roman numeral for 1 <= n <= 3999. See prompt.md."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"expected an int, got {type(n).__name__}")
    if not 1 <= n <= 3999:
        raise ValueError(f"{n} is outside 1..3999")
    parts = []
    for value, letters in _VALUES:
        count, n = divmod(n, value)
        parts.append(letters * count)
    return "".join(parts)


def from_roman(s):
    """Value of a canonical Roman numeral; ValueError for anything else. See prompt.md."""
    if not isinstance(s, str):
        raise TypeError(f"expected a str, got {type(s).__name__}")
    if not s or any(ch not in _DIGITS for ch in s):
        raise ValueError(f"not a Roman numeral: {s!r}")
    total = 0
    for i, ch in enumerate(s):
        value = _DIGITS[ch]
        if i + 1 < len(s) and value < _DIGITS[s[i + 1]]:
            total -= value
        else:
            total += value
    # to_roman raises ValueError itself for a total outside 1..3999 (e.g. 'MMMM').
    if to_roman(total) != s:
        raise ValueError(f"not a canonical Roman numeral: {s!r}")
    return total
