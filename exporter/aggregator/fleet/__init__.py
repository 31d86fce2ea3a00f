"""Running many aggregators and many agents: which agent URLs to pull (targets), Lease-based leader election,
the hand-over of a tick's commit to the ledger's thread, checked against this shard's nodes (the shard
arithmetic itself is pure, in ``exporter.model.shard_spec``). It may import ``books``, ``kube`` and
``ledger``; nothing of advice, focus or web."""
