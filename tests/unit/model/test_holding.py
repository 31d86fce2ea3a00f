"""Request fractions and free capacity: the holding arithmetic the meter books from, by hand."""

from __future__ import annotations

import pytest

from exporter.model.holding import free_capacity, request_fraction

H100 = "NVIDIA H100 80GB HBM3"


def test_request_fractions() -> None:
    """Whole GPU 1; MIG 3g.40gb on an H100 3/7, 2g.12gb on an A30 2/4; a replica of 4 1/4."""
    assert request_fraction("nvidia.com/gpu", model=H100, replicas=1) == 1.0
    assert request_fraction("nvidia.com/mig-3g.40gb", model=H100, replicas=1) == pytest.approx(3 / 7)
    assert request_fraction("nvidia.com/mig-2g.12gb", model="NVIDIA A30", replicas=1) == pytest.approx(2 / 4)
    assert request_fraction("nvidia.com/gpu.shared", model=H100, replicas=4) == 0.25


def test_free_capacity_edge_cases() -> None:
    """8 GPUs x 10 s = 80. Held 30 of H100 + 20 of an unknown model: unallocated 80 - 30 - 20 = 30.
    Held 100 > 80: unallocated 0, oversubscribed 20 (30 + 0 ... = 100 - 80), identity kept:
    held + unallocated - oversubscribed = 80."""
    f = free_capacity({H100: 8.0}, {H100: 30.0, "unknown": 20.0}, seconds=10.0)
    assert f.unallocated == {H100: pytest.approx(30.0)} and f.oversubscribed == 0.0
    f = free_capacity({H100: 8.0}, {H100: 70.0, "unknown": 30.0}, seconds=10.0)
    assert f.unallocated == {H100: 0.0} and f.oversubscribed == pytest.approx(20.0)
    assert 100.0 + 0.0 - f.oversubscribed == pytest.approx(80.0)
