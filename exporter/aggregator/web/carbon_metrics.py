"""The CO2e counter of /metrics: grams of the measured energy, by namespace, only where they are known."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily

from exporter.aggregator.books.booking import Books
from exporter.model.books import NamespaceTotals


def co2e_counter(books: Books, *, namespaces: dict[str, NamespaceTotals]) -> Iterator[CounterMetricFamily]:
    """CO2e of the measured energy, by namespace (and capacity nobody held or observed); only where it is known,
    so a pricing file without ``emissions:`` reports nothing rather than 0."""
    co2e = CounterMetricFamily("gpucost_co2e_grams_total",
                               "grams CO2e of the energy measured on the devices (pricing emissions: grid intensity x "
                               "PUE), by the namespace that held them (__unallocated__, __unobserved__: nobody did)",
                               labels=["namespace"])
    for ns, total in sorted(namespaces.items()):
        if total.co2e_s > 0:
            co2e.add_metric([ns], float(total.co2e_g))
    for name, capacity in (("__unallocated__", books.unallocated_totals), ("__unobserved__", books.unobserved_totals)):
        if sum(a.co2e_s for a in capacity.values()) > 0:
            co2e.add_metric([name], float(sum(a.co2e_g for a in capacity.values())))
    if co2e.samples:
        yield co2e
