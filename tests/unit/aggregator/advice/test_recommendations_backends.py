"""Right-sizing read from both ledger backends: the same hand-written books give the same rows from SQLite and
PostgreSQL, with the figures computed here by hand, over the default window and over an explicit ``since``.

Books (2 hours from 2027-01-15T00:00:00Z; latest booked snapshot at 02:00), prices per device-hour: an A100
2.50, its 1g.10gb instance 2.50 / 7. Every device's measured seconds sit in one utilisation bucket.

* notebook (lab; 1 H100 at 4.00, 0 %, 2 GiB) both hours: scale_to_zero, now 4.00 x 730 = 2920.00.
* serve (infer; a Deployment: serve-a both hours, serve-b the second hour only; one A100 each at 8 %, peaks
  6 GiB and 4 GiB): pooled p95 10 %, 0.10 x 312 = 31.2 TFLOPS <= 0.8 x 312 / 7 = 35.66 on a 1g.10gb and
  6 GiB x 1.2 = 7.73e9 <= 10e9 bytes: mig 1g.10gb.
  Whole window: cost 3 x 2.50 = 7.50 over 2 h, now 3.75 x 730 = 2737.50; 3 device-hours over 2 h = 1.5 devices,
  after 1.5 x 2.50 / 7 x 730 = 391.07. Since 01:00: 2 x 2.50 = 5.00 over 1 h, now 3650.00; 2 devices, after
  2 x 2.50 / 7 x 730 = 521.43.
* embed (infer; a 1g.10gb at 30 %, 8 GiB) both hours: the offered 1g.10gb; nothing smaller fits: no row.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from exporter.aggregator.advice.recommendations import Query, as_dict, recommendations
from exporter.aggregator.ledger.devices import DeviceKey
from exporter.aggregator.ledger.evidence import EvidenceKey, EvidenceRow
from exporter.aggregator.ledger.store import Ledger, TickWrite
from exporter.model.books import AgentMark, UsageAmounts, UsageKey
from exporter.model.exact import exact
from exporter.model.rightsizing.evidence import UtilHistogram
from exporter.model.rightsizing.types import Recommendation, RuleSettings
from tests.pg import LedgerTarget, ledger_target_fixture, postgres_fixture

_FIXTURES = (ledger_target_fixture, postgres_fixture)  # used by name

H = 3600
H0 = 20833 * 86400  # 2027-01-15T00:00:00Z
H1 = H0 + H
H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
GIB = 2**30
MONTH_H = 730.0
ONE_HOUR = RuleSettings(min_evidence_hours=1.0)
T = TypeVar("T")


def _hold(w: TickWrite, *, hour: int, ns: str, pod: str, workload: str, model: str, price: float, util: float,
          fb: int, profile: str = "") -> None:
    """One device's hour: usage (GPU-seconds = fraction x 3600, cost = the device-hour's price) and evidence."""
    fraction = 1 / 7 if profile else 1.0
    device = f"MIG-{pod}" if profile else f"GPU-{pod}"
    w.usage[UsageKey(hour, ns, pod, workload, "n1", "", model, profile, "", "USD")] = UsageAmounts(
        allocated_s=exact(fraction * H), used_s=exact(fraction * H * util), idle_s=exact(fraction * H * (1 - util)),
            cost=exact(price),
        list_cost=exact(price))
    kind = "mig" if profile else "gpu"
    w.evidence[EvidenceKey(hour, ns, pod, workload, "n1", model, profile, kind, device)] = EvidenceRow(
        fraction, UtilHistogram.of([(util, float(H))]), fb)


def _books() -> TickWrite:
    w = TickWrite()
    for hour in (H0, H1):
        _hold(w, hour=hour, ns="lab", pod="notebook-0", workload="notebook", model=H100, price=4.00, util=0.0,
              fb=2 * GIB)
        _hold(w, hour=hour, ns="infer", pod="serve-a", workload="serve", model=A100, price=2.50, util=0.08,
              fb=6 * GIB)
        _hold(w, hour=hour, ns="infer", pod="embed-0", workload="embed", model=A100, price=2.50 / 7, util=0.30,
              fb=8 * GIB, profile="1g.10gb")
    _hold(w, hour=H1, ns="infer", pod="serve-b", workload="serve", model=A100, price=2.50, util=0.08, fb=4 * GIB)
    w.agents["n1"] = AgentMark("epoch-1", float(H0 + 2 * H), 480)
    w.books_since["n1"] = float(H0)
    return w


async def _rows(t: LedgerTarget, **window: Any) -> list[dict[str, Any]]:
    ledger = Ledger(t.target, password_file=t.password_file)
    await ledger.open()
    try:
        await ledger.commit(_books())
        found = await ledger.read(lambda q: recommendations(q, cluster=ledger.cluster, settings=ONE_HOUR, **window))
        return [as_dict(r) for r in found]
    finally:
        await ledger.close()


@pytest.fixture(name="sqlite_rows")
async def _sqlite_rows(tmp_path: Path) -> dict[str, list[dict[str, Any]]]:
    """The reference: the same books in a SQLite ledger, whole window and since 01:00."""
    t = LedgerTarget("sqlite", str(tmp_path / "reference.db"))
    return {"whole": await _rows(t), "since": await _rows(LedgerTarget("sqlite", str(tmp_path / "since.db")),
                                                          since=float(H1))}


async def test_both_backends_give_the_hand_computed_rows(ledger_target: LedgerTarget,
                                                         sqlite_rows: dict[str, list[dict[str, Any]]]) -> None:
    whole = await _rows(ledger_target)
    assert whole == sqlite_rows["whole"]
    rows = {r["workload"]: r for r in whole}
    assert set(rows) == {"notebook", "serve"}  # embed: nothing smaller than its 1g.10gb
    nb, serve = rows["notebook"], rows["serve"]
    assert (nb["action"], nb["monthly_cost_now"], nb["monthly_cost_after"]) == ("scale_to_zero", 2920.00, 0.0)
    assert nb["evidence"] == {"util_p50": 0.01, "util_p95": 0.01, "framebuffer_peak_bytes": 2 * GIB,
                              "hours_observed": 2.0}
    assert serve["action"] == "mig" and serve["target"]["mig_profile"] == "1g.10gb"
    assert serve["current"] == {"gpu_model": A100, "mig_profile": None, "gpus": 1, "replicas": None}
    assert serve["monthly_cost_now"] == pytest.approx(3 * 2.50 / 2 * MONTH_H)  # 2737.50
    assert serve["monthly_cost_after"] == pytest.approx(round(1.5 * 2.50 / 7 * MONTH_H, 2))  # 391.07
    assert serve["evidence"]["framebuffer_peak_bytes"] == 6 * GIB and serve["evidence"]["hours_observed"] == 2.0


async def test_both_backends_agree_on_an_explicit_since(ledger_target: LedgerTarget,
                                                        sqlite_rows: dict[str, list[dict[str, Any]]]) -> None:
    since = await _rows(ledger_target, since=float(H1))
    assert since == sqlite_rows["since"]
    serve = {r["workload"]: r for r in since}["serve"]
    assert serve["monthly_cost_now"] == pytest.approx(2 * 2.50 * MONTH_H)  # 3650.00
    assert serve["monthly_cost_after"] == pytest.approx(round(2 * 2.50 / 7 * MONTH_H, 2))  # 521.43
    assert serve["evidence"]["hours_observed"] == 1.0


async def _read_after(t: LedgerTarget, w: TickWrite, *, hours: int, read: Callable[[Query, str], T]) -> T:
    """``w`` committed with node n1 booked from H0 for ``hours``, then ``read(query, cluster)`` on the ledger."""
    w.agents["n1"] = AgentMark("epoch-1", float(H0 + hours * H), 100)
    w.books_since["n1"] = float(H0)
    ledger = Ledger(t.target, password_file=t.password_file)
    await ledger.open()
    try:
        await ledger.commit(w)
        return await ledger.read(lambda q: read(q, ledger.cluster))
    finally:
        await ledger.close()


async def test_rows_read_do_not_grow_with_the_hours_in_the_window(ledger_target: LedgerTarget) -> None:
    """One pod on one H100 for 48 hours: no query hands back more than one row (a device, a pod, a workload),
    where reading pod-hours would be 48; its 48 hours observed and 1 GPU are still there (summed by the
    database)."""
    w = TickWrite()
    for i in range(48):
        _hold(w, hour=H0 + i * H, ns="lab", pod="notebook-0", workload="notebook", model=H100, price=4.00, util=0.0,
              fb=2 * GIB)
        w.node_devices[DeviceKey(H0 + i * H, "n1", H100, "", 0)] = 1  # the GPU n1 advertised, every hour
    sizes: list[int] = []

    def counted(query: Query, cluster: str) -> list[Recommendation]:
        def q(sql: str, params: Any) -> list[tuple[Any, ...]]:
            rows = query(sql, params)
            sizes.append(len(rows))
            return rows
        return recommendations(q, cluster=cluster, settings=ONE_HOUR)

    (row,) = await _read_after(ledger_target, w, hours=48, read=counted)
    # window (2), evidence, GPUs held, hours observed, usage; free capacity: advertised, held, unallocated
    assert max(sizes) == 1 and len(sizes) == 9
    assert (row.evidence.hours_observed, row.current.gpus, str(row.action)) == (48.0, 1, "scale_to_zero")


class _Rows(list[tuple[Any, ...]]):
    """A read's rows, as a list that can be watched (a weak reference) to see when it is freed."""


