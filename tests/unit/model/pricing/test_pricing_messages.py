"""A bad pricing file is refused with one line naming the file, the field and the reason: the whole line is
what an operator reads at start, so each is pinned word for word here (``test_pricing_schema`` checks that
every rule refuses; this checks what it says)."""

from __future__ import annotations

import pytest

from exporter.model.pricing.document import PricingError, build_pricing, parse_document, parse_pricing
from exporter.model.pricing.schema import field_path

A100 = "NVIDIA A100-SXM4-80GB"
V2 = 'effective_from: "2026-01-01T00:00:00Z"\n'
TERM = 'start: "2026-01-01T00:00:00Z", end: "2027-01-01T00:00:00Z"'

MESSAGES = [
    ("default_price: .inf\n", "field default_price: Value error, must be a finite number"),
    ("default_price: 1\nmodels: {A: -3}\n", "field models: Value error, 'A' must be a finite number >= 0, got -3.0"),
    ("default_price: 1\nmodels: {A: .nan}\n", "field models: Value error, 'A' must be a finite number >= 0, got nan"),
    ("default_price: 1\npools: {spot: .inf}\n",
     "field pools: Value error, 'spot' must be a finite number >= 0, got inf"),
    (f'default_price: 1\nmig_profiles: {{"{A100}": {{"1g.10gb": -1}}}}\n',
     f"field mig_profiles: Value error, '{A100}'/'1g.10gb' must be a finite number >= 0, got -1.0"),
    (f'default_price: 1\nmig_profiles: {{"{A100}": {{"1g.10gb": .inf}}}}\n',
     f"field mig_profiles: Value error, '{A100}'/'1g.10gb' must be a finite number >= 0, got inf"),
    ("default_price: 1\nmig_profiles: {A: {banana: 1}}\n",
     "field mig_profiles: Value error, not a MIG profile: 'banana'"),
    (f'default_price: 1\nmig_profiles: {{"{A100}": {{"1g.10gb": 0}}}}\n' + V2,
     f"field mig_profiles['{A100}']['1g.10gb']: must be > 0 in a version-2 document"),
    ("default_price: 1\nmodels: {A: 0}\n" + V2, "field models.A: must be > 0 in a version-2 document"),
    ("default_price: 1\npools: {b: 1, spot: 0}\n" + V2, "field pools.spot: must be > 0 in a version-2 document"),
    ('default_price: 1\ncommitments: [{name: c, model: M, gpus: 1, hourly: 1, start: "2026-01-01T00:00:00Z", '
     'end: "2026-01-01T00:00:00Z"}]\n', "field commitments[0].end: must be after start (2026-01-01T00:00:00+00:00)"),
    (f"default_price: 1\ncommitments: [{{name: c, model: M, gpus: 1, hourly: 1, {TERM}}}, "
     f"{{name: c, model: N, gpus: 1, hourly: 1, {TERM}}}]\n",
     "field commitments[1].name: duplicate commitment name 'c'"),
    (f"default_price: 1\ncommitments: [{{name: c, model: M, gpus: 1, hourly: 1, {TERM}}}]\n"
     "on_prem: [{model: M, capex_per_gpu: 1, years: 1, energy_price_kwh: 0, pue: 1}]\n",
     "field commitments[0].model: 'M' is also under on_prem: owned GPUs take no commitment"),
    ("default_price: 1\non_prem: [{model: M, capex_per_gpu: 1, years: 1, energy_price_kwh: 0, pue: 1}, "
     "{model: N, capex_per_gpu: 1, years: 1, energy_price_kwh: 0, pue: 1}, "
     "{model: M, capex_per_gpu: 1, years: 1, energy_price_kwh: 0, pue: 1}]\n",
     "field on_prem[2].model: duplicate on_prem model 'M'"),
    ('{"default_price": }', "not valid YAML/JSON: Expecting value: line 1 column 19 (char 18)"),
    ('  {"default_price": }', "not valid YAML/JSON: Expecting value: line 1 column 21 (char 20)"),
    ("a: [\n", "not valid YAML/JSON: while parsing a flow node"),
    ("[1, 2]\n", "expected a mapping at the top level"),
    ("b: 1\na: 2\nversions: []\n", "field a: not allowed beside versions (put it in each version)"),
    ("versions: []\n", "field versions: expected a non-empty list of pricing documents"),
    ("versions: {a: 1}\n", "field versions: expected a non-empty list of pricing documents"),
    ("versions: [{default_price: 1}, 3]\n", "field versions[1]: expected a mapping"),
    ('versions:\n  - {default_price: 1, "bad key": 1}\n',
     "field versions[0]['bad key']: Extra inputs are not permitted"),
    ("versions:\n  - {default_price: 1, models: {B: -1}}\n",
     "field versions[0].models: Value error, 'B' must be a finite number >= 0, got -1.0"),
    ("versions:\n  - {default_price: 1, models: {B: 0}, effective_from: \"2026-01-01T00:00:00Z\"}\n",
     "field versions[0].models.B: must be > 0 in a version-2 document"),
]


