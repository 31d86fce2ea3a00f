"""Invalid version-2 pricing documents: one line naming file and field; the design's example is valid."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.model.pricing.document import PricingError, parse_pricing

FIXTURE = Path(__file__).resolve().parents[3] / "fixtures" / "pricing_v2_example.yaml"
H100 = "NVIDIA H100 80GB HBM3"
HEAD = 'default_price: 1.0\nmodels: {"NVIDIA H100 80GB HBM3": 4.0}\n'
TERM = 'start: "2026-01-01T00:00:00Z", end: "2027-01-01T00:00:00Z"'


def _commitment(**fields: str) -> str:
    body = {"name": "c", "model": f'"{H100}"', "gpus": "8", "hourly": "2.1", "start": '"2026-01-01T00:00:00Z"',
            "end": '"2027-01-01T00:00:00Z"'} | fields
    return "commitments:\n  - {" + ", ".join(f"{k}: {v}" for k, v in body.items()) + "}\n"


ON_PREM = "on_prem:\n  - {model: M, capex_per_gpu: 17520, years: 4, energy_price_kwh: 0.12, pue: 1.5}\n"


def _version(models: str, when: str, currency: str = "USD") -> str:
    return f"  - {{currency: {currency}, default_price: 1.0, models: {models}, effective_from: \"{when}\"}}\n"


BAD = [
    (HEAD + _commitment(gpus="0"), "commitments[0].gpus", "greater than or equal to 1"),
    (HEAD + _commitment(gpus="2.5"), "commitments[0].gpus", "valid integer"),
    (HEAD + _commitment(hourly="0"), "commitments[0].hourly", "greater than 0"),
    (HEAD + _commitment(end='"2025-12-31T00:00:00Z"'), "commitments[0].end", "must be after start"),
    (HEAD + _commitment(start='"2026-01-01T00:00:00"'), "commitments[0].start", "timezone"),
    (HEAD + _commitment(price="2.1"), "commitments[0].price", "Extra inputs are not permitted"),
    (HEAD + _commitment() + f'  - {{name: c, model: M, gpus: 1, hourly: 1, {TERM}}}\n',
     "commitments[1].name", "duplicate commitment name 'c'"),
    (HEAD + _commitment(model="M") + ON_PREM, "commitments[0].model", "also under on_prem"),
    (HEAD + ON_PREM.replace("pue: 1.5", "pue: 0.9"), "on_prem[0].pue", "greater than or equal to 1"),
    (HEAD + ON_PREM.replace("years: 4", "years: 0"), "on_prem[0].years", "greater than 0"),
    (HEAD + ON_PREM.replace("energy_price_kwh: 0.12", "energy_price_kwh: -0.1"), "on_prem[0].energy_price_kwh",
     "greater than or equal to 0"),
    (HEAD + ON_PREM.replace("capex_per_gpu: 17520", "capex_per_gpu: .inf"), "on_prem[0].capex_per_gpu", "finite"),
    (HEAD + ON_PREM + "  - {model: M, capex_per_gpu: 1, years: 1, energy_price_kwh: 0, pue: 1}\n",
     "on_prem[1].model", "duplicate on_prem model 'M'"),
    (HEAD + "instance_types: {p5.48xlarge: {gpus: 0, hourly: 55.04}}\n", "instance_types['p5.48xlarge'].gpus",
     "greater than or equal to 1"),
    (HEAD + "instance_types: {p5.48xlarge: {gpus: 8}}\n", "instance_types['p5.48xlarge'].hourly", "Field required"),
    (HEAD + "capacity_types: {preemptible: 0.3}\n", "capacity_types.preemptible", "'spot'"),
    (HEAD + "capacity_types: {spot: 0}\n", "capacity_types.spot", "greater than 0"),
    (HEAD + "capacity_types: {spot: 0.35}\npools: {batch: 0}\n", "pools.batch", "must be > 0 in a version-2"),
    ('default_price: 1.0\nmodels: {"NVIDIA H100 80GB HBM3": 0}\neffective_from: "2026-12-01T00:00:00Z"\n',
     "models['NVIDIA H100 80GB HBM3']", "must be > 0 in a version-2"),
    (HEAD + "effective_from: next tuesday\n", "effective_from", "datetime"),
    ("versions:\n" + _version("{A: 1}", "2026-11-01T00:00:00Z") + "  - {default_price: 1.0}\n",
     "versions[1].effective_from", "required when several pricing documents are kept"),
    ("versions:\n" + _version("{A: 1}", "2026-11-01T00:00:00Z") + _version("{A: 2}", "2026-11-01T00:00:00+00:00"),
     "versions[1].effective_from", "already taken by p.yaml versions[0]"),
    ("versions:\n" + _version("{A: 1}", "2026-11-01T00:00:00Z") + _version("{A: 2}", "2026-12-01T00:00:00Z", "EUR"),
     "versions[1].currency", "'EUR' differs from 'USD'"),
    ("versions:\n" + _version("{A: 1}", "2026-11-01T00:00:00Z")
     + f'  - {{default_price: 1, effective_from: "2026-12-01T00:00:00Z", commitments: [{{name: c, model: A, '
       f'gpus: 0, hourly: 1, {TERM}}}]}}\n', "versions[1].commitments[0].gpus", "greater than or equal to 1"),
    ("currency: USD\nversions:\n" + _version("{A: 1}", "2026-11-01T00:00:00Z"), "currency",
     "not allowed beside versions"),
    ("versions: []\n", "versions", "non-empty list"),
    ("versions: [3]\n", "versions[0]", "expected a mapping"),
]


@pytest.mark.parametrize(("text", "field", "message"), BAD, ids=[f"{i}-{b[1]}" for i, b in enumerate(BAD)])
def test_every_error_names_file_and_field(text: str, field: str, message: str) -> None:
    """Each bad document fails with one line: ``p.yaml: field <path>: <why>``."""
    with pytest.raises(PricingError) as info:
        parse_pricing(text, "p.yaml")
    line = str(info.value)
    assert "\n" not in line
    assert line.startswith(f"p.yaml: field {field}: "), line
    assert message in line, line


def test_the_design_example_is_valid() -> None:
    """The example document of the pricing design loads as it is written."""
    p = parse_pricing(FIXTURE.read_text(), "pricing.yaml")
    assert p.doc.is_v2 and [c.name for c in p.doc.commitments] == ["h100-1yr"]
