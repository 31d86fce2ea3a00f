"""What the aggregator's HTTP endpoints and status page read of it, as a protocol: they are handed the
aggregator but never import the daemon's module (no import cycle)."""

from __future__ import annotations

from typing import Any, Protocol

from exporter.aggregator.advice.budget_control import BudgetControl
from exporter.aggregator.advice.forecasts import MonthForecasts
from exporter.aggregator.advice.recommendations import Advice
from exporter.aggregator.books.booking import Books
from exporter.aggregator.books.gauges import Gauges
from exporter.aggregator.books.pricing_source import PricingSource
from exporter.aggregator.kube.state import KubeState
from exporter.aggregator.ledger.store import Ledger
from exporter.aggregator.web.metrics import AggregatorCollector
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
    budget_control: BudgetControl
    advice: Advice
    books: Books | None

    def health_report(self) -> dict[str, Any]:
        """``/readyz``'s body: readiness and what it is made of."""

    def budgets(self) -> dict[str, float]:
        """Every namespace's monthly budget now: annotations, with the configured ones on top."""
