"""Each shard elects its own leader and is fenced by its own term: the aggregator's wiring of the Lease name
and the ledger's fence row, and terms of two shards of one cluster never refusing each other's commits."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import psycopg
import pytest

from exporter.aggregator.ledger.store import Ledger, StaleTerm, TickWrite
from exporter.clock import VirtualClock
from exporter.model.books import AgentMark, NamespaceKey, NamespaceTotals, UsageAmounts, UsageKey
from exporter.model.exact import exact
from exporter.model.shard_spec import Shard
from exporter.pipeline import Pipeline
from exporter.sim.scenario import parse_scenario
from tests.pg import PASSWORD, PgServer, postgres_fixture

_FIXTURES = (postgres_fixture,)  # used by name
NOV = 1_793_491_200  # 2026-11-01T00:00:00Z
SCENARIO = """
tick: 15s
duration: 1h
prices: {"NVIDIA L4": 0.8}
nodes: [{name: n0, model: "NVIDIA L4", gpus: 1}]
pods: [{name: p, namespace: team-a, node: n0, gpus: 1, utilization: 0.5}]
"""


def _fence_rows(url: str) -> dict[str, tuple[int, str]]:
    with psycopg.connect(url, password=PASSWORD) as pg:
        return {key: (int(term), holder) for key, term, holder in
                pg.execute("SELECT cluster, term, holder FROM fence").fetchall()}


async def test_shard_one_of_two_leads_under_its_own_lease_and_fence_row(postgres: PgServer, tmp_path: Path) -> None:
    """shards=2, shard_index=1, leader election on, PostgreSQL, cluster "c": the aggregator elects on the
    Lease "agg-shard-1" (not "agg", which shard 0's replicas elect on) and, once leader, takes term 1 of
    the fence row "c/shard-1" (not "c", the unsharded cluster's row), held by its Lease identity."""
    url = postgres.database()
    extra = {"cluster": "c", "ledger_password_file": postgres.password_file, "shards": 2, "shard_index": 1,
             "leader_election": True, "lease_namespace": "default", "lease_name": "agg",
             "lease_duration": 5.0, "lease_renew_period": 0.2}
    pipe = Pipeline(parse_scenario(SCENARIO, "s.yaml"), tmp_path, clock=VirtualClock(float(NOV)), ledger=url,
                    aggregator_extra=extra)
    await pipe.start(serve_aggregator=False)
    try:
        agg = pipe.aggregator
        assert agg is not None
        assert agg.shard == Shard(1, 2)
        assert agg.ledger.fenced and agg.ledger.fence_key == "c/shard-1" and agg.ledger.cluster == "c"
        # no term before it leads (the election runs in the background: it may already have won by now)
        assert not agg.ledger.may_book or (agg.is_leader and agg.ledger.term is not None)
        deadline = time.monotonic() + 30
        while agg.ledger.term is None:
            assert time.monotonic() < deadline, "no fencing term taken"
            await asyncio.sleep(0.05)
        assert agg.elector is not None and agg.elector.name == "agg-shard-1"
        leases = pipe.peers.cluster.store.objects["leases"]
        assert set(leases) == {("default", "agg-shard-1")}
        assert leases[("default", "agg-shard-1")]["spec"]["holderIdentity"] == agg.elector.identity
        assert _fence_rows(url) == {"c/shard-1": (1, agg.elector.identity)}
        assert agg.ledger.term == 1 and agg.ledger.may_book
    finally:
        await pipe.close()


def _tick(seconds: float, node: str) -> TickWrite:
    w = TickWrite()
    w.usage[UsageKey(NOV, "ns", "p", "wl", node, "pool", "M", "", "", "USD")] = UsageAmounts(
        allocated_s=exact(seconds), cost=exact(seconds / 3600))
    w.totals[NamespaceKey("ns", "USD")] = NamespaceTotals(allocated_s=exact(seconds), cost=exact(seconds / 3600))
    w.agents[node] = AgentMark("e1", float(NOV), 1)
    return w


def _shard_ledger(url: str, password_file: Path, index: int) -> Ledger:
    """A shard's ledger as the aggregator builds it: fenced, keyed by the shard's fence row."""
    return Ledger(url, cluster="c", password_file=password_file, fenced=True,
                  fence_key=Shard(index, 2).fence_key("c"))


async def test_a_shards_new_term_leaves_the_other_shards_commits_accepted(postgres: PgServer) -> None:
    """Shard 0 holds term 1 of "c/shard-0". Shard 1's leader takes term 1 of "c/shard-1", then a new leader
    of shard 1 takes term 2 of it: shard 1's old leader is refused, shard 0 commits on throughout.
    By hand: shard 0 10 + 20 s, shard 1 5 s (old) + 7 s (new), the refused 50 s never lands: 42 s."""
    url = postgres.database()
    s0, s1, s1_new = (_shard_ledger(url, postgres.password_file, i) for i in (0, 1, 1))
    for ledger in (s0, s1, s1_new):
        await ledger.open()
    try:
        assert await s0.acquire_term("s0") == 1
        await s0.commit(_tick(10.0, "n0"))
        assert await s1.acquire_term("s1") == 1  # its own row: shard 0's term is not bumped
        await s1.commit(_tick(5.0, "n1"))
        await s0.commit(_tick(20.0, "n0"))  # accepted: another shard's term is not this one's
        assert await s1_new.acquire_term("s1-new") == 2
        with pytest.raises(StaleTerm, match=r"c/shard-1: ledger term is 2, this replica held 1"):
            await s1.commit(_tick(50.0, "n1"))
        await s1_new.commit(_tick(7.0, "n1"))
        await s0.commit(_tick(0.0, "n0"))  # still shard 0's term 1
        assert s0.may_book and s0.term == 1 and not s1.may_book
        assert _fence_rows(url) == {"c/shard-0": (1, "s0"), "c/shard-1": (2, "s1-new")}
        assert await s0.query("SELECT node, SUM(allocated_s) FROM usage GROUP BY node ORDER BY node") == [
            ("n0", 10.0 + 20.0), ("n1", 5.0 + 7.0)]
        assert (await s0.load_state()).totals[NamespaceKey("ns", "USD")].allocated_s == 42.0
    finally:
        for ledger in (s0, s1, s1_new):
            await ledger.close()
