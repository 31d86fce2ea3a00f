"""Running many aggregators and many agents: which agent URLs to pull (targets), Lease-based leader election,
the hand-over of a tick's commit to the ledger's thread, and shards. It may import ``books``, ``kube`` and
``ledger``; nothing of advice, focus or web."""
