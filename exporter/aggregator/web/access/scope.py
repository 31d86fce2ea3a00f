"""What one caller may see: every namespace and the cluster's own rows, some namespaces, or only /metrics."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from exporter.aggregator.ledger.report import GROUPS


@dataclass(frozen=True, slots=True)
class Scope:
    """``cluster``: every namespace plus the cluster rows (unallocated, unobserved, unused commitments)."""

    cluster: bool = False
    namespaces: frozenset[str] = frozenset()

    def sees(self, namespace: str) -> bool:
        """Whether rows of ``namespace`` may be shown (a cluster row's name is no namespace anyone is granted)."""
        return self.cluster or namespace in self.namespaces

    def rows(self, rows: Iterable[dict[str, Any]], *, key: str = "namespace") -> list[dict[str, Any]]:
        """The rows whose ``key`` column names a namespace this caller sees."""
        rows = list(rows)
        return rows if self.cluster else [r for r in rows if self.sees(str(r.get(key, "")))]

    def may_group(self, by: str) -> bool:
        """Whether a report grouped ``by`` can be cut to this scope: a grouping without the namespace
        (by node, pool, model) sums namespaces together, so only a cluster-wide reader gets it."""
        return self.cluster or any("namespace" in GROUPS.get(k.strip(), ()) for k in by.split(","))


EVERYTHING = Scope(cluster=True)
