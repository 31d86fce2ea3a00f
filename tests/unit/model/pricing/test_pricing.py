"""The version-1 pricing lookup and its validation (one clear line naming the field)."""

from __future__ import annotations

import pytest

from exporter.model.pricing.document import PricingError, parse_pricing


def test_pricing_lookup() -> None:
    """Model price, default for unknown models (flagged), pool multiplier, MIG instance override."""
    p = parse_pricing("""
currency: EUR
default_price: 1.5
models: {"NVIDIA H100 80GB HBM3": 4.0, "NVIDIA A100-SXM4-80GB": 2.1}
mig_profiles: {"NVIDIA A100-SXM4-80GB": {"1g.10gb": 0.35}}
pools: {spot: 0.4}
""", "p.yaml")
    assert p.currency == "EUR"
    assert p.price("NVIDIA H100 80GB HBM3").per_gpu_hour == 4.0
    unknown = p.price("NVIDIA B200")
    assert (unknown.per_gpu_hour, unknown.known) == (1.5, False)
    assert p.price("NVIDIA H100 80GB HBM3", pool="spot").per_gpu_hour == pytest.approx(1.6)
    # 0.35 per 1g.10gb instance-hour = 0.35 / (1/7) = 2.45 per GPU-hour equivalent
    assert p.price("NVIDIA A100-SXM4-80GB", "1g.10gb").per_gpu_hour == pytest.approx(2.45)
    assert p.price("NVIDIA A100-SXM4-80GB", "3g.40gb").per_gpu_hour == 2.1


@pytest.mark.parametrize(("text", "message"), [
    ("currency: USD\n", "p.yaml: field default_price: Field required"),
    ("default_price: 0\n", "p.yaml: field default_price: Input should be greater than 0"),
    ("default_price: 1\nmodels: {A: -3}\n", "p.yaml: field models:"),
    ("default_price: 1\nmodles: {}\n", "p.yaml: field modles: Extra inputs are not permitted"),
    ("default_price: 1\nmig_profiles: {A: {banana: 1}}\n", "not a MIG profile"),
    ("[1, 2]\n", "p.yaml: expected a mapping"),
    ("a: [\n", "p.yaml: not valid YAML/JSON"),
])
def test_invalid_pricing(text: str, message: str) -> None:
    """Every invalid pricing document names the file and field."""
    with pytest.raises(PricingError, match=message.replace("[", r"\[")):
        parse_pricing(text, "p.yaml")
