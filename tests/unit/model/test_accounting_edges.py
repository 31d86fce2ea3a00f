"""The accounting arithmetic at its edges, one field at a time: what a mutation run found no test looking at
(energy on every path, unmeasured time on shared GPUs, each counter's own reset, the clamp's bounds)."""

from __future__ import annotations

import pytest

from exporter.model.accounting import (
    Holding,
    Reading,
    Usage,
    charge_exclusive,
    charge_shared,
    clamp_utilization,
    counter_delta,
)


def test_usage_add_sums_every_field() -> None:
    u = Usage(1.0, 2.0, 3.0, 4.0)
    u.add(Usage(10.0, 20.0, 30.0, 40.0))
    assert u.as_tuple() == (11.0, 22.0, 33.0, 44.0)


def test_clamp_keeps_the_bounds_themselves() -> None:
    """0 and 1 are readings, not out of range: not flagged."""
    assert clamp_utilization(0.0) == (0.0, False)
    assert clamp_utilization(1.0) == (1.0, False)


def test_exclusive_charge_carries_the_energy_with_or_without_a_reading() -> None:
    measured = charge_exclusive(1.0, 15.0, reading=Reading(0.5, energy_delta_j=900.0))
    assert measured.as_tuple() == (15.0, 7.5, 0.0, 900.0)
    unmeasured = charge_exclusive(0.5, 10.0, reading=Reading(None, energy_delta_j=300.0))
    assert unmeasured.as_tuple() == (5.0, 0.0, 5.0, 300.0)


def test_shared_charge_without_a_reading_is_unmeasured_and_splits_energy_by_fraction() -> None:
    """Two 1/4 holders, 60 s, no utilisation, 1000 J: each 15 allocated and unmeasured, 250 J (energy is
    split by the whole GPU's fraction, so half the GPU unheld keeps half the joules out)."""
    out = charge_shared([Holding("A", 0.25), Holding("B", 0.25)], 60.0, reading=Reading(None, energy_delta_j=1000.0))
    assert out["A"].as_tuple() == (15.0, 0.0, 15.0, 250.0)
    assert out["B"].as_tuple() == (15.0, 0.0, 15.0, 250.0)


def test_shared_charge_over_a_whole_gpu_splits_energy_by_total_fraction() -> None:
    """Holders summing past one GPU (1.5) share all the energy by fraction of that total."""
    out = charge_shared([Holding("A", 1.0), Holding("B", 0.5)], 10.0, reading=Reading(0.3, energy_delta_j=600.0))
    assert out["A"].energy_j == pytest.approx(400.0) and out["B"].energy_j == pytest.approx(200.0)
    assert out["A"].used == pytest.approx(2.0) and out["B"].used == pytest.approx(1.0)


def test_shared_charge_of_a_holder_listed_twice_adds_up() -> None:
    out = charge_shared([Holding("A", 0.25), Holding("A", 0.25)], 60.0, reading=Reading(None))
    assert out["A"].as_tuple() == (30.0, 0.0, 30.0, 0.0)


def test_no_fraction_no_charge() -> None:
    assert charge_shared([Holding("A", 0.0)], 60.0, reading=Reading(0.5)) == {}
    assert charge_shared([], 60.0, reading=Reading(0.5)) == {}


@pytest.mark.parametrize("field", ["allocated", "used", "unmeasured"])
def test_any_one_counter_going_back_is_a_reset(field: str) -> None:
    prev = Usage(100.0, 40.0, 10.0, 5.0)
    cur = Usage(120.0, 50.0, 20.0, 9.0)
    setattr(cur, field, getattr(prev, field) - 1.0)
    d, reset = counter_delta(prev, cur, same_epoch=True)
    assert reset
    assert d.as_tuple() == cur.as_tuple()


def test_a_counter_that_did_not_move_is_no_reset() -> None:
    d, reset = counter_delta(Usage(100.0, 40.0, 10.0, 5.0), Usage(100.0, 40.0, 10.0, 5.0), same_epoch=True)
    assert (d.as_tuple(), reset) == ((0.0, 0.0, 0.0, 0.0), False)


def test_energy_alone_going_back_counts_its_whole_value() -> None:
    """A driver reload resets the energy counter only: the seconds are deltas, the energy its new value."""
    d, reset = counter_delta(Usage(100.0, 40.0, 10.0, 500.0), Usage(110.0, 45.0, 10.0, 30.0), same_epoch=True)
    assert (d.as_tuple(), reset) == ((10.0, 5.0, 0.0, 30.0), False)
    d, _ = counter_delta(Usage(100.0, 40.0, 10.0, 500.0), Usage(110.0, 45.0, 10.0, 500.5), same_epoch=True)
    assert d.energy_j == pytest.approx(0.5)


def test_a_reset_counts_every_field_whole() -> None:
    d, reset = counter_delta(Usage(1.0, 1.0, 1.0, 1.0), Usage(7.0, 3.0, 2.0, 90.0), same_epoch=False)
    assert (d.as_tuple(), reset) == ((7.0, 3.0, 2.0, 90.0), True)


def test_split_advances_and_resets_like_the_others() -> None:
    """Split 4 -> 10 while held 100 -> 120: a delta of 6 split of 20 held; split 10 -> 9 is a reset (the whole 9)."""
    d, reset = counter_delta(Usage(100.0, 40.0, 0.0, 0.0, split=4.0), Usage(120.0, 50.0, 0.0, 0.0, split=10.0),
                             same_epoch=True)
    assert (d.allocated, d.split, reset) == (20.0, 6.0, False)
    d, reset = counter_delta(Usage(100.0, 40.0, 0.0, 0.0, split=10.0), Usage(120.0, 50.0, 0.0, 0.0, split=9.0),
                             same_epoch=True)
    assert (d.allocated, d.split, reset) == (120.0, 9.0, True)
