"""The held-GPU families of the last scrape, reused while the gauges they come from are unchanged, so the
renderer (``exposition``) serves their bytes of then instead of building and formatting 20,000 pods again."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from exporter.aggregator.books.gauges import Gauges

Family = GaugeMetricFamily | CounterMetricFamily


class HeldGaugesCache:
    """``build``'s families for the last gauges seen. The key holds shallow copies of the gauges' dicts: a tick
    replaces them (``Gauges.show_held``) and their ``PodGauge`` values, never mutating one in place."""

    def __init__(self, build: Callable[..., Iterable[Family]]) -> None:
        self._build = build
        self._last: tuple[tuple[object, ...], list[Family]] | None = None

    def families(self, g: Gauges, *, currency: str) -> list[Family]:
        """The same family objects as last scrape while nothing they show changed; built anew otherwise."""
        key = (currency, dict(g.allocated_gpus), dict(g.ns_utilization), dict(g.workload_utilization), dict(g.pods),
               dict(g.overflow_pods))
        if self._last is None or self._last[0] != key:
            self._last = (key, list(self._build(g, currency=currency)))
        return self._last[1]
