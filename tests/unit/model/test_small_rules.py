"""Small rules at their edges: budget amounts from labels, GPU slice counts, HAMi device IDs, adding split
seconds."""

from __future__ import annotations

from decimal import Decimal

from exporter.model.accounting import Usage
from exporter.model.budget_values import parse_budget
from exporter.model.devices import gpu_slices, hami_device_gpu

UUID = "GPU-12345678-abcd-ef01-2345-6789abcdef01"


def test_budget_amounts() -> None:
    """Below one is still an amount; a number too large for a float, or a value of another type, is none."""
    assert parse_budget("0.5") == 0.5
    assert parse_budget(" 12 ") == 12.0
    assert parse_budget("1e400") is None
    assert parse_budget(Decimal("5")) is None
    assert parse_budget(True) is None


def test_slices_come_from_the_model_when_it_is_known() -> None:
    """Without model or profile: 7. A known model decides, whatever the profile says; only without a model
    does an A30-only profile mean 4."""
    assert gpu_slices(None) == 7
    assert gpu_slices(None, "1g.10gb") == 7
    assert gpu_slices(None, "1g.6gb") == 4
    assert gpu_slices("NVIDIA H100 80GB HBM3", "1g.6gb") == 7


def test_hami_device_ids() -> None:
    assert hami_device_gpu(f"{UUID}-3") == UUID
    assert hami_device_gpu(f"{UUID}-x") is None
    assert hami_device_gpu(UUID) is None


def test_adding_usage_adds_split_seconds() -> None:
    total = Usage(allocated=10.0, split=2.0)
    total.add(Usage(allocated=5.0, split=3.0))
    assert total.split == 5.0
