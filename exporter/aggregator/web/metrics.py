"""The aggregator's metrics over in-memory state: no SQL and no I/O per scrape. ``AggregatorCollector`` reads exactly
what it is handed (``MetricsInputs``: books, gauges, the API cache, prices, the time), one small method per group of
families (the held-GPU ones reused while unchanged: ``held_cache``); series names are written out whole."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from exporter.aggregator.advice.budget_control import BudgetControl
from exporter.aggregator.books.booking import Books
from exporter.aggregator.books.gauges import Gauges
from exporter.aggregator.kube.state import PENDING_REASONS, KubeState, parse_timestamp
from exporter.aggregator.web import held_cache
from exporter.aggregator.web.budget_metrics import window_budget_families
from exporter.aggregator.web.carbon_metrics import co2e_counter
from exporter.aggregator.web.ledger_metrics import ledger_families
from exporter.aggregator.web.model_metrics import model_info
from exporter.model.books import CapacityAmounts, CapacityTotalKey, NamespaceTotals
from exporter.model.forecast import Forecast
from exporter.model.pricing.document import Pricing
from exporter.model.rightsizing.types import Recommendation

Family = GaugeMetricFamily | CounterMetricFamily


@dataclass(frozen=True, slots=True)
class MetricsInputs:
    """Everything the collector reads, taken at scrape time."""

    is_leader: bool
    books: Books | None
    gauges: Gauges
    kube: KubeState
    pricing: Pricing
    now: float
    kube_up: bool
    pricing_reload_errors: int
    snapshots_rejected: Counter[str]
    team_label: str
    breakdown_series: bool
    ledger_up: bool = True
    ledger_write_failures: Mapping[str, int] = field(default_factory=dict)  # reason -> failed writes
    recommendations: tuple[Recommendation, ...] = ()
    budgets: Mapping[str, float] = field(default_factory=dict)
    forecasts: tuple[Forecast, ...] = ()
    budget_annotations_invalid: int = 0
    window_budgets: BudgetControl | None = None


class AggregatorCollector(Collector):
    """Every series of the metrics contract (ARCHITECTURE.md) plus the aggregator's own health."""

    def __init__(self, inputs: Callable[[], MetricsInputs]) -> None:
        self.inputs, self.held = inputs, held_cache.HeldGaugesCache(held_gauges)

    def collect(self) -> Iterator[Family]:
        """One scrape: the leader flag on every replica, every other family on the leader only."""
        m = self.inputs()
        yield GaugeMetricFamily("gpucost_aggregator_leader", "1 on the replica that accounts",
                                value=1.0 if m.is_leader else 0.0)
        if not m.is_leader:
            return
        if m.books is not None:
            yield from namespace_counters(m.books)
            yield from capacity_counters(m.books, breakdown_series=m.breakdown_series)
            yield from commitment_and_node_prices(m.books)
        yield from self.held.families(m.gauges, currency=m.pricing.currency)
        yield from (price_gauges(m.pricing), model_info(m.books, gauges=m.gauges, pricing=m.pricing))
        yield from quota_and_queue(m.kube, now=m.now, team_label=m.team_label)
        yield from (*dra_families(m.kube), recommendation_savings(m.recommendations))
        yield from budget_families(m.budgets, m.forecasts, invalid=m.budget_annotations_invalid)
        yield from window_budget_families(m.window_budgets, currency=m.pricing.currency)
        yield from health(m)


