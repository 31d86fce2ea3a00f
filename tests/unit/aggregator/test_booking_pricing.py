"""Booking with version-2 pricing, by hand: node labels, two costs, energy, commitments booked once,
ledger migration 3, and the series that show them."""

from __future__ import annotations

import asyncio
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from exporter.aggregator.booking import Books
from exporter.aggregator.gauges import Gauges
from exporter.aggregator.kubestate import KubeState
from exporter.aggregator.ledger import MIGRATIONS, SCHEMA_VERSION, Ledger, LedgerState
from exporter.aggregator.metrics import AggregatorCollector, MetricsInputs
from exporter.model.books import CommitmentKey, CommitmentTotalKey, NamespaceKey
from exporter.model.pricing import Pricing, parse_pricing
from exporter.model.usage import GpuCapacity, HolderCounters, UsageSnapshot

H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z, an hour boundary
COMMITTED = parse_pricing("""
default_price: 1
models: {"NVIDIA H100 80GB HBM3": 4.0}
instance_types: {p5.48xlarge: {gpus: 8, hourly: 55.04}}
capacity_types: {spot: 0.35}
commitments:
  - {name: h100-1yr, model: "NVIDIA H100 80GB HBM3", gpus: 12, hourly: 2.10,
     start: "2027-01-01T00:00:00Z", end: "2028-01-01T00:00:00Z"}
""", "p.yaml")


def snap(node: str, seq: int, ts: float, *, held: float, gpus: int = 8, model: str = H100,
         energy_j: float = 0.0) -> UsageSnapshot:
    """One holder (ns/p) holding 1 GPU for ``held`` seconds so far, on a node of ``gpus`` GPUs."""
    return UsageSnapshot(node=node, epoch="e1", timestamp=ts, seq=seq, started_at=T0, holders=[HolderCounters(
        namespace="ns", pod=f"p-{node}", container="c", device_id="GPU-0", gpu_uuid="GPU-0", gpu_model=model,
        fraction=1.0, allocated_s=held, used_s=held, unmeasured_s=0.0, energy_j=energy_j)],
        capacity=[GpuCapacity(gpu_uuid=f"GPU-{i}", gpu_model=model) for i in range(gpus)])


def cluster(**labels: dict[str, str]) -> KubeState:
    k = KubeState()
    for node, node_labels in labels.items():
        k.nodes[node] = node_labels
    return k


def test_node_labels_set_list_and_effective_rates() -> None:
    """od (p5.48xlarge, on-demand) and spot (p5.48xlarge, EKS SPOT): L = 55.04 / 8 = 6.88 on both.
    The 12-GPU commitment over n = 8 on-demand GPUs: c = 1, od's GPU costs 2.10; unused (12 - 8) x 2.10.
    spot: 6.88 x 0.35 = 2.408, never committed. One hour of one GPU on each node:
    od cost 2.10, list 6.88; spot cost 2.408, list 6.88; unused 4 GPU-h x 2.10 = 8.40."""
    books = Books(LedgerState())
    k = cluster(od={"node.kubernetes.io/instance-type": "p5.48xlarge"},
                spot={"node.kubernetes.io/instance-type": "p5.48xlarge", "eks.amazonaws.com/capacityType": "SPOT"})
    books.apply(books.prepare([snap("od", 1, T0, held=0.0), snap("spot", 1, T0, held=0.0)], k, COMMITTED, now=T0))
    p = books.prepare([snap("od", 2, T0 + 3600, held=3600.0), snap("spot", 2, T0 + 3600, held=3600.0)], k,
                      COMMITTED, now=T0 + 3600)
    rows = {key.node: amount for key, amount in p.write.usage.items()}
    assert rows["od"].cost == pytest.approx(2.10) and rows["od"].list_cost == pytest.approx(55.04 / 8)
    assert rows["spot"].cost == pytest.approx(55.04 / 8 * 0.35) and rows["spot"].list_cost == pytest.approx(6.88)
    unused = p.write.unused_commitment[CommitmentKey(int(T0), "h100-1yr", H100, "USD")]
    assert unused.seconds == pytest.approx(4 * 3600) and unused.cost == pytest.approx(8.40)
    assert unused.list_cost == 0.0
    assert p.write.node_billing == {}  # unchanged since the first tick wrote them
    prices = {node: (str(n.rate.capacity_type), str(n.rate.source), round(n.rate.effective_per_gpu_hour, 6))
              for node, n in p.node_prices.items()}
    assert prices == {"od": ("on-demand", "commitment", 2.10), "spot": ("spot", "instance_type", 2.408)}


