"""Commitments when shards split a cluster's nodes: each shard blends over the whole cluster's fleet (read
from the ledger's ``fleet`` rows the others wrote), and only one shard books the unused part."""

from __future__ import annotations

import pytest

from exporter.aggregator.books.booking import Books
from exporter.aggregator.ledger.store import Ledger, LedgerState
from exporter.model.pricing.document import Pricing, parse_pricing
from tests.pg import LedgerTarget, ledger_target_fixture, postgres_fixture
from tests.unit.aggregator.books.pricing_books import COMMITTED, T0, cluster, snap

_FIXTURES = (ledger_target_fixture, postgres_fixture)  # used by name

OVERSIZED = parse_pricing("""
default_price: 1
models: {"NVIDIA H100 80GB HBM3": 4.0}
commitments:
  - {name: h100-3yr, model: "NVIDIA H100 80GB HBM3", gpus: 24, hourly: 2.10,
     start: "2027-01-01T00:00:00Z", end: "2028-01-01T00:00:00Z"}
""", "p.yaml")


async def _two_shards(t: LedgerTarget, pricing: Pricing, *, share_fleet: bool = True) -> tuple[
        dict[str, float], float]:
    """Nodes ``a`` and ``b`` (8 H100s each, one GPU held for the hour) booked by two shards of one ledger;
    returns each node's booked cost and the unused commitment cost."""
    ledger = Ledger(t.target, password_file=t.password_file)
    await ledger.open()
    kube = cluster(a={}, b={})
    shards = {"a": Books(LedgerState()), "b": Books(LedgerState())}
    shards["b"].books_commitments = False  # shard 1: shard 0 books what is not a node's
    for seq, at in ((1, T0), (2, T0 + 3600)):
        for node, books in shards.items():
            if share_fleet:
                books.others = await ledger.load_fleet()
            p = books.prepare([snap(node, seq, at, held=at - T0)], kube, pricing=pricing, now=at)
            await ledger.commit(p.write)
            books.apply(p)
    cost = dict(await ledger.query("SELECT node, SUM(cost) FROM usage GROUP BY node"))
    unused = (await ledger.query("SELECT COALESCE(SUM(cost), 0) FROM unused_commitment"))[0][0]
    await ledger.close()
    return {n: float(c) for n, c in cost.items()}, float(unused)


async def test_shards_blend_a_commitment_over_the_whole_cluster(ledger_target: LedgerTarget) -> None:
    """12 committed over 16 H100s (8 per shard): c = 12 / 16 = 0.75, so every GPU-hour costs
    0.75 x 2.10 + 0.25 x 4.00 = 2.575 on both shards, and nothing is unused (12 <= 16). A shard blending
    over its own 8 GPUs alone would charge 2.10 and book (12 - 8) x 2.10 = 8.40 unused, on each shard."""
    cost, unused = await _two_shards(ledger_target, COMMITTED)
    assert cost == {"a": pytest.approx(2.575), "b": pytest.approx(2.575)}
    assert unused == pytest.approx(0.0)


async def test_the_unused_part_is_booked_once_for_the_cluster(ledger_target: LedgerTarget) -> None:
    """24 committed, 16 present: every GPU-hour at 2.10 (c = 1) and (24 - 16) x 1 h x 2.10 = 16.80 unused,
    booked once (not 16 x 2.10 = 33.60 by each of two shards)."""
    cost, unused = await _two_shards(ledger_target, OVERSIZED)
    assert cost == {"a": pytest.approx(2.10), "b": pytest.approx(2.10)}
    assert unused == pytest.approx(16.80)


async def test_without_the_fleet_rows_each_shard_sees_only_its_nodes(ledger_target: LedgerTarget) -> None:
    """The arithmetic the fleet rows prevent (so the two tests above can fail): 2.10 per GPU-hour and
    (24 - 8) x 2.10 = 33.60 unused booked by shard 0 from its own 8 GPUs."""
    cost, unused = await _two_shards(ledger_target, OVERSIZED, share_fleet=False)
    assert cost == {"a": pytest.approx(2.10), "b": pytest.approx(2.10)}
    assert unused == pytest.approx(33.60)
