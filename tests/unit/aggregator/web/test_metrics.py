"""The aggregator's collector: which series it emits, and the inputs the renderer tests share."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal as D

import pytest

from exporter.aggregator.books.booking import Books, NodeModel
from exporter.aggregator.books.gauges import AgentHealth, Gauges, PodGauge, hourly_rate
from exporter.aggregator.books.pricing_source import PricingSource
from exporter.aggregator.kube.state import KubeState
from exporter.aggregator.ledger.store import LedgerState
from exporter.aggregator.web.exposition import ExpositionRenderer
from exporter.aggregator.web.metrics import AggregatorCollector, MetricsInputs
from exporter.clock import RealClock
from exporter.model.books import (
    BreakdownKey,
    BreakdownTotals,
    CapacityAmounts,
    CapacityTotalKey,
    NamespaceKey,
    NamespaceTotals,
)
from exporter.model.usage import GpuCapacity, HolderCounters, UsageSnapshot
from tests.unit.aggregator.books.pricing_books import A100, COMMITTED, H100, T0, cluster, snap

HOSTILE = 'we"ird\\pod\nname'


def inputs(*, breakdown_series: bool = False) -> MetricsInputs:
    """The state the collector reads, with label values that need escaping."""
    books = Books(LedgerState(
        totals={NamespaceKey("team-a", "USD"): NamespaceTotals(allocated_s=D(7200), used_s=D(3600), cost=D(8),
                                                               idle_cost=D(4)),
                NamespaceKey(HOSTILE, "USD"): NamespaceTotals(allocated_s=D(1), used_s=D("0.5"), cost=D("0.1"),
                                                              idle_cost=D("Infinity"))},
        unallocated_totals={CapacityTotalKey("n1", "pool", "NVIDIA L4", "USD"): CapacityAmounts(seconds=D(3600),
                                                                                                cost=D("0.8"))},
        unobserved_totals={CapacityTotalKey("n1", "pool", "NVIDIA L4", "USD"): CapacityAmounts(seconds=D(60),
                                                                                               cost=D("0.2"))},
        breakdown={BreakdownKey("team-a", "spot", "gpu-batch", "USD"): BreakdownTotals(allocated_s=D(3600),
                                                                                       cost=D(2))}))
    gauges = Gauges()
    gauges.allocated_gpus = {"team-a": 2.0, HOSTILE: 0.25}
    gauges.pods = {("team-a", HOSTILE): PodGauge("wl", 1.0, "NVIDIA H100 80GB HBM3", 0.01, 600.0, 4.0)}
    gauges.agents = {"n1": AgentHealth(up=True, dcgm_up=False)}
    kube = KubeState()
    kube.quotas[("team-a", "q")] = (8.0, 3.0)
    return MetricsInputs(is_leader=True, books=books, gauges=gauges, kube=kube, pricing=PricingSource(None).current,
                         now=RealClock().now(), kube_up=True, pricing_reload_errors=0,
                         snapshots_rejected=Counter({"node_mismatch": 3}), team_label="gpu.platform/team",
                         breakdown_series=breakdown_series)


def test_breakdown_series_only_when_enabled() -> None:
    """Pool x priority-class series appear only with breakdown_series (bounded cardinality by default)."""
    text = ExpositionRenderer().render(list(AggregatorCollector(inputs).collect())).decode()
    assert "gpucost_breakdown_cost_total" not in text
    collector = AggregatorCollector(lambda: inputs(breakdown_series=True))
    text = ExpositionRenderer().render(list(collector.collect())).decode()
    assert ('gpucost_breakdown_cost_total{namespace="team-a",pool="spot",priority_class="gpu-batch",currency="USD"} '
            "2.0") in text
    assert 'gpucost_breakdown_allocated_gpu_seconds_total{namespace="team-a",pool="spot",priority_class="gpu-batch"}' \
        in text


def test_metrics_show_list_cost_energy_unused_commitments_and_node_prices() -> None:
    """After one priced hour (test 1's cluster): list cost 6.88 + 6.88 = 13.76 for ns, cost 2.10 + 2.408
    = 4.508, the unused commitment 8.40, and each node's effective price."""
    books = Books(LedgerState())
    k = cluster(od={"node.kubernetes.io/instance-type": "p5.48xlarge"},
                spot={"node.kubernetes.io/instance-type": "p5.48xlarge", "karpenter.sh/capacity-type": "spot"})
    books.apply(books.prepare([snap("od", 1, T0, held=0.0), snap("spot", 1, T0, held=0.0)], k, pricing=COMMITTED,
                                now=T0))
    books.apply(books.prepare([snap("od", 2, T0 + 3600, held=3600.0, energy_j=10.0),
                               snap("spot", 2, T0 + 3600, held=3600.0, energy_j=5.0)], k, pricing=COMMITTED,
                              now=T0 + 3600))
    collector = AggregatorCollector(lambda: MetricsInputs(
        is_leader=True, books=books, gauges=Gauges(), kube=k, pricing=COMMITTED, now=T0 + 3600, kube_up=True,
        pricing_reload_errors=0, snapshots_rejected=Counter(), team_label="team", breakdown_series=False))
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in collector.collect() for s in f.samples}
    assert samples[("gpucost_list_cost_total", (("currency", "USD"), ("namespace", "ns")))] == pytest.approx(13.76)
    assert samples[("gpucost_cost_total", (("currency", "USD"), ("namespace", "ns")))] == pytest.approx(4.508)
    assert samples[("gpucost_energy_joules_total", (("namespace", "ns"),))] == 15.0
    assert samples[("gpucost_unused_commitment_cost_total",
                    (("commitment", "h100-1yr"), ("currency", "USD"), ("gpu_model", H100)))] == pytest.approx(8.40)
    assert samples[("gpucost_node_gpu_hourly_price", (("capacity_type", "spot"), ("gpu_model", H100), ("node", "spot"),
                                                      ("pricing_source", "instance_type")))] == pytest.approx(2.408)


