"""Which aggregator shard books which node: rendezvous (highest-random-weight) hashing of node names.

Every node is scored against every shard and goes to the highest score. Growing from N to N+1 shards
moves only the nodes the new shard now wins (about 1/(N+1) of them), each to the new shard; nothing
moves between old shards, so a reshard hands over as few nodes' marks as possible. Pure: no I/O, so
the settings can resolve a replica's shard without loading the aggregator.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

_ORDINAL = re.compile(r"-(\d+)$")


def _score(node: str, shard: int) -> int:
    """A stable 64-bit weight of (shard, node): the same on every replica, every Python, every run."""
    digest = hashlib.blake2b(f"{shard}\x00{node}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def owner(node: str, count: int) -> int:
    """The shard (0 .. count-1) that books ``node``."""
    if count < 1:
        raise ValueError(f"shard count must be >= 1, got {count}")
    return max(range(count), key=lambda s: _score(node, s))


def hostname_ordinal(hostname: str) -> int | None:
    """The trailing ordinal of a StatefulSet pod's name (``gpucost-aggregator-2`` -> 2), else None."""
    m = _ORDINAL.search(hostname)
    return int(m.group(1)) if m else None


@dataclass(frozen=True, slots=True)
class Shard:
    """This replica's shard: ``index`` of ``count``. One shard (the default) owns every node."""

    index: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise ValueError(f"shard index {self.index} is not in 0..{self.count - 1}")

    @property
    def sharded(self) -> bool:
        """Whether the cluster's nodes are split over more than one shard."""
        return self.count > 1

    @property
    def primary(self) -> bool:
        """Shard 0 also books what belongs to the cluster, not to a node (quota events, compaction)."""
        return self.index == 0

    def owns(self, node: str) -> bool:
        """Whether this shard books ``node`` (every node when unsharded)."""
        return not self.sharded or owner(node, self.count) == self.index

    def lease_name(self, base: str) -> str:
        """Each shard elects its own leader among its replicas."""
        return f"{base}-shard-{self.index}" if self.sharded else base

    def fence_key(self, cluster: str) -> str:
        """The ``fence`` row of this shard's term: the cluster's own row when unsharded (no schema change)."""
        return f"{cluster}/shard-{self.index}" if self.sharded else cluster
