"""Holding at its edges: windows that do not meet, resources that are no GPU or an unreadable MIG profile, and
capacity shared out over several models (homeless holders, oversubscription beside free capacity)."""

from __future__ import annotations

import pytest

from exporter.model.holding import FreeCapacity, Window, free_capacity, request_fraction


def test_overlap_of_intervals_that_do_not_meet_is_zero_and_half_seconds_count() -> None:
    w = Window(100.0, 200.0)
    assert w.overlap(300.0, 400.0) == 0.0
    assert w.overlap(None, 50.0) == 0.0
    assert w.overlap(199.5, None) == 0.5


def test_other_resources_and_unreadable_profiles_are_one_device() -> None:
    assert request_fraction("amd.com/gpu", model=None, replicas=4) == 1.0
    assert request_fraction("nvidia.com/mig-weird", model="NVIDIA A100-SXM4-80GB", replicas=1) == 1.0
    assert request_fraction("nvidia.com/mig-3g.40gb", model="NVIDIA A100-SXM4-80GB", replicas=1) == pytest.approx(3 / 7)


def test_homeless_holders_take_free_time_model_after_model() -> None:
    """Models A and B, one GPU each, 100 s: A held 50 s, an unknown model 80 s. The 80 s take A's free 50 s,
    then 30 of B's 100: A 0, B 70, nothing oversubscribed."""
    assert free_capacity({"B": 1, "A": 1}, {"A": 50.0, "X": 80.0}, seconds=100.0) == FreeCapacity(
        {"A": 0.0, "B": 70.0}, 0.0)


def test_oversubscription_of_one_model_beside_another_models_free_time() -> None:
    """A held 150 s of its 100, B idle: B's 100 s are free, and 150 + 100 - 200 = 50 s are oversubscribed."""
    assert free_capacity({"A": 1, "B": 1}, {"A": 150.0}, seconds=100.0) == FreeCapacity({"A": 0.0, "B": 100.0}, 50.0)
