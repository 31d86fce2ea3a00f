"""Right-sizing recommendations from a ledger: the window's usage and evidence rows, pooled per workload.

The window ends at the ledger's latest booked snapshot and spans ``window`` seconds back, widened to the
start of that clock hour (the ledger's rows are hourly), or the ledger's history if shorter: the cost pace
is taken over the time actually covered. An explicit ``since`` / ``until`` (``--since/--until``, as in
``report``: the hour buckets that start in [since, until)) overrides either end: ``since`` widened to the
start of its hour, ``until`` to the end of the hour it falls in, capped at the latest booked snapshot.
What the cluster "offers" is what some workload held in the window, priced at the higher of what booking
charged and the list price per device-hour for it, and what it had free in the window (``free_offers``),
priced at its own effective rate. A workload seen on several device kinds is judged on
the one it spent most on. A pod's GPU count is the most devices it held in any one hour. Hours observed
are measured seconds, not clock hours touched: per hour the most any one device of the workload's placement
(model, profile and device kind: a whole GPU's hours are not a shared one's) was measured (pods side by side
overlap; pods one after the other in one hour are undercounted, the side that never claims more evidence than
there is). Both are summed by the database, so what is read stays one row per device and pod whatever the
window's length: a 7-day window of 80,000 pods is 13 million pod-hours.
"""

from __future__ import annotations

import csv
import io
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol, TypeVar

from exporter.aggregator.advice.free_offers import free_offers, with_free
from exporter.aggregator.ledger.evidence import BUCKET_COLUMNS
from exporter.aggregator.ledger.report import ReportError, parse_time
from exporter.aggregator.ledger.table import Table
from exporter.logs import get_logger
from exporter.model.books import hour_of
from exporter.model.named_rows import Select
from exporter.model.rightsizing.evidence import UtilHistogram
from exporter.model.rightsizing.recommend import recommend_all
from exporter.model.rightsizing.types import (
    DeviceUse,
    Offer,
    Placement,
    PodUse,
    Recommendation,
    RuleSettings,
    WorkloadUse,
)
from exporter.model.wire import exact_numbers, plain, to_json

Query = Callable[[str, Iterable[Any]], list[tuple[Any, ...]]]
log = get_logger("aggregator.recommendations")
T = TypeVar("T")
DEFAULT_WINDOW_S = 7 * 86400.0


@dataclass(slots=True)
class _Group:
    """One (namespace, workload, placement)'s rows while they are being read."""

    placement: Placement
    cost: float = 0.0
    list_cost: float = 0.0
    device_hours: float = 0.0
    currency: str = ""
    observed_s: float = 0.0  # per hour the seconds of the most measured device, summed over the hours
    devices: dict[str, dict[str, DeviceUse]] = field(default_factory=dict)  # pod -> device -> evidence
    gpus: int = 0  # the most devices one of its pods held in any one hour


def _placement(model: str, profile: str, *, kind: str, fraction: float) -> Placement:
    replicas = round(1 / fraction) if kind == "replica" and fraction > 0 else None
    return Placement(model, profile or None, 1, replicas)


def explicit_window(since: str | None, until: str | None, *, now: float,
                    names: tuple[str, str] = ("--since", "--until")) -> tuple[float | None, float | None]:
    """``since`` / ``until`` parsed as ``report`` parses them (RFC3339, a duration back from ``now``, or
    ``now``); a bad one raises ReportError naming it (``names``: how the caller spells the two)."""
    bounds: list[float | None] = []
    for name, text in zip(names, (since, until), strict=True):
        try:
            bounds.append(parse_time(text, now))
        except ReportError as exc:
            raise ReportError(f"{name}: {exc}") from None
    start, end = bounds
    if start is not None and end is not None and end < start:
        raise ReportError(f"{names[1]} is before {names[0]}")
    return start, end


def _window(query: Query, cluster: str, *, window_s: float, since: float | None = None,
            until: float | None = None) -> tuple[float, float] | None:
    """(start, end): ``end`` the latest booked snapshot (or ``until``'s hour's end, if earlier); ``start`` a
    window back from ``end`` (or ``since``), or where the books begin. None: nothing booked in it."""
    latest, books = query("SELECT MAX(booked_ts), MIN(since) FROM agents WHERE cluster = ?", (cluster,))[0]
    (first,) = query("SELECT MIN(hour) FROM usage WHERE cluster = ?", (cluster,))[0]
    first = books if books is not None else first
    if latest is None or first is None:
        return None
    end = float(latest)
    if until is not None:  # the hour bucket ``until`` falls in is reported whole: so is its time
        end = min(end, float(until if until == hour_of(until) else hour_of(until) + 3600))
    # The ledger books by the clock hour: the window starts at the hour its first moment falls in.
    start = max(float(hour_of(end - window_s if since is None else since)), float(first))
    return (start, end) if end > start else None


