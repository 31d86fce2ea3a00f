"""Who may read costs: bearer tokens authenticated by the Kubernetes API (TokenReview, and OIDC ID tokens
where configured), authorised by Kubernetes RBAC alone (SubjectAccessReview), briefly cached and counted;
the aiohttp middleware that guards every aggregator route, and the ``Scope`` each route filters its rows by.

Owns: ``Identity``, ``Scope``, the review cache, the middleware and its counters. May import
``exporter.clients`` (the Kubernetes client), ``exporter.config`` and ``exporter.aggregator.ledger.report``'s
groupings; never the daemon (``service``), so the routes receive it through ``view``.
"""