async def test_each_read_is_folded_and_freed_before_the_next_is_fetched(ledger_target: LedgerTarget) -> None:
    """The hourly refresh is the aggregator's peak allocation at scale (10,000 nodes: 606 MB with all four reads
    alive at once, 509 MB one at a time). Each of the four summed reads is folded into the groups and dropped
    before the next is fetched: when a read starts, no earlier read's rows are still alive."""
    alive_at_read: list[int] = []

    def watched(query: Query, cluster: str) -> list[Recommendation]:
        reads: list[weakref.ref[_Rows]] = []

        def q(sql: str, params: Any) -> list[tuple[Any, ...]]:
            alive_at_read.append(sum(r() is not None for r in reads))
            rows = _Rows(query(sql, params))
            reads.append(weakref.ref(rows))
            return rows
        return recommendations(q, cluster=cluster, settings=ONE_HOUR)

    books = _books()
    books.node_devices[DeviceKey(H0, "n1", A100, "", 0)] = 3  # all held: free capacity is read, none found
    rows = await _read_after(ledger_target, books, hours=2, read=watched)
    assert {r.workload for r in rows} == {"notebook", "serve"}
    # window (2), evidence, GPUs held, hours observed, usage; free capacity: advertised, held, unallocated
    assert alive_at_read == [0] * 9