def namespace_counters(books: Books) -> Iterator[Family]:
    """Per-namespace counters of the books: GPU-seconds held, used, unmeasured and split by fraction (of the used,
    how much is an estimate), cost, idle and list cost, energy."""
    alloc = CounterMetricFamily("gpucost_allocated_gpu_seconds_total",
                                "GPU-seconds held by pods (fraction x seconds)", labels=["namespace"])
    used = CounterMetricFamily("gpucost_used_gpu_seconds_total", "GPU-seconds used (utilisation-weighted)",
                               labels=["namespace"])
    unmeasured = CounterMetricFamily("gpucost_unmeasured_gpu_seconds_total",
                                     "GPU-seconds held while no utilisation reading existed", labels=["namespace"])
    split = CounterMetricFamily("gpucost_split_gpu_seconds_total",
                                "GPU-seconds held on a busy shared GPU whose busy time was split by fraction, for want "
                                "of measured per-pod use", labels=["namespace"])
    cost = CounterMetricFamily("gpucost_cost_total", "money for allocated GPU time", labels=["namespace", "currency"])
    idle_cost = CounterMetricFamily("gpucost_idle_cost_total", "money for allocated but idle GPU time",
                                    labels=["namespace", "currency"])
    list_cost = CounterMetricFamily("gpucost_list_cost_total",
                                    "allocated GPU time at public list prices (no spot, pool, commitment discount)",
                                    labels=["namespace", "currency"])
    energy = CounterMetricFamily("gpucost_energy_joules_total",
                                 "energy DCGM measured on the devices, by the namespace that held them "
                                 "(__unallocated__: nobody did; __unobserved__: holders unknown)", labels=["namespace"])
    seconds: dict[str, NamespaceTotals] = {}  # summed over currencies
    for key, t in sorted(books.totals.items()):
        seconds[key.namespace] = seconds[key.namespace] + t if key.namespace in seconds else t
        cost.add_metric([key.namespace, key.currency], float(t.cost))
        idle_cost.add_metric([key.namespace, key.currency], float(t.idle_cost))
        list_cost.add_metric([key.namespace, key.currency], float(t.list_cost))
    for ns, total in sorted(seconds.items()):
        alloc.add_metric([ns], float(total.allocated_s))
        used.add_metric([ns], float(total.used_s))
        unmeasured.add_metric([ns], float(total.unmeasured_s))
        split.add_metric([ns], float(total.split_s))
        energy.add_metric([ns], float(total.energy_j))
    for name, capacity in (("__unallocated__", books.unallocated_totals), ("__unobserved__", books.unobserved_totals)):
        if joules := sum(a.energy_j for a in capacity.values()):
            energy.add_metric([name], float(joules))
    yield from (alloc, used, unmeasured, split, cost, idle_cost, list_cost, energy)
    yield from co2e_counter(books, namespaces=seconds)


def commitment_and_node_prices(books: Books) -> Iterator[Family]:
    """What commitments paid for nothing, and what a GPU-hour costs on each node now."""
    unused = CounterMetricFamily("gpucost_unused_commitment_cost_total",
                                 "committed GPU time the fleet could not use (paid for nothing)",
                                 labels=["commitment", "gpu_model", "currency"])
    for key, amount in sorted(books.unused_commitment_totals.items()):
        unused.add_metric(list(key), float(amount.cost))
    node_price = GaugeMetricFamily("gpucost_node_gpu_hourly_price",
                                   "effective price of one GPU-hour on the node now (commitments blended in)",
                                   labels=["node", "gpu_model", "capacity_type", "pricing_source"])
    for at, price in sorted(books.node_prices.items()):  # one series per node and GPU model
        node_price.add_metric([at.node, at.gpu_model, str(price.rate.capacity_type), str(price.rate.source)],
                              price.rate.effective_per_gpu_hour)
    yield from (unused, node_price)