@pytest.mark.parametrize(("text", "message"), MESSAGES, ids=[f"{i}" for i in range(len(MESSAGES))])
def test_the_whole_line(text: str, message: str) -> None:
    with pytest.raises(PricingError) as info:
        parse_pricing(text, "p.yaml")
    assert str(info.value) == f"p.yaml: {message}"


def test_zero_prices_stay_valid_in_a_version_1_document() -> None:
    """Version 1 allowed free models, pools and MIG instances; they still load."""
    p = parse_pricing(f'default_price: 1\nmodels: {{A: 0}}\npools: {{b: 0}}\nmig_profiles: {{"{A100}": '
                      '{"1g.10gb": 0}}\n', "p.yaml")
    assert p.price("A").per_gpu_hour == 0.0
    assert p.price(A100, "1g.10gb").per_gpu_hour == 0.0
    assert p.price("Z", pool="b").per_gpu_hour == 0.0


VERSION = {"default_price": 1.0, "effective_from": "2026-11-01T00:00:00Z"}


def test_documents_from_separate_files_name_the_other_file() -> None:
    """Documents kept as files of a directory carry no ``versions[i]`` prefix: the message names the file."""
    a = parse_document(VERSION, "a.yaml")
    with pytest.raises(PricingError) as taken:
        build_pricing([a, parse_document(dict(VERSION), "b.yaml")])
    assert str(taken.value) == "b.yaml: field effective_from: 2026-11-01T00:00:00+00:00 is already taken by a.yaml"
    euro = parse_document(VERSION | {"currency": "EUR", "effective_from": "2026-12-01T00:00:00Z"}, "b.yaml")
    with pytest.raises(PricingError) as currency:
        build_pricing([a, euro])
    assert str(currency.value) == "b.yaml: field currency: 'EUR' differs from 'USD' in a.yaml"
    undated = parse_document({"default_price": 1.0}, "b.yaml")
    with pytest.raises(PricingError) as missing:
        build_pricing([a, undated])
    assert str(missing.value) == "b.yaml: field effective_from: required when several pricing documents are kept"
    assert build_pricing([undated]).price("A").per_gpu_hour == 1.0


def test_a_document_that_is_not_a_mapping() -> None:
    with pytest.raises(PricingError) as top:
        parse_document([1], "p.yaml")
    assert str(top.value) == "p.yaml: expected a mapping at the top level"
    with pytest.raises(PricingError) as inner:
        parse_document("x", "p.yaml", prefix="versions[2]")
    assert str(inner.value) == "p.yaml: field versions[2]: expected a mapping"


@pytest.mark.parametrize(("loc", "path"), [
    ((), "(document)"),
    (("models", "[key]"), "models"),
    (("models", "A 1"), "models['A 1']"),
    (("instance_types", "p5.48xlarge", "gpus"), "instance_types['p5.48xlarge'].gpus"),
    (("commitments", 0, "gpus"), "commitments[0].gpus"),
    (("x y", "z"), "['x y'].z"),
])
def test_field_paths(loc: tuple[int | str, ...], path: str) -> None:
    assert field_path(loc) == path


def test_version_1_lookup_edges() -> None:
    """A model without MIG prices keeps its whole price for any profile; an unknown pool multiplies by 1;
    without a model the default applies even with a profile; ``at`` picks the document in force."""
    p = parse_pricing(f'default_price: 1.5\nmodels: {{H: 4.0, "{A100}": 2.1}}\n'
                      f'mig_profiles: {{"{A100}": {{"1g.10gb": 0.35}}}}\npools: {{spot: 0.4}}\n', "p.yaml")
    assert p.price("H", "1g.10gb").per_gpu_hour == 4.0
    assert p.price("H", pool="other").per_gpu_hour == 4.0
    assert p.price("H", pool="").per_gpu_hour == 4.0
    none = p.price(None, "1g.10gb")
    assert (none.per_gpu_hour, none.known) == (1.5, False)
    assert p.price(A100, "1g.10gb", pool="spot").per_gpu_hour == pytest.approx(0.35 * 7 * 0.4)
    book = parse_pricing('versions:\n  - {default_price: 1, models: {H: 2}, effective_from: "2026-01-01T00:00:00Z"}\n'
                         '  - {default_price: 1, models: {H: 3}, effective_from: "2026-02-01T00:00:00Z"}\n', "p.yaml")
    january = 1767225600.0 + 86400  # 2026-01-02T00:00:00Z
    assert book.price("H", at=january).per_gpu_hour == 2.0
    assert book.price("H").per_gpu_hour == 3.0