def test_energy_costs_only_on_owned_hardware_and_only_in_cost() -> None:
    """An owned A100 (0.50 per GPU-hour) drew 7.2 MJ in the hour: 7.2e6 / 3.6e6 = 2 kWh x 0.12 x 1.5 = 0.36.
    cost 0.50 + 0.36 = 0.86, list 0.50; energy joules reach the namespace totals."""
    pricing = parse_pricing("""
default_price: 1
on_prem: [{model: "NVIDIA A100-SXM4-80GB", capex_per_gpu: 17520, years: 4, energy_price_kwh: 0.12, pue: 1.5}]
""", "p.yaml")
    books, k = Books(LedgerState()), cluster(dc={})
    books.apply(books.prepare([snap("dc", 1, T0, held=0.0, gpus=1, model=A100)], k, pricing))
    p = books.prepare([snap("dc", 2, T0 + 3600, held=3600.0, gpus=1, model=A100, energy_j=7.2e6)], k, pricing)
    (row,) = p.write.usage.values()
    assert row.cost == pytest.approx(0.50 + 0.36) and row.list_cost == pytest.approx(0.50)
    assert row.idle_cost == 0.0  # used the whole hour
    assert p.write.totals[NamespaceKey("ns", "USD")].energy_j == 7.2e6


def test_same_energy_costs_nothing_on_rented_gpus() -> None:
    """An H100 at 4.00 that drew 7.2 MJ: cost 4.00 (the cloud's price includes power), list 4.00."""
    books, k = Books(LedgerState()), cluster(n={})
    plain = Pricing(COMMITTED.doc.model_copy(update={"commitments": []}))
    books.apply(books.prepare([snap("n", 1, T0, held=0.0, gpus=1)], k, plain))
    p = books.prepare([snap("n", 2, T0 + 3600, held=3600.0, gpus=1, energy_j=7.2e6)], k, plain)
    (row,) = p.write.usage.values()
    assert row.cost == pytest.approx(4.0) and row.list_cost == pytest.approx(4.0)


async def test_unused_commitment_is_booked_once_across_repeats_and_restarts(tmp_path: Path) -> None:
    """12 committed, 8 present: 4 unused GPUs x 2.10 per hour. Ticks at +0, +1800, a repeated +1800
    (stale: books nothing), then a restart from the ledger and a tick at +3600: the unused part is
    4 x 3600 GPU-s = 8.40 in total, with the mark at +3600 - not 8.40 + a repeated half hour."""
    ledger = Ledger(tmp_path / "l.db")
    await ledger.open()
    k = cluster(od={})
    books = Books(await ledger.load_state())
    for seq, t in ((1, 0.0), (2, 1800.0), (2, 1800.0)):
        p = books.prepare([snap("od", seq, T0 + t, held=t)], k, COMMITTED, now=T0 + t)
        await ledger.commit(p.write)
        books.apply(p)
    await ledger.close()
    reopened = Ledger(tmp_path / "l.db")
    await reopened.open()
    state = await reopened.load_state()
    assert state.commitment_marks == {"h100-1yr": T0 + 1800}
    books = Books(state)
    p = books.prepare([snap("od", 3, T0 + 3600, held=3600.0)], k, COMMITTED, now=T0 + 3600)
    await reopened.commit(p.write)
    books.apply(p)
    rows = await reopened.query("SELECT SUM(seconds), SUM(cost) FROM unused_commitment")
    assert rows[0] == (pytest.approx(4 * 3600.0), pytest.approx(8.40))
    assert books.unused_commitment_totals[CommitmentTotalKey("h100-1yr", H100, "USD")].cost == pytest.approx(8.40)
    await reopened.close()