def capacity_counters(books: Books, *, breakdown_series: bool) -> Iterator[Family]:
    """Capacity nobody held or observed, (``breakdown_series``) cost by pool and priority class, unpriced and
    unmeasured-energy GPU-seconds."""
    yield from seconds_and_cost(
        CounterMetricFamily("gpucost_unallocated_gpu_seconds_total", "GPU-seconds of capacity nobody held",
                            labels=["node", "pool", "gpu_model"]),
        CounterMetricFamily("gpucost_unallocated_cost_total", "money for capacity nobody held",
                            labels=["node", "pool", "gpu_model", "currency"]),
        totals=books.unallocated_totals)
    yield from seconds_and_cost(
        CounterMetricFamily("gpucost_unobserved_gpu_seconds_total",
                            "GPU-seconds of capacity no one could observe (agent down or state lost, kubelet "
                            "socket gone past the charge cap)", labels=["node", "pool", "gpu_model"]),
        CounterMetricFamily("gpucost_unobserved_cost_total", "money for capacity no one could observe",
                            labels=["node", "pool", "gpu_model", "currency"]),
        totals=books.unobserved_totals)
    if breakdown_series:
        alloc = CounterMetricFamily("gpucost_breakdown_allocated_gpu_seconds_total",
                                    "GPU-seconds held by namespace, pool and priority class",
                                    labels=["namespace", "pool", "priority_class"])
        cost = CounterMetricFamily("gpucost_breakdown_cost_total", "cost by namespace, node pool and priority class",
                                   labels=["namespace", "pool", "priority_class", "currency"])
        per_key: dict[tuple[str, str, str], Decimal] = defaultdict(Decimal)
        for bk, bv in sorted(books.breakdown.items()):
            per_key[(bk.namespace, bk.pool, bk.priority_class)] += bv.allocated_s
            cost.add_metric(list(bk), float(bv.cost))
        for labels, secs in sorted(per_key.items()):
            alloc.add_metric(list(labels), float(secs))
        yield from (alloc, cost)
    unmeasured_energy = CounterMetricFamily(
        "gpucost_unmeasured_energy_seconds_total", "GPU-seconds whose energy DCGM did not measure (no energy field, "
        "DCGM down, an impossible reading): their energy is priced at nothing", labels=["node"])
    for key, gap in sorted(books.unmeasured_energy.items()):
        unmeasured_energy.add_metric([key.node], float(gap.seconds))
    yield unmeasured_energy
    unpriced = CounterMetricFamily("gpucost_unpriced_gpu_seconds_total",
                                   "GPU-seconds of models missing from the pricing file (priced at default)",
                                   labels=["gpu_model"])
    for model, s in sorted(books.unpriced_seconds.items()):
        unpriced.add_metric([model], s)
    yield unpriced


def seconds_and_cost(seconds: CounterMetricFamily, cost: CounterMetricFamily, *,
                     totals: Mapping[CapacityTotalKey, CapacityAmounts]) -> tuple[Family, Family]:
    """Seconds summed over currencies, cost per currency, from capacity totals."""
    per_key: dict[tuple[str, str, str], Decimal] = defaultdict(Decimal)
    for key, amount in sorted(totals.items()):
        per_key[(key.node, key.pool, key.gpu_model)] += amount.seconds
        cost.add_metric(list(key), float(amount.cost))
    for labels, secs in sorted(per_key.items()):
        seconds.add_metric(list(labels), float(secs))
    return seconds, cost


def held_gauges(g: Gauges, *, currency: str) -> Iterator[Family]:
    """Held now: GPUs and utilisation per namespace and workload, each pod's GPUs, idle time, cost; overflow."""
    alloc = GaugeMetricFamily("gpucost_allocated_gpus", "GPUs held now (fractional)", labels=["namespace"])
    for ns, gpus in sorted(g.allocated_gpus.items()):
        alloc.add_metric([ns], gpus)
    util = GaugeMetricFamily("gpucost_gpu_utilization_ratio", "used / measured allocated GPU time, last tick",
                             labels=["namespace"])
    for ns, ratio in sorted(g.ns_utilization.items()):
        util.add_metric([ns], ratio)
    wutil = GaugeMetricFamily("gpucost_workload_gpu_utilization_ratio",
                              "used / measured allocated GPU time of a workload, last tick",
                              labels=["namespace", "workload"])
    for (ns, wl), wratio in sorted(g.workload_utilization.items()):
        wutil.add_metric([ns, wl], wratio)
    idle = GaugeMetricFamily("gpucost_pod_idle_seconds", "seconds a GPU holder has been below the idle threshold",
                             labels=["namespace", "pod", "workload"])
    held = GaugeMetricFamily("gpucost_pod_allocated_gpus", "GPUs a pod holds now (fractional)",
                             labels=["namespace", "pod", "workload", "gpu_model"])
    hourly = GaugeMetricFamily("gpucost_pod_hourly_cost", "what a pod's GPUs cost per hour now",
                               labels=["namespace", "pod", "workload", "currency"])
    for (ns, pod_name), pg in sorted(g.pods.items()):
        idle.add_metric([ns, pod_name, pg.workload], pg.idle_seconds)
        held.add_metric([ns, pod_name, pg.workload, pg.gpu_model], pg.gpus)
        hourly.add_metric([ns, pod_name, pg.workload, currency], pg.hourly_cost)
    overflow = GaugeMetricFamily("gpucost_overflow_pods",
                                 "pods folded into pod=__overflow__ by the per-namespace series limit",
                                 labels=["namespace"])
    for ns, folded in sorted(g.overflow_pods.items()):
        overflow.add_metric([ns], folded)
    yield from (alloc, util, wutil, idle, held, hourly, overflow)


