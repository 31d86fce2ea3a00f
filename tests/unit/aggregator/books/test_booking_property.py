"""A property of booking itself (``Books.prepare``, with the rates of ``TickRates``), over random fleets and
documents: with no multiplier above 1 and every commitment rate below the list price, no booked row costs
more than its list price; and every row's cost is exactly the blend ``c x R + (1 - c) x E`` computed here
from the pricing rules, independently of the code (which a check of the inequality alone would not see:
swapping the blend's weights keeps it)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.aggregator.books.booking import Books
from exporter.aggregator.kube.state import KubeState
from exporter.aggregator.ledger.store import LedgerState
from exporter.model.pricing.document import parse_pricing
from exporter.model.usage import GpuCapacity, HolderCounters, UnallocatedCounter, UsageSnapshot

T0 = 1_800_000_000.0  # an hour boundary; one tick of 600 s stays inside the hour
TICK = 600.0
MODELS = ("M-a", "M-b")
OWNED = "M-owned"
CAPITAL = 20000 / (5 * 8760)  # capex_per_gpu / (years x 8760)
CAPACITY_LABELS: dict[str, tuple[dict[str, str], str]] = {  # what a node is labelled, and the type it means
    "none": ({}, "on-demand"),
    "karpenter-spot": ({"karpenter.sh/capacity-type": "spot"}, "spot"),
    "karpenter-od": ({"karpenter.sh/capacity-type": "on-demand"}, "on-demand"),
    "karpenter-reserved": ({"karpenter.sh/capacity-type": "reserved"}, "reserved"),
    "eks-spot": ({"eks.amazonaws.com/capacityType": "SPOT"}, "spot"),
    "gke-spot": ({"cloud.google.com/gke-spot": "true"}, "spot"),
}


@dataclass(frozen=True)
class Node:
    model: str
    instance_type: str | None
    capacity: str
    pool: str | None
    gpus: int
    held: int
    watts: float


_node = st.builds(Node, model=st.sampled_from([*MODELS, "M-unlisted", OWNED]),
                  instance_type=st.sampled_from([None, "i-8", "i-4", "i-none"]),
                  capacity=st.sampled_from(sorted(CAPACITY_LABELS)), pool=st.sampled_from([None, "p1", "p2", "p3"]),
                  gpus=st.integers(min_value=1, max_value=8), held=st.integers(min_value=0, max_value=8),
                  watts=st.floats(min_value=0.0, max_value=700.0))
_price = st.floats(min_value=0.01, max_value=100.0)
_multiplier = st.floats(min_value=0.01, max_value=1.0)


def _snapshot(name: str, n: Node, t: float) -> UsageSnapshot:
    """``held`` GPUs each held by its own pod for ``t`` seconds (drawing ``watts``), the rest nobody held."""
    held = min(n.held, n.gpus)
    holders = [HolderCounters(namespace="ns", pod=f"{name}-{i}", container="c", device_id=f"GPU-{i}",
                              gpu_uuid=f"{name}-{i}", gpu_model=n.model, fraction=1.0, allocated_s=t, used_s=t / 2,
                              unmeasured_s=0.0, energy_j=n.watts * t) for i in range(held)]
    idle = [UnallocatedCounter(gpu_model=n.model, seconds=(n.gpus - held) * t)] if n.gpus > held else []
    return UsageSnapshot(node=name, epoch="e", timestamp=T0 + t, seq=int(t) + 1, started_at=T0, holders=holders,
                         unallocated=idle,
                         capacity=[GpuCapacity(gpu_uuid=f"{name}-{i}", gpu_model=n.model) for i in range(n.gpus)])


@settings(max_examples=120, deadline=None)
@given(fleet=st.lists(_node, min_size=1, max_size=8), model_prices=st.lists(_price, min_size=2, max_size=2),
       instance_prices=st.lists(_price, min_size=2, max_size=2), spot=_multiplier, reserved=_multiplier,
       on_demand=_multiplier, pools=st.lists(_multiplier, min_size=2, max_size=2),
       committed=st.lists(st.integers(min_value=1, max_value=24), min_size=3, max_size=3),
       discounts=st.lists(st.floats(min_value=0.01, max_value=0.99), min_size=3, max_size=3))
def test_booked_rows_never_cost_more_than_list_and_blend_by_coverage(
        fleet: list[Node], model_prices: list[float], instance_prices: list[float], spot: float, reserved: float,
        on_demand: float, pools: list[float], committed: list[int], discounts: list[float]) -> None:
    """Per booked row (held time and capacity nobody held): ``list_cost`` = GPU-h x L and ``cost`` = GPU-h x
    (c x R + (1 - c) x E), E = L x K x P, c = min(N, n) / n over the non-spot, not owned GPUs of the row's
    model in the tick's fleet (0 where the GPU cannot take a commitment); hence ``list_cost >= cost``.

    Left out of the inequality, by the rules themselves: owned hardware (rule 5: ``cost`` = capital rate plus
    the measured energy, ``list_cost`` the capital rate only, so ``cost`` exceeds it by the energy; its cost is
    still checked exactly) and ``__unused_commitment__`` rows (paid-for time no GPU used: it has no list
    price, ``list_cost`` = 0, and its cost is the commitment's, not a GPU's)."""
    models = dict(zip(MODELS, model_prices, strict=True))
    doc: dict[str, object] = {
        "default_price": 3.0,
        "models": models,
        "instance_types": {"i-8": {"gpus": 8, "hourly": instance_prices[0] * 8},
                           "i-4": {"gpus": 4, "hourly": instance_prices[1] * 4}},
        "capacity_types": {"spot": spot, "reserved": reserved, "on-demand": on_demand},
        "pools": {"p1": pools[0], "p2": pools[1]},
        "on_prem": [{"model": OWNED, "capex_per_gpu": 20000, "years": 5, "energy_price_kwh": 0.1, "pue": 1.2}],
    }
    instances = {"i-8": instance_prices[0], "i-4": instance_prices[1]}
    multipliers = {"spot": spot, "reserved": reserved, "on-demand": on_demand}
    pool_multipliers = {"p1": pools[0], "p2": pools[1]}

    def list_price(n: Node) -> float:  # rule 1
        if n.model == OWNED:
            return CAPITAL
        if n.instance_type in instances:
            return instances[n.instance_type]
        return models.get(n.model, 3.0)

    def payg(n: Node) -> float:  # rule 3: E = L x K x P
        if n.model == OWNED:
            return CAPITAL
        return list_price(n) * multipliers[CAPACITY_LABELS[n.capacity][1]] * pool_multipliers.get(n.pool or "", 1.0)

    def eligible(n: Node) -> bool:
        return n.model != OWNED and CAPACITY_LABELS[n.capacity][1] != "spot"

    lowest: dict[str, float] = {}
    for n in fleet:
        if eligible(n):
            lowest[n.model] = min(lowest.get(n.model, 1e9), list_price(n))
    commitments = [(model, committed[i], lowest[model] * discounts[i]) for i, model in enumerate(sorted(lowest))]
    doc["commitments"] = [{"name": f"c{i}", "model": m, "gpus": gpus, "hourly": rate,
                           "start": "2027-01-01T00:00:00Z", "end": "2028-01-01T00:00:00Z"}
                          for i, (m, gpus, rate) in enumerate(commitments)]
    pricing = parse_pricing(json.dumps(doc), "p.json")

    kube, nodes = KubeState(), {f"n{i}": n for i, n in enumerate(fleet)}
    for name, n in nodes.items():
        labels = dict(CAPACITY_LABELS[n.capacity][0])
        if n.instance_type:
            labels["node.kubernetes.io/instance-type"] = n.instance_type
        if n.pool:
            labels[kube.pool_label] = n.pool
        kube.nodes[name] = labels
    books = Books(LedgerState())
    books.apply(books.prepare([_snapshot(name, n, 0.0) for name, n in nodes.items()], kube, pricing=pricing, now=T0))
    p = books.prepare([_snapshot(name, n, TICK) for name, n in nodes.items()], kube, pricing=pricing, now=T0 + TICK)

    present = {m: sum(n.gpus for n in fleet if n.model == m and eligible(n)) for m in lowest}  # n per model

    def rate(n: Node) -> float:  # rule 4: c x R + (1 - c) x E
        found = next(((gpus, r) for m, gpus, r in commitments if m == n.model), None)
        if found is None or not eligible(n):
            return payg(n)
        c = min(found[0], present[n.model]) / present[n.model]
        return c * found[1] + (1 - c) * payg(n)

    rows = [(k.node, a.allocated_s, a.energy_j, a.cost, a.list_cost) for k, a in p.write.usage.items()] + [
        (k.node, a.seconds, a.energy_j, a.cost, a.list_cost) for k, a in p.write.unallocated.items()]
    assert float(sum(seconds for _n, seconds, *_ in rows)) == pytest.approx(sum(n.gpus for n in fleet) * TICK)
    for node, *amounts in rows:
        n = nodes[node]
        seconds, joules, cost, list_cost = (float(a) for a in amounts)
        energy = joules / 3.6e6 * 0.1 * 1.2 if n.model == OWNED else 0.0  # kWh x price x PUE, owned only
        # booked money: the price of the end position less that of the start, each rounded half-even to 9 digits
        # (at most a nano-unit off the exact price of the row's seconds; the energy's own rounding on owned GPUs)
        assert list_cost == pytest.approx(seconds / 3600 * list_price(n), rel=1e-9, abs=1e-9)
        assert cost == pytest.approx(seconds / 3600 * rate(n) + energy, rel=1e-9, abs=1.5e-9)
        if n.model != OWNED:
            assert list_cost >= cost - 1e-9
