"""The aggregator: one per cluster, it pulls every agent, watches the Kubernetes API and books GPU time in the
ledger exactly once. A tick's path through the sub-packages: ``fleet`` (which agents, who leads) → ``books``
(admit, delta, price) → ``ledger`` (one transaction) → ``web`` (metrics, reports, status page). ``service``
wires them into the daemon; nothing below it imports it."""