def version_2_ledger(path: Path) -> sqlite3.Connection:
    """A ledger as a build before version-2 pricing left it: migrations 1 and 2 only."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    for version in (1, 2):
        for stmt in filter(None, (s.strip() for s in MIGRATIONS[version].split(";"))):
            conn.execute(stmt)
    conn.execute("INSERT INTO meta VALUES ('schema_version', '2')")
    return conn


def test_version_2_ledger_migrates_with_list_cost_equal_to_cost(tmp_path: Path) -> None:
    """A ledger written at schema version 2 (before clusters and list prices) opens at the current version:
    every booked row's list cost is its cost, and each namespace's energy total is the energy of its kept rows."""
    path = tmp_path / "v2.db"
    conn = version_2_ledger(path)
    conn.execute("INSERT INTO usage VALUES (3600, 'ns', 'p', 'wl', 'n1', 'pool', 'M', '', '', 'USD', "
                 "3600, 1800, 0, 1800, 4.0, 2.0, 500.0)")
    conn.execute("INSERT INTO unallocated VALUES (3600, 'n1', 'pool', 'M', 'USD', 7200, 8.0)")
    conn.execute("INSERT INTO unobserved VALUES (3600, 'n1', 'pool', 'M', 'USD', 60, 0.5)")
    conn.execute("INSERT INTO totals VALUES ('ns', 'USD', 3600, 1800, 0, 4.0, 2.0)")
    conn.execute("INSERT INTO unallocated_totals VALUES ('n1', 'pool', 'M', 'USD', 7200, 8.0)")
    conn.close()
    ledger = Ledger(path)

    async def reopen() -> LedgerState:
        await ledger.open()
        try:
            return await ledger.load_state()
        finally:
            await ledger.close()

    state = asyncio.run(reopen())
    db = sqlite3.connect(path)
    assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
    assert db.execute("SELECT cost, list_cost FROM usage").fetchall() == [(4.0, 4.0)]
    assert db.execute("SELECT cost, list_cost FROM unallocated").fetchall() == [(8.0, 8.0)]
    assert db.execute("SELECT cost, list_cost FROM unobserved").fetchall() == [(0.5, 0.5)]
    db.close()
    assert state.totals[NamespaceKey("ns", "USD")].list_cost == 4.0
    assert state.totals[NamespaceKey("ns", "USD")].energy_j == 500.0
    assert next(iter(state.unallocated_totals.values())).list_cost == 8.0
    assert state.commitment_marks == {} and state.node_billing == {}


def test_metrics_show_list_cost_energy_unused_commitments_and_node_prices() -> None:
    """After one priced hour (test 1's cluster): list cost 6.88 + 6.88 = 13.76 for ns, cost 2.10 + 2.408
    = 4.508, the unused commitment 8.40, and each node's effective price."""
    books = Books(LedgerState())
    k = cluster(od={"node.kubernetes.io/instance-type": "p5.48xlarge"},
                spot={"node.kubernetes.io/instance-type": "p5.48xlarge", "karpenter.sh/capacity-type": "spot"})
    books.apply(books.prepare([snap("od", 1, T0, held=0.0), snap("spot", 1, T0, held=0.0)], k, COMMITTED, now=T0))
    books.apply(books.prepare([snap("od", 2, T0 + 3600, held=3600.0, energy_j=10.0),
                               snap("spot", 2, T0 + 3600, held=3600.0, energy_j=5.0)], k, COMMITTED, now=T0 + 3600))
    collector = AggregatorCollector(lambda: MetricsInputs(
        is_leader=True, books=books, gauges=Gauges(), kube=k, pricing=COMMITTED, now=T0 + 3600, kube_up=True,
        pricing_reload_errors=0, snapshots_rejected=Counter(), team_label="team", breakdown_series=False))
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in collector.collect() for s in f.samples}
    assert samples[("gpucost_list_cost_total", (("currency", "USD"), ("namespace", "ns")))] == pytest.approx(13.76)
    assert samples[("gpucost_cost_total", (("currency", "USD"), ("namespace", "ns")))] == pytest.approx(4.508)
    assert samples[("gpucost_energy_joules_total", (("namespace", "ns"),))] == 15.0
    assert samples[("gpucost_unused_commitment_cost_total",
                    (("commitment", "h100-1yr"), ("currency", "USD"), ("gpu_model", H100)))] == pytest.approx(8.40)
    assert samples[("gpucost_node_gpu_hourly_price", (("capacity_type", "spot"), ("gpu_model", H100), ("node", "spot"),
                                                      ("pricing_source", "instance_type")))] == pytest.approx(2.408)


@pytest.mark.parametrize(("block", "message"), [
    ("pricing: {default_price: 1, capacity_types: {spot: 0}}\n",
     "s.yaml: field pricing.capacity_types.spot: Input should be greater than 0"),
    ("pricing: {default_price: 1}\nprices: {A: 1}\n", "s.yaml: prices: not allowed beside pricing"),
    ("pricing: {versions: [{default_price: 1}, {default_price: 2}]}\n",
     "s.yaml: field pricing.versions[0].effective_from: required when several pricing documents are kept"),
])
def test_scenario_pricing_block_is_validated(block: str, message: str) -> None:
    """A scenario's pricing: block is checked as the aggregator checks its file: one line, file and field."""
    from exporter.sim.scenario import ScenarioError, parse_scenario

    with pytest.raises(ScenarioError) as err:
        parse_scenario(block + "nodes: [{name: n, model: M, gpus: 1}]\n", "s.yaml")
    assert str(err.value) == message or str(err.value).startswith(message)


def test_report_on_an_unmigrated_ledger_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`report` opens the ledger read-only: on a version-2 ledger it says to migrate it, exit 2."""
    from exporter.cli import main

    path = tmp_path / "v2.db"
    conn = version_2_ledger(path)
    conn.close()
    assert main(["report", "--ledger", str(path)]) == 2
    assert f"schema version 2 is older than this build's ({SCHEMA_VERSION})" in capsys.readouterr().err
