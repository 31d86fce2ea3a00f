"""Which team a namespace belonged to in each hour, written beside the books in the tick's transaction."""

from __future__ import annotations

from collections.abc import Mapping

from exporter.aggregator.ledger.backend import Tx


def write_teams(tx: Tx, teams: Mapping[tuple[int, str], str], *, cluster: str) -> None:
    """Upsert (hour, namespace) -> team in the tick's transaction: the last team seen in the hour wins."""
    if teams:
        tx.executemany("INSERT INTO namespace_team (cluster, hour, namespace, team) VALUES (?,?,?,?) "
                       "ON CONFLICT (cluster, hour, namespace) DO UPDATE SET team = excluded.team",
                       [(cluster, hour, ns, team) for (hour, ns), team in teams.items()])
