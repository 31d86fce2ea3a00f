"""The "apply" step: cumulative, monotonic GPU-second counters per (namespace, pod, container, device).

Each tick charges the interval since the previous tick to what this tick observed, with the real elapsed time,
capped (a stalled agent must not bill an hour to whoever holds a GPU now). Conservation: every second of the node's
capacity since the epoch's first tick (``started_at``) lands in exactly one bucket, a holder's allocated time,
``unallocated`` or ``unobserved`` (the capped excess, and whole intervals while pod-resources was unreachable beyond
the cap), so Σ allocated + Σ unallocated + Σ unobserved - oversubscribed = Σ physical GPUs x wall seconds. With the
own-node pod watch, holders are charged to the second between their pod's ``startTime`` and ``finishedAt``
(``holding``); without it, to the tick, and each such boundary is counted. Counters survive restarts through
``state`` (same epoch), or restart from zero with a new epoch. Energy follows the same buckets, with the GPU-seconds
DCGM did not measure counted (``energy``).

Edge cases of the identity: a holder whose device could not be resolved (a MIG instance without a known parent) is
charged at its profile's fraction under the node's model when the node has one model, else under "unknown", whose
time is taken out of the free capacity of the node's models; when more is held than exists (replicas read as whole
GPUs before GetAllocatableResources answered, a misread MIG layout) holders still pay what Kubernetes allocated
them, unallocated is 0 and the excess is counted in ``oversubscribed_total`` (see ``holding.free_capacity``). Before
any source (DCGM's inventory, else GetAllocatableResources) has said how many GPUs the node has, the epoch has not
started: nothing is charged and ``started_at`` stays unset.
"""

from __future__ import annotations

import uuid as uuidlib
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from exporter.agent.energy import NodeEnergy, TickEnergy, read_deltas
from exporter.agent.exporters.dcgm import DcgmDevice
from exporter.agent.holders.attribution import Assignment, Attribution, MigLocation, node_model, replica_counts
from exporter.agent.holders.measured import shared_rates
from exporter.model.accounting import Reading, Usage, charge_exclusive, clamp_utilization
from exporter.model.devices import DeviceKind, mig_profile_from_resource, parse_device_id
from exporter.model.holding import PodLifetime, Window, free_capacity, request_fraction

UNKNOWN_MODEL = "unknown"
UNLISTED = "unlisted/"
PodKey = tuple[str, str]


