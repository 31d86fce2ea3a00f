"""The status page's pool table: each pool's effective and list rate per GPU-hour, weighted by GPUs over
the node prices booking used, by hand."""

from __future__ import annotations

import re

from exporter.aggregator.books.booking import Books
from exporter.aggregator.ledger.store import LedgerState
from exporter.aggregator.web.status_pools import pool_rows
from exporter.model.usage import GpuCapacity, UsageSnapshot
from tests.unit.aggregator.books.pricing_books import A100, COMMITTED, H100, T0, cluster, snap

POOL = "gpu.platform/pool"


def _cells(row: str) -> list[str]:
    return re.findall(r"<td>(.*?)</td>", re.sub(r"<svg.*?</svg>", "", row))


def test_pool_rate_is_weighted_by_gpus_over_nodes_and_models() -> None:
    """Pool research: ``spot`` has 8 spot H100s on p5.48xlarge (6.88 x 0.35 = 2.408, list 6.88); ``mixed`` has
    2 on-demand H100s (the 12-GPU commitment over n = 2: c = 1, 2.10, list 4.00) and 2 A100s (unlisted:
    default 1.00, list 1.00). Effective (8 x 2.408 + 2 x 2.10 + 2 x 1.00) / 12 = 25.464 / 12 = 2.122;
    list (8 x 6.88 + 2 x 4.00 + 2 x 1.00) / 12 = 65.04 / 12 = 5.42 (a mean per node or per entry would not
    be: (2.408 + 2.10 + 1.00) / 3 = 1.836). ``late`` reported but was never booked: no rate yet."""
    k = cluster(spot={POOL: "research", "node.kubernetes.io/instance-type": "p5.48xlarge",
                      "karpenter.sh/capacity-type": "spot"},
                mixed={POOL: "research"}, late={POOL: "later"})
    mixed = UsageSnapshot(node="mixed", epoch="e1", timestamp=T0, seq=1, started_at=T0, capacity=[
        GpuCapacity(gpu_uuid=f"G-{i}", gpu_model=H100 if i < 2 else A100) for i in range(4)])
    spot = snap("spot", 1, T0, held=0.0)
    books = Books(LedgerState())
    books.apply(books.prepare([spot, mixed], k, pricing=COMMITTED, now=T0))
    latest = {"spot": spot, "mixed": mixed, "late": snap("late", 1, T0, held=0.0, gpus=2)}
    rows = {_cells(r)[0]: _cells(r)[1:] for r in pool_rows(latest, kube=k, prices=books.node_prices, currency="USD")}
    assert round((8 * 2.408 + 2 * 2.10 + 2 * 1.00) / 12, 4) == 2.122 and round(65.04 / 12, 4) == 5.42
    assert rows["research"] == ["12", "0.00 ", "12.00", "2.1220 USD", "5.4200 USD"]
    assert rows["later"] == ["2", "0.00 ", "2.00", "", ""]
