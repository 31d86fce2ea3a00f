"""Budget states from ledger rows, by hand: spent per target (namespace, team, Kueue LocalQueue and ClusterQueue,
Volcano), remaining, burn rate and when it runs out."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from exporter.aggregator.advice.window_budgets import evaluate
from exporter.aggregator.ledger.store import Ledger, TickWrite
from exporter.model.books import UsageKey
from exporter.model.budget_windows import WindowBudget
from tests.ledger_versions import idle_tick

DAY = 1_798_761_600  # 2027-01-01T00:00:00Z (a Friday)
KEY = UsageKey(DAY, "team-a", "p", "wl", "n1", "pool", "H100", "", "", "USD")
TRAIN = KEY._replace(scheduler="kueue", queue="team-a/train", cluster_queue="gpu")


def _tick(*writes: TickWrite) -> TickWrite:
    w = TickWrite()
    for x in writes:
        w.usage.update(x.usage)
    w.namespace_teams[(DAY, "team-a")] = "ml"
    w.namespace_teams[(DAY + 3600, "team-a")] = "ml"
    return w


async def test_spent_remaining_burn_and_exhaustion(tmp_path: Path) -> None:
    """Hour 00: train 2 GPUs x 1 h = 7200 s at 4.00 = 8.00; hour 01: train 3600 s = 4.00, and Volcano research
    (team-b) 1800 s at 2.50/h = 1.25, and KAI's queue also named research (team-c) 3600 s, which no Volcano budget
    counts. Now 02:00 (2 h into the day).
    * train-day (Kueue LocalQueue, 4 GPU-h): spent 3 GPU-h, 1 left, burn 3 / 2 = 1.5 GPU-h/h, runs out in
      1 / 1.5 h = 40 min (02:40).
    * gpu-day (ClusterQueue gpu, money 12.00): spent 12.00, none left: spent now.
    * a-day (namespace team-a, money 100): spent 12.00; ml-day (team ml): the same rows, 12.00.
    * research-day (volcano, 1 GPU-h): 0.5 GPU-h, burn 0.25/h, runs out 2 h later (04:00)."""
    ledger = Ledger(tmp_path / "l.db")
    await ledger.open()
    try:
        await ledger.commit(_tick(idle_tick(TRAIN, seconds=7200, price=4.0)))
        await ledger.commit(_tick(idle_tick(TRAIN._replace(hour=DAY + 3600), seconds=3600, price=4.0),
                                  idle_tick(KEY._replace(hour=DAY + 3600, namespace="team-b", scheduler="volcano",
                                                         queue="research"), seconds=1800, price=2.5),
                                  idle_tick(KEY._replace(hour=DAY + 3600, namespace="team-c", scheduler="kai",
                                                         queue="research"), seconds=3600, price=4.0)))
        budgets = [WindowBudget("train-day", "kueue_local_queue", "team-a/train", "day", gpu_hours=Decimal(4)),
                   WindowBudget("gpu-day", "kueue_cluster_queue", "gpu", "day", money=Decimal(12)),
                   WindowBudget("a-day", "namespace", "team-a", "day", money=Decimal(100)),
                   WindowBudget("ml-day", "team", "ml", "day", money=Decimal(100)),
                   WindowBudget("research-day", "volcano_queue", "research", "day", gpu_hours=Decimal(1))]
        now = DAY + 7200.0
        states = {s.budget.name: s for s in await ledger.read(
            lambda q: evaluate(q, budgets, now=now, cluster="default", currency="USD"))}
    finally:
        await ledger.close()
    train = states["train-day"]
    assert train.spent_gpu_hours == 3
    assert train.remaining_gpu_hours == 1
    assert train.burn_gpu_hours == Decimal("1.5")
    assert train.exhausted_at == now + 40 * 60
    assert not train.spent
    assert train.thresholds_reached() == []  # 3 / 4 = 0.75 < 0.8
    gpu = states["gpu-day"]
    assert (gpu.spent_money, gpu.remaining_money, gpu.spent, gpu.exhausted_at) == (Decimal(12), Decimal(0), True, now)
    assert states["a-day"].spent_money == 12
    assert states["ml-day"].spent_money == 12
    research = states["research-day"]
    assert (research.spent_gpu_hours, research.spent_money) == (Decimal("0.5"), Decimal("1.25"))
    assert research.exhausted_at == now + 2 * 3600
