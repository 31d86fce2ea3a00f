"""Which shard books which node, at the level of the pure rules (``tests/unit/aggregator/fleet/test_shards``
runs them through the settings, the Helm chart and the ledger). The weights are pinned: a different hash
would move every node to another shard at the next upgrade."""

from __future__ import annotations

import pytest

from exporter.model.shard_spec import Shard, _score, hostname_ordinal, owner

NODES = [f"gpu-node-{i}" for i in range(60)]


def test_weights_are_blake2b_of_shard_and_node() -> None:
    """blake2b, 8 bytes, of ``b"<shard>\\x00<node>"``, read big-endian (values from ``hashlib`` by hand)."""
    assert [_score("gpu-node-1", s) for s in range(3)] == [6947757500663856003, 13657908090958646541,
                                                           11505901426513354108]


def test_the_highest_weight_wins() -> None:
    """gpu-node-1 weighs most on shard 1 of three (above), on shard 0 alone, and on shard 1 of two."""
    assert owner("gpu-node-1", 3) == 1
    assert owner("gpu-node-1", 2) == 1
    assert owner("gpu-node-1", 1) == 0
    assert [owner(f"n{i}", 3) for i in range(12)] == [2, 2, 0, 0, 0, 1, 1, 0, 1, 2, 1, 1]
    for node in NODES:
        weights = [_score(node, s) for s in range(4)]
        assert owner(node, 4) == weights.index(max(weights))


@pytest.mark.parametrize("count", [0, -1])
def test_no_shards_is_refused(count: int) -> None:
    with pytest.raises(ValueError) as info:
        owner("n", count)
    assert str(info.value) == f"shard count must be >= 1, got {count}"


@pytest.mark.parametrize(("index", "count", "message"), [
    (3, 3, "shard index 3 is not in 0..2"),
    (-1, 3, "shard index -1 is not in 0..2"),
    (0, 0, "shard index 0 is not in 0..-1"),
    (1, 1, "shard index 1 is not in 0..0"),
])
def test_an_index_outside_the_count_is_refused(index: int, count: int, message: str) -> None:
    with pytest.raises(ValueError) as info:
        Shard(index, count)
    assert str(info.value) == message


def test_the_first_and_last_shard_of_three() -> None:
    """Shards 0 and 2 of three each own exactly the nodes ``owner`` gives them, and name their own lease and
    fence row; one shard of one owns everything under the cluster's own names."""
    first, last = Shard(0, 3), Shard(2, 3)
    assert first.primary and first.sharded and not last.primary and last.sharded
    assert [n for n in NODES if first.owns(n)] == [n for n in NODES if owner(n, 3) == 0]
    assert [n for n in NODES if last.owns(n)] == [n for n in NODES if owner(n, 3) == 2]
    assert (first.lease_name("agg"), first.fence_key("prod")) == ("agg-shard-0", "prod/shard-0")
    assert (last.lease_name("agg"), last.fence_key("prod")) == ("agg-shard-2", "prod/shard-2")
    only = Shard(0, 1)
    assert all(only.owns(n) for n in NODES) and not only.sharded
    assert (only.lease_name("agg"), only.fence_key("prod")) == ("agg", "prod")


def test_hostname_ordinals() -> None:
    assert hostname_ordinal("gpucost-aggregator-2") == 2
    assert hostname_ordinal("agg-0") == 0
    assert hostname_ordinal("agg-2-x") is None
