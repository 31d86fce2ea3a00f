"""Which team a namespace belonged to while its GPU time was booked: kept per hour beside the books, so a
FOCUS export (or any later report) can charge a team without asking the cluster what the label says today."""

from __future__ import annotations

from exporter.aggregator.kube.state import KubeState
from exporter.aggregator.ledger.rows import TickWrite


def book_teams(w: TickWrite, *, kube: KubeState, team_label: str) -> None:
    """For every (hour, namespace) this tick books usage in, the namespace's ``team_label`` value as the API
    shows it now; a namespace without the label gets no row (its team is unknown, not guessed)."""
    if not team_label:
        return
    for key in w.usage:
        team = kube.namespaces.get(key.namespace, {}).get(team_label)
        if team:
            w.namespace_teams[(key.hour, key.namespace)] = team
