"""What one tick writes to the ledger and what the aggregator reloads from it, as named fields."""

from __future__ import annotations

from dataclasses import dataclass, field

from exporter.aggregator.ledger.devices import DeviceKey
from exporter.aggregator.ledger.evidence import EvidenceKey, EvidenceRow
from exporter.model.books import (
    AgentMark,
    BreakdownKey,
    BreakdownTotals,
    CapacityAmounts,
    CapacityKey,
    CapacityTotalKey,
    CommitmentKey,
    CommitmentTotalKey,
    CounterMark,
    EventCount,
    NamespaceKey,
    NamespaceTotals,
    NodeKey,
    UnmeasuredEnergy,
    UsageAmounts,
    UsageKey,
)


@dataclass(slots=True)
class NodeCounterMark:
    """One row of the ``hwm`` table: the last booked value of one counter of one node's agent."""

    node: str
    key: str
    mark: CounterMark


@dataclass(slots=True)
class QuotaEvent:
    """A quota-rejection Event's count as last seen (Events repeat with a growing count)."""

    uid: str
    namespace: str
    count: int
    seen_at: float


@dataclass(frozen=True, slots=True)
class FleetFacts:
    """A node's GPUs by model and the MIG instances held on it, as its latest booked snapshot showed them:
    what commitments are blended over, shared through the ledger by aggregators that split the nodes."""

    gpus_by_model: tuple[tuple[str, int], ...] = ()
    held_mig: tuple[tuple[str, str, float], ...] = ()  # (model, profile, fraction)


@dataclass(slots=True)
class TickWrite:
    """Everything one tick writes, in one transaction."""

    usage: dict[UsageKey, UsageAmounts] = field(default_factory=dict)
    unallocated: dict[CapacityKey, CapacityAmounts] = field(default_factory=dict)
    unobserved: dict[CapacityKey, CapacityAmounts] = field(default_factory=dict)
    hwm: list[NodeCounterMark] = field(default_factory=list)
    hwm_reset_nodes: list[str] = field(default_factory=list)
    hwm_deleted: list[tuple[str, str]] = field(default_factory=list)  # (node, counter key)
    agents: dict[str, AgentMark] = field(default_factory=dict)
    agent_urls: dict[str, str] = field(default_factory=dict)  # node -> the URL that proved it
    books_since: dict[str, float] = field(default_factory=dict)  # node -> start of its books (first booking)
    pruned_nodes: list[str] = field(default_factory=list)
    totals: dict[NamespaceKey, NamespaceTotals] = field(default_factory=dict)
    unallocated_totals: dict[CapacityTotalKey, CapacityAmounts] = field(default_factory=dict)
    unobserved_totals: dict[CapacityTotalKey, CapacityAmounts] = field(default_factory=dict)
    quota_events: list[QuotaEvent] = field(default_factory=list)
    breakdown: dict[BreakdownKey, BreakdownTotals] = field(default_factory=dict)
    unused_commitment: dict[CommitmentKey, CapacityAmounts] = field(default_factory=dict)
    unused_commitment_totals: dict[CommitmentTotalKey, CapacityAmounts] = field(default_factory=dict)
    commitment_marks: dict[str, float] = field(default_factory=dict)  # commitment -> booked until
    node_billing: dict[str, tuple[str, str]] = field(default_factory=dict)  # node -> (instance type, capacity type)
    evidence: dict[EvidenceKey, EvidenceRow] = field(default_factory=dict)  # right-sizing evidence per hour x device
    namespace_teams: dict[tuple[int, str], str] = field(default_factory=dict)  # (hour, namespace) -> team label
    unmeasured_energy: dict[NodeKey, UnmeasuredEnergy] = field(default_factory=dict)  # GPU-seconds, per node
    fleet: dict[str, FleetFacts] = field(default_factory=dict)  # nodes whose GPUs or held MIG instances changed
    node_devices: dict[DeviceKey, int] = field(default_factory=dict)  # devices each node advertised per hour

    def empty(self) -> bool:
        """Whether the tick has nothing to write (no transaction is needed)."""
        return not (self.usage or self.unallocated or self.unobserved or self.hwm or self.agents or self.agent_urls
                    or self.quota_events or self.hwm_reset_nodes or self.hwm_deleted or self.pruned_nodes
                    or self.commitment_marks or self.node_billing or self.fleet)


@dataclass(slots=True)
class LedgerState:
    """What the aggregator reloads at start."""

    agents: dict[str, AgentMark] = field(default_factory=dict)
    hwm: dict[str, dict[str, CounterMark]] = field(default_factory=dict)
    totals: dict[NamespaceKey, NamespaceTotals] = field(default_factory=dict)
    unallocated_totals: dict[CapacityTotalKey, CapacityAmounts] = field(default_factory=dict)
    unobserved_totals: dict[CapacityTotalKey, CapacityAmounts] = field(default_factory=dict)
    quota_events: dict[str, EventCount] = field(default_factory=dict)  # uid -> (namespace, count)
    quota_rejection_base: dict[str, int] = field(default_factory=dict)  # namespace -> count of pruned events
    breakdown: dict[BreakdownKey, BreakdownTotals] = field(default_factory=dict)
    agent_urls: dict[str, str] = field(default_factory=dict)
    unused_commitment_totals: dict[CommitmentTotalKey, CapacityAmounts] = field(default_factory=dict)
    commitment_marks: dict[str, float] = field(default_factory=dict)
    node_billing: dict[str, tuple[str, str]] = field(default_factory=dict)
    unmeasured_energy: dict[NodeKey, UnmeasuredEnergy] = field(default_factory=dict)
