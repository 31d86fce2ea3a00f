"""Issue 28's target rules: a bound on the value, or on value / baseline, met at the bound and not past it."""

from __future__ import annotations

import pytest

from bench.targets import Rule, Target


def _target(value: float, baseline: float, limit: float, rule: Rule) -> Target:
    return Target(name="t", value=value, unit="s", baseline=baseline, baseline_is="b", limit=limit, rule=rule)


def test_a_value_bound_is_met_at_the_bound_and_missed_past_it() -> None:
    assert _target(5.0, 1.0, 5.0, Rule.VALUE_AT_MOST).met
    assert not _target(5.01, 1.0, 5.0, Rule.VALUE_AT_MOST).met


def test_a_value_bound_ignores_the_ratio() -> None:
    """4.0 s <= 5 s is met even though 4.0 / 1.0 = 4 is far above the baseline."""
    t = _target(4.0, 1.0, 5.0, Rule.VALUE_AT_MOST)
    assert t.ratio == 4.0
    assert t.met


def test_a_ratio_at_most_compares_value_over_baseline() -> None:
    """1.2 / 3.0 = 0.4 <= 0.5 met; 1.6 / 3.0 = 0.5333 > 0.5 missed; 1.5 / 3.0 = 0.5 met."""
    assert _target(1.2, 3.0, 0.5, Rule.RATIO_AT_MOST).ratio == pytest.approx(0.4)
    assert _target(1.2, 3.0, 0.5, Rule.RATIO_AT_MOST).met
    assert not _target(1.6, 3.0, 0.5, Rule.RATIO_AT_MOST).met
    assert _target(1.5, 3.0, 0.5, Rule.RATIO_AT_MOST).met


def test_a_ratio_at_least_is_a_floor() -> None:
    """40,000 / 100,000 rows per CPU-s = 0.4 >= 0.4 met; 39,000 / 100,000 = 0.39 missed."""
    assert _target(40_000, 100_000, 0.4, Rule.RATIO_AT_LEAST).met
    assert not _target(39_000, 100_000, 0.4, Rule.RATIO_AT_LEAST).met


def test_a_ratio_rule_without_a_baseline_is_not_met() -> None:
    t = _target(0.1, 0.0, 0.5, Rule.RATIO_AT_MOST)
    assert t.ratio is None
    assert not t.met


def test_the_entry_carries_every_field_the_issue_names() -> None:
    entry = _target(1.0, 4.0, 0.3, Rule.RATIO_AT_MOST).entry()
    assert {"name", "value", "unit", "baseline", "ratio", "target", "met"} <= set(entry)
    assert entry["ratio"] == 0.25
    assert entry["target"] == 0.3
    assert entry["met"] is True
