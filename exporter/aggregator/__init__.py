"""The cluster aggregator: pulls agents, watches the Kubernetes API, and books GPU time into money."""
