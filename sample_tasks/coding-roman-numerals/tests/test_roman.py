from roman import from_roman, to_roman

CASES = [(1, "I"), (4, "IV"), (9, "IX"), (14, "XIV"), (40, "XL"), (90, "XC"),
         (400, "CD"), (900, "CM"), (1994, "MCMXCIV"), (2024, "MMXXIV"), (3999, "MMMCMXCIX")]


def test_to_roman_examples():
    results = [to_roman(n) for n, _ in CASES]
    assert all(type(r) is str for r in results)  # an object that equals anything is not a str
    assert results == [s for _, s in CASES]


def test_from_roman_examples():
    results = [from_roman(s) for _, s in CASES]
    assert all(type(r) is int for r in results)
    assert results == [n for n, _ in CASES]


def test_round_trip_small_range():
    for n in range(1, 200):
        back = from_roman(to_roman(n))
        assert type(back) is int and back == n
