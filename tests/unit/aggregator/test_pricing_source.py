"""Pricing reloads on change without a restart; an invalid edit keeps the previous prices and is counted."""

from __future__ import annotations

import os
from pathlib import Path

from exporter.aggregator.pricing_source import PricingSource


def _write(path: Path, text: str, mtime: float) -> None:
    path.write_text(text)
    os.utime(path, (mtime, mtime))


def test_reload_valid_then_invalid(tmp_path: Path) -> None:
    """4.00 -> 5.00 is picked up; a broken edit keeps 5.00 and increments reload_errors."""
    path = tmp_path / "pricing.yaml"
    _write(path, 'default_price: 1\nmodels: {"NVIDIA H100 80GB HBM3": 4.0}\n', 1000)
    source = PricingSource(path)
    assert source.current.price("NVIDIA H100 80GB HBM3").per_gpu_hour == 4.0
    assert source.maybe_reload() is False  # unchanged
    _write(path, 'default_price: 1\nmodels: {"NVIDIA H100 80GB HBM3": 5.0}\n', 2000)
    assert source.maybe_reload() is True and source.reloads == 1
    assert source.current.price("NVIDIA H100 80GB HBM3").per_gpu_hour == 5.0
    _write(path, "default_price: -3\n", 3000)
    assert source.maybe_reload() is False and source.reload_errors == 1
    assert source.current.price("NVIDIA H100 80GB HBM3").per_gpu_hour == 5.0
