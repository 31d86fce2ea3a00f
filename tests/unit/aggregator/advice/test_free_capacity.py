"""Right-sizing offers capacity the cluster has free, read from both ledger backends' hand-written books.

Books (2 hours from 2027-01-15T00:00:00Z, latest booked snapshot at 02:00), prices per GPU-hour: A100 2.50,
L4 0.80. Node n1: one whole A100 held by serve (infer; 8 %, 6 GiB peak). Node n2: one A100 carved into seven
1g.10gb instances nobody holds; its unallocated rows are the whole GPU both hours (3600 s at 2.50 each).
Node n3: one L4 held by encode (busy at 90 %), so the L4 is offered as held.

serve: p95 bucket 10 %: 0.10 x 312 = 31.2 TFLOPS <= 0.8 x 312 / 7 = 35.66 on a 1g.10gb, and 6 GiB x 1.2 =
7.73e9 <= 10e9 bytes: it fits the free 1g.10gb; on the L4 31.2 <= 0.8 x 121 = 96.8 and 7.73e9 <= 24e9.
now 2.50 x 730 = 1825.00. Free 1g.10gb: 7 device-hours an hour, none held, capped by n2's unallocated 1 GPU-h
= 7 instance-hours; priced at n2's own effective rate 2.50 x 1/7 = 0.3571 an hour; after 2.50 / 7 x 730 =
260.71, savings 2.50 x 730 - 2.50 / 7 x 730 = 1564.29. Without free capacity the best would be the L4:
after 0.80 x 730 = 584.00, savings 1241.00.
"""

from __future__ import annotations

from typing import Any

import pytest

from exporter.aggregator.advice.free_offers import free_offers
from exporter.aggregator.advice.recommendations import as_dict, recommendations
from exporter.aggregator.ledger.devices import DeviceKey
from exporter.aggregator.ledger.evidence import EvidenceKey, EvidenceRow
from exporter.aggregator.ledger.store import Ledger, TickWrite
from exporter.model.books import AgentMark, CapacityAmounts, CapacityKey, UsageAmounts, UsageKey
from exporter.model.exact import exact
from exporter.model.rightsizing.evidence import UtilHistogram
from exporter.model.rightsizing.types import Placement, RuleSettings
from tests.pg import LedgerTarget, ledger_target_fixture, postgres_fixture

_FIXTURES = (ledger_target_fixture, postgres_fixture)  # used by name

H = 3600
H0 = 20833 * 86400  # 2027-01-15T00:00:00Z
A100 = "NVIDIA A100-SXM4-80GB"
L4 = "NVIDIA L4"
GIB = 2**30
MONTH_H = 730.0
ONE_HOUR = RuleSettings(min_evidence_hours=1.0)


def _hold(w: TickWrite, *, hour: int, pod: str, node: str, model: str, price: float, util: float, fb: int,
          seconds: float = H) -> None:
    """One whole GPU held for ``seconds`` of the hour: its usage and its evidence."""
    w.usage[UsageKey(hour, "infer", pod, pod.rsplit("-", 1)[0], node, "", model, "", "", "USD")] = UsageAmounts(
        allocated_s=exact(seconds), used_s=exact(seconds * util), idle_s=exact(seconds * (1 - util)),
            cost=exact(price * seconds / H),
        list_cost=exact(price * seconds / H))
    w.evidence[EvidenceKey(hour, "infer", pod, pod.rsplit("-", 1)[0], node, model, "", "gpu", f"GPU-{pod}")] = \
        EvidenceRow(1.0, UtilHistogram.of([(util, seconds)]), fb)


def _free_gpu(w: TickWrite, *, hour: int, node: str, model: str, price: float, seconds: float = H) -> None:
    """``seconds`` of one GPU nobody held, as booking writes it, at ``price`` per GPU-hour."""
    w.unallocated[CapacityKey(hour, node, "", model, "USD")] = CapacityAmounts(
        seconds=exact(seconds), cost=exact(price * seconds / H), list_cost=exact(price * seconds / H))


def _books(*, carved: bool = True) -> TickWrite:
    w = TickWrite()
    for hour in (H0, H0 + H):
        _hold(w, hour=hour, pod="serve-0", node="n1", model=A100, price=2.50, util=0.08, fb=6 * GIB)
        _hold(w, hour=hour, pod="encode-0", node="n3", model=L4, price=0.80, util=0.90, fb=10 * GIB)
        w.node_devices[DeviceKey(hour, "n1", A100, "", 0)] = 1
        w.node_devices[DeviceKey(hour, "n3", L4, "", 0)] = 1
        if carved:
            w.node_devices[DeviceKey(hour, "n2", A100, "1g.10gb", 0)] = 7
        _free_gpu(w, hour=hour, node="n2", model=A100, price=2.50)
    for node in ("n1", "n2", "n3"):
        w.agents[node] = AgentMark("epoch-1", float(H0 + 2 * H), 480)
        w.books_since[node] = float(H0)
    return w


