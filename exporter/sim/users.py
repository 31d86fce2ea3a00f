"""Who calls the aggregator in a scenario (``users``): plain records, kept apart from the review endpoints so
the scenario's vocabulary (``spec``) need not import a web server."""

from __future__ import annotations

from dataclasses import dataclass

COST_GROUP = "gpu-cost-exporter.io"
COST_RESOURCE = "costs"


@dataclass(frozen=True, slots=True)
class UserSpec:
    """One caller of the aggregator: its token, identity, and what RBAC lets it ``get``."""

    name: str
    token: str
    groups: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    cluster: bool = False
    service_account: str = ""  # "<namespace>/<name>": the user is that ServiceAccount
    metrics: bool = False

    @property
    def username(self) -> str:
        """The name TokenReview reports: ``system:serviceaccount:<ns>:<name>`` for a ServiceAccount."""
        if self.service_account:
            ns, sa = self.service_account.split("/", 1)
            return f"system:serviceaccount:{ns}:{sa}"
        return self.name

    @property
    def all_groups(self) -> list[str]:
        """Groups as the API server reports them: a ServiceAccount's implicit groups, then everyone's."""
        implicit = []
        if self.service_account:
            ns = self.service_account.split("/", 1)[0]
            implicit = ["system:serviceaccounts", f"system:serviceaccounts:{ns}"]
        return [*self.groups, *implicit, "system:authenticated"]

    def may_get_costs(self, namespace: str) -> bool:
        """RBAC's answer for ``get costs.gpu-cost-exporter.io`` in ``namespace`` ("" = cluster-wide)."""
        return self.cluster or (bool(namespace) and namespace in self.namespaces)
