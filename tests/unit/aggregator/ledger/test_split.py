"""Schema 13 on both backends: split GPU-seconds on the usage rows, the marks and the namespace totals. A ledger a
schema-12 build wrote is migrated on open: every row kept, split 0 on the usage rows and totals (nothing split was
known then), and the marks' split unknown, so an agent's cumulative split counter is a baseline there instead of
one interval's split (which would outrun the interval's allocation and be refused for ever)."""

from __future__ import annotations

from decimal import Decimal

from exporter.aggregator.books.booking import Books
from exporter.aggregator.kube.state import KubeState, PodInfo
from exporter.aggregator.ledger.schema import TABLES_V12
from exporter.aggregator.ledger.store import SCHEMA_VERSION, Ledger
from exporter.model.books import SPLIT_UNKNOWN, CounterMark, NamespaceKey
from exporter.model.pricing.document import parse_pricing
from exporter.model.usage import GpuCapacity, HolderCounters, UsageSnapshot
from tests.ledger_versions import back_to, usage_as_of
from tests.pg import LedgerTarget, ledger_target_fixture, postgres_fixture, raw_execute

_FIXTURES = (ledger_target_fixture, postgres_fixture)  # used by name

HOUR = 1_764_547_200  # 2025-12-01T00:00:00Z
L4 = "NVIDIA L4"
KEY = "ml/p/c/GPU-1::0"


def _as_schema_12(t: LedgerTarget) -> None:
    """What a schema-12 build booked: ml held 1 GPU-h (3600 s) at 0.80, half used; its totals; the node's mark
    (7200 held, 3600 used) as of 10 s into the hour, and the agent's."""
    raw_execute(
        t, *back_to(12, backend=t.backend), *usage_as_of(TABLES_V12, backend=t.backend, hour=HOUR),
        "INSERT INTO usage (cluster, hour, namespace, pod, workload, node, pool, gpu_model, mig_profile, "
        "priority_class, currency, claim, sharing, allocated_s, used_s, unmeasured_s, idle_s, cost, idle_cost, "
        f"energy_j, list_cost) VALUES ('default', {HOUR}, 'ml', 'p', 'wl', 'n1', '', '{L4}', '', '', 'USD', '', "
        "'time-slicing', 3600, 1800, 0, 1800, 0.8, 0.4, 0, 0.8)",
        "INSERT INTO totals (cluster, namespace, currency, allocated_s, used_s, unmeasured_s, cost, idle_cost, "
        "list_cost, energy_j) VALUES ('default', 'ml', 'USD', 3600, 1800, 0, 0.8, 0.4, 0.8, 0)",
        "INSERT INTO hwm (cluster, node, key, allocated_s, used_s, unmeasured_s, energy_j) "
        f"VALUES ('default', 'n1', '{KEY}', 7200, 3600, 0, 0)",
        f"INSERT INTO agents (cluster, node, epoch, booked_ts, seq, since) VALUES ('default', 'n1', 'e1', "
        f"{HOUR + 10}, 7, 0)")


def _snap(seq: int, ts: float, *, alloc: float, split: float) -> UsageSnapshot:
    return UsageSnapshot(node="n1", epoch="e1", timestamp=ts, seq=seq, holders=[
        HolderCounters(namespace="ml", pod="p", container="c", device_id="GPU-1::0", gpu_uuid="GPU-1", gpu_model=L4,
                       fraction=0.5, allocated_s=alloc, used_s=3600.0, unmeasured_s=0.0, split_s=split,
                       sharing="time-slicing")], capacity=[GpuCapacity(gpu_uuid="GPU-1", gpu_model=L4)])


def _kube() -> KubeState:
    k = KubeState()
    k.nodes["n1"] = {}
    k.pods[("ml", "p")] = PodInfo("ml", "p", "u", "n1", "Running", 0.5, "wl", "Deployment", "", {}, "", "", "")
    return k


async def test_schema_12_ledger_gains_split_columns(ledger_target: LedgerTarget) -> None:
    """After the migration: the usage row (3600 s, 0.80), the totals and the mark are all there; split is 0 on the
    row and the totals, unknown on the mark. The agent's next snapshot (10 s later: 0.5 x 10 = 5 GPU-s more, its
    cumulative split 2000 s over its whole epoch) books 5 s held and no split, not a refusal; the one after
    (another 5 s held, split 2005) books 5 s split. The report's ml row: (3600 + 10) / 3600 GPU-h held, 5 / 3600
    split."""
    fresh = Ledger(ledger_target.target, password_file=ledger_target.password_file)
    fresh.open_sync()
    fresh.backend.close()
    _as_schema_12(ledger_target)
    ledger = Ledger(ledger_target.target, password_file=ledger_target.password_file)
    await ledger.open()
    try:
        assert await ledger.query("SELECT value FROM meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]
        assert SCHEMA_VERSION == 15
        usage = await ledger.query("SELECT allocated_s, used_s, cost, split_s FROM usage")
        assert [tuple(float(v) for v in r) for r in usage] == [(3600.0, 1800.0, 0.8, 0.0)]
        state = await ledger.load_state()
        assert state.totals[NamespaceKey("ml", "USD")].allocated_s == 3600.0
        assert state.totals[NamespaceKey("ml", "USD")].split_s == 0.0
        assert state.hwm["n1"][KEY] == CounterMark(allocated_s=7200.0, used_s=3600.0, split_s=SPLIT_UNKNOWN)
        books, k = Books(state), _kube()
        pricing = parse_pricing('default_price: 1\nmodels: {"NVIDIA L4": 0.8}\n', "p")
        for seq, alloc, split, booked in ((8, 7205.0, 2000.0, 0.0), (9, 7210.0, 2005.0, 5.0)):
            p = books.prepare([_snap(seq, HOUR + 10 * (seq - 6), alloc=alloc, split=split)], k, pricing=pricing)
            assert p.rejected == {}
            assert [(a.allocated_s, a.split_s) for a in p.write.usage.values()] == [(Decimal(5), Decimal(booked))]
            await ledger.commit(p.write)
            books.apply(p)
        (row,) = await ledger.run_report("namespace", since=None, until=None)
        marks = await ledger.query("SELECT allocated_s, split_s FROM hwm")
    finally:
        await ledger.close()
    assert [tuple(float(v) for v in r) for r in marks] == [(7210.0, 2005.0)]
    assert row["allocated_gpu_hours"] == Decimal("1.002777778")  # (3600 + 10) / 3600 = 1.0027777..., 9 digits
    assert row["split_gpu_hours"] == Decimal("0.001388889")  # 5 / 3600 = 0.0013888..., half-even to 9 digits
