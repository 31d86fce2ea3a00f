"""How amounts are written in JSON and CSV, character for character: a reader parsing the export, or a diff
between two exports, sees these exact texts."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from exporter.model.wire import exact_numbers, plain, to_json


@pytest.mark.parametrize(("value", "written"), [
    (Decimal(0), "0.000000000"),
    (Decimal("1.5"), "1.500000000"),
    (Decimal("1E-9"), "0.000000001"),
    (Decimal("-2.0000000005"), "-2.000000000"),  # half-even: ...05 rounds to the even 0
    (Decimal("2.0000000015"), "2.000000002"),
    (Decimal("12345678901"), "12345678901.000000000"),
])
def test_plain_has_nine_digits_and_no_exponent(value: Decimal, written: str) -> None:
    assert plain(value) == written


def test_floats_become_exact_decimals_at_every_depth() -> None:
    """Floats by their shortest repr, rounded to 9 digits; tuples become lists; ints, bools, text, None and
    infinities are left as they are."""
    out = exact_numbers({"a": 0.125000000012, "b": [1e-05, (2.5, 3)], "c": {"d": True, "e": "x", "f": None},
                         "g": 7, "h": float("inf")})
    assert out == {"a": Decimal("0.125000000"), "b": [Decimal("0.000010000"), [Decimal("2.500000000"), 3]],
                   "c": {"d": True, "e": "x", "f": None}, "g": 7, "h": float("inf")}
    assert str(out["a"]) == "0.125000000" and str(out["b"][0]) == "0.000010000"
    assert exact_numbers(0.1) == Decimal("0.100000000")


def test_json_writes_decimals_as_plain_numbers() -> None:
    """A Decimal is a bare number with 9 digits; strings that merely look like numbers stay strings."""
    doc = {"cost": Decimal("1.5"), "tiny": Decimal("1E-9"), "n": 3, "id": "12.5", "rows": [Decimal(0)]}
    assert to_json(doc) == ('{"cost": 1.500000000, "tiny": 0.000000001, "n": 3, "id": "12.5", '
                            '"rows": [0.000000000]}')
    assert to_json({"a": Decimal("-0.25")}, indent=2) == '{\n  "a": -0.250000000\n}'
    assert json.loads(to_json(doc))["cost"] == 1.5


def test_json_refuses_what_it_cannot_write_exactly() -> None:
    with pytest.raises(TypeError) as info:
        to_json({"a": {1, 2}})
    assert str(info.value) == "set is not JSON serializable"
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        to_json({"a": float("nan")})
