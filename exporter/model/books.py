"""The numbers the ledger keeps, with names: what booking writes, the ledger stores, metrics and reports read.

Each amount is a small frozen dataclass whose field names are the ledger's column names, so the meaning
of a number is written once (here) and the ledger maps fields to columns by name, never by position.
Keys are ``NamedTuple``s: they are identities, not amounts, and hash fast as dictionary keys.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields
from decimal import Decimal
from operator import attrgetter
from typing import Any, NamedTuple, Self

from exporter.model.exact import ZERO

HOUR = 3600


def hour_of(ts: float) -> int:
    """The start of the UTC hour that contains ``ts``."""
    return int(ts // HOUR) * HOUR


def hour_shares(start: float, end: float) -> list[tuple[int, float]]:
    """Split the interval [start, end] into (hour, share of the interval) pairs, shares summing to 1.

    A delta that spans an hour boundary is booked to both hours by their share of the wall time, so
    that every hour's books hold exactly that hour's GPU-seconds (the per-hour conservation identity).
    An empty or backwards interval belongs wholly to the hour of ``end``; a non-finite bound is refused
    (the wire schema keeps them out; this keeps a bad value from ever looping for ever here).
    """
    if not (math.isfinite(start) and math.isfinite(end)):
        raise ValueError(f"interval [{start}, {end}] is not finite")
    if not end > start:
        return [(hour_of(end), 1.0)]
    span = end - start
    out: list[tuple[int, float]] = []
    t = start
    while t < end:
        h = hour_of(t)
        nxt = min(end, h + HOUR)
        out.append((h, (nxt - t) / span))
        t = nxt
    return out


#: The split counter of a mark that predates it: its next advance is a baseline, not a delta (see ``CounterMark``).
SPLIT_UNKNOWN = -1.0

_GETTERS: dict[type, Callable[[Any], tuple[Any, ...]]] = {}
_NAMES: dict[type, tuple[str, ...]] = {}


def _getter(cls: type) -> Callable[[Any], tuple[Any, ...]]:
    """One C-level getter per amount type, returning all fields as a tuple (fast on the booking path; a
    one-field type is wrapped, as ``attrgetter`` of one name returns the bare value)."""
    g = _GETTERS.get(cls)
    if g is None:
        first, *rest = (f.name for f in fields(cls))
        one = attrgetter(first)
        g = _GETTERS[cls] = attrgetter(first, *rest) if rest else (lambda obj: (one(obj),))
    return g


_FIELDWISE: dict[tuple[type, str], Callable[..., Any]] = {}
_SUMS: dict[type, Callable[..., Any]] = {}  # ``__add__`` per type, looked up by the type alone (the hot path)


def _fieldwise(cls: type[_Amounts], expr: str, *, args: str) -> Callable[..., Any]:
    """A function of ``args`` building ``cls`` by field name, field ``n`` from ``expr`` (``a.{n} + b.{n}``).

    Generated once per type from its own field names, as ``dataclasses`` generates ``__init__``. It sets each
    slot through the class's own slot descriptor, which is what a frozen ``__init__`` does less directly
    (``object.__setattr__`` per field): adding two amounts is the booking path's most frequent step, and this
    makes it 2.7x cheaper while the type stays frozen and keyword-only to every caller."""
    fn = _FIELDWISE.get((cls, expr))
    if fn is None:
        names = cls.columns()
        scope: dict[str, Any] = {"new": object.__new__, "cls": cls}
        scope.update({f"set_{n}": getattr(cls, n).__set__ for n in names})
        body = "".join(f"    set_{n}(o, {expr.format(n=n)})\n" for n in names)
        exec(f"def fieldwise({args}):\n    o = new(cls)\n{body}    return o\n", scope)
        fn = _FIELDWISE[(cls, expr)] = scope["fieldwise"]
    return fn


class _Amounts:
    """Addition and scaling field by field, shared by every amount type below (built by field name: the
    types are keyword-only, so no amount is ever built by position)."""

    __slots__ = ()

    def __add__(self, other: Self) -> Self:
        cls = type(self)
        fn = _SUMS.get(cls)
        if fn is None:
            fn = _SUMS[cls] = _fieldwise(cls, "a.{n} + b.{n}", args="a, b")
        result: Self = fn(self, other)
        return result

    def scaled(self, factor: Any) -> Self:
        """Every field times ``factor`` (a Decimal or int for amounts: a float would make them inexact)."""
        result: Self = _fieldwise(type(self), "a.{n} * k", args="a, k")(self, factor)
        return result

    def values(self) -> tuple[Any, ...]:
        """Field values in declaration order: the ledger's column order (used only by the ledger's SQL)."""
        return tuple(_getter(type(self))(self))

    @classmethod
    def columns(cls) -> tuple[str, ...]:
        """Field names in declaration order: the ledger's column names."""
        names = _NAMES.get(cls)
        if names is None:
            names = _NAMES[cls] = tuple(f.name for f in fields(cls))  # type: ignore[arg-type]
        return names


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageAmounts(_Amounts):
    """One holder's GPU time and money in one hour-row of the ledger."""

    allocated_s: Decimal = ZERO
    used_s: Decimal = ZERO
    unmeasured_s: Decimal = ZERO
    idle_s: Decimal = ZERO
    cost: Decimal = ZERO  # effective: discounts, commitments, owned hardware's capital rate plus its energy
    idle_cost: Decimal = ZERO
    energy_j: Decimal = ZERO
    list_cost: Decimal = ZERO  # GPU-hours x the public list price, no discount and no energy
    #: Of ``allocated_s``, seconds on a busy shared GPU whose busy time was split by fraction (no measured
    #: per-pod use): how much of ``used_s`` is an estimate.
    split_s: Decimal = ZERO
    co2e_g: Decimal = ZERO  # grams CO2e of the measured energy (``emissions:`` in the pricing file)
    co2e_s: Decimal = ZERO  # the GPU-seconds whose CO2e is known (measured, under ``emissions:``); 0: unknown
    unmeasured_energy_s: Decimal = ZERO  # the GPU-seconds whose energy was not measured


