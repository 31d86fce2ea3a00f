"""Pricing reloads on change without a restart; an invalid edit keeps the previous prices and is counted."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from exporter.aggregator.books.pricing_source import PricingSource, load_pricing_file
from exporter.model.pricing.document import PricingError
from tests.unit.model.pricing.test_pricing_schema import HEAD, _commitment


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


def test_a_directory_of_dated_documents(tmp_path: Path) -> None:
    """Files in a directory are the versions; a clash names the later file; hidden entries are skipped."""
    (tmp_path / "prices").mkdir()
    _write(tmp_path / "prices" / "2026-11.yaml", 'default_price: 1\nmodels: {A: 4.0}\n'
           'effective_from: "2026-11-01T00:00:00Z"\n', 1000)
    _write(tmp_path / "prices" / "2026-12.json", '{"default_price": 1, "models": {"A": 3.0}, '
           '"effective_from": "2026-12-01T00:00:00Z"}', 1000)
    _write(tmp_path / "prices" / ".hidden.yaml", "not: [valid\n", 1000)
    _write(tmp_path / "prices" / "README.txt", "notes\n", 1000)
    p = load_pricing_file(tmp_path / "prices")
    assert [pl.doc.models["A"] for pl in p.book.lists] == [4.0, 3.0]
    _write(tmp_path / "prices" / "2026-13.yaml", 'default_price: 1\neffective_from: "2026-12-01T00:00:00Z"\n', 1000)
    with pytest.raises(PricingError, match=r"2026-13\.yaml: field effective_from: .* already taken by .*2026-12\.json"):
        load_pricing_file(tmp_path / "prices")
    (tmp_path / "empty").mkdir()
    with pytest.raises(PricingError, match="no pricing documents"):
        load_pricing_file(tmp_path / "empty")


def test_reload_keeps_the_last_good_version_2_document(tmp_path: Path) -> None:
    """A valid v2 edit is picked up; a bad commitment is refused, counted, and the previous prices stay."""
    path = tmp_path / "pricing.yaml"
    _write(path, HEAD, 1000)
    source = PricingSource(path)
    _write(path, HEAD + 'instance_types: {p5.48xlarge: {gpus: 8, hourly: 55.04}}\n', 2000)
    assert source.maybe_reload() is True
    assert source.current.doc.instance_types["p5.48xlarge"].hourly == 55.04
    _write(path, HEAD + _commitment(gpus="0"), 3000)
    assert source.maybe_reload() is False and source.reload_errors == 1
    assert source.current.doc.instance_types["p5.48xlarge"].hourly == 55.04


def test_reload_watches_every_file_of_a_directory(tmp_path: Path) -> None:
    """Editing one file of a pricing directory reloads the whole set."""
    _write(tmp_path / "a.yaml", 'default_price: 1\nmodels: {A: 4.0}\neffective_from: "2026-11-01T00:00:00Z"\n', 1000)
    source = PricingSource(tmp_path)
    assert source.maybe_reload() is False
    _write(tmp_path / "b.yaml", 'default_price: 1\nmodels: {A: 3.0}\neffective_from: "2026-12-01T00:00:00Z"\n', 1000)
    assert source.maybe_reload() is True and len(source.current.book.lists) == 2
    _write(tmp_path / "b.yaml", 'default_price: 1\nmodels: {A: 2.0}\neffective_from: "2026-12-01T00:00:00Z"\n', 2000)
    assert source.maybe_reload() is True and source.current.doc.models["A"] == 2.0
