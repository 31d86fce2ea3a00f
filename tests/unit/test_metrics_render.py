"""The aggregator's fast /metrics renderer says exactly what prometheus-client would say."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from exporter.aggregator.booking import Books
from exporter.aggregator.kubestate import KubeState
from exporter.aggregator.ledger import LedgerState
from exporter.aggregator.metrics import AggregatorCollector, ExpositionRenderer
from exporter.aggregator.pricing_source import PricingSource
from exporter.aggregator.service import Gauges, PodGauge
from exporter.clock import RealClock
from exporter.config import AggregatorSettings

HOSTILE = 'we"ird\\pod\nname'


class FakeAggregator:
    """The state the collector reads, with label values that need escaping."""

    def __init__(self) -> None:
        self.is_leader = True
        self.settings = AggregatorSettings()
        self.books = Books(LedgerState({}, {}, {("team-a", "USD"): [7200.0, 3600.0, 0.0, 8.0, 4.0],
                                                (HOSTILE, "USD"): [1.0, 0.5, 0.0, 0.1, float("inf")]},
                                       {("n1", "pool", "NVIDIA L4", "USD"): [3600.0, 0.8]}, {}))
        self.gauges = Gauges()
        self.gauges.allocated_gpus = {"team-a": 2.0, HOSTILE: 0.25}
        self.gauges.pods = {("team-a", HOSTILE): PodGauge("wl", 1.0, "NVIDIA H100 80GB HBM3", 0.01, 600.0, 4.0)}
        self.gauges.agents = {"n1": (True, False)}
        self.pricing = PricingSource(None)
        self.kube = KubeState()
        self.kube.quotas[("team-a", "q")] = (8.0, 3.0)
        self.kube_up = True
        self.clock = RealClock()


def _samples(text: str) -> list[tuple[str, list[tuple[str, str]], float]]:
    return sorted((s.name, sorted(s.labels.items()), s.value) for f in text_string_to_metric_families(text)
                  for s in f.samples if not s.name.endswith("_created"))


def test_fast_renderer_matches_prometheus_client() -> None:
    """Same samples, labels (escaped) and values as generate_latest, twice (the label cache is warm)."""
    fake = FakeAggregator()
    collector = AggregatorCollector(fake)  # type: ignore[arg-type]
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    expected = _samples(generate_latest(registry).decode())
    renderer = ExpositionRenderer()
    for _ in range(2):
        got = _samples(renderer.render(list(collector.collect())).decode())
        assert got == expected
    assert any(("pod", HOSTILE) in s[1] for s in got)
    assert ("gpucost_quota_gpus", [("namespace", "team-a"), ("source", "resourcequota"), ("type", "used")], 3.0) in got


def test_cardinality_guard_folds_cheapest_pods() -> None:
    """With a limit of 3 pods per namespace, the two most expensive keep their series and the rest fold
    into one __overflow__ pod whose GPUs and cost are the sum of what it replaced."""
    from exporter.aggregator.service import fold_overflow

    pods = {("ns", f"p{i}"): PodGauge("wl", 1.0, "M", 0.5, float(i), float(i)) for i in range(6)}
    pods[("other", "x")] = PodGauge("wl", 1.0, "M", 0.5, 0.0, 1.0)
    out, folded = fold_overflow(pods, 3)
    assert set(out) == {("ns", "p5"), ("ns", "p4"), ("ns", "__overflow__"), ("other", "x")}
    assert folded == {"ns": 4}
    over = out[("ns", "__overflow__")]
    assert (over.gpus, over.hourly_cost, over.idle_seconds) == (4.0, 0 + 1 + 2 + 3, 3.0)


def test_breakdown_series_only_when_enabled() -> None:
    """Pool x priority-class series appear only with breakdown_series (bounded cardinality by default)."""
    fake = FakeAggregator()
    fake.books.breakdown[("team-a", "spot", "gpu-batch", "USD")] = [3600.0, 2.0]
    collector = AggregatorCollector(fake)  # type: ignore[arg-type]
    text = ExpositionRenderer().render(list(collector.collect())).decode()
    assert "gpucost_breakdown_cost_total" not in text
    fake.settings = AggregatorSettings(breakdown_series=True)
    text = ExpositionRenderer().render(list(collector.collect())).decode()
    assert ('gpucost_breakdown_cost_total{namespace="team-a",pool="spot",priority_class="gpu-batch",currency="USD"} '
            "2.0") in text
    assert 'gpucost_breakdown_allocated_gpu_seconds_total{namespace="team-a",pool="spot",priority_class="gpu-batch"}' \
        in text
