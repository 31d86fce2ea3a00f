"""Rendezvous hashing of node names over aggregator shards: stable, balanced, and moving as little as
possible when the shard count changes; and the settings that choose this replica's shard."""

from __future__ import annotations

from collections import Counter

import pytest

from exporter.aggregator.shards import Shard, hostname_ordinal, owner
from exporter.config import AggregatorSettings

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

    from tests.unit.test_helm_chart import _render

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
    from tests.unit.test_helm_chart import _render

    with pytest.raises(Exception, match=r"aggregator\.postgres\.url is required"):  # Helm's own error type
        _render({"aggregator": {"shards": 2}})
