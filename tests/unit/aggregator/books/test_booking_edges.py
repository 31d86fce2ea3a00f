"""Closing a deleted node's books by hand: the time since its last snapshot (this tick's, when it has one) is
booked as unobserved for the GPUs that snapshot showed, else for the GPUs the deletion reported."""

from __future__ import annotations

from decimal import Decimal

from exporter.aggregator.books.booking import Books, NodeGone
from exporter.aggregator.kube.state import KubeState
from exporter.aggregator.ledger.store import LedgerState
from exporter.model.books import CapacityKey
from exporter.model.pricing.document import parse_pricing
from exporter.model.usage import GpuCapacity, UsageSnapshot

T0 = 1_800_000_000.0  # an hour boundary
H100 = "NVIDIA H100 80GB HBM3"
PRICING = parse_pricing(f'default_price: 1\nmodels: {{"{H100}": 3.6}}\n', "p.yaml")


def _snap(seq: int, ts: float, *, gpus: int) -> UsageSnapshot:
    """Node n1 with ``gpus`` H100s in its inventory and nobody holding one."""
    return UsageSnapshot(node="n1", epoch="e1", timestamp=ts, seq=seq, started_at=T0,
                         capacity=[GpuCapacity(gpu_uuid=f"GPU-{i}", gpu_model=H100) for i in range(gpus)])


def _unobserved_seconds(books: Books, *, this_tick: float, gone: NodeGone) -> dict[str, Decimal]:
    """Book n1 at T0 + 100 (2 GPUs), then a tick with its snapshot at ``this_tick`` and its deletion."""
    kube = KubeState()
    books.apply(books.prepare([_snap(1, T0 + 100, gpus=2)], kube, pricing=PRICING))
    p = books.prepare([_snap(2, this_tick, gpus=2)], kube, pricing=PRICING, gone=[gone])
    assert p.pruned == ["n1"] and "n1" not in p.marks  # nothing of the node is left to apply
    return {key.gpu_model: amount.seconds for key, amount in p.write.unobserved.items()}


def test_a_node_booked_and_deleted_in_one_tick_is_unobserved_from_this_ticks_snapshot() -> None:
    """Its snapshot at T0 + 200 showed 2 GPUs; deleted at T0 + 260: 2 x 60 = 120 GPU-seconds, not from the
    previous tick's T0 + 100, nor for the 8 GPUs the deletion reported."""
    seconds = _unobserved_seconds(Books(LedgerState()), this_tick=T0 + 200,
                                  gone=NodeGone("n1", deleted_at=T0 + 260, gpus=8, gpu_model=H100))
    assert seconds == {H100: Decimal(120)}


def test_a_node_that_never_showed_gpus_closes_with_the_gpus_its_deletion_reported() -> None:
    """No inventory, no label: the 4 GPUs the deletion names, of its model (else "unknown"), for 60 s each."""
    for model, booked_as in ((H100, H100), ("", "unknown")):
        books, kube = Books(LedgerState()), KubeState()
        books.apply(books.prepare([_snap(1, T0 + 200, gpus=0)], kube, pricing=PRICING))
        p = books.prepare([], kube, pricing=PRICING, gone=[NodeGone("n1", deleted_at=T0 + 260, gpus=4,
                                                                    gpu_model=model)])
        assert {key: amount.seconds for key, amount in p.write.unobserved.items()} == {
            CapacityKey(int(T0), "n1", "", booked_as, "USD"): Decimal(240)}
        assert p.pruned == ["n1"]


def test_a_node_deleted_without_gpus_or_books_closes_with_nothing_booked() -> None:
    """No inventory and a deletion reporting 0 GPUs: nothing unobserved; a node never booked: not even pruned."""
    books, kube = Books(LedgerState()), KubeState()
    books.apply(books.prepare([_snap(1, T0 + 200, gpus=0)], kube, pricing=PRICING))
    p = books.prepare([], kube, pricing=PRICING, gone=[NodeGone("n1", deleted_at=T0 + 260, gpus=0, gpu_model="")])
    assert p.write.unobserved == {} and p.pruned == ["n1"]
    assert Books(LedgerState()).prepare([], kube, pricing=PRICING, gone=[
        NodeGone("n2", deleted_at=T0 + 260, gpus=4, gpu_model=H100)]).pruned == []
