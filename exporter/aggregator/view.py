"""What the aggregator's HTTP endpoints and status page read of it, as a protocol: they are handed the
aggregator but never import the daemon's module (no import cycle)."""

from __future__ import annotations

from typing import Any, Protocol

from exporter.aggregator.booking import Books
from exporter.aggregator.forecasts import MonthForecasts
from exporter.aggregator.gauges import Gauges
from exporter.aggregator.kubestate import KubeState
from exporter.aggregator.ledger import Ledger
from exporter.aggregator.metrics import AggregatorCollector
from exporter.aggregator.pricing_source import PricingSource
from exporter.clock import Clock
from exporter.config import AggregatorSettings
from exporter.model.usage import UsageSnapshot


class AggregatorView(Protocol):
    """The parts of the aggregator its endpoints and status page use."""

    settings: AggregatorSettings
    clock: Clock
    ledger: Ledger
    gauges: Gauges
    kube: KubeState
    latest: dict[str, UsageSnapshot]
    pricing: PricingSource
    collector: AggregatorCollector
    forecasts: MonthForecasts
    books: Books | None

    def health_report(self) -> dict[str, Any]:
        """``/readyz``'s body: readiness and what it is made of."""

    def budgets(self) -> dict[str, float]:
        """Every namespace's monthly budget now: annotations, with the configured ones on top."""
