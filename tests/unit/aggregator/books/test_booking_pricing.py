"""Booking with version-2 pricing, by hand: node labels set the list and effective rates; energy costs only
on owned hardware. (booking.py's other tests are in test_booking.py; these share pricing_books' fixtures.)"""

from __future__ import annotations

from decimal import Decimal

import pytest

from exporter.aggregator.books.booking import Books
from exporter.aggregator.ledger.store import LedgerState
from exporter.model.books import CommitmentKey, NamespaceKey
from exporter.model.pricing.document import Pricing, parse_pricing
from tests.unit.aggregator.books.pricing_books import A100, COMMITTED, H100, T0, cluster, snap


def test_node_labels_set_list_and_effective_rates() -> None:
    """od (p5.48xlarge, on-demand) and spot (p5.48xlarge, EKS SPOT): L = 55.04 / 8 = 6.88 on both.
    The 12-GPU commitment over n = 8 on-demand GPUs: c = 1, od's GPU costs 2.10; unused (12 - 8) x 2.10.
    spot: 6.88 x 0.35 = 2.408, never committed. One hour of one GPU on each node:
    od cost 2.10, list 6.88; spot cost 2.408, list 6.88; unused 4 GPU-h x 2.10 = 8.40."""
    books = Books(LedgerState())
    k = cluster(od={"node.kubernetes.io/instance-type": "p5.48xlarge"},
                spot={"node.kubernetes.io/instance-type": "p5.48xlarge", "eks.amazonaws.com/capacityType": "SPOT"})
    books.apply(books.prepare([snap("od", 1, T0, held=0.0), snap("spot", 1, T0, held=0.0)], k, pricing=COMMITTED,
                                now=T0))
    p = books.prepare([snap("od", 2, T0 + 3600, held=3600.0), snap("spot", 2, T0 + 3600, held=3600.0)], k,
                      pricing=COMMITTED, now=T0 + 3600)
    rows = {key.node: amount for key, amount in p.write.usage.items()}
    assert rows["od"].cost == Decimal("2.10") and rows["od"].list_cost == Decimal("6.88")  # 55.04 / 8
    assert rows["spot"].cost == Decimal("2.408") and rows["spot"].list_cost == Decimal("6.88")  # 6.88 x 0.35
    unused = p.write.unused_commitment[CommitmentKey(int(T0), "h100-1yr", H100, "USD")]
    assert unused.seconds == 4 * 3600 and unused.cost == Decimal("8.40")
    assert unused.list_cost == 0.0
    assert p.write.node_billing == {}  # unchanged since the first tick wrote them
    prices = {key.node: (str(n.rate.capacity_type), str(n.rate.source), round(n.rate.effective_per_gpu_hour, 6))
              for key, n in p.node_prices.items()}
    assert prices == {"od": ("on-demand", "commitment", 2.10), "spot": ("spot", "instance_type", 2.408)}


def test_energy_costs_only_on_owned_hardware_and_only_in_cost() -> None:
    """An owned A100 (0.50 per GPU-hour) drew 7.2 MJ in the hour: 7.2e6 / 3.6e6 = 2 kWh x 0.12 x 1.5 = 0.36.
    cost 0.50 + 0.36 = 0.86, list 0.50; energy joules reach the namespace totals."""
    pricing = parse_pricing("""
default_price: 1
on_prem: [{model: "NVIDIA A100-SXM4-80GB", capex_per_gpu: 17520, years: 4, energy_price_kwh: 0.12, pue: 1.5}]
""", "p.yaml")
    books, k = Books(LedgerState()), cluster(dc={})
    books.apply(books.prepare([snap("dc", 1, T0, held=0.0, gpus=1, model=A100)], k, pricing=pricing))
    p = books.prepare([snap("dc", 2, T0 + 3600, held=3600.0, gpus=1, model=A100, energy_j=7.2e6)], k, pricing=pricing)
    (row,) = p.write.usage.values()
    assert row.cost == Decimal("0.86") and row.list_cost == Decimal("0.50")
    assert row.idle_cost == 0.0  # used the whole hour
    assert p.write.totals[NamespaceKey("ns", "USD")].energy_j == 7.2e6


def test_same_energy_costs_nothing_on_rented_gpus() -> None:
    """An H100 at 4.00 that drew 7.2 MJ: cost 4.00 (the cloud's price includes power), list 4.00."""
    books, k = Books(LedgerState()), cluster(n={})
    plain = Pricing(COMMITTED.doc.model_copy(update={"commitments": []}))
    books.apply(books.prepare([snap("n", 1, T0, held=0.0, gpus=1)], k, pricing=plain))
    p = books.prepare([snap("n", 2, T0 + 3600, held=3600.0, gpus=1, energy_j=7.2e6)], k, pricing=plain)
    (row,) = p.write.usage.values()
    assert row.cost == pytest.approx(4.0) and row.list_cost == pytest.approx(4.0)
