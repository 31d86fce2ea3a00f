"""The accounting arithmetic (charges, utilization clamp, counter deltas, cost), with hand-computed answers."""

from __future__ import annotations

import math

import pytest

from exporter.model.accounting import (
    Holding,
    Reading,
    Usage,
    charge_exclusive,
    charge_shared,
    clamp_utilization,
    cost_of,
    counter_delta,
)


def test_charge_exclusive_whole_and_mig() -> None:
    """Whole GPU, 15 s at 40 %: 15 allocated, 6 used. MIG 3/7 for 70 s at 50 %: 30 allocated, 15 used."""
    u = charge_exclusive(1.0, 15.0, reading=Reading(0.4))
    assert (u.allocated, u.used, u.unmeasured, u.idle) == pytest.approx((15.0, 6.0, 0.0, 9.0))
    m = charge_exclusive(3 / 7, 70.0, reading=Reading(0.5))
    assert (m.allocated, m.used) == pytest.approx((30.0, 15.0))


def test_charge_without_reading_is_unmeasured_not_idle() -> None:
    """No utilisation reading: allocated and unmeasured, never used and never idle."""
    u = charge_exclusive(1.0, 15.0, reading=Reading(None))
    assert (u.allocated, u.used, u.unmeasured, u.idle) == (15.0, 0.0, 15.0, 0.0)


def test_charge_shared_splits_busy_time_by_fraction_with_cap() -> None:
    """4 replicas; A holds 1 (1/4), B holds 2 (2/4); 60 s at device util 0.6.

    busy = 36 GPU-s, split by fraction: A 36 x (1/4)/(3/4) = 12 -> capped at its 15 allocated -> 12;
    B 36 x (2/4)/(3/4) = 24, allocated 30 -> 24.
    """
    out = charge_shared([Holding("A", 0.25), Holding("B", 0.5)], 60.0, reading=Reading(0.6))
    assert out["A"].allocated == pytest.approx(15.0)
    assert out["A"].used == pytest.approx(12.0)
    assert out["B"].allocated == pytest.approx(30.0)
    assert out["B"].used == pytest.approx(24.0)


def test_charge_shared_never_gives_more_than_allocated() -> None:
    """Two 1/4 holders on a saturated GPU (util 1.0): busy 60 GPU-s, each gets 30 but is capped at 15."""
    out = charge_shared([Holding("A", 0.25), Holding("B", 0.25)], 60.0, reading=Reading(1.0))
    assert out["A"].used == pytest.approx(15.0)
    assert out["B"].used == pytest.approx(15.0)


def test_clamp_utilization() -> None:
    """Out-of-range readings are clamped and flagged; NaN and inf are dropped and flagged."""
    assert clamp_utilization(1.5) == (1.0, True)
    assert clamp_utilization(-0.2) == (0.0, True)
    assert clamp_utilization(math.nan) == (None, True)
    assert clamp_utilization(math.inf) == (None, True)
    assert clamp_utilization(0.3) == (0.3, False)
    assert clamp_utilization(None) == (None, False)


def test_counter_delta_normal_reset_and_epoch() -> None:
    """Increases give deltas; any decrease or a new epoch is a reset that counts the whole value."""
    d, reset = counter_delta(Usage(100, 40, 10, 5), Usage(130, 50, 10, 7), same_epoch=True)
    assert (d.allocated, d.used, d.unmeasured, d.energy_j, reset) == (30, 10, 0, 2, False)
    d, reset = counter_delta(Usage(100, 40, 10), Usage(20, 5, 0), same_epoch=True)
    assert (d.allocated, d.used, reset) == (20, 5, True)
    d, reset = counter_delta(Usage(100, 40, 10), Usage(150, 60, 10), same_epoch=False)
    assert (d.allocated, reset) == (150, True)
    d, reset = counter_delta(None, Usage(15, 3, 0), same_epoch=True)
    assert (d.allocated, reset) == (15, False)


def test_cost() -> None:
    """5400 GPU-s at 4.00 per GPU-hour = 1.5 h x 4 = 6.00."""
    assert cost_of(5400, 4.0) == pytest.approx(6.0)
