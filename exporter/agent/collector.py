"""Prometheus collector over the agent's last published tick: a scrape does no I/O and no accounting."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from exporter.agent.health import Health
from exporter.agent.meter import Meter
from exporter.clock import ClockSteps
from exporter.model.devices import SharingMode
from exporter.model.usage import UsageSnapshot

HOLDER_LABELS = ["namespace", "pod", "container", "device_id", "gpu_uuid", "gpu_model", "mig_profile"]


@dataclass(frozen=True, slots=True)
class AgentView:
    """Exactly what the collector reads, taken at scrape time (no daemon object, no I/O)."""

    node: str
    published: UsageSnapshot | None
    health: Health
    meter: Meter
    ignored_finished: int
    sharing: Mapping[str, SharingMode]
    max_holder_series: int
    clock_steps: ClockSteps = field(default_factory=ClockSteps)


class AgentCollector(Collector):
    """Per-device utilisation, per-pod counters and the agent's own health."""

    def __init__(self, view: Callable[[], AgentView]) -> None:
        self.view = view

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        """The agent's gauges and counters, read from the published snapshot at scrape time."""
        agent = self.view()
        node = agent.node
        snap: UsageSnapshot | None = agent.published
        health = agent.health
        yield GaugeMetricFamily("gpucost_agent_dcgm_up", "1 when the last DCGM Exporter scrape succeeded",
                                value=1.0 if health.dcgm_up else 0.0)
        yield GaugeMetricFamily("gpucost_agent_podresources_up",
                                "1 when the last kubelet pod-resources List succeeded",
                                value=1.0 if health.podresources_up else 0.0)
        ready = GaugeMetricFamily("gpucost_agent_ready", "1 when /readyz answers 200: pod-resources and this "
                                  "node's exporter read, the state written", labels=["node"])
        ready.add_metric([node], 0.0 if health.not_ready() else 1.0)
        yield ready
        refused = CounterMetricFamily("gpucost_agent_exporter_refused", "exporter scrapes refused as not this node's",
                                      labels=["node", "reason"])
        for reason, count in sorted(health.exporter_refusals.items()):
            refused.add_metric([node, reason], count)
        yield refused
        yield GaugeMetricFamily("gpucost_agent_tick_duration_seconds", "wall time of the last tick",
                                value=health.last_tick_duration)
        yield GaugeMetricFamily("gpucost_agent_last_tick_timestamp_seconds", "time of the last tick",
                                value=health.last_tick_at)
        yield CounterMetricFamily("gpucost_agent_ticks", "ticks run", value=health.ticks)
        yield CounterMetricFamily("gpucost_agent_dcgm_parse_errors", "malformed DCGM exposition lines skipped",
                                  value=health.parse_errors)
        yield CounterMetricFamily("gpucost_agent_bad_readings", "NaN/inf/out-of-range utilisation readings",
                                  value=agent.meter.bad_readings_total)
        yield CounterMetricFamily("gpucost_agent_capped_seconds",
                                  "wall seconds between ticks beyond the charge cap (their capacity is unobserved)",
                                  value=agent.meter.capped_seconds_total)
        yield CounterMetricFamily("gpucost_agent_tick_resolution_boundaries",
                                  "pod starts and ends charged to the tick, not the second (no or skewed times)",
                                  value=agent.meter.tick_resolution_total)
        yield CounterMetricFamily("gpucost_agent_oversubscribed_gpu_seconds",
                                  "GPU-seconds held beyond the node's physical capacity (misread layout)",
                                  value=agent.meter.oversubscribed_total)
        yield CounterMetricFamily("gpucost_agent_state_resets", "times the agent started a new epoch",
                                  value=health.state_resets)
        yield CounterMetricFamily("gpucost_agent_state_write_failures",
                                  "state writes that failed (the last durable snapshot stays published)",
                                  value=health.state_write_failures)
        steps = CounterMetricFamily("gpucost_agent_clock_steps", "steps of the node's wall clock against its "
                                    "monotonic clock (NTP, VM migration); the books keep the agent's timeline",
                                    labels=["direction"])
        steps.add_metric(["back"], agent.clock_steps.back)
        steps.add_metric(["forward"], agent.clock_steps.forward)
        yield steps
        yield GaugeMetricFamily("gpucost_agent_clock_offset_seconds", "the node's wall clock minus the agent's "
                                "timeline (0 until the wall clock steps)", value=agent.clock_steps.offset)
        yield GaugeMetricFamily("gpucost_agent_finished_pods_ignored",
                                "finished pods the kubelet still lists, ignored thanks to the own-node pod watch",
                                value=agent.ignored_finished)
        yield GaugeMetricFamily("gpucost_agent_unresolved_devices",
                                "held devices that could not be matched to a DCGM device",
                                value=health.unresolved)
        util = GaugeMetricFamily("gpucost_device_utilization_ratio",
                                 "utilisation of each device the node's exporter reports (DCGM: GR engine, else "
                                 "GPU_UTIL), 0..1", labels=["node", "gpu_uuid", "gpu_model", "mig_profile", "gpu_i_id",
                                                            "sharing", "vendor"])

        def sharing(uuid: str, gi: str) -> str:
            """mps | time-slicing | hami | dra | none; a MIG instance is shared only through a DRA claim."""
            mode = str(agent.sharing.get(uuid, "none"))
            return mode if not gi or mode == "dra" else "none"

        for (uuid, gi), (value, model, profile) in sorted(agent.meter.device_util.items()):
            if value is not None:
                dev = agent.meter.device_readings.get((uuid, gi))
                util.add_metric([node, uuid, model, profile or "", gi, sharing(uuid, gi),
                                 dev.vendor if dev is not None else "nvidia"], value)
        yield util
        gauges = {
            "fb_used": GaugeMetricFamily("gpucost_device_framebuffer_used_bytes", "framebuffer in use (DCGM)",
                                         labels=["node", "gpu_uuid", "gpu_i_id", "sharing"]),
            "fb_free": GaugeMetricFamily("gpucost_device_framebuffer_free_bytes", "framebuffer free (DCGM)",
                                         labels=["node", "gpu_uuid", "gpu_i_id", "sharing"]),
            "power": GaugeMetricFamily("gpucost_device_power_watts", "board power draw (DCGM; GPU-wide on MIG)",
                                       labels=["node", "gpu_uuid", "gpu_i_id", "sharing"]),
        }
        for (uuid, gi), dev in sorted(agent.meter.device_readings.items()):
            for attr, fam in gauges.items():
                value = getattr(dev, attr)
                if value is not None:
                    fam.add_metric([node, uuid, gi, sharing(uuid, gi)], value)
        yield from gauges.values()
        yield GaugeMetricFamily("gpucost_agent_unmeasured_devices",
                                "held devices without a utilisation reading at the last tick",
                                value=agent.meter.unmeasured_devices)
        if snap is None:
            return
        fams = {
            name: CounterMetricFamily(name, doc, labels=HOLDER_LABELS)
            for name, doc in (
                ("gpucost_pod_allocated_gpu_seconds", "GPU-seconds held (fraction x seconds)"),
                ("gpucost_pod_used_gpu_seconds", "GPU-seconds used (utilisation-weighted)"),
                ("gpucost_pod_unmeasured_gpu_seconds", "GPU-seconds held while no utilisation reading existed"),
                ("gpucost_pod_energy_joules", "energy attributed to the holder"),
            )
        }
        held = GaugeMetricFamily("gpucost_holder_allocated_gpus", "fraction of a GPU each holder holds now",
                                 labels=HOLDER_LABELS)
        limit = agent.max_holder_series
        holders = snap.holders
        if len(holders) > limit:  # bound cardinality: the biggest holders keep their own series
            holders = sorted(holders, key=lambda h: -h.allocated_s)[:limit]
        yield GaugeMetricFamily("gpucost_agent_overflow_holders", "holders left off /metrics by the series limit",
                                value=len(snap.holders) - len(holders))
        for h in holders:
            labels = [h.namespace, h.pod, h.container, h.device_id, h.gpu_uuid, h.gpu_model or "unknown",
                      h.mig_profile or ""]
            fams["gpucost_pod_allocated_gpu_seconds"].add_metric(labels, h.allocated_s)
            fams["gpucost_pod_used_gpu_seconds"].add_metric(labels, h.used_s)
            fams["gpucost_pod_unmeasured_gpu_seconds"].add_metric(labels, h.unmeasured_s)
            fams["gpucost_pod_energy_joules"].add_metric(labels, h.energy_j)
            if h.active:
                held.add_metric(labels, h.fraction)
        yield from fams.values()
        yield held
        unalloc = CounterMetricFamily("gpucost_agent_unallocated_gpu_seconds",
                                      "GPU-seconds of this node's capacity nobody held", labels=["gpu_model"])
        for u in snap.unallocated:
            unalloc.add_metric([u.gpu_model], u.seconds)
        yield unalloc
        unobserved = CounterMetricFamily("gpucost_agent_unobserved_gpu_seconds",
                                         "GPU-seconds of this node's capacity the agent could not observe "
                                         "(beyond the charge cap, pod-resources unreachable)", labels=["gpu_model"])
        for u in snap.unobserved:
            unobserved.add_metric([u.gpu_model], u.seconds)
        yield unobserved
        unalloc_energy = CounterMetricFamily("gpucost_agent_unallocated_energy_joules",
                                             "energy DCGM measured on this node's capacity nobody held",
                                             labels=["gpu_model"])
        for u in snap.unallocated:
            unalloc_energy.add_metric([u.gpu_model], u.energy_j)
        yield unalloc_energy
        yield CounterMetricFamily("gpucost_agent_unmeasured_energy_seconds",
                                  "GPU-seconds whose energy DCGM did not measure (no energy field, DCGM down, "
                                  "an impossible reading)", value=snap.unmeasured_energy_s)
