"""``gpucost_gpu_model_info``: the vendor of every GPU model the metrics name, as one series per model.

Every series that carries ``gpu_model`` gets its vendor by a join on this one, so vendor costs no label on
them and no cardinality: ``sum by (vendor) (gpucost_unallocated_cost_total * on (gpu_model) group_left (vendor)
gpucost_gpu_model_info)``. The vendor is derived from the model name exactly as ``report --by vendor`` does.
"""

from __future__ import annotations

from prometheus_client.core import GaugeMetricFamily

from exporter.aggregator.books.booking import Books
from exporter.aggregator.books.gauges import Gauges
from exporter.aggregator.ledger.report import vendor_of
from exporter.model.pricing.document import Pricing


def model_info(books: Books | None, *, gauges: Gauges, pricing: Pricing) -> GaugeMetricFamily:
    """1 per GPU model seen on a node, held by a pod, booked as capacity or priced, with its vendor."""
    models: set[str] = {pg.gpu_model for pg in gauges.pods.values()} | set(pricing.doc.models)
    if books is not None:
        models |= {at.gpu_model for at in books.node_prices}
        models |= {k.gpu_model for k in (*books.unallocated_totals, *books.unobserved_totals)}
    info = GaugeMetricFamily("gpucost_gpu_model_info", "1 per GPU model, with its vendor (nvidia, amd, gaudi, "
                             "unknown): join on gpu_model for vendor", labels=["gpu_model", "vendor"])
    for model in sorted(m for m in models if m):
        info.add_metric([model, vendor_of(model)], 1.0)
    return info
