"""Invalid version-2 pricing documents: one line naming file and field; a running daemon keeps the last good one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from exporter.aggregator.pricing_source import PricingSource, load_pricing_file
from exporter.cli import main
from exporter.model.pricing import PricingError, parse_pricing

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "pricing_v2_example.yaml"
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


def test_aggregator_exits_2_on_an_invalid_version_2_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI refuses a bad commitment at start: exit 2, one stderr line with file and field, no ledger."""
    bad = tmp_path / "pricing.yaml"
    bad.write_text(HEAD + _commitment(gpus="0"))
    assert main(["aggregator", "--pricing-file", str(bad), "--ledger", str(tmp_path / "l.db")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{bad}: field commitments[0].gpus:" in err[0]
    assert not (tmp_path / "l.db").exists()


def _write(path: Path, text: str, mtime: float) -> None:
    path.write_text(text)
    os.utime(path, (mtime, mtime))


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
