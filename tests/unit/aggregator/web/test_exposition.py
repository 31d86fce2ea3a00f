"""The fast exposition renderer writes what prometheus-client's generate_latest writes."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from exporter.aggregator.books.gauges import PodGauge
from exporter.aggregator.web.exposition import ExpositionRenderer
from exporter.aggregator.web.metrics import AggregatorCollector
from tests.unit.aggregator.web.test_metrics import HOSTILE, inputs


def _samples(text: str) -> list[tuple[str, list[tuple[str, str]], float]]:
    return sorted((s.name, sorted(s.labels.items()), s.value) for f in text_string_to_metric_families(text)
                  for s in f.samples if not s.name.endswith("_created"))


def test_fast_renderer_matches_prometheus_client() -> None:
    """Same samples, labels (escaped) and values as generate_latest, twice (the label cache is warm)."""
    collector = AggregatorCollector(inputs)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    expected = _samples(generate_latest(registry).decode())
    renderer = ExpositionRenderer()
    for _ in range(2):
        got = _samples(renderer.render(list(collector.collect())).decode())
        assert got == expected
    assert any(("pod", HOSTILE) in s[1] for s in got)
    assert ("gpucost_quota_gpus", [("namespace", "team-a"), ("source", "resourcequota"), ("type", "used")], 3.0) in got
    assert ("gpucost_unobserved_gpu_seconds_total", [("gpu_model", "NVIDIA L4"), ("node", "n1"), ("pool", "pool")],
            60.0) in got
    assert ("gpucost_agent_snapshots_rejected_total", [("reason", "node_mismatch")], 3.0) in got


def test_unchanged_families_are_served_from_cached_bytes() -> None:
    """A second scrape with the same gauges hands the renderer the same family objects (their bytes are reused,
    not formatted again); a tick that replaces a pod's gauge gives new families and the new value."""
    m = inputs()
    collector = AggregatorCollector(lambda: m)
    renderer = ExpositionRenderer()
    first_families = list(collector.collect())
    first = renderer.render(first_families)
    again_families = list(collector.collect())
    held = {f.name for f in again_families if any(f is g for g in first_families)}
    assert {"gpucost_pod_hourly_cost", "gpucost_pod_allocated_gpus", "gpucost_allocated_gpus"} <= held
    assert renderer.render(again_families) == first
    pod = m.gauges.pods[("team-a", HOSTILE)]
    m.gauges.pods = {("team-a", HOSTILE): PodGauge(pod.workload, pod.gpus, pod.gpu_model, pod.utilization,
                                                   pod.idle_seconds, 5.5)}  # a tick: new dict, new gauge
    changed = _samples(renderer.render(list(collector.collect())).decode())
    assert ("gpucost_pod_hourly_cost", [("currency", "USD"), ("namespace", "team-a"), ("pod", HOSTILE),
                                        ("workload", "wl")], 5.5) in changed
