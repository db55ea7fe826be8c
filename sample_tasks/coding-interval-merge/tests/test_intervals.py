import pytest

from intervals import merge_intervals


def test_empty_input_gives_empty_list():
    assert merge_intervals([]) == []


def test_unsorted_overlapping_and_disjoint():
    assert merge_intervals([(5, 8), (1, 3), (2, 4)]) == [(1, 4), (5, 8)]


def test_touching_intervals_merge_but_gaps_do_not():
    assert merge_intervals([(1, 3), (3, 5)]) == [(1, 5)]
    assert merge_intervals([(3, 4), (1, 2)]) == [(1, 2), (3, 4)]


def test_contained_interval_keeps_outer_end():
    assert merge_intervals([(1, 10), (2, 3), (4, 12), (14, 14)]) == [(1, 12), (14, 14)]
    assert merge_intervals([(0, 0), (0, 0), (-3, -1)]) == [(-3, -1), (0, 0)]


def test_input_is_not_modified_and_result_is_tuples():
    data = [[4, 6], [1, 2]]
    result = merge_intervals(data)
    assert data == [[4, 6], [1, 2]]
    assert result == [(1, 2), (4, 6)]
    assert all(type(item) is tuple for item in result)


def test_start_greater_than_end_raises():
    with pytest.raises(ValueError):
        merge_intervals([(1, 2), (5, 4)])
    assert merge_intervals([(7, 7)]) == [(7, 7)]
