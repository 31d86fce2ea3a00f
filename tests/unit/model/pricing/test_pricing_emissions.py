"""The pricing file's ``emissions:`` section: bad values refused with one line naming file and field (exit 2 at the
aggregator's start), and the CO2e of a joule by hand: grid or pool intensity, the section's PUE or owned GPUs' own."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.cli import main
from exporter.model.pricing.document import PricingError, parse_pricing
from exporter.model.pricing.labels import CapacityType, NodeFacts

A100 = "NVIDIA A100-SXM4-80GB"
H100 = "NVIDIA H100 80GB HBM3"
HEAD = "default_price: 1.0\n"
OWNED = f'on_prem: [{{model: "{A100}", capex_per_gpu: 17520, years: 4, energy_price_kwh: 0.12, pue: 1.5}}]\n'
SECTION = "emissions: {grid_g_per_kwh: 400, pue: 1.2, pools: {green: 25}}\n"

BAD = [
    ("emissions: {grid_g_per_kwh: -1}\n", "emissions.grid_g_per_kwh", "greater than or equal to 0"),
    ("emissions: {grid_g_per_kwh: .nan}\n", "emissions.grid_g_per_kwh", "finite"),
    ("emissions: {pue: 1.2}\n", "emissions.grid_g_per_kwh", "Field required"),
    ("emissions: {grid_g_per_kwh: 400, pue: 0.9}\n", "emissions.pue", "greater than or equal to 1"),
    ("emissions: {grid_g_per_kwh: 400, pools: {green: -5}}\n", "emissions.pools.green", "greater than or equal to 0"),
    ("emissions: {grid_g_per_kwh: 400, scope: 2}\n", "emissions.scope", "Extra inputs are not permitted"),
    ("emissions: 400\n", "emissions", "valid dictionary"),
]


@pytest.mark.parametrize(("text", "field", "message"), BAD, ids=[b[1] + "-" + str(i) for i, b in enumerate(BAD)])
def test_every_bad_value_names_file_and_field(text: str, field: str, message: str) -> None:
    """Each bad section fails with one line: ``p.yaml: field <path>: <why>``."""
    with pytest.raises(PricingError) as info:
        parse_pricing(HEAD + text, "p.yaml")
    line = str(info.value)
    assert "\n" not in line and line.startswith(f"p.yaml: field {field}: "), line
    assert message in line, line


def test_the_aggregator_exits_2_on_a_bad_emissions_section(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """At start: one stderr line naming the file and ``emissions.pue``, exit 2, no ledger."""
    bad = tmp_path / "pricing.yaml"
    bad.write_text(HEAD + "emissions: {grid_g_per_kwh: 400, pue: 0.5}\n")
    assert main(["aggregator", "--pricing-file", str(bad), "--ledger", str(tmp_path / "l.db")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(bad) in err[0] and "emissions.pue" in err[0]
    assert not (tmp_path / "l.db").exists()


def _grams(text: str, model: str, *, pool: str | None = None, joules: float = 3.6e6) -> float | None:
    rate = parse_pricing(text, "p.yaml").rate(NodeFacts("n", model, capacity_type=CapacityType.ON_DEMAND, pool=pool),
                                              at=0.0)
    return rate.carbon.grams(joules) if rate.carbon is not None else None


def test_a_kwh_emits_intensity_times_pue() -> None:
    """1 kWh (3.6e6 J) on a rented H100: 1 x 1.2 x 400 = 480 g; in pool green 1 x 1.2 x 25 = 30 g; on an owned A100
    its site's PUE 1.5: 1 x 1.5 x 400 = 600 g; in an unlisted pool the grid's 480 g."""
    text = HEAD + OWNED + SECTION
    assert _grams(text, H100) == pytest.approx(480)
    assert _grams(text, H100, pool="green") == pytest.approx(30)
    assert _grams(text, H100, pool="batch") == pytest.approx(480)
    assert _grams(text, A100) == pytest.approx(600)
    assert _grams(text, A100, pool="green") == pytest.approx(1.5 * 25)


def test_pue_defaults_to_one_and_no_section_means_no_factor() -> None:
    """Without ``pue`` a kWh emits the intensity alone (400 g); without the section there is no factor at all."""
    assert _grams(HEAD + "emissions: {grid_g_per_kwh: 400}\n", H100) == pytest.approx(400)
    assert _grams(HEAD, H100) is None
    assert _grams(HEAD + OWNED, A100) is None
