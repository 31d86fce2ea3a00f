"""Which aggregator shard books which node: rendezvous hashing of node names (``exporter.model.shard_spec``).

The arithmetic is pure and lives in the model, where the aggregator's settings resolve a replica's shard
without loading the aggregator; the aggregator's modules keep importing it from here.
"""

from __future__ import annotations

from exporter.model.shard_spec import Shard, hostname_ordinal, owner

__all__ = ["Shard", "hostname_ordinal", "owner"]
