"""After a tick's commit: mirror what the ledger now holds into the aggregator's memory.

Pins, the latest snapshot of each booked node, each agent's health, pruned nodes and the quota events
already booked: all of it changes only once the transaction that books it has committed.
"""

from __future__ import annotations

from urllib.parse import urlparse

from exporter.aggregator.books.booking import Prepared
from exporter.aggregator.books.gate import Admitted, SnapshotGate
from exporter.aggregator.books.gauges import AgentHealth, Gauges
from exporter.aggregator.kube.state import KubeState
from exporter.clients.agents import PullResult
from exporter.logs import get_logger
from exporter.model.usage import UsageSnapshot

log = get_logger("aggregator")


def booked_latest(latest: dict[str, UsageSnapshot], *, prepared: Prepared,
                  admitted: Admitted) -> dict[str, UsageSnapshot]:
    """``latest`` as ``mirror_commit`` leaves it: this tick's booked snapshots in, pruned nodes out."""
    out = {**latest, **{n: snap for n, (_url, snap) in admitted.snapshots.items() if n not in prepared.rejected}}
    for node in prepared.pruned:
        out.pop(node, None)
    return out


def mirror_commit(prepared: Prepared, admitted: Admitted, *, results: list[PullResult], url_nodes: dict[str, str],
                  gate: SnapshotGate, gauges: Gauges, latest: dict[str, UsageSnapshot], kube: KubeState) -> None:
    """Mirror what was committed: pins, latest snapshots, agent health, pruned nodes, quota events."""
    gate.pins.update(prepared.write.agent_urls)
    for node, (url, snap) in admitted.snapshots.items():
        gauges.agents.pop(urlparse(url).netloc, None)  # known by its node now, not by its address
        booked = node not in prepared.rejected
        if booked:
            latest[node] = snap
        gauges.agents[node] = AgentHealth(up=booked, dcgm_up=booked and snap.dcgm_up)
    for r in results:
        if r.snapshot is None or r.url in admitted.refused_urls:
            node = url_nodes.get(r.url) or gate.pins_by_url().get(r.url) or urlparse(r.url).netloc
            prev = gauges.agents.get(node)
            if r.snapshot is None and (prev is None or prev.up):
                log.warning("agent_pull_failed", node=node, url=r.url, error=r.error)
            if node not in admitted.snapshots:
                gauges.agents[node] = AgentHealth(up=False, dcgm_up=False)
    for node in prepared.pruned:
        latest.pop(node, None)
        gauges.agents.pop(node, None)
        gate.unpin(node)
        log.info("node_books_closed", node=node)
    for e in prepared.write.quota_events:
        seen = kube.quota_event_counts.get(e.uid)
        if seen is not None and seen.fired == e.count:
            kube.new_quota_rejections.pop(e.uid, None)
    if prepared.resets:
        log.info("agent_epoch_reset", count=prepared.resets)
