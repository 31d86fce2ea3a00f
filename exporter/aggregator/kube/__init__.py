"""What the aggregator knows of the cluster: the watch cache (``state``) of pods, nodes, namespaces, quotas and
events, the objects it reads from them, DRA claims, scheduler queues, and namespace budgets; and the one thing it
writes to the API, a spent budget's hold on its queue (``queue_hold``, through the API client). It imports only
``exporter.model`` (and the clients' errors): the API's view is an input to booking, never the other way round."""
