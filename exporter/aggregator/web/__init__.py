"""What the aggregator shows: the HTTP routes (reports, FOCUS, recommendations, budgets, KEDA), the Prometheus
collector and its exposition, and the status page with its charts. It sits on top: it may read every other
sub-package but fleet, and nothing but ``service`` imports it."""
