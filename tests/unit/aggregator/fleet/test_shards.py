"""Rendezvous hashing of node names over aggregator shards: stable, balanced, and moving as little as
possible when the shard count changes; and the settings that choose this replica's shard."""

from __future__ import annotations

from collections import Counter

import pytest

from exporter.aggregator.ledger.store import Ledger, NodeCounterMark, StaleMarks, TickWrite
from exporter.config import AggregatorSettings
from exporter.model.books import AgentMark, CounterMark, NamespaceKey, NamespaceTotals, UsageAmounts, UsageKey
from exporter.model.exact import exact
from exporter.model.shard_spec import Shard, hostname_ordinal, owner
from tests.pg import LedgerTarget, ledger_target_fixture, postgres_fixture

_FIXTURES = (ledger_target_fixture, postgres_fixture)  # used by name

NODES = [f"gpu-node-{i:04d}" for i in range(3000)]
PG = "postgresql://gpucost@db:5432/gpucost"


def test_owner_is_stable_and_in_range() -> None:
    """The same node always lands on the same shard (every replica must agree without talking)."""
    for node in NODES[:200]:
        s = owner(node, 3)
        assert 0 <= s < 3
        assert owner(node, 3) == s
    assert {owner(n, 1) for n in NODES} == {0}


def test_owner_pinned_values() -> None:
    """Pinned so a change of the hash (which would move every node at the next upgrade) fails a test."""
    pinned = {n: owner(n, 3) for n in ("gpu-h100-0", "gpu-l4-0", "node-b", "node-d")}
    assert pinned == {"gpu-h100-0": 1, "gpu-l4-0": 0, "node-b": 0, "node-d": 2}


@pytest.mark.parametrize("count", [2, 3, 5])
def test_balance(count: int) -> None:
    """3000 nodes over N shards: each shard within 10 % of 3000/N (a binomial's spread is ~2-3 %)."""
    per = Counter(owner(n, count) for n in NODES)
    assert set(per) == set(range(count))
    fair = len(NODES) / count
    for shard, n in per.items():
        assert abs(n - fair) <= 0.10 * fair, (shard, n, fair)


def test_two_to_three_moves_a_third_each_to_the_new_shard() -> None:
    """2 -> 3 shards: only the nodes the new shard wins move (~1/3 of them, here within 1000 +- 100 of
    3000) and every one moves to shard 2; nothing moves between shards 0 and 1."""
    moved = [(owner(n, 2), owner(n, 3)) for n in NODES if owner(n, 2) != owner(n, 3)]
    assert {new for _old, new in moved} == {2}
    assert 900 <= len(moved) <= 1100, len(moved)
    # and shrinking back 3 -> 2 moves exactly those nodes back where they were
    back = [n for n in NODES if owner(n, 3) != owner(n, 2)]
    assert len(back) == len(moved)


def test_shard_owns_and_names() -> None:
    one = Shard()
    assert not one.sharded and one.owns("anything") and one.primary
    assert one.lease_name("agg") == "agg" and one.fence_key("prod") == "prod"  # unsharded: unchanged rows
    s = Shard(2, 3)
    assert s.lease_name("agg") == "agg-shard-2" and s.fence_key("prod") == "prod/shard-2"
    assert not s.primary
    assert [n for n in NODES[:50] if s.owns(n)] == [n for n in NODES[:50] if owner(n, 3) == 2]
    with pytest.raises(ValueError, match=r"not in 0\.\.2"):
        Shard(3, 3)


def test_hostname_ordinal() -> None:
    assert hostname_ordinal("gpu-cost-exporter-aggregator-2") == 2
    assert hostname_ordinal("agg-10") == 10
    assert hostname_ordinal("my-laptop") is None
    assert hostname_ordinal("node7") is None


def test_settings_default_index_is_the_hostname_ordinal(monkeypatch: pytest.MonkeyPatch) -> None:
    # the hostname is the seam: a StatefulSet names its pods, this machine has its own name
    monkeypatch.setattr("socket.gethostname", lambda: "gpu-cost-exporter-aggregator-1")
    assert AggregatorSettings(ledger=PG, shards=3).shard() == Shard(1, 3)
    assert AggregatorSettings(ledger=PG, shards=3, shard_index=0).shard() == Shard(0, 3)
    assert AggregatorSettings().shard() == Shard(0, 1)  # unsharded ignores the hostname