@dataclass(frozen=True, slots=True, kw_only=True)
class NamespaceTotals(_Amounts):
    """A namespace's running totals since the ledger began (what the counters on /metrics show)."""

    allocated_s: Decimal = ZERO
    used_s: Decimal = ZERO
    unmeasured_s: Decimal = ZERO
    cost: Decimal = ZERO
    idle_cost: Decimal = ZERO
    list_cost: Decimal = ZERO
    energy_j: Decimal = ZERO
    split_s: Decimal = ZERO
    co2e_g: Decimal = ZERO
    co2e_s: Decimal = ZERO
    unmeasured_energy_s: Decimal = ZERO


@dataclass(frozen=True, slots=True, kw_only=True)
class CapacityAmounts(_Amounts):
    """GPU-seconds of capacity (unallocated, unobserved, or a commitment's unused part) and their price,
    with the energy DCGM measured on that capacity (its cost is in ``cost`` where owned hardware prices it).

    An unused commitment's ``list_cost`` and ``energy_j`` are 0: no GPU-hour was had for it at any price."""

    seconds: Decimal = ZERO
    cost: Decimal = ZERO
    list_cost: Decimal = ZERO
    energy_j: Decimal = ZERO
    co2e_g: Decimal = ZERO
    co2e_s: Decimal = ZERO
    unmeasured_energy_s: Decimal = ZERO


@dataclass(frozen=True, slots=True, kw_only=True)
class BreakdownTotals(_Amounts):
    """Allocated GPU-seconds and cost by namespace x pool x priority class."""

    allocated_s: Decimal = ZERO
    cost: Decimal = ZERO


@dataclass(frozen=True, slots=True, kw_only=True)
class UnmeasuredEnergy(_Amounts):
    """GPU-seconds of a node whose energy DCGM did not measure: priced at nothing, so counted instead."""

    seconds: Decimal = ZERO


@dataclass(frozen=True, slots=True, kw_only=True)
class CounterMark(_Amounts):
    """The last booked value of one cumulative agent counter (a high-water mark)."""

    allocated_s: float = 0.0
    used_s: float = 0.0
    unmeasured_s: float = 0.0
    energy_j: float = 0.0
    #: ``SPLIT_UNKNOWN`` on a mark booked before split seconds were (a ledger migrated to schema 13): the
    #: agent's cumulative split is then taken as the new mark, not as seconds split in one interval.
    split_s: float = 0.0


class UsageKey(NamedTuple):
    """An hour-row of usage: who held GPU time, where, at which price."""

    hour: int
    namespace: str
    pod: str
    workload: str
    node: str
    pool: str
    gpu_model: str
    mig_profile: str
    priority_class: str
    currency: str
    claim: str = ""  # the DRA claim (``<namespace>/<name>``) the time was held through; "" for none
    sharing: str = ""  # how the GPU was shared (``usage.SHARING_MODES``); "" when the agent did not say
    scheduler: str = ""  # whose queue admitted the pod: kueue | volcano | kai | yunikorn; "" for none
    queue: str = ""  # that queue (Kueue: ``<namespace>/<localqueue>``); "" for none
    cluster_queue: str = ""  # Kueue's ClusterQueue behind the LocalQueue; "" otherwise


class CapacityKey(NamedTuple):
    """An hour-row of one node's capacity that nobody held (or nobody observed)."""

    hour: int
    node: str
    pool: str
    gpu_model: str
    currency: str


class CapacityTotalKey(NamedTuple):
    """The all-time total of one node's unallocated or unobserved capacity."""

    node: str
    pool: str
    gpu_model: str
    currency: str


class CommitmentKey(NamedTuple):
    """An hour-row of one commitment's unused part (``__unused_commitment__``)."""

    hour: int
    commitment: str
    gpu_model: str
    currency: str


class CommitmentTotalKey(NamedTuple):
    """The all-time total of one commitment's unused part."""

    commitment: str
    gpu_model: str
    currency: str


class NodeKey(NamedTuple):
    """The all-time GPU-seconds of one node whose energy DCGM did not measure."""

    node: str


class NamespaceKey(NamedTuple):
    """A namespace's all-time totals, per currency."""

    namespace: str
    currency: str


class BreakdownKey(NamedTuple):
    """A namespace's all-time totals broken down by pool and priority class."""

    namespace: str
    pool: str
    priority_class: str
    currency: str


class AgentMark(NamedTuple):
    """Where an agent's books stand: its epoch, the snapshot time booked last and its sequence number."""

    epoch: str
    booked_ts: float
    seq: int


class EventCount(NamedTuple):
    """How many times a quota-rejection Event (by uid) has fired, and in which namespace."""

    namespace: str
    fired: int
