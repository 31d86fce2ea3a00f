"""Random fleets for the exact-amount tests: agents' counters over random intervals crossing hours, booked by
the real ``Books`` into a ledger (SQLite or PostgreSQL). Shared by the two-backend property test and the
script that made the FOCUS golden files from them (``tests/integration/focus_golden.py``)."""

from __future__ import annotations

import random
from decimal import Decimal
from pathlib import Path

from exporter.aggregator.books.booking import Books
from exporter.aggregator.kube.state import KubeState
from exporter.aggregator.ledger.store import Ledger
from exporter.model.pricing.document import Pricing, parse_pricing
from exporter.model.usage import GpuCapacity, HolderCounters, UnallocatedCounter, UsageSnapshot

T0 = 1_800_000_000.0  # an hour boundary
H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"
FRACTIONS = {"": Decimal(1), "1g.10gb": Decimal(1) / 7, "3g.40gb": Decimal(3) / 7, "2g.20gb": Decimal(2) / 7}
SEEDS = range(6)


def random_pricing(rng: random.Random) -> Pricing:
    """Prices with many digits (9 after the point), so nothing is round by luck."""
    h100, a100 = (Decimal(rng.randrange(1_000_000_000, 9_999_999_999)) / 10**9 for _ in range(2))
    return parse_pricing(f'currency: USD\ndefault_price: 1\nmodels: {{"{H100}": {h100}, "{A100}": {a100}}}\n',
                         "p.yaml")


def random_fleet(rng: random.Random) -> list[list[UsageSnapshot]]:
    """Per node, its agent's snapshots: holders of whole GPUs or MIG slices whose counters advance by random
    amounts (never more than wall time x fraction) over random intervals crossing hours, plus unheld GPU time."""
    out = []
    for n in range(rng.randint(1, 3)):
        node, model = f"n{n}", rng.choice((H100, A100))
        holders = []
        for i in range(rng.randint(1, 4)):
            profile = rng.choice(tuple(FRACTIONS)) if model == A100 else ""
            holders.append((f"ns{rng.randint(0, 2)}", f"p{n}-{i}", profile, float(FRACTIONS[profile])))
        counters = {pod: [0.0, 0.0] for _ns, pod, _p, _f in holders}
        free, ts, snaps = 0.0, T0, []
        for seq in range(1, rng.randint(3, 7)):
            step = rng.choice((15.0, 60.0, 333.3, 900.0, 2_700.0))
            ts += step
            for _ns, pod, _profile, frac in holders:
                held = step * frac * rng.random()
                counters[pod][0] += held
                counters[pod][1] += held * rng.random()
            free += step * rng.random()
            snaps.append(UsageSnapshot(node=node, epoch="e1", timestamp=ts, seq=seq, started_at=T0, holders=[
                HolderCounters(namespace=ns, pod=pod, container="c", device_id=f"{pod}-dev", gpu_uuid=f"GPU-{node}-{i}",
                               gpu_model=model, mig_profile=profile or None, fraction=frac,
                               allocated_s=counters[pod][0], used_s=counters[pod][1], unmeasured_s=0.0)
                for i, (ns, pod, profile, frac) in enumerate(holders)],
                unallocated=[UnallocatedCounter(gpu_model=model, seconds=free)],
                capacity=[GpuCapacity(gpu_uuid=f"GPU-{node}-{i}", gpu_model=model) for i in range(8)]))
        out.append(snaps)
    return out


async def book_fleet(target: str, password_file: Path | None, *, fleet: list[list[UsageSnapshot]],
                     pricing: Pricing) -> Decimal:
    """Book the fleet tick by tick (every node's next snapshot in one tick); the ledger's booked total."""
    ledger = Ledger(target, password_file=password_file)
    await ledger.open()
    try:
        books, kube = Books(await ledger.load_state()), KubeState()
        for node in {s[0].node for s in fleet}:
            kube.nodes[node] = {}
        for tick in range(max(len(s) for s in fleet)):
            p = books.prepare([s[tick] for s in fleet if tick < len(s)], kube, pricing=pricing)
            assert p.rejected == {}
            await ledger.commit(p.write)
            books.apply(p)
        total = Decimal(0)
        for table in ("usage", "unallocated", "unobserved"):
            ((cost,),) = await ledger.query(f"SELECT COALESCE(SUM(cost), 0) FROM {table}")
            total += Decimal(cost)
        return total
    finally:
        await ledger.close()