@dataclass(slots=True)
class HolderState:
    """One holder's counters and what we last knew of its device."""

    namespace: str
    pod: str
    container: str
    device_id: str
    gpu_uuid: str
    model: str | None
    mig_profile: str | None
    fraction: float
    usage: Usage = field(default_factory=Usage)
    active: bool = True
    last_active: float = 0.0
    utilization: float | None = None
    #: used / allocated at its last charge (None: unmeasured): the nearest reading for the seconds
    #: between that tick and the pod's end.
    used_ratio: float | None = None
    fb_peak_bytes: float | None = None  # peak framebuffer used in the clock hour ``fb_peak_hour``
    fb_peak_hour: int | None = None
    claim: str = ""  # the DRA claim (``<namespace>/<name>``) it holds the device through; "" otherwise
    sharing: str = ""  # how its GPU is shared (``SharingMode``'s value); "" restored from an older state file

    def note_framebuffer(self, used_bytes: float | None, at: float) -> None:
        """Keep the hour's peak; a new hour starts again (unmeasured until a reading comes)."""
        if self.fb_peak_hour != (hour := int(at // 3600) * 3600):
            self.fb_peak_hour, self.fb_peak_bytes = hour, None
        if used_bytes is not None and used_bytes >= 0:
            self.fb_peak_bytes = used_bytes if self.fb_peak_bytes is None else max(self.fb_peak_bytes, used_bytes)


@dataclass(slots=True)
class TickStats:
    """What one tick did, for the agent's own metrics."""

    charged_seconds: float = 0.0  # wall seconds charged to holders and unallocated
    capped_seconds: float = 0.0  # wall seconds beyond the charge cap (counted as unobserved)
    unobserved_seconds: float = 0.0  # wall seconds whose capacity went to unobserved
    tick_resolution_boundaries: int = 0
    bad_readings: int = 0
    unresolved: int = 0
    unmeasured_devices: int = 0


def new_epoch() -> str:
    """A fresh counter epoch: the aggregator books counters of a new epoch from zero."""
    return uuidlib.uuid4().hex[:16]


@dataclass(slots=True)
class Meter:
    """All counters of one node."""

    node: str
    epoch: str = field(default_factory=new_epoch)
    seq: int = 0
    last_tick: float | None = None
    started_at: float | None = None
    holders: dict[str, HolderState] = field(default_factory=dict)
    unallocated: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    unobserved: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    energy_last: dict[str, float] = field(default_factory=dict)
    energy: NodeEnergy = field(default_factory=NodeEnergy)
    mig_known: dict[str, MigLocation] = field(default_factory=dict)
    inventory: dict[str, str] = field(default_factory=dict)  # physical GPU uuid -> model
    inventory_index: dict[str, str] = field(default_factory=dict)
    known_capacity: dict[str, float] = field(default_factory=dict)  # the last capacity any source gave
    capped_seconds_total: float = 0.0
    oversubscribed_total: float = 0.0
    tick_resolution_total: int = 0
    bad_readings_total: int = 0
    device_util: dict[tuple[str, str], tuple[float | None, str, str | None]] = field(default_factory=dict)
    device_readings: dict[tuple[str, str], DcgmDevice] = field(default_factory=dict)
    unmeasured_devices: int = 0
    pod_use: dict[str, dict[tuple[str, str], float]] = field(default_factory=dict)  # GPU -> pod -> measured, per tick

    # -- the tick -----------------------------------------------------------------------------------
    def tick(self, now: float, attribution: Attribution | None, *,
             dcgm: dict[tuple[str, str], DcgmDevice] | None, cap: float,
             allocatable: Mapping[str, tuple[str, ...]] | None = None,
             lifetimes: Mapping[PodKey, PodLifetime] | None = None, skew: float = 15.0) -> TickStats:
        """Charge [last_tick, now] to this tick's observation. ``attribution`` None = holders unknown.

        ``lifetimes`` (the own-node pod watch) give holding times to the second; a start or end more
        than ``skew`` seconds (one tick) outside where it can be falls back to tick resolution.
        """
        stats = TickStats()
        self.seq += 1
        if dcgm:
            self._learn_inventory(dcgm)
        energy_delta = read_deltas(self.energy_last, dcgm,
                                   elapsed=None if self.last_tick is None else now - self.last_tick)
        self._record_device_util(dcgm)
        if attribution is not None:
            self.mig_known.update(attribution.learned)
            stats.unresolved = len(attribution.unresolved)
        capacity = self.capacity(allocatable)
        if self.last_tick is None:
            if not capacity:  # neither DCGM nor the kubelet said what GPUs there are: nothing to cover yet
                return stats
            self.last_tick = self.started_at = now
        since = self.last_tick
        elapsed = max(0.0, now - since)
        self.last_tick = now
        self.energy.count_unmeasured(gpus=sum(capacity.values()), deltas=energy_delta, inventory=self.inventory,
                                     seconds=elapsed)
        if attribution is None:  # holders unknown (pod-resources gone beyond the cap): all of it unobserved
            self._add_unobserved(capacity, elapsed)
            self.energy.to_unobserved(energy_delta, share=1.0, inventory=self.inventory)
            stats.unobserved_seconds = elapsed
            return stats
        dt = min(elapsed, cap)
        energy = TickEnergy(self.energy.charged_part(energy_delta, charged_s=dt, elapsed=elapsed,
                                                     inventory=self.inventory))
        stats.charged_seconds = dt
        stats.capped_seconds = stats.unobserved_seconds = elapsed - dt
        self.capped_seconds_total += stats.capped_seconds
        self._add_unobserved(capacity, elapsed - dt)
        window = Window(now - dt, now)
        lives = lifetimes or {}
        held: dict[str, float] = defaultdict(float)
        seen = self._charge_listed(window, attribution, dcgm=dcgm, energy=energy, lives=lives, skew=skew,
                                   stats=stats, held=held)
        self._charge_ended(window, seen, lives=lives, skew=skew, stats=stats, held=held, energy=energy)
        self.energy.to_unallocated(energy, inventory=self.inventory)
        model = node_model(dcgm, self.inventory) or (next(iter(capacity)) if len(capacity) == 1 else None)
        self._charge_unlisted(window, since, lives=lives, model=model or UNKNOWN_MODEL, allocatable=allocatable,
                              held=held)
        free = free_capacity(capacity, held, seconds=dt)
        for m, seconds in free.unallocated.items():
            self.unallocated[m] += seconds
        self.oversubscribed_total += free.oversubscribed
        self.bad_readings_total += stats.bad_readings
        self.tick_resolution_total += stats.tick_resolution_boundaries
        self.unmeasured_devices = stats.unmeasured_devices
        return stats

    def capacity(self, allocatable: Mapping[str, tuple[str, ...]] | None) -> dict[str, float]:
        """Physical GPUs per model. From DCGM's inventory (it names every GPU and its model); when DCGM
        never answered, from the kubelet's ``GetAllocatableResources`` (GPU and replica IDs name their
        GPU; a MIG instance counts once its parent is known), with the model unknown."""
        out: dict[str, float] = defaultdict(float)
        for m in self.inventory.values():
            out[m or UNKNOWN_MODEL] += 1.0
        if not out:
            physical: set[str] = set()
            for ids in (allocatable or {}).values():
                for raw in ids:
                    d = parse_device_id(raw)
                    if d.kind in (DeviceKind.GPU, DeviceKind.REPLICA):
                        physical.add(d.physical)
                    elif d.kind is DeviceKind.MIG and d.physical in self.mig_known:
                        physical.add(self.mig_known[d.physical].gpu_uuid)
            if physical:
                out[UNKNOWN_MODEL] = float(len(physical))
        if out:
            self.known_capacity = dict(out)
        return dict(self.known_capacity)

    def _add_unobserved(self, capacity: Mapping[str, float], seconds: float) -> None:
        if seconds > 0:
            for m, gpus in capacity.items():
                self.unobserved[m] += gpus * seconds

    def _held_seconds(self, window: Window, life: PodLifetime | None, *, new: bool, skew: float,
                      stats: TickStats) -> float:
        """Seconds of the window a listed holder held its device."""
        if window.seconds <= 0:
            return 0.0
        if life is None or life.start is None:
            stats.tick_resolution_boundaries += int(new)
            return window.seconds
        if life.start > window.end + skew or (new and life.start < window.start - skew):
            stats.tick_resolution_boundaries += 1  # clock skew, or a start we did not see: to the tick
            return window.seconds
        until = life.finished if life.finished is not None and life.finished >= window.start - skew else None
        return window.overlap(life.start if new else None, until)

    def _charge_listed(self, window: Window, attribution: Attribution, *,
                       dcgm: dict[tuple[str, str], DcgmDevice] | None, energy: TickEnergy,
                       lives: Mapping[PodKey, PodLifetime], skew: float, stats: TickStats,
                       held: dict[str, float]) -> set[str]:
        groups: dict[str, list[Assignment]] = defaultdict(list)
        for a in attribution.assignments:
            groups[a.charge_group].append(a)
        seen: set[str] = set()
        for members in groups.values():
            first = members[0]
            raw = fb_used = None
            if dcgm is not None and first.dcgm_key is not None and first.dcgm_key in dcgm:
                raw = dcgm[first.dcgm_key].utilization_raw
                alone = len(members) == 1 and first.kind in (DeviceKind.GPU, DeviceKind.MIG)  # its memory is its own
                fb_used = dcgm[first.dcgm_key].fb_used if alone else None
            util, bad = clamp_utilization(raw)
            stats.bad_readings += int(bad)
            stats.unmeasured_devices += int(util is None)
            gpu_energy = energy.deltas.get(first.gpu_uuid, 0.0)
            # Per-second rates: holders of one device may have held it for different parts of the window.
            if first.kind is DeviceKind.REPLICA:  # busy time split by measured per-pod use where every holder has it
                rates, _ = shared_rates(members, Reading(util, gpu_energy), measured=self.pod_use.get(first.gpu_uuid))
            else:
                rates = {a.holder_key: charge_exclusive(a.fraction, 1.0, reading=Reading(util, gpu_energy * a.fraction))
                         for a in members}
            for a in members:
                state = self.holders.get(a.holder_key)
                new = state is None
                if state is None:
                    state = self.holders[a.holder_key] = HolderState(
                        a.namespace, a.pod, a.container, a.device_id, a.gpu_uuid, a.model, a.mig_profile,
                        a.fraction, claim=a.claim, sharing=a.sharing.value)
                else:
                    state.gpu_uuid, state.claim = a.gpu_uuid or state.gpu_uuid, a.claim or state.claim
                    state.model, state.mig_profile = a.model or state.model, a.mig_profile or state.mig_profile
                    state.fraction, state.sharing = a.fraction, a.sharing.value
                secs = self._held_seconds(window, lives.get((a.namespace, a.pod)), new=new, skew=skew, stats=stats)
                rate = rates.get(a.holder_key, Usage())
                usage = Usage(rate.allocated * secs, rate.used * secs, rate.unmeasured * secs,
                              rate.energy_j * secs / window.seconds if window.seconds > 0 else 0.0, rate.split * secs)
                state.usage.add(usage)
                energy.charged[a.gpu_uuid] += usage.energy_j
                state.used_ratio = rate.used / rate.allocated if util is not None and rate.allocated > 0 else None
                state.active = True
                state.last_active = window.end
                state.utilization = util
                state.note_framebuffer(fb_used, window.end)
                seen.add(a.holder_key)
                held[a.model or UNKNOWN_MODEL] += a.fraction * secs
        return seen

    def _charge_ended(self, window: Window, seen: set[str], *, lives: Mapping[PodKey, PodLifetime], skew: float,
                      stats: TickStats, held: dict[str, float], energy: TickEnergy) -> None:
        """Holders listed at the last tick and gone now: charged up to their pod's end, at their last reading,
        with their share of the device's energy; without a known end (or one beyond ``skew``), to the tick:
        nothing, counted."""
        for key, state in self.holders.items():
            if key in seen:
                continue
            was_active, state.active, state.utilization = state.active, False, None
            if not was_active or window.seconds <= 0:
                continue
            life = lives.get((state.namespace, state.pod))
            end = None if life is None else life.end
            if end is None or end > window.end + skew or end < window.start - skew:
                stats.tick_resolution_boundaries += 1
                continue
            secs = window.overlap(None, end)
            allocated = state.fraction * secs
            ratio = state.used_ratio
            joules = energy.deltas.get(state.gpu_uuid, 0.0) * state.fraction * secs / window.seconds
            state.usage.add(Usage(allocated, 0.0 if ratio is None else allocated * ratio,
                                  allocated if ratio is None else 0.0, joules))
            energy.charged[state.gpu_uuid] += joules
            state.last_active = window.start + secs
            held[state.model or UNKNOWN_MODEL] += allocated

    def _charge_unlisted(self, window: Window, since: float, *, lives: Mapping[PodKey, PodLifetime], model: str,
                         allocatable: Mapping[str, tuple[str, ...]] | None, held: dict[str, float]) -> None:
        """Pods that lived entirely between two ticks (only the watch saw them): unmeasured for their
        lifetime x their request, on devices named ``unlisted/<resource>/<i>``, of the node's model."""
        listed = {(s.namespace, s.pod) for s in self.holders.values()}
        replicas = max(replica_counts(dict(allocatable or {}), []).values(), default=1)
        for (ns, pod), life in sorted(lives.items()):
            end = life.end
            if (ns, pod) in listed or not life.requests or life.start is None or end is None:
                continue
            if life.start < since or end > window.end:
                continue
            secs = window.overlap(life.start, end)
            if secs <= 0:
                continue
            for resource, count in sorted(life.requests.items()):
                frac = request_fraction(resource, model=model, replicas=replicas)
                for i in range(count):
                    device = f"{UNLISTED}{resource}/{i}"
                    allocated = frac * secs
                    self.holders[f"{ns}/{pod}/{life.container}/{device}"] = HolderState(
                        ns, pod, life.container, device, "", model, mig_profile_from_resource(resource), frac,
                        Usage(allocated=allocated, unmeasured=allocated), active=False, last_active=end)
                    held[model] += allocated

    def _learn_inventory(self, dcgm: dict[tuple[str, str], DcgmDevice]) -> None:
        inventory: dict[str, str] = {}
        for dev in dcgm.values():
            inventory[dev.gpu_uuid] = dev.model or inventory.get(dev.gpu_uuid) or self.inventory.get(
                dev.gpu_uuid, UNKNOWN_MODEL)
            self.inventory_index[dev.gpu_uuid] = dev.index
        self.inventory = inventory

    def _record_device_util(self, dcgm: dict[tuple[str, str], DcgmDevice] | None) -> None:
        self.device_readings = dict(dcgm or {})
        self.device_util = {}
        for key, dev in (dcgm or {}).items():
            util, _bad = clamp_utilization(dev.utilization_raw)
            self.device_util[key] = (util, dev.model or self.inventory.get(dev.gpu_uuid, UNKNOWN_MODEL),
                                     dev.mig_profile)

    # -- retention ----------------------------------------------------------------------------------
    def drop_acknowledged(self, now: float, acked_until: float | None, *, retention: float, safety: float) -> int:
        """Forget gone pods' counters once the aggregator booked them (or after the safety period)."""
        gone = [
            key for key, s in self.holders.items()
            if not s.active and (
                (acked_until is not None and s.last_active <= acked_until and now - s.last_active > retention)
                or now - s.last_active > safety)
        ]
        for key in gone:
            del self.holders[key]
        return len(gone)
