"""Which team a namespace belonged to while its GPU time was booked: kept per hour beside the books, so a
FOCUS export (or any later report) can charge a team without asking the cluster what the label says today."""

from __future__ import annotations

from collections.abc import Mapping

from exporter.aggregator.kubestate import KubeState
from exporter.aggregator.ledger_backend import Tx
from exporter.aggregator.ledger_rows import TickWrite


def book_teams(w: TickWrite, *, kube: KubeState, team_label: str) -> None:
    """For every (hour, namespace) this tick books usage in, the namespace's ``team_label`` value as the API
    shows it now; a namespace without the label gets no row (its team is unknown, not guessed)."""
    if not team_label:
        return
    for key in w.usage:
        team = kube.namespaces.get(key.namespace, {}).get(team_label)
        if team:
            w.namespace_teams[(key.hour, key.namespace)] = team


def write_teams(tx: Tx, teams: Mapping[tuple[int, str], str], *, cluster: str) -> None:
    """Upsert (hour, namespace) -> team in the tick's transaction: the last team seen in the hour wins."""
    if teams:
        tx.executemany("INSERT INTO namespace_team (cluster, hour, namespace, team) VALUES (?,?,?,?) "
                       "ON CONFLICT (cluster, hour, namespace) DO UPDATE SET team = excluded.team",
                       [(cluster, hour, ns, team) for (hour, ns), team in teams.items()])
