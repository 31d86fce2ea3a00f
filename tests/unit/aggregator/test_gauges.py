"""The cardinality guard on per-pod gauges: the cheapest pods fold into one overflow series."""

from __future__ import annotations

from exporter.aggregator.gauges import PodGauge, fold_overflow


def test_cardinality_guard_folds_cheapest_pods() -> None:
    """With a limit of 3 pods per namespace, the two most expensive keep their series and the rest fold
    into one __overflow__ pod whose GPUs and cost are the sum of what it replaced."""
    pods = {("ns", f"p{i}"): PodGauge("wl", 1.0, "M", 0.5, float(i), float(i)) for i in range(6)}
    pods[("other", "x")] = PodGauge("wl", 1.0, "M", 0.5, 0.0, 1.0)
    out, folded = fold_overflow(pods, 3)
    assert set(out) == {("ns", "p5"), ("ns", "p4"), ("ns", "__overflow__"), ("other", "x")}
    assert folded == {"ns": 4}
    over = out[("ns", "__overflow__")]
    assert (over.gpus, over.hourly_cost, over.idle_seconds) == (4.0, 0 + 1 + 2 + 3, 3.0)
