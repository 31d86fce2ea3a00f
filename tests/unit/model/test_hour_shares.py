"""An interval split over the hours it touches, at the edges: empty and backwards intervals."""

from __future__ import annotations

from exporter.model.books import hour_shares


def test_an_empty_or_backwards_interval_belongs_wholly_to_the_hour_of_its_end() -> None:
    assert hour_shares(7200.0, 7200.0) == [(7200, 1.0)]
    assert hour_shares(8000.0, 4000.0) == [(3600, 1.0)]
    assert hour_shares(7300.0, 7300.0) == [(7200, 1.0)]
