"""The price resolver's bookkeeping at its edges: documents given out of order, an empty book, a commitment
touching an hour only at its edge or for half a second, an owned GPU's capacity type, a document used as is."""

from __future__ import annotations

import pytest

from exporter.model.pricing.document import Pricing, parse_document, parse_pricing
from exporter.model.pricing.labels import CapacityType, NodeFacts
from exporter.model.pricing.resolve import PriceBook, PriceList
from exporter.model.pricing.schema import field_path
from tests.unit.model.pricing.test_pricing_resolve import A100, H100, _example, _ts

NOV = {"currency": "EUR", "default_price": 1.0, "models": {H100: 4.0}, "effective_from": "2026-11-01T00:00:00Z"}
DEC = NOV | {"models": {H100: 3.0}, "effective_from": "2026-12-01T00:00:00Z"}


def test_documents_are_ordered_by_date_whatever_order_they_come_in() -> None:
    nov, dec = PriceList(parse_document(NOV, "a").doc), PriceList(parse_document(DEC, "b").doc)
    book = PriceBook([dec, nov])
    assert book.lists == (nov, dec) and book.newest is dec
    assert book.at(_ts("2026-11-15T00:00:00+00:00")) is nov
    assert nov.currency == "EUR"


def test_an_empty_book_is_refused() -> None:
    with pytest.raises(ValueError) as info:
        PriceBook([])
    assert str(info.value) == "a price book needs at least one document"


def test_a_document_is_priced_as_it_is() -> None:
    """``Pricing`` takes one validated document as well as a book."""
    assert Pricing(parse_document(NOV, "a").doc).price(H100).per_gpu_hour == 4.0


def test_commitments_in_force_for_an_instant_or_half_a_second() -> None:
    """A commitment ending at 2026-01-01 00:00 is not in force in the hour starting then; one ending half a
    second into the hour is, for 0.5 s."""
    term = '{name: c, model: M, gpus: 1, hourly: 1, start: "2025-01-01T00:00:00Z", end: "%s"}'
    hour = _ts("2026-01-01T00:00:00+00:00")
    ended = parse_pricing(f"default_price: 1\ncommitments: [{term % '2026-01-01T00:00:00Z'}]\n", "p.yaml")
    assert ended.book.at(hour).active_commitments(hour, hour + 3600) == []
    sliver = parse_pricing(f"default_price: 1\ncommitments: [{term % '2026-01-01T00:00:00.5Z'}]\n", "p.yaml")
    assert [a.seconds for a in sliver.book.at(hour).active_commitments(hour, hour + 3600)] == [0.5]


def test_an_owned_gpu_keeps_its_nodes_capacity_type() -> None:
    node = NodeFacts.from_labels("dc-1", A100, labels={"karpenter.sh/capacity-type": "spot"}, pool="batch")
    assert _example().rate(node, at=_ts("2026-12-15T00:00:00+00:00")).capacity_type is CapacityType.SPOT


def test_a_key_marker_inside_a_path_is_skipped_and_the_rest_kept() -> None:
    assert field_path(("capacity_types", "[key]", "spot")) == "capacity_types.spot"