def test_a_node_with_two_gpu_models_has_a_price_series_for_each() -> None:
    """Node ``mixed`` has 4 H100s and 4 A100s. H100: the 12-GPU commitment over n = 4 eligible GPUs, c = 1,
    rate 2.10 (commitment); A100: not listed, default 1.00 (default). Two series, one per model, and the
    pod gauges price each model's holder at its own booked rate."""
    books, k = Books(LedgerState()), cluster(mixed={})
    capacity = [GpuCapacity(gpu_uuid=f"H-{i}", gpu_model=H100) for i in range(4)] + [
        GpuCapacity(gpu_uuid=f"A-{i}", gpu_model=A100) for i in range(4)]
    holders = [HolderCounters(namespace="ns", pod=f"p-{m}", container="c", device_id=f"{m}-0", gpu_uuid=f"{m}-0",
                              gpu_model=model, fraction=1.0, allocated_s=0.0, used_s=0.0, unmeasured_s=0.0)
               for m, model in (("H", H100), ("A", A100))]
    first = UsageSnapshot(node="mixed", epoch="e1", timestamp=T0, seq=1, started_at=T0, holders=holders,
                          capacity=capacity)
    books.apply(books.prepare([first], k, pricing=COMMITTED, now=T0))
    assert set(books.node_prices) == {NodeModel("mixed", H100), NodeModel("mixed", A100)}
    assert [p.gpus for p in books.node_prices.values()] == [4, 4]
    collector = AggregatorCollector(lambda: MetricsInputs(
        is_leader=True, books=books, gauges=Gauges(), kube=k, pricing=COMMITTED, now=T0, kube_up=True,
        pricing_reload_errors=0, snapshots_rejected=Counter(), team_label="team", breakdown_series=False))
    prices = {(s.labels["gpu_model"], s.labels["pricing_source"]): s.value for f in collector.collect()
              for s in f.samples if s.name == "gpucost_node_gpu_hourly_price"}
    assert prices == {(H100, "commitment"): pytest.approx(2.10), (A100, "default"): pytest.approx(1.00)}
    for model, rate in ((H100, 2.10), (A100, 1.00)):
        assert hourly_rate(node="mixed", model=model, mig_profile=None, kube=k, pricing=COMMITTED, now=T0,
                           booked=books.node_prices) == pytest.approx(rate)
