"""A node's unmeasured-energy GPU-seconds split over its booked rows, by hand: rows with time but no joules first,
the rest by GPU time; the shares always sum to the node's count and never exceed a row's seconds."""

from __future__ import annotations

import pytest

from exporter.model.emissions import RowEnergy, split_unmeasured


def test_rows_without_joules_take_the_gap() -> None:
    """A holder with 3600 s and 0 J, an idle GPU with 3600 s and 360,000 J, 3600 s unmeasured: all on the holder."""
    assert split_unmeasured(3600.0, {"pod": RowEnergy(3600.0, 0.0), "idle": RowEnergy(3600.0, 360_000.0)}) == {
        "pod": 3600.0}


def test_a_whole_node_unmeasured_is_every_row() -> None:
    """Both GPUs dark (7200 s counted): 3600 s each."""
    assert split_unmeasured(7200.0, {"pod": RowEnergy(3600.0, 0.0), "idle": RowEnergy(3600.0, 0.0)}) == {
        "pod": 3600.0, "idle": 3600.0}


def test_dark_rows_holding_more_than_the_gap_are_scaled() -> None:
    """1800 s counted, two dark rows of 3600 s and 1200 s: 1800 / 4800 = 0.375 of each: 1350 and 450."""
    shares = split_unmeasured(1800.0, {"a": RowEnergy(3600.0, 0.0), "b": RowEnergy(1200.0, 0.0)})
    assert shares == {"a": pytest.approx(1350.0), "b": pytest.approx(450.0)}
    assert sum(shares.values()) == pytest.approx(1800.0)


def test_what_dark_rows_cannot_hold_goes_to_the_others_by_time() -> None:
    """A delta mixing measured and unmeasured ticks: 2700 s counted, one dark row of 900 s takes 900; the 1800 s
    left over the lit rows of 3600 s and 1200 s by time: 1800 x 3600 / 4800 = 1350 and 1800 x 1200 / 4800 = 450."""
    shares = split_unmeasured(2700.0, {"dark": RowEnergy(900.0, 0.0), "a": RowEnergy(3600.0, 5.0),
                                       "b": RowEnergy(1200.0, 5.0)})
    assert shares == {"dark": pytest.approx(900.0), "a": pytest.approx(1350.0), "b": pytest.approx(450.0)}
    assert sum(shares.values()) == pytest.approx(2700.0)


def test_nothing_counted_or_no_time_gives_nothing() -> None:
    """No gap: nothing; a row with no time (energy only) takes none."""
    assert split_unmeasured(0.0, {"a": RowEnergy(3600.0, 0.0)}) == {}
    assert split_unmeasured(100.0, {"a": RowEnergy(0.0, 10.0), "b": RowEnergy(0.0, 0.0)}) == {}
    assert split_unmeasured(100.0, {}) == {}


def test_fractions_of_a_second_and_of_a_joule_count() -> None:
    """Half a second dark, half a second lit with half a joule, 0.75 s unmeasured: the dark row takes its 0.5 s,
    the lit one the 0.25 s left; a row with joules but no seconds takes nothing and is left out. A gap larger
    than every row gives each row at most its own seconds."""
    rows = {"d": RowEnergy(0.5, 0.0), "l": RowEnergy(0.5, 0.5), "z": RowEnergy(0.0, 5.0)}
    assert split_unmeasured(0.75, rows) == {"d": 0.5, "l": 0.25}
    assert split_unmeasured(10.0, rows) == {"d": 0.5, "l": 0.5}
