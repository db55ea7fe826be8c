import pytest

from roman import from_roman, to_roman


def test_range_bounds():
    assert to_roman(1) == "I"
    assert to_roman(3999) == "MMMCMXCIX"
    for bad in (0, -1, 4000):
        with pytest.raises(ValueError):
            to_roman(bad)


def test_to_roman_rejects_non_int():
    for bad in (True, 5.0, "5", None):
        with pytest.raises(TypeError):
            to_roman(bad)


def test_from_roman_rejects_non_canonical():
    for bad in ("IIII", "VV", "IC", "IL", "VX", "XM", "MMMM", "IIV", "XXL", "CMC", "DD"):
        with pytest.raises(ValueError):
            from_roman(bad)


def test_from_roman_rejects_bad_characters():
    for bad in ("", "iv", "X I", "XIZ", " X"):
        with pytest.raises(ValueError):
            from_roman(bad)
    with pytest.raises(TypeError):
        from_roman(4)


def test_full_round_trip():
    back = {n: from_roman(to_roman(n)) for n in range(1, 4000)}
    wrong = [n for n, m in back.items() if type(m) is not int or m != n]
    # A short message: pytest's diff of two 3999-item lists takes longer than the time limit.
    assert not wrong, f"{len(wrong)} numbers do not round-trip, e.g. {wrong[:5]}"