_EVIDENCE_KEYS = ("namespace", "workload", "pod", "gpu_model", "mig_profile", "device_kind", "device")
_EVIDENCE = Select.of((*_EVIDENCE_KEYS, "fraction", "fb_peak", "fb_peaks", *BUCKET_COLUMNS), fraction="MAX(fraction)",
                      fb_peak="MAX(fb_peak_bytes)", fb_peaks="COUNT(fb_peak_bytes)",
                      **{c: f"SUM({c})" for c in BUCKET_COLUMNS})
_EVIDENCE_KEY = _EVIDENCE.getter(*_EVIDENCE_KEYS)
_EVIDENCE_FB = _EVIDENCE.getter("fraction", "fb_peak", "fb_peaks")
_EVIDENCE_SECONDS = _EVIDENCE.getter(*BUCKET_COLUMNS)  # in BUCKET_COLUMNS' order, as UtilHistogram holds them


def _read(query: Query, cluster: str, *, start: float, end: float) -> dict[tuple[str, str], list[_Group]]:
    """The window's groups, from four summed reads done one after another: each read's rows are folded into the
    groups and dropped before the next is fetched, so the peak is one read's rows, not four (the hourly refresh
    at 10,000 nodes is the aggregator's largest allocation)."""
    span = (cluster, hour_of(start), end)
    groups: dict[tuple[str, str, str, str, str], _Group] = {}
    pod_group: dict[tuple[str, str, str, str, str], _Group] = {}
    for r in query(f"SELECT {_EVIDENCE.sql()} FROM evidence WHERE cluster = ? AND hour >= ? AND hour < ? GROUP BY "
                   "namespace, workload, pod, gpu_model, mig_profile, device_kind, device", span):
        ns, wl, pod, model, profile, kind, device = _EVIDENCE_KEY(r)
        fraction, peak, peaks = _EVIDENCE_FB(r)
        key = (ns, wl, model, profile, kind)
        g = groups.setdefault(key, _Group(_placement(model, profile, kind=kind, fraction=float(fraction))))
        pod_group[(ns, wl, pod, model, profile)] = g
        hist = UtilHistogram(tuple(float(s) if s else 0.0 for s in _EVIDENCE_SECONDS(r)))  # 0.0 shared
        fb = None if kind == "replica" or not peaks else int(peak)
        g.devices.setdefault(pod, {})[device] = DeviceUse(hist, fb)
    seconds = " + ".join(BUCKET_COLUMNS)
    held_in = "FROM evidence WHERE cluster = ? AND hour >= ? AND hour < ? AND device_kind <> ''"
    for ns, wl, pod, model, profile, n in query(
            "SELECT namespace, workload, pod, gpu_model, mig_profile, MAX(n) FROM (SELECT namespace, workload, "
            f"pod, gpu_model, mig_profile, hour, COUNT(*) AS n {held_in} GROUP BY namespace, workload, pod, "
            "gpu_model, mig_profile, hour) AS per_hour GROUP BY namespace, workload, pod, gpu_model, mig_profile",
            span):
        owner = pod_group.get((ns, wl, pod, model, profile))
        if owner is not None:
            owner.gpus = max(owner.gpus, int(n))
    for ns, wl, model, profile, kind, measured in query(  # each placement its own devices' hours
            "SELECT namespace, workload, gpu_model, mig_profile, device_kind, SUM(m) FROM (SELECT namespace, "
            f"workload, gpu_model, mig_profile, device_kind, hour, MAX({seconds}) AS m {held_in} GROUP BY "
            "namespace, workload, gpu_model, mig_profile, device_kind, hour) AS per_hour GROUP BY namespace, "
            "workload, gpu_model, mig_profile, device_kind", span):
        placed = groups.get((ns, wl, model, profile, kind))
        if placed is not None:
            placed.observed_s = float(measured or 0.0)
    for ns, wl, pod, model, profile, currency, allocated, cost, list_cost in query(
            "SELECT namespace, workload, pod, gpu_model, mig_profile, currency, SUM(allocated_s), SUM(cost), "
            "SUM(list_cost) FROM usage WHERE cluster = ? AND hour >= ? AND hour < ? "
            "GROUP BY namespace, workload, pod, gpu_model, mig_profile, currency", span):
        target = pod_group.get((ns, wl, pod, model, profile))
        if target is None or not target.placement.share:
            continue
        target.cost += float(cost)
        target.list_cost += float(list_cost)
        target.device_hours += float(allocated) / 3600.0 / target.placement.share
        target.currency = str(currency)
    out: dict[tuple[str, str], list[_Group]] = defaultdict(list)
    for (ns, wl, *_rest), g in groups.items():
        out[(ns, wl)].append(g)
    return out


