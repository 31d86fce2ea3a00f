"""Booking: the snapshot gate (which agent may speak for a node), reset-aware deltas, rates and priced rows,
commitments, right-sizing evidence, team rows and the live gauges. It turns admitted snapshots into a
``ledger.rows.TickWrite``; it may import ``ledger``, ``kube`` and ``model``, never advice, fleet, focus or web."""
