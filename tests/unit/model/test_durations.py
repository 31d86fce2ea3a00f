"""Durations as people write them, both ways: parsed into seconds, and seconds shown short."""

from __future__ import annotations

import math

import pytest

from exporter.model.durations import format_duration, parse_duration


@pytest.mark.parametrize(("text", "seconds"), [
    ("90s", 90.0), ("15m", 900.0), ("2h", 7200.0), ("1d", 86400.0), ("1w", 604800.0), ("250ms", 0.25),
    ("1h30m", 5400.0), ("1d2h3m4s", 93784.0), (" 45 ", 45.0), ("1.5h", 5400.0), (30, 30.0), (2.5, 2.5),
])
def test_parsed_into_seconds(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("value", ["", "h", "1x", "1h 30m", "1h30", "m5", "-5s", -1, math.inf, math.nan, "inf",
                                   True, None, [1]])
def test_anything_else_is_refused_with_the_value_named(value: object) -> None:
    with pytest.raises(ValueError, match=r"not a duration: ") as err:
        parse_duration(value)
    assert repr(value) in str(err.value)


def test_refusals_say_what_a_duration_looks_like() -> None:
    with pytest.raises(ValueError, match=r"use e\.g\. 90s, 15m, 2h"):
        parse_duration("1x")
    with pytest.raises(ValueError, match=r"must be finite and >= 0"):
        parse_duration(-1)


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0s"), (59.4, "59s"), (60, "1m"), (3600, "1h"), (3725, "1h2m5s"), (86400, "1d"), (90061, "1d1h1m1s"),
    (86399, "23h59m59s"), (7200, "2h"), (3660, "1h1m"), (172800 + 59, "2d59s"),
])
def test_formatted_short(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == round(seconds)