def _offers(groups: Iterable[_Group]) -> list[Offer]:
    """Each placement held in the window, at the higher of its booked and its list price per device-hour.

    A moved workload pays the margin, not the average: a commitment already used up, a pool's or spot's
    discount are not its to count on; and where booking charged more than list (a pool multiplier above 1,
    a commitment dearer than list) that is what it would pay. The higher price never overstates savings."""
    totals: dict[Placement, tuple[float, float, float]] = {}
    for g in groups:
        cost, list_cost, hours = totals.get(g.placement, (0.0, 0.0, 0.0))
        totals[g.placement] = (cost + g.cost, list_cost + g.list_cost, hours + g.device_hours)
    return [Offer(p, max(cost, list_cost) / hours) for p, (cost, list_cost, hours) in totals.items() if hours > 0]


def _use(ns: str, wl: str, *, g: _Group) -> WorkloadUse:
    gpus = g.gpus or 1
    placement = Placement(g.placement.gpu_model, g.placement.mig_profile, gpus, g.placement.replicas)
    pods = tuple(PodUse(pod, tuple(devices.values())) for pod, devices in sorted(g.devices.items()))
    observed = round(g.observed_s / 3600.0, 6)  # float sums of tick pieces: 1.9999999999999971 h
    return WorkloadUse(namespace=ns, workload=wl, placement=placement, pods=pods, allocated_device_hours=g.device_hours,
                       booked_cost=g.cost, hours_observed=observed, currency=g.currency)


def recommendations(query: Query, *, cluster: str, window_s: float = DEFAULT_WINDOW_S,
                    settings: RuleSettings | None = None, since: float | None = None,
                    until: float | None = None) -> list[Recommendation]:
    """Every workload's best action over the window ending at the ledger's latest booked time (or over the
    explicit ``since`` / ``until``, which override the window's start / end)."""
    span = _window(query, cluster, window_s=window_s, since=since, until=until)
    if span is None:
        return []
    start, end = span
    by_workload = _read(query, cluster, start=start, end=end)
    offers = with_free(_offers(g for gs in by_workload.values() for g in gs),
                       free_offers(query, cluster, start=start, end=end))
    uses = [_use(ns, wl, g=max(gs, key=lambda g: g.cost)) for (ns, wl), gs in sorted(by_workload.items())]
    return recommend_all(uses, offers, window_hours=(end - start) / 3600.0, settings=settings)


def why_none(query: Query, *, cluster: str, min_evidence_s: float, window_s: float = DEFAULT_WINDOW_S) -> str:
    """Why there are no recommendations: the evidence a row needs against the most any workload has."""
    need = min_evidence_s / 3600.0
    span = _window(query, cluster, window_s=window_s, since=None, until=None)
    if span is None:
        return f"(no recommendations: nothing booked for cluster {cluster!r}; a row needs a workload observed " \
               f"{need:g} h (--min-evidence))"
    most = max((g.observed_s for gs in _read(query, cluster, start=span[0], end=span[1]).values() for g in gs),
               default=0.0) / 3600.0
    if most < need:
        return (f"(no recommendations: a row needs a workload observed {need:g} h (--min-evidence); the most any "
                f"workload was observed in the window is {most:.1f} h)")
    return (f"(no recommendations: every workload observed at least {need:g} h (most: {most:.1f} h) is placed "
            "and sized as its evidence asks)")


def as_dict(r: Recommendation) -> dict[str, Any]:
    """The JSON shape of one recommendation (money rounded to cents)."""
    def place(p: Placement) -> dict[str, Any]:
        return {"gpu_model": p.gpu_model, "mig_profile": p.mig_profile, "gpus": p.gpus, "replicas": p.replicas}

    ev = r.evidence
    return {"namespace": r.namespace, "workload": r.workload, "action": str(r.action), "current": place(r.current),
            "target": place(r.target),
            "evidence": {"util_p50": ev.util_p50, "util_p95": ev.util_p95,
                         "framebuffer_peak_bytes": ev.framebuffer_peak_bytes, "hours_observed": ev.hours_observed},
            "monthly_cost_now": round(r.monthly_cost_now, 2), "monthly_cost_after": round(r.monthly_cost_after, 2),
            "monthly_savings": round(r.monthly_savings, 2), "currency": r.currency, "reason": r.reason}


