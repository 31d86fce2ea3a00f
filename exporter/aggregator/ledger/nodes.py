"""Per-node books in a ledger several aggregators write: load the marks of nodes a shard gains, and
refuse a tick whose nodes another aggregator booked since their marks were read.

Marks live in the ledger per node, so whichever shard books a node next must start from the marks the
last one committed; checking them inside the tick's transaction (rows locked) keeps two aggregators that
both believe they own a node (while the shard count changes) from booking the same GPU-seconds twice.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from exporter.aggregator.ledger.backend import Tx
from exporter.aggregator.ledger.rows import FleetFacts
from exporter.model.books import AgentMark, CounterMark
from exporter.model.named_rows import Select


class StaleMarks(RuntimeError):
    """Another aggregator booked some of this tick's nodes since their marks were read: nothing is written."""

    def __init__(self, nodes: list[str]) -> None:
        super().__init__(f"marks of {len(nodes)} node(s) moved in the ledger: {', '.join(sorted(nodes)[:5])}")
        self.nodes = nodes


@dataclass(frozen=True, slots=True)
class NodeBooks:
    """Where some nodes' books stand in the ledger: what a shard loads for the nodes it gains."""

    agents: dict[str, AgentMark]
    hwm: dict[str, dict[str, CounterMark]]
    agent_urls: dict[str, str]
    node_billing: dict[str, tuple[str, str]]


def _where(nodes: list[str]) -> str:
    return f"cluster = ? AND node IN ({', '.join('?' * len(nodes))})"


def check_marks(tx: Tx, expected: Mapping[str, AgentMark | None], *, cluster: str, for_update: str) -> None:
    """Raise ``StaleMarks`` unless every node's committed (epoch, seq) is the one in ``expected`` (None: no
    row yet); the rows stay locked until the transaction ends."""
    if not expected:
        return
    nodes = sorted(expected)
    found = {node: (epoch, int(seq)) for node, epoch, seq in tx.fetch(
        f"SELECT node, epoch, seq FROM agents WHERE {_where(nodes)}{for_update}", (cluster, *nodes))}
    moved = []
    for node in nodes:
        mark = expected[node]
        if found.get(node) != (None if mark is None else (mark.epoch, mark.seq)):
            moved.append(node)
    if moved:
        raise StaleMarks(moved)


_AGENTS = Select.of(("node", *AgentMark._fields))
_HWM = Select.of(("node", "key", *CounterMark.columns()))


def read_marks(tx: Tx, where: str, *, params: Sequence[str]) -> tuple[dict[str, AgentMark],
                                                                   dict[str, dict[str, CounterMark]]]:
    """Each node's agent mark and counter marks (``hwm``) in the rows ``where`` selects: the same read at
    start (the whole cluster) and when a shard gains nodes."""
    agents = {}
    for r in tx.fetch(f"SELECT {_AGENTS.sql()} FROM agents WHERE {where}", params):
        m = _AGENTS.mapping(r)
        agents[m["node"]] = AgentMark(epoch=m["epoch"], booked_ts=float(m["booked_ts"]), seq=int(m["seq"]))
    hwm: dict[str, dict[str, CounterMark]] = {}
    for r in tx.fetch(f"SELECT {_HWM.sql()} FROM hwm WHERE {where}", params):
        m = _HWM.mapping(r)
        hwm.setdefault(m["node"], {})[m["key"]] = CounterMark(**{n: float(m[n]) for n in CounterMark.columns()})
    return agents, hwm


def load_nodes(tx: Tx, nodes: list[str], *, cluster: str) -> NodeBooks:
    """The committed marks, pins and billing facts of ``nodes``."""
    out = NodeBooks({}, {}, {}, {})
    if not nodes:
        return out
    where, p = _where(nodes), (cluster, *nodes)
    agents, hwm = read_marks(tx, where, params=p)
    out.agents.update(agents)
    out.hwm.update(hwm)
    out.agent_urls.update({node: url for node, url in tx.fetch(f"SELECT node, url FROM agent_urls WHERE {where}", p)})
    out.node_billing.update({node: (it, ct) for node, it, ct in tx.fetch(
        f"SELECT node, instance_type, capacity_type FROM node_billing WHERE {where}", p)})
    return out


def write_fleet(tx: Tx, fleet: Mapping[str, FleetFacts], *, pruned: list[str], cluster: str) -> None:
    """Upsert the nodes whose GPUs or held MIG instances changed; forget pruned nodes."""
    if fleet:
        tx.executemany("INSERT INTO fleet (cluster, node, gpus_by_model, held_mig) VALUES (?,?,?,?) "
                       "ON CONFLICT (cluster, node) DO UPDATE SET gpus_by_model = excluded.gpus_by_model, "
                       "held_mig = excluded.held_mig",
                       [(cluster, node, json.dumps(dict(f.gpus_by_model), sort_keys=True),
                         json.dumps([list(h) for h in f.held_mig])) for node, f in fleet.items()])
    for node in pruned:
        tx.execute("DELETE FROM fleet WHERE cluster = ? AND node = ?", (cluster, node))


def load_fleet(tx: Tx, *, cluster: str) -> dict[str, FleetFacts]:
    """Every node of the cluster with the GPUs its last booking saw (whichever aggregator booked it)."""
    out = {}
    for node, gpus, held in tx.fetch("SELECT node, gpus_by_model, held_mig FROM fleet WHERE cluster = ?", (cluster,)):
        out[node] = FleetFacts(tuple(sorted((str(m), int(n)) for m, n in json.loads(gpus).items())),
                               tuple((str(m), str(p), float(f)) for m, p, f in json.loads(held)))
    return out
