"""What the aggregator knows of the cluster: the watch cache (``state``) of pods, nodes, namespaces, quotas and
events, the objects it reads from them, DRA claims, and namespace budgets. It imports only ``exporter.model``:
the API's view is an input to booking, never the other way round."""
