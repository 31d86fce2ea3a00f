"""The aggregator's metrics over in-memory state: no SQL and no I/O per scrape.

``AggregatorCollector`` yields prometheus-client metric families (used by tests and the registry);
``render_exposition`` writes the same families as text 0.0.4 with label strings escaped once and cached,
which is what ``/metrics`` serves: with tens of thousands of pods, prometheus-client's generic
per-sample formatting dominates a scrape.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from exporter.aggregator.kubestate import PENDING_REASONS, parse_timestamp

if TYPE_CHECKING:
    from exporter.aggregator.service import Aggregator


class AggregatorCollector(Collector):
    """Every series of the metrics contract (ARCHITECTURE.md) plus the aggregator's own health."""

    def __init__(self, agg: Aggregator) -> None:
        self.agg = agg

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        agg = self.agg
        if not agg.is_leader:
            yield GaugeMetricFamily("gpucost_aggregator_leader", "1 on the replica that accounts", value=0.0)
            return
        yield GaugeMetricFamily("gpucost_aggregator_leader", "1 on the replica that accounts", value=1.0)
        books = agg.books
        names = {
            "gpucost_allocated_gpu_seconds": ("GPU-seconds held by pods (fraction x seconds)", 0),
            "gpucost_used_gpu_seconds": ("GPU-seconds used (utilisation-weighted)", 1),
            "gpucost_unmeasured_gpu_seconds": ("GPU-seconds held while no utilisation reading existed", 2),
        }
        fams = {n: CounterMetricFamily(n, doc, labels=["namespace"]) for n, (doc, _i) in names.items()}
        per_ns: dict[str, list[float]] = defaultdict(lambda: [0.0] * 5)
        cost = CounterMetricFamily("gpucost_cost", "money for allocated GPU time", labels=["namespace", "currency"])
        idle_cost = CounterMetricFamily("gpucost_idle_cost", "money for allocated but idle GPU time",
                                        labels=["namespace", "currency"])
        for (ns, currency), v in sorted(books.totals.items()) if books else []:
            acc = per_ns[ns]
            for i in range(3):
                acc[i] += v[i]
            cost.add_metric([ns, currency], v[3])
            idle_cost.add_metric([ns, currency], v[4])
        for ns, acc in sorted(per_ns.items()):
            for n, (_doc, i) in names.items():
                fams[n].add_metric([ns], acc[i])
        yield from fams.values()
        yield cost
        yield idle_cost
        yield from _seconds_and_cost(
            "gpucost_unallocated_gpu_seconds", "GPU-seconds of capacity nobody held",
            "gpucost_unallocated_cost", "money for capacity nobody held", ["node", "pool", "gpu_model"],
            books.unallocated_totals if books else {})
        if agg.settings.breakdown_series and books:
            yield from _seconds_and_cost(
                "gpucost_breakdown_allocated_gpu_seconds", "GPU-seconds held by namespace, pool and priority class",
                "gpucost_breakdown_cost", "cost by namespace, node pool and priority class",
                ["namespace", "pool", "priority_class"], books.breakdown)
        unpriced = CounterMetricFamily("gpucost_unpriced_gpu_seconds",
                                       "GPU-seconds of models missing from the pricing file (priced at default)",
                                       labels=["gpu_model"])
        for model, s in sorted(books.unpriced_seconds.items()) if books else []:
            unpriced.add_metric([model], s)
        yield unpriced

        g = agg.gauges
        alloc = GaugeMetricFamily("gpucost_allocated_gpus", "GPUs held now (fractional)", labels=["namespace"])
        for ns, gpus in sorted(g.allocated_gpus.items()):
            alloc.add_metric([ns], gpus)
        yield alloc
        util = GaugeMetricFamily("gpucost_gpu_utilization_ratio", "used / measured allocated GPU time, last tick",
                                 labels=["namespace"])
        for ns, ratio in sorted(g.ns_utilization.items()):
            util.add_metric([ns], ratio)
        yield util
        wutil = GaugeMetricFamily("gpucost_workload_gpu_utilization_ratio",
                                  "used / measured allocated GPU time of a workload, last tick",
                                  labels=["namespace", "workload"])
        for (ns, wl), wratio in sorted(g.workload_utilization.items()):
            wutil.add_metric([ns, wl], wratio)
        yield wutil
        idle = GaugeMetricFamily("gpucost_pod_idle_seconds", "seconds a GPU holder has been below the idle threshold",
                                 labels=["namespace", "pod", "workload"])
        held = GaugeMetricFamily("gpucost_pod_allocated_gpus", "GPUs a pod holds now (fractional)",
                                 labels=["namespace", "pod", "workload", "gpu_model"])
        hourly = GaugeMetricFamily("gpucost_pod_hourly_cost", "what a pod's GPUs cost per hour now",
                                   labels=["namespace", "pod", "workload", "currency"])
        for (ns, pod_name), pg in sorted(g.pods.items()):
            idle.add_metric([ns, pod_name, pg.workload], pg.idle_seconds)
            held.add_metric([ns, pod_name, pg.workload, pg.gpu_model], pg.gpus)
            hourly.add_metric([ns, pod_name, pg.workload, agg.pricing.current.currency], pg.hourly_cost)
        yield idle
        yield held
        yield hourly
        overflow = GaugeMetricFamily("gpucost_overflow_pods",
                                     "pods folded into pod=__overflow__ by the per-namespace series limit",
                                     labels=["namespace"])
        for ns, folded in sorted(g.overflow_pods.items()):
            overflow.add_metric([ns], folded)
        yield overflow
        price = GaugeMetricFamily("gpucost_gpu_hourly_price", "price of one GPU-hour", labels=["gpu_model", "currency"])
        doc = agg.pricing.current.doc
        for model, model_price in sorted(doc.models.items()):
            price.add_metric([model, doc.currency], model_price)
        price.add_metric(["default", doc.currency], doc.default_price)
        yield price
        quota = GaugeMetricFamily("gpucost_quota_gpus",
                                  "GPU quota per namespace: the tightest ResourceQuota, or a Kueue ClusterQueue "
                                  "serving the namespace", labels=["namespace", "type", "source"])
        for (ns, source), (hard, used) in sorted(agg.kube.quota_sources().items()):
            quota.add_metric([ns, "hard", source], hard)
            quota.add_metric([ns, "used", source], used)
        yield quota
        headroom = GaugeMetricFamily("gpucost_quota_headroom_gpus", "GPUs a namespace may still request (hard - used)",
                                     labels=["namespace", "source"])
        for (ns, source), (hard, used) in sorted(agg.kube.quota_sources().items()):
            headroom.add_metric([ns, source], hard - used)
        yield headroom
        queue = GaugeMetricFamily("gpucost_queue_gpus", "GPU capability and use of batch queues (Volcano, Kueue)",
                                  labels=["source", "queue", "type"])
        for name, (hard, used) in sorted(agg.kube.volcano_queues.items()):
            queue.add_metric(["volcano", name, "hard"], hard)
            queue.add_metric(["volcano", name, "used"], used)
        for name, (hard, used) in sorted(agg.kube.kueue_cluster_queues.items()):
            queue.add_metric(["kueue", name, "hard"], hard)
            queue.add_metric(["kueue", name, "used"], used)
        yield queue
        pending = GaugeMetricFamily("gpucost_pending_gpu_pods", "pending pods requesting GPUs, by reason",
                                    labels=["namespace", "reason"])
        counts: dict[tuple[str, str], int] = defaultdict(int)
        for pending_pod in agg.kube.pending_gpu_pods():
            for reason in agg.kube.pending_reasons(pending_pod):
                counts[(pending_pod.namespace, reason)] += 1
        for (ns, reason), npods in sorted(counts.items()):
            if reason in PENDING_REASONS:
                pending.add_metric([ns, reason], npods)
        yield pending
        oldest = GaugeMetricFamily("gpucost_pending_gpu_pods_oldest_age_seconds",
                                   "age of the oldest pending GPU pod per namespace", labels=["namespace"])
        ages: dict[str, float] = {}
        now = agg.clock.now()
        for pending_pod in agg.kube.pending_gpu_pods():
            created = parse_timestamp(pending_pod.created)
            if created is not None:
                ages[pending_pod.namespace] = max(ages.get(pending_pod.namespace, 0.0), max(0.0, now - created))
        for ns, age in sorted(ages.items()):
            oldest.add_metric([ns], age)
        yield oldest
        info = GaugeMetricFamily("gpucost_namespace_info", "1 per namespace that carries the team label",
                                 labels=["namespace", "team"])
        team_label = agg.settings.team_label
        for ns, ns_labels in sorted(agg.kube.namespaces.items()):
            if ns_labels.get(team_label):
                info.add_metric([ns, ns_labels[team_label]], 1.0)
        yield info
        rejections = CounterMetricFamily("gpucost_quota_rejections", "pod creations rejected by GPU quota",
                                         labels=["namespace"])
        rej: dict[str, int] = defaultdict(int)
        for ns, count in agg.kube.quota_event_counts.values():
            rej[ns] += count
        for ns, nrej in sorted(rej.items()):
            rejections.add_metric([ns], nrej)
        yield rejections
        agent_up = GaugeMetricFamily("gpucost_agent_up", "1 when the last pull of the node's agent succeeded",
                                     labels=["node"])
        dcgm_up = GaugeMetricFamily("gpucost_dcgm_up", "1 when the node's agent could scrape DCGM Exporter",
                                    labels=["node"])
        for node, (up, dcgm) in sorted(g.agents.items()):
            agent_up.add_metric([node], 1.0 if up else 0.0)
            dcgm_up.add_metric([node], 1.0 if dcgm else 0.0)
        yield agent_up
        yield dcgm_up
        yield GaugeMetricFamily("gpucost_ledger_last_commit_timestamp_seconds",
                                "when the ledger last committed a tick", value=g.last_commit)
        yield GaugeMetricFamily("gpucost_aggregator_tick_duration_seconds", "wall time of the last tick",
                                value=g.tick_duration)
        yield CounterMetricFamily("gpucost_agent_resets", "agent epochs that changed (counter resets)",
                                  value=books.resets_total if books else 0)
        yield GaugeMetricFamily("gpucost_kube_up", "1 while the Kubernetes watch is healthy",
                                value=1.0 if agg.kube_up else 0.0)
        yield CounterMetricFamily("gpucost_pricing_reload_errors", "pricing file reloads rejected as invalid",
                                  value=agg.pricing.reload_errors)


