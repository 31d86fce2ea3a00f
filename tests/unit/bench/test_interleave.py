"""Old and new in ABBA order, the best run of each, and a run's steady tick."""

from __future__ import annotations

import pytest

from bench.interleave import abba, best, steady_tick


def test_abba_puts_each_side_first_and_last_equally_often() -> None:
    assert abba("old", "new", rounds=1) == ["old", "new", "new", "old"]
    order = abba("old", "new", rounds=2)
    assert order == ["old", "new", "new", "old", "old", "new", "new", "old"]
    assert order.count("old") == order.count("new") == 4


def test_abba_needs_a_round() -> None:
    with pytest.raises(ValueError, match="rounds"):
        abba("old", "new", rounds=0)


def test_best_is_the_least_disturbed_run() -> None:
    assert best([2.4, 1.9, 2.1]) == 1.9
    with pytest.raises(ValueError, match="no runs"):
        best([])


def test_the_steady_tick_leaves_out_the_first() -> None:
    """[9, 3, 1, 2]: the first (9) proves every node; the median of 3, 1, 2 is 2."""
    assert steady_tick([9.0, 3.0, 1.0, 2.0]) == 2.0


def test_the_steady_tick_of_an_even_count_is_the_mean_of_the_middle_two() -> None:
    """[9, 4, 1]: the median of 4 and 1 is (1 + 4) / 2 = 2.5."""
    assert steady_tick([9.0, 4.0, 1.0]) == 2.5


def test_a_single_tick_is_its_own_steady_tick() -> None:
    assert steady_tick([7.0]) == 7.0
    with pytest.raises(ValueError, match="no ticks"):
        steady_tick([])