def price_gauges(pricing: Pricing) -> Family:
    """The price of one GPU-hour per model in the current pricing, and the default price."""
    price = GaugeMetricFamily("gpucost_gpu_hourly_price", "price of one GPU-hour", labels=["gpu_model", "currency"])
    doc = pricing.doc
    for model, model_price in sorted(doc.models.items()):
        price.add_metric([model, doc.currency], model_price)
    price.add_metric(["default", doc.currency], doc.default_price)
    return price


def quota_and_queue(kube: KubeState, *, now: float, team_label: str) -> Iterator[Family]:
    """Quotas and headroom, batch queues, pending GPU pods by reason (and the oldest), team labels, rejections."""
    quota = GaugeMetricFamily("gpucost_quota_gpus",
                              "GPU quota per namespace: the tightest ResourceQuota, or a Kueue ClusterQueue "
                              "serving the namespace", labels=["namespace", "type", "source"])
    headroom = GaugeMetricFamily("gpucost_quota_headroom_gpus", "GPUs a namespace may still request (hard - used)",
                                 labels=["namespace", "source"])
    for (ns, source), (hard, used) in sorted(kube.quota_sources().items()):
        quota.add_metric([ns, "hard", source], hard)
        quota.add_metric([ns, "used", source], used)
        headroom.add_metric([ns, source], hard - used)
    queue = GaugeMetricFamily("gpucost_queue_gpus", "GPU capability and use of batch queues (Volcano, Kueue)",
                              labels=["source", "queue", "type"])
    for source, queues in (("volcano", kube.volcano_queues), ("kueue", kube.kueue_cluster_queues)):
        for name, (qhard, qused) in sorted(queues.items()):
            queue.add_metric([source, name, "hard"], qhard)
            queue.add_metric([source, name, "used"], qused)
    pending = GaugeMetricFamily("gpucost_pending_gpu_pods", "pending pods requesting GPUs, by reason",
                                labels=["namespace", "reason"])
    oldest = GaugeMetricFamily("gpucost_pending_gpu_pods_oldest_age_seconds",
                               "age of the oldest pending GPU pod per namespace", labels=["namespace"])
    counts: dict[tuple[str, str], int] = defaultdict(int)
    ages: dict[str, float] = {}
    for pod in kube.pending_gpu_pods():
        for reason in kube.pending_reasons(pod):
            counts[(pod.namespace, reason)] += 1
        created = parse_timestamp(pod.created)
        if created is not None:
            ages[pod.namespace] = max(ages.get(pod.namespace, 0.0), max(0.0, now - created))
    for (ns, reason), npods in sorted(counts.items()):
        if reason in PENDING_REASONS:
            pending.add_metric([ns, reason], npods)
    for ns, age in sorted(ages.items()):
        oldest.add_metric([ns], age)
    info = GaugeMetricFamily("gpucost_namespace_info", "1 per namespace that carries the team label",
                             labels=["namespace", "team"])
    for ns, ns_labels in sorted(kube.namespaces.items()):
        if ns_labels.get(team_label):
            info.add_metric([ns, ns_labels[team_label]], 1.0)
    rejections = CounterMetricFamily("gpucost_quota_rejections_total", "pod creations rejected by GPU quota",
                                     labels=["namespace"])
    for ns, nrej in sorted(kube.quota_rejections().items()):
        rejections.add_metric([ns], nrej)
    yield from (quota, headroom, queue, pending, oldest, info, rejections)


def dra_families(kube: KubeState) -> Iterator[Family]:
    """DRA GPU claims by state and the GPU devices nodes publish; empty where resource.k8s.io is not served."""
    claims = GaugeMetricFamily("gpucost_dra_claims", "DRA ResourceClaims for GPUs by namespace; pending = no "
                               "allocation yet", labels=["namespace", "state"])
    for c in kube.dra.claim_counts():
        claims.add_metric([c.namespace, c.state], c.claims)
    devices = GaugeMetricFamily("gpucost_dra_published_devices", "GPU devices the NVIDIA DRA driver publishes "
                                "in ResourceSlices, by node and type (gpu, mig, vfio, other)", labels=["node", "type"])
    for d in kube.dra.published_devices():
        devices.add_metric([d.node, d.type], d.devices)
    yield from (claims, devices)


