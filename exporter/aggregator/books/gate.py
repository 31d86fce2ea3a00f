"""Which pulled snapshots may be booked: one per node per tick, and only from the agent that may speak for it.

A snapshot names its node, but the name alone proves nothing: an impostor (or a misconfigured agent)
claiming another node's name with another epoch would make that node's whole counter look like a
reset every tick. So a snapshot is admitted only from the URL bound to its node: with discovery, the
agent pod scheduled on that node (``spec.nodeName``); with static ``GPUCOST_AGENTS``, the URL that first
proved the node, pinned in the ledger. Everything else is refused, counted by reason and logged once.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

from exporter.clients.agents import PullResult
from exporter.logs import get_logger
from exporter.model.usage import UsageSnapshot

log = get_logger("aggregator.gate")

#: Every reason a snapshot can be refused for (the label values of the rejection counter).
REASONS = ("invalid", "unknown_node", "node_mismatch", "url_mismatch", "duplicate", "counter_decreased",
           "used_above_allocated", "split_above_allocated", "faster_than_wall_time", "time_went_backwards")
MAX_LOGGED = 10_000


class FromUrl(NamedTuple):
    """A pulled snapshot and the URL it came from (what the node's pin is checked against)."""

    url: str
    snapshot: UsageSnapshot


@dataclass(slots=True)
class Admitted:
    """The snapshots to book this tick, keyed by node, and the pins they would create."""

    snapshots: dict[str, FromUrl] = field(default_factory=dict)
    new_pins: dict[str, str] = field(default_factory=dict)  # node -> url
    refused_urls: set[str] = field(default_factory=set)


@dataclass(slots=True)
class SnapshotGate:
    """Admission of snapshots; ``pins`` mirrors the ledger's ``agent_urls`` table (static agents)."""

    pins: dict[str, str] = field(default_factory=dict)
    rejected: Counter[str] = field(default_factory=Counter)
    _logged: set[tuple[str, str]] = field(default_factory=set)

    def admit(self, results: list[PullResult], *, expected: dict[str, str] | None,
              known_nodes: set[str] | None = None) -> Admitted:
        """``expected``: URL -> node of discovered agent pods, or None for static agents (pinning).
        ``known_nodes``: the nodes the API has, when it can say; a snapshot for any other node waits
        (refused, its counters kept by the agent) until the node exists again or its books are closed."""
        out = Admitted()
        pinned_urls = self.pins_by_url()
        for r in results:
            if r.snapshot is None:
                if r.invalid:
                    self.refuse(url=r.url, node="", reason="invalid", detail=r.error or "")
                    out.refused_urls.add(r.url)
                continue
            node = r.snapshot.node
            if known_nodes is not None and node not in known_nodes:
                reason = "unknown_node"
            else:
                reason = self._check(r.url, node, expected=expected, pinned_urls=pinned_urls, admitted=out)
            if reason:
                self.refuse(url=r.url, node=node, reason=reason)
                out.refused_urls.add(r.url)
                continue
            out.snapshots[node] = FromUrl(r.url, r.snapshot)
            if expected is None and node not in self.pins:
                out.new_pins[node] = r.url
        return out

    def _check(self, url: str, node: str, *, expected: dict[str, str] | None, pinned_urls: dict[str, str],
               admitted: Admitted) -> str:
        if expected is not None:
            if expected.get(url) != node:
                return "node_mismatch"
        else:
            pin = self.pins.get(node) or admitted.new_pins.get(node)
            if pin is not None and pin != url:
                return "node_mismatch"
            proven = pinned_urls.get(url) or next((n for n, u in admitted.new_pins.items() if u == url), None)
            if proven is not None and proven != node:
                return "url_mismatch"
        return "duplicate" if node in admitted.snapshots else ""

    def refuse(self, *, url: str, node: str, reason: str, detail: str = "") -> None:
        """Count a refusal; log the first one of each (url, reason)."""
        self.rejected[reason] += 1
        key = (url, reason)
        if key not in self._logged and len(self._logged) < MAX_LOGGED:
            self._logged.add(key)
            log.warning("agent_snapshot_rejected", url=url, node=node, reason=reason, detail=detail[:300])

    def pins_by_url(self) -> dict[str, str]:
        """The pins turned around: URL -> the node it proved."""
        return {url: node for node, url in self.pins.items()}

    def unpin(self, node: str) -> None:
        """Forget a node's pin (its books closed): another URL may prove it next."""
        self.pins.pop(node, None)