def _seconds_and_cost(seconds_name: str, seconds_doc: str, cost_name: str, cost_doc: str, labels: list[str],
                      totals: Mapping[tuple[str, str, str, str], list[float]],
                      ) -> tuple[CounterMetricFamily, CounterMetricFamily]:
    """Two counters from totals keyed (*labels, currency) -> [seconds, cost]: seconds summed over
    currencies, cost per currency."""
    seconds = CounterMetricFamily(seconds_name, seconds_doc, labels=labels)
    cost = CounterMetricFamily(cost_name, cost_doc, labels=[*labels, "currency"])
    per_key: dict[tuple[str, str, str], float] = defaultdict(float)
    for key, (secs, money) in sorted(totals.items()):
        per_key[key[:-1]] += secs
        cost.add_metric(list(key), money)
    for labels_key, secs in sorted(per_key.items()):
        seconds.add_metric(list(labels_key), secs)
    return seconds, cost


_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n"})


def _fmt(value: float) -> str:
    text = repr(float(value))
    if text[-1] in "nf":  # nan, inf, -inf
        return "NaN" if text == "nan" else ("+Inf" if text == "inf" else "-Inf")
    return text


class ExpositionRenderer:
    """Renders families to text; caches escaped label strings between scrapes (bounded)."""

    MAX_CACHE = 200_000

    def __init__(self) -> None:
        self._labels: dict[str, dict[tuple[str, ...], str]] = {}
        self._size = 0

    def render(self, families: list[GaugeMetricFamily | CounterMetricFamily]) -> bytes:
        out: list[str] = []
        append = out.append
        if self._size > self.MAX_CACHE:
            self._labels.clear()
            self._size = 0
        for fam in families:
            name = fam.name + "_total" if fam.type == "counter" else fam.name
            append(f"# HELP {name} {fam.documentation.translate(_ESCAPES)}\n# TYPE {name} {fam.type}\n")
            cache = self._labels.setdefault(fam.name, {})
            for sample in fam.samples:
                labels = sample.labels
                if not labels:
                    append(f"{sample.name} {_fmt(sample.value)}\n")
                    continue
                values = tuple(labels.values())
                text = cache.get(values)
                if text is None:
                    text = ",".join(f'{k}="{str(v).translate(_ESCAPES)}"' for k, v in labels.items())
                    cache[values] = text
                    self._size += 1
                append(f"{sample.name}{{{text}}} {_fmt(sample.value)}\n")
        return "".join(out).encode()