def test_settings_refuse_bad_shards(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("socket.gethostname", lambda: "gpu-cost-exporter-aggregator-4")
    with pytest.raises(ValueError, match=r"shard index 4 .* not in 0\.\.2"):
        AggregatorSettings(ledger=PG, shards=3)
    with pytest.raises(ValueError, match="needs a PostgreSQL ledger"):
        AggregatorSettings(ledger="/tmp/l.db", shards=2, shard_index=0)


SHARDED_VALUES = {"aggregator": {"shards": 3, "postgres": {
    "url": "postgresql://gpucost@db:5432/gpucost?sslmode=verify-full", "cluster": "prod-eu-1",
    "passwordSecret": {"name": "ledger-db", "key": "password"}}}}


def test_helm_shards_render_a_statefulset_of_shards_on_postgres() -> None:
    """``aggregator.shards: 3`` renders one StatefulSet of 3 aggregators (no Deployment, no ledger PVC), each
    with the shared ledger's URL, cluster, password file and the shard count; the index is the ordinal."""
    import kubernetes_validate

    from tests.unit.repo.test_helm_chart import _render

    _out, docs = _render(SHARDED_VALUES)
    kinds = [d["kind"] for d in docs]
    assert "Deployment" not in kinds and "PersistentVolumeClaim" not in kinds and kinds.count("StatefulSet") == 1
    sts = next(d for d in docs if d["kind"] == "StatefulSet")
    kubernetes_validate.validate(sts, "1.33", strict=True)
    assert sts["spec"]["replicas"] == 3 and "volumeClaimTemplates" not in sts["spec"]
    pod = sts["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["GPUCOST_SHARDS"] == "3" and "GPUCOST_SHARD_INDEX" not in env
    assert env["GPUCOST_LEDGER"].startswith("postgresql://") and env["GPUCOST_CLUSTER"] == "prod-eu-1"
    assert env["GPUCOST_LEDGER_PASSWORD_FILE"] == "/etc/gpu-cost-exporter-ledger/password"
    secret = next(v for v in pod["volumes"] if v["name"] == "ledger-password")["secret"]
    assert secret["secretName"] == "ledger-db" and secret["items"] == [{"key": "password", "path": "password"}]
    # The ordinal a StatefulSet gives its pods is what the settings read as the shard index.
    assert hostname_ordinal(f"{sts['metadata']['name']}-2") == 2


def test_helm_shards_need_a_postgres_url() -> None:
    """Sharded without a shared ledger is refused at render time, naming the value."""
    from tests.unit.repo.test_helm_chart import _render

    with pytest.raises(Exception, match=r"aggregator\.postgres\.url is required"):  # Helm's own error type
        _render({"aggregator": {"shards": 2}})


async def test_ledger_refuses_a_tick_whose_node_marks_moved(ledger_target: LedgerTarget) -> None:
    """Two aggregators of one cluster both book node n1 from the same mark: the first commit lands, the
    second is refused whole (no usage row, no total) and names n1; the node's marks then reload from the
    ledger. By hand: only the first 3600 s (cost 2.5) are in the books."""
    first = Ledger(ledger_target.target, cluster="c", password_file=ledger_target.password_file, guard_marks=True)
    second = Ledger(ledger_target.target, cluster="c", password_file=ledger_target.password_file, guard_marks=True)
    await first.open()
    await second.open()
    try:
        mark = AgentMark("epoch-1", 3600.0, 7)
        for ledger in (first, second):
            w = _usage(3600.0)
            w.agents["n1"] = mark
            w.hwm.append(NodeCounterMark("n1", "k", CounterMark(allocated_s=3600.0, used_s=1800.0, unmeasured_s=0.0,
                                                                energy_j=0.0)))
            if ledger is first:
                await ledger.commit(w, {"n1": None})  # never booked before: no row expected
            else:
                with pytest.raises(StaleMarks, match="n1") as err:
                    await ledger.commit(w, {"n1": None})
                assert err.value.nodes == ["n1"]
        rows = await first.query("SELECT SUM(allocated_s), SUM(cost) FROM usage WHERE cluster = ?", ("c",))
        assert [tuple(float(v) for v in r) for r in rows] == [(3600.0, 2.5)]
        loaded = await second.load_nodes(["n1", "n2"])
        assert loaded.agents == {"n1": mark} and set(loaded.hwm["n1"]) == {"k"}
        assert loaded.hwm["n1"]["k"].allocated_s == 3600.0
        w = _usage(1800.0)
        w.agents["n1"] = AgentMark("epoch-1", 5400.0, 8)
        await second.commit(w, {"n1": loaded.agents["n1"]})  # from the reloaded mark: accepted
        totals = await first.query("SELECT allocated_s FROM totals WHERE cluster = ?", ("c",))
        assert [float(r[0]) for r in totals] == [5400.0]
    finally:
        await first.close()
        await second.close()


def _usage(seconds: float) -> TickWrite:
    """``seconds`` GPU-seconds of team-a in the hour 0, at 2.5 per GPU-hour."""
    w = TickWrite()
    cost = seconds / 3600.0 * 2.5
    w.usage[UsageKey(0, "team-a", "p", "wl", "n1", "pool", "M", "", "", "USD")] = UsageAmounts(
        allocated_s=exact(seconds), used_s=exact(seconds), idle_s=exact(0.0), cost=exact(cost), idle_cost=exact(0.0))
    w.totals[NamespaceKey("team-a", "USD")] = NamespaceTotals(allocated_s=exact(seconds), used_s=exact(seconds),
        cost=exact(cost))
    return w