def as_wire(r: Recommendation) -> dict[str, Any]:
    """``as_dict`` as JSON and CSV write it: every number a decimal to 9 digits (no float noise past them)."""
    out: dict[str, Any] = exact_numbers(as_dict(r))
    return out


_FLAT = ("namespace", "workload", "action", "current", "target", "util_p95", "fb_peak_gib", "monthly_cost_now",
         "monthly_cost_after", "monthly_savings", "currency", "reason")


def _flat(r: Recommendation) -> dict[str, Any]:
    def place(p: Placement) -> str:
        kind = p.mig_profile or (f"1/{p.replicas}" if p.replicas else "")
        return f"{p.gpus}x {p.gpu_model}{' ' + kind if kind else ''}"

    d = as_wire(r)
    fb = r.evidence.framebuffer_peak_bytes
    return {**{k: d[k] for k in ("namespace", "workload", "action", "monthly_cost_now", "monthly_cost_after",
                                 "monthly_savings", "currency", "reason")},
            "current": place(r.current), "target": place(r.target), "util_p95": d["evidence"]["util_p95"],
            "fb_peak_gib": "" if fb is None else f"{fb / 2**30:.1f}"}


def render(rows: list[Recommendation], fmt: str, *, wide: bool = False, none: str = "(no recommendations)") -> str:
    """``json`` (full rows), ``csv`` or ``table`` (one flat line each, 120 columns unless ``wide``; ``none``
    when there are no rows: why there is nothing)."""
    if fmt == "json":
        return to_json([as_wire(r) for r in rows], indent=2)
    flat = [{k: plain(v) if isinstance(v, Decimal) else v for k, v in _flat(r).items()} for r in rows]
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=_FLAT, lineterminator="\n")
        writer.writeheader()
        writer.writerows(flat)
        return buf.getvalue()
    if not flat:
        return none + "\n"
    fields = [k for k in _FLAT if k != "reason"]
    cells = [[_table_cell(f[k]) for k in fields] for f in flat]
    return Table(fields, cells, keep=("namespace", "workload", "action", "monthly_savings"),
                 priority=("currency", "target", "current", "util_p95")).render(wide=wide)


def _table_cell(v: Any) -> str:
    """Money and ratios for the eye: cents, and a ratio to 2 digits; nothing known is empty."""
    if v is None:
        return ""
    if isinstance(v, str) and v.replace(".", "", 1).lstrip("-").isdigit():
        return f"{Decimal(v):,.2f}"
    return str(v)


class LedgerReader(Protocol):
    """What advice needs of the ledger: its cluster and a read on its own thread."""

    cluster: str

    async def read(self, fn: Callable[[Query], T]) -> T:
        """Run ``fn(query)`` on the ledger's thread (off the event loop)."""


@dataclass(slots=True)
class Advice:
    """Right-sizing rows as last computed for the metrics, refreshed at most every ``every`` seconds."""

    settings: RuleSettings = field(default_factory=RuleSettings)
    every: float = 3600.0
    window_s: float = DEFAULT_WINDOW_S
    rows: tuple[Recommendation, ...] = ()
    at: float | None = None

    async def after_commit(self, ledger: LedgerReader) -> None:
        """Recompute when ``every`` seconds have passed; a failure is logged, never raised into the tick's commit."""
        if self.at is not None and time.monotonic() - self.at < self.every:
            return
        try:
            await self.compute(ledger)
        except Exception as exc:  # recommendations are advice: a failure never fails the tick's commit
            log.warning("recommendations_failed", error=repr(exc))

    async def compute(self, ledger: LedgerReader, *, window_s: float | None = None,
                      settings: RuleSettings | None = None, remember: bool = True, since: float | None = None,
                      until: float | None = None) -> tuple[Recommendation, ...]:
        """Rows over the window ending at the latest booked time (this advice's own window and rules unless
        given; ``since`` / ``until`` as in ``recommendations``); ``remember``: keep them for the metrics."""
        rules, window = settings or self.settings, window_s or self.window_s
        rows = tuple(await ledger.read(lambda q: recommendations(q, cluster=ledger.cluster, window_s=window,
                                                                 settings=rules, since=since, until=until)))
        if remember:
            self.at, self.rows = time.monotonic(), rows
        return rows
