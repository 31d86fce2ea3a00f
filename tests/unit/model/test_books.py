"""The ledger's named amounts: keyword-only, added and scaled field by field."""

from __future__ import annotations

from decimal import Decimal

import pytest

from exporter.model import books
from exporter.model.books import CapacityAmounts, NamespaceTotals, UsageAmounts

AMOUNTS = [cls for cls in vars(books).values()
           if isinstance(cls, type) and issubclass(cls, books._Amounts) and cls is not books._Amounts]


@pytest.fixture(autouse=True)
def _fresh_helpers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The getters and field-wise functions are generated once per type and cached: every test here builds
    them afresh, so a fault in building them fails these tests whatever ran earlier in the process."""
    for cache in ("_GETTERS", "_NAMES", "_FIELDWISE", "_SUMS"):
        monkeypatch.setattr(books, cache, {})


def test_every_amount_type_is_found() -> None:
    assert {c.__name__ for c in AMOUNTS} == {"UsageAmounts", "NamespaceTotals", "CapacityAmounts",
                                             "BreakdownTotals", "UnmeasuredEnergy", "CounterMark"}


@pytest.mark.parametrize("cls", AMOUNTS, ids=lambda c: c.__name__)
def test_no_amount_is_built_by_position(cls: type[books._Amounts]) -> None:
    """``CapacityAmounts(3600.0, 0.8)`` could put a price in the seconds: only names are accepted."""
    with pytest.raises(TypeError):
        cls(1.0)  # type: ignore[call-arg]
    assert cls(**{cls.columns()[0]: 1.0}).values()[0] == 1.0


def test_addition_is_field_by_field() -> None:
    a = CapacityAmounts(seconds=Decimal(3600), cost=Decimal("0.75"), list_cost=Decimal(1), energy_j=Decimal(10))
    b = CapacityAmounts(seconds=Decimal(1800), cost=Decimal("0.5"), list_cost=Decimal("0.5"))
    # 3600 + 1800 = 5400 s; 0.75 + 0.5 = 1.25; 1.0 + 0.5 = 1.5; 10 + 0 = 10 J
    assert a + b == CapacityAmounts(seconds=Decimal(5400), cost=Decimal("1.25"), list_cost=Decimal("1.5"),
                                    energy_j=Decimal(10))
    # 0.1 + 0.2 is 0.3 exactly in decimal (in binary it is 0.30000000000000004)
    assert (CapacityAmounts(cost=Decimal("0.1")) + CapacityAmounts(cost=Decimal("0.2"))).cost == Decimal("0.3")


def test_scaling_is_field_by_field() -> None:
    t = NamespaceTotals(allocated_s=Decimal(7200), used_s=Decimal(3600), cost=Decimal(8), idle_cost=Decimal(4))
    # a quarter of each: 1800 s, 900 s, 2.00, 1.00; zeros stay zero
    assert t.scaled(Decimal("0.25")) == NamespaceTotals(allocated_s=Decimal(1800), used_s=Decimal(900),
                                                         cost=Decimal(2), idle_cost=Decimal(1))


def test_columns_are_the_ledger_column_order() -> None:
    assert UsageAmounts.columns() == ("allocated_s", "used_s", "unmeasured_s", "idle_s", "cost", "idle_cost",
                                      "energy_j", "list_cost", "split_s", "co2e_g", "co2e_s", "unmeasured_energy_s")


@pytest.mark.parametrize("cls", AMOUNTS, ids=lambda c: c.__name__)
def test_sums_and_scalings_are_frozen_and_equal_to_amounts_built_by_name(cls: type[books._Amounts]) -> None:
    """``+`` and ``scaled`` build through the slot descriptors, not ``__init__``: what they make is the same
    frozen, hashable value ``cls(**fields)`` makes, each field from its own two operands (field i: (i + 1) and
    10 (i + 1), so a swapped slot or a dropped operand shows)."""
    names = cls.columns()
    a = cls(**{n: Decimal(i + 1) for i, n in enumerate(names)})
    b = cls(**{n: Decimal(10 * (i + 1)) for i, n in enumerate(names)})
    total, tripled = a + b, a.scaled(3)
    assert total == cls(**{n: Decimal(11 * (i + 1)) for i, n in enumerate(names)})
    assert tripled == cls(**{n: Decimal(3 * (i + 1)) for i, n in enumerate(names)})
    assert [getattr(total, n) for n in names] == [Decimal(11 * (i + 1)) for i in range(len(names))]
    assert hash(total) == hash(cls(**{n: Decimal(11 * (i + 1)) for i, n in enumerate(names)}))
    with pytest.raises(AttributeError):  # dataclasses.FrozenInstanceError
        setattr(total, names[0], 0.0)


@pytest.mark.parametrize("cls", AMOUNTS, ids=lambda c: c.__name__)
def test_values_are_every_field_in_column_order(cls: type[books._Amounts]) -> None:
    """Each field set to its position (1, 2, ...): ``values()`` reads them all back, in the columns' order."""
    columns = cls.columns()
    amount = cls(**{name: float(i + 1) for i, name in enumerate(columns)})
    assert amount.values() == tuple(float(i + 1) for i in range(len(columns)))
