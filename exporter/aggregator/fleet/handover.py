"""What one shard of a cluster's aggregators pulls and books, and how it takes over nodes from another.

Marks live in the ledger per node. A shard books only the nodes it owns; before it first books a node
(at start, after a take-over, after the shard count changed, or after another aggregator booked it) it
reloads that node's marks, pin and billing facts from the ledger, so the handover neither loses nor
repeats a GPU-second. Each commit then checks, in its own transaction, that every booked node's mark is
still the one its delta was computed against (``StaleMarks`` otherwise). Unsharded, everything here is a
no-op and every node is owned.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from exporter.aggregator.books.booking import Books, NodeGone, NodeMarks, Prepared
from exporter.aggregator.books.gate import Admitted, SnapshotGate
from exporter.aggregator.ledger.store import Ledger, StaleMarks, TickWrite
from exporter.logs import get_logger
from exporter.model.shard_spec import Shard

log = get_logger("handover")


@dataclass(slots=True)
class Handover:
    """This aggregator's shard, which of its nodes' marks are current in memory, and foreign agents."""

    shard: Shard
    fresh: set[str] = field(default_factory=set)  # owned nodes whose in-memory marks are the ledger's
    foreign: dict[str, str] = field(default_factory=dict)  # static agent URL -> node another shard owns

    def targets(self, urls: list[str], url_nodes: dict[str, str]) -> list[str]:
        """The agent URLs to pull: those of owned nodes, and (static agents) URLs not yet known to speak for
        another shard's node; those are pulled once to learn their node, never acknowledged."""
        if not self.shard.sharded:
            return urls
        out = []
        for url in urls:
            node = url_nodes.get(url) or self.foreign.get(url)
            if node is None or self.shard.owns(node):
                out.append(url)
        return out

    async def own(self, admitted: Admitted, gone: list[NodeGone], *, ledger: Ledger, books: Books,
                  gate: SnapshotGate) -> list[NodeGone]:
        """Keep this tick's snapshots and deleted nodes of this shard, with their marks loaded; return the
        deleted nodes whose books this shard closes."""
        self.keep_own(admitted)
        gone = [g for g in gone if self.shard.owns(g.node)]
        await self.load_gained([*admitted.snapshots, *(g.node for g in gone)], ledger=ledger, books=books, gate=gate)
        return gone

    def keep_own(self, admitted: Admitted) -> None:
        """Drop snapshots (and would-be pins) of nodes another shard books."""
        if not self.shard.sharded:
            return
        for node in [n for n in admitted.snapshots if not self.shard.owns(n)]:
            url, _snap = admitted.snapshots.pop(node)
            self.foreign[url] = node
            admitted.new_pins.pop(node, None)

    def drop_foreign(self, agents: dict[str, Any]) -> None:
        """Forget the health of URLs that turned out to speak for another shard's node (a pull that failed
        before this shard knew whose agent it was is reported under the URL's host:port)."""
        for url in self.foreign:
            agents.pop(urlparse(url).netloc, None)

    def restored(self, books: Books, gate: SnapshotGate) -> None:
        """After the whole books were (re)loaded: keep only owned nodes' marks; reload each before booking it."""
        self.fresh.clear()
        if not self.shard.sharded:
            return
        for node in [n for n in books.marks if not self.shard.owns(n)]:
            del books.marks[node]
        for node in [n for n in gate.pins if not self.shard.owns(n)]:
            self.foreign[gate.pins.pop(node)] = node  # pinned by another shard: never pulled from here

    async def load_gained(self, nodes: list[str], *, ledger: Ledger, books: Books, gate: SnapshotGate) -> None:
        """Load from the ledger the marks of owned nodes this shard has not booked since it last read them."""
        if not self.shard.sharded:
            return
        gained = sorted({n for n in nodes if self.shard.owns(n)} - self.fresh)
        if not gained:
            return
        loaded = await ledger.load_nodes(gained)
        for node in gained:
            mark = loaded.agents.get(node)
            if mark is None:
                books.marks.pop(node, None)  # never booked: its first snapshot starts its books
            else:
                books.marks[node] = NodeMarks(mark, dict(loaded.hwm.get(node, {})))
            if node in loaded.agent_urls:
                gate.pins[node] = loaded.agent_urls[node]
            if node in loaded.node_billing:
                books.node_billing[node] = loaded.node_billing[node]
        self.fresh.update(gained)
        log.info("shard_nodes_loaded", shard=self.shard.index, shards=self.shard.count, nodes=len(gained))

    def trim(self, write: TickWrite) -> TickWrite:
        """Quota events belong to the cluster, not to a node: only shard 0 books them."""
        if not self.shard.primary:
            write.quota_events.clear()
        return write

    async def commit(self, prepared: Prepared, *, ledger: Ledger, books: Books) -> None:
        """Commit one tick (unless it writes nothing), then advance the in-memory marks: one step, which a cancelled
        tick waits for (``runtime.finish``). Sharded, the ledger first checks each booked node's mark is the one
        its delta was computed against. If another aggregator moved one, nothing is written and those nodes'
        marks are reloaded before they are booked again."""
        if not self.trim(prepared.write).empty():  # nothing to write: no transaction, no fencing-term check
            await self._commit(prepared.write, ledger=ledger, books=books)
        books.apply(prepared)

    async def _commit(self, write: TickWrite, *, ledger: Ledger, books: Books) -> None:
        if not self.shard.sharded:
            await ledger.commit(write)
            return
        expected = {node: (books.marks[node].mark if node in books.marks else None) for node in write.agents}
        try:
            await ledger.commit(write, expected)
        except StaleMarks as exc:
            self.fresh.difference_update(exc.nodes)
            log.warning("shard_marks_moved", shard=self.shard.index, nodes=sorted(exc.nodes)[:10],
                        count=len(exc.nodes))
            raise
