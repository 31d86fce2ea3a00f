"""The aggregator's collector: which series it emits, and the inputs the renderer tests share."""

from __future__ import annotations

from collections import Counter

from exporter.aggregator.booking import Books
from exporter.aggregator.exposition import ExpositionRenderer
from exporter.aggregator.gauges import AgentHealth, Gauges, PodGauge
from exporter.aggregator.kubestate import KubeState
from exporter.aggregator.ledger import LedgerState
from exporter.aggregator.metrics import AggregatorCollector, MetricsInputs
from exporter.aggregator.pricing_source import PricingSource
from exporter.clock import RealClock
from exporter.model.books import (
    BreakdownKey,
    BreakdownTotals,
    CapacityAmounts,
    CapacityTotalKey,
    NamespaceKey,
    NamespaceTotals,
)

HOSTILE = 'we"ird\\pod\nname'


def inputs(*, breakdown_series: bool = False) -> MetricsInputs:
    """The state the collector reads, with label values that need escaping."""
    books = Books(LedgerState(
        totals={NamespaceKey("team-a", "USD"): NamespaceTotals(7200.0, 3600.0, 0.0, 8.0, 4.0),
                NamespaceKey(HOSTILE, "USD"): NamespaceTotals(1.0, 0.5, 0.0, 0.1, float("inf"))},
        unallocated_totals={CapacityTotalKey("n1", "pool", "NVIDIA L4", "USD"): CapacityAmounts(3600.0, 0.8)},
        unobserved_totals={CapacityTotalKey("n1", "pool", "NVIDIA L4", "USD"): CapacityAmounts(60.0, 0.2)},
        breakdown={BreakdownKey("team-a", "spot", "gpu-batch", "USD"): BreakdownTotals(3600.0, 2.0)}))
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