async def test_each_placement_counts_only_its_own_devices_hours(ledger_target: LedgerTarget) -> None:
    """Workload train on H100s: pod a on a whole GPU for 2 h at 4.00 (8.00), then pod b on a quarter of a
    time-sliced GPU for 23 h at 0.10 (2.30). It is judged on the whole GPU, where it spent most, and that
    placement has 2 h of evidence: under the default 24 h gate no row (its 23 h on the shared GPU are not the
    whole GPU's evidence). Pod a also lists a device of unknown kind (an older ledger's row) in its two hours:
    it counts as no GPU, so with a 1 h gate the row says 1 GPU and 2.0 hours observed."""
    w = TickWrite()
    for i in range(25):
        hour = H0 + i * H
        if i < 2:
            w.usage[UsageKey(hour, "ml", "a", "train", "n1", "", H100, "", "", "USD")] = UsageAmounts(
                allocated_s=exact(float(H)), used_s=exact(180.0), idle_s=exact(H - 180.0), cost=exact(4.0),
                    list_cost=exact(4.0))
            w.evidence[EvidenceKey(hour, "ml", "a", "train", "n1", H100, "", "gpu", "GPU-a")] = EvidenceRow(
                1.0, UtilHistogram.of([(0.05, float(H))]), GIB)
            w.evidence[EvidenceKey(hour, "ml", "a", "train", "n1", H100, "", "", "GPU-old")] = EvidenceRow(
                1.0, UtilHistogram.of([(0.05, float(H))]), None)
        else:
            w.usage[UsageKey(hour, "ml", "b", "train", "n1", "", H100, "", "", "USD")] = UsageAmounts(
                allocated_s=exact(H / 4), used_s=exact(45.0), idle_s=exact(H / 4 - 45.0), cost=exact(0.10),
                    list_cost=exact(0.10))
            w.evidence[EvidenceKey(hour, "ml", "b", "train", "n1", H100, "", "replica", "GPU-b::0")] = EvidenceRow(
                0.25, UtilHistogram.of([(0.05, float(H))]), None)
    gated, (row,) = await _read_after(ledger_target, w, hours=25, read=lambda q, cluster: (
        recommendations(q, cluster=cluster), recommendations(q, cluster=cluster, settings=ONE_HOUR)))
    assert gated == []
    assert (row.current.gpus, row.current.replicas, row.evidence.hours_observed) == (1, None, 2.0)