def health(m: MetricsInputs) -> Iterator[Family]:
    """The aggregator's own health: agents and DCGM up, rejected snapshots, ledger, tick, agent resets, watch,
    pricing reloads."""
    agent_up = GaugeMetricFamily("gpucost_agent_up", "1 when the last pull of the node's agent was booked",
                                 labels=["node"])
    dcgm_up = GaugeMetricFamily("gpucost_dcgm_up", "1 when the node's agent could scrape DCGM Exporter",
                                labels=["node"])
    for node, a in sorted(m.gauges.agents.items()):
        agent_up.add_metric([node], 1.0 if a.up else 0.0)
        dcgm_up.add_metric([node], 1.0 if a.dcgm_up else 0.0)
    rejected = CounterMetricFamily("gpucost_agent_snapshots_rejected_total",
                                   "agent snapshots refused (impostor or duplicate node, invalid or impossible "
                                   "counters), by reason", labels=["reason"])
    for reason, n in sorted(m.snapshots_rejected.items()):
        rejected.add_metric([reason], n)
    yield from (agent_up, dcgm_up, rejected)
    yield from ledger_families(up=m.ledger_up, write_failures=m.ledger_write_failures,
                               last_commit=m.gauges.last_commit)
    yield GaugeMetricFamily("gpucost_aggregator_tick_duration_seconds", "wall time of the last tick",
                            value=m.gauges.tick_duration)
    yield CounterMetricFamily("gpucost_agent_resets_total", "agent epochs that changed (counter resets)",
                              value=m.books.resets_total if m.books else 0)
    yield GaugeMetricFamily("gpucost_kube_up", "1 while the Kubernetes watch is healthy",
                            value=1.0 if m.kube_up else 0.0)
    yield CounterMetricFamily("gpucost_pricing_reload_errors_total", "pricing file reloads rejected as invalid",
                              value=m.pricing_reload_errors)


def recommendation_savings(rows: tuple[Recommendation, ...]) -> GaugeMetricFamily:
    """One series per workload with a right-sizing action (the one saving most), in the ledger's currency."""
    g = GaugeMetricFamily("gpucost_recommendation_monthly_savings",
                          "monthly (730 h) amount a right-sizing action would save, at the booked prices",
                          labels=["namespace", "workload", "action"])
    for r in rows:
        g.add_metric([r.namespace, r.workload, str(r.action)], round(r.monthly_savings, 2))  # as the API has it
    return g


def budget_families(budgets: Mapping[str, float], forecasts: tuple[Forecast, ...], *,
                    invalid: int) -> Iterator[Family]:
    """Budgets now, and the month-end forecasts as last refreshed from the ledger (pricing currency)."""
    budget = GaugeMetricFamily("gpucost_budget", "monthly GPU budget of the namespace in the pricing currency "
                               "(annotation gpu.platform/monthly-budget, or the chart's budgets)", labels=["namespace"])
    for ns, amount in sorted(budgets.items()):
        budget.add_metric([ns], amount)
    forecast = GaugeMetricFamily("gpucost_forecast_month_cost", "cost of the namespace's GPUs this calendar month "
                                 "(UTC): spent so far + recent burn rate x hours left", labels=["namespace"])
    crossing = GaugeMetricFamily("gpucost_forecast_budget_crossing_timestamp_seconds",
                                 "00:00 UTC of the day the namespace's month-to-date cost reaches its budget at the "
                                 "recent burn rate (absent: not this month)", labels=["namespace"])
    for f in forecasts:
        forecast.add_metric([f.namespace], f.month_cost)
        if f.crossing_day is not None:
            crossing.add_metric([f.namespace], f.crossing_day)
    yield from (budget, forecast, crossing)
    yield CounterMetricFamily("gpucost_budget_annotations_invalid", "namespace budget annotations ignored as not a "
                              "positive amount (each namespace and value counted once)", value=invalid)