async def _read(t: LedgerTarget, w: TickWrite, read: Any) -> Any:
    ledger = Ledger(t.target, password_file=t.password_file)
    await ledger.open()
    try:
        await ledger.commit(w)
        return await ledger.read(lambda q: read(q, ledger.cluster))
    finally:
        await ledger.close()


def _by_workload(q: Any, cluster: str) -> dict[str, dict[str, Any]]:
    return {r.workload: as_dict(r) for r in recommendations(q, cluster=cluster, settings=ONE_HOUR)}


async def test_a_free_mig_instance_is_the_target(ledger_target: LedgerTarget) -> None:
    rows = await _read(ledger_target, _books(), _by_workload)
    assert set(rows) == {"serve"}  # encode is busy
    serve = rows["serve"]
    assert serve["action"] == "mig"
    assert serve["target"] == {"gpu_model": A100, "mig_profile": "1g.10gb", "gpus": 1, "replicas": None}
    assert serve["monthly_cost_now"] == pytest.approx(2.50 * MONTH_H)  # 1825.00
    assert serve["monthly_cost_after"] == pytest.approx(round(2.50 / 7 * MONTH_H, 2))  # 260.71
    assert serve["monthly_savings"] == pytest.approx(round(2.50 * MONTH_H - 2.50 / 7 * MONTH_H, 2))  # 1564.29
    assert serve["monthly_savings"] == 1564.29
    assert serve["reason"].endswith("; the cluster has it free")


async def test_without_the_carved_instances_it_goes_to_the_l4(ledger_target: LedgerTarget) -> None:
    """The same books without n2's advertised instances: its free time is a whole A100 (the kind it was not
    advertised as is not guessed), and the held L4 is the best target: savings 2.50 x 730 - 0.80 x 730."""
    serve = (await _read(ledger_target, _books(carved=False), _by_workload))["serve"]
    assert (serve["action"], serve["target"]["gpu_model"]) == ("smaller_gpu", L4)
    assert serve["monthly_savings"] == pytest.approx(round((2.50 - 0.80) * MONTH_H, 2))  # 1241.00


async def test_held_devices_and_part_hours_are_not_free(ledger_target: LedgerTarget) -> None:
    """Over 2 hours: n4 advertises 4 whole A100s (8 device-hours) and holds 3 the whole time (6), 2 left by the
    count, but its unallocated rows say 1.5 GPU-hours (it joined 30 minutes late): 1.5 free, at n4's rate 3.00
    (4.50 / 1.5 h). n6 has 1 A100 free for 1 hour at 2.00. The free A100 is priced by free device-hours:
    (1.5 x 3.00 + 1 x 2.00) / 2.5 = 2.60 (counting n4's 2 it would be 8.00 / 3 = 2.67). n5's two L4s are held
    the whole time: no L4 offer. n2's seven 1g.10gb are all held the first hour and none the second: offered at
    2.50 / 7."""
    w = TickWrite()
    for hour in (H0, H0 + H):
        w.node_devices[DeviceKey(hour, "n4", A100, "", 0)] = 4
        w.node_devices[DeviceKey(hour, "n5", L4, "", 0)] = 2
        w.node_devices[DeviceKey(hour, "n2", A100, "1g.10gb", 0)] = 7
        for i in range(3):
            _hold(w, hour=hour, pod=f"train-{i}", node="n4", model=A100, price=3.00, util=0.9, fb=GIB)
        for i in range(2):
            _hold(w, hour=hour, pod=f"encode-{i}", node="n5", model=L4, price=0.80, util=0.9, fb=GIB)
    w.node_devices[DeviceKey(H0, "n6", A100, "", 0)] = 1
    _free_gpu(w, hour=H0, node="n6", model=A100, price=2.00)
    _free_gpu(w, hour=H0, node="n4", model=A100, price=3.00, seconds=H / 2)
    _free_gpu(w, hour=H0 + H, node="n4", model=A100, price=3.00)
    w.usage[UsageKey(H0, "infer", "embed-0", "embed", "n2", "", A100, "1g.10gb", "", "USD")] = UsageAmounts(
        allocated_s=exact(7 * H / 7), cost=exact(2.50))  # seven instances, each 1/7 of the GPU, the whole hour
    _free_gpu(w, hour=H0 + H, node="n2", model=A100, price=2.50)
    w.agents["n4"] = AgentMark("epoch-1", float(H0 + 2 * H), 480)
    w.books_since["n4"] = float(H0)
    offers = await _read(ledger_target, w, lambda q, cluster: free_offers(q, cluster, start=H0, end=H0 + 2 * H))
    assert {o.placement: (o.hourly_price, o.free) for o in offers} == {
        Placement(A100): (pytest.approx(2.60), True), Placement(A100, "1g.10gb"): (pytest.approx(2.50 / 7), True)}
