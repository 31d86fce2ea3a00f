"""The simulated Kubernetes API server: its object store, list/watch over HTTP, discovery (so ``kubectl``
works), server-side tables, and the objects it serves."""
