"""Persist the meter across restarts: written atomically (write, fsync, rename, fsync dir) every tick.

A missing or corrupt file starts a new epoch; the aggregator then sees a reset, never a decrease.
Version 2 adds ``started_at``, the ``unobserved`` counters and named holder fields; a version-1 file
is migrated (same epoch, counters kept): its ``started_at`` becomes its last tick, the first moment
from which the new counters can vouch for conservation, and ``unobserved`` starts at 0. The energy of
capacity nobody held and the GPU-seconds DCGM did not measure start at 0 in a file written before them.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

from exporter.agent.holders.attribution import MigLocation
from exporter.agent.meter import HolderState, Meter
from exporter.model.accounting import Usage

STATE_VERSION = 2
_HOLDER_FIELDS = ("namespace", "pod", "container", "device_id", "gpu_uuid", "model", "mig_profile")


class StateError(ValueError):
    """The state file exists but cannot be used."""


def state_path(state_dir: Path) -> Path:
    """Where the agent keeps its counters across restarts, in ``state_dir``."""
    return state_dir / "agent-state.json"


def dump_meter(meter: Meter) -> dict[str, Any]:
    """The meter's counters and marks as the JSON document ``write_state`` persists."""
    return {
        "version": STATE_VERSION,
        "node": meter.node,
        "epoch": meter.epoch,
        "seq": meter.seq,
        "last_tick": meter.last_tick,
        "started_at": meter.started_at,
        "capped_seconds_total": meter.capped_seconds_total,
        "oversubscribed_total": meter.oversubscribed_total,
        "tick_resolution_total": meter.tick_resolution_total,
        "holders": [
            {"namespace": s.namespace, "pod": s.pod, "container": s.container, "device_id": s.device_id,
             "gpu_uuid": s.gpu_uuid, "model": s.model, "mig_profile": s.mig_profile, "fraction": s.fraction,
             "allocated": s.usage.allocated, "used": s.usage.used, "unmeasured": s.usage.unmeasured,
             "energy_j": s.usage.energy_j, "split": s.usage.split, "active": s.active, "last_active": s.last_active,
             "used_ratio": s.used_ratio, "fb_peak_bytes": s.fb_peak_bytes, "fb_peak_hour": s.fb_peak_hour,
             "claim": s.claim, "sharing": s.sharing}
            for s in meter.holders.values()
        ],
        "unallocated": dict(meter.unallocated),
        "unobserved": dict(meter.unobserved),
        "energy_last": meter.energy_last,
        "unallocated_energy": dict(meter.energy.unallocated),
        "unobserved_energy": dict(meter.energy.unobserved),
        "unmeasured_energy_s": meter.energy.unmeasured_s,
        "mig_known": {k: [v.gpu_uuid, v.gpu_instance_id, v.profile] for k, v in meter.mig_known.items()},
        "inventory": meter.inventory,
        "inventory_index": meter.inventory_index,
        "known_capacity": meter.known_capacity,
    }


def _v1_holder(row: list[Any]) -> dict[str, Any]:
    """A version-1 holder row (a positional list) as the version-2 mapping."""
    (ns, pod, ctr, dev, uuid, model, profile, frac, alloc, used, unmeas, energy, active, last) = row
    return {"namespace": ns, "pod": pod, "container": ctr, "device_id": dev, "gpu_uuid": uuid, "model": model,
            "mig_profile": profile, "fraction": frac, "allocated": alloc, "used": used, "unmeasured": unmeas,
            "energy_j": energy, "active": active, "last_active": last, "used_ratio": None}


def _holder(row: dict[str, Any]) -> HolderState:
    ns, pod, ctr, dev, uuid, model, profile = (row[k] for k in _HOLDER_FIELDS)
    ratio = row.get("used_ratio")
    fb_peak, fb_hour = row.get("fb_peak_bytes"), row.get("fb_peak_hour")
    return HolderState(
        namespace=str(ns), pod=str(pod), container=str(ctr), device_id=str(dev), gpu_uuid=str(uuid),
        model=None if model is None else str(model), mig_profile=None if profile is None else str(profile),
        fraction=float(row["fraction"]),
        usage=Usage(allocated=float(row["allocated"]), used=float(row["used"]),
                    unmeasured=float(row["unmeasured"]), energy_j=float(row["energy_j"]),
                    split=max(0.0, float(row.get("split") or 0.0))),
        active=bool(row["active"]), last_active=float(row["last_active"]),
        used_ratio=None if ratio is None else float(ratio),
        fb_peak_bytes=None if fb_peak is None else float(fb_peak),
        fb_peak_hour=None if fb_hour is None else int(fb_hour), claim=str(row.get("claim") or ""),
        sharing=str(row.get("sharing") or ""))


def load_meter(data: dict[str, Any], node: str) -> Meter:
    """Rebuild a meter (migrating version 1); raises ``StateError`` on anything unexpected."""
    try:
        version = data.get("version")
        if version not in (1, STATE_VERSION):
            raise StateError(f"unsupported state version {version!r}")
        if data["node"] != node:
            raise StateError(f"state belongs to node {data['node']!r}, not {node!r}")
        last_tick = None if data["last_tick"] is None else float(data["last_tick"])
        started = data.get("started_at", last_tick) if version == STATE_VERSION else last_tick
        meter = Meter(node=node, epoch=str(data["epoch"]), seq=int(data["seq"]), last_tick=last_tick,
                      started_at=None if started is None else float(started))
        meter.capped_seconds_total = float(data.get("capped_seconds_total", 0.0))
        meter.oversubscribed_total = float(data.get("oversubscribed_total", 0.0))
        meter.tick_resolution_total = int(data.get("tick_resolution_total", 0))
        rows = [_v1_holder(r) for r in data["holders"]] if version == 1 else data["holders"]
        for row in rows:
            h = _holder(row)
            meter.holders[f"{h.namespace}/{h.pod}/{h.container}/{h.device_id}"] = h
        meter.unallocated = defaultdict(float, {str(k): float(v) for k, v in data["unallocated"].items()})
        meter.unobserved = defaultdict(float, {str(k): float(v) for k, v in data.get("unobserved", {}).items()})
        meter.energy_last = {str(k): float(v) for k, v in data["energy_last"].items()}
        for name, bucket in (("unallocated_energy", meter.energy.unallocated),
                             ("unobserved_energy", meter.energy.unobserved)):  # absent before energy per model
            bucket.update({str(k): float(v) for k, v in data.get(name, {}).items()})
        meter.energy.unmeasured_s = float(data.get("unmeasured_energy_s", 0.0))
        meter.mig_known = {k: MigLocation(v[0], v[1], v[2]) for k, v in data["mig_known"].items()}
        meter.inventory = {str(k): str(v) for k, v in data["inventory"].items()}
        meter.inventory_index = {str(k): str(v) for k, v in data.get("inventory_index", {}).items()}
        meter.known_capacity = {str(k): float(v) for k, v in data.get("known_capacity", {}).items()}
        for h in meter.holders.values():
            if min(h.usage.as_tuple()) < 0:
                raise StateError("negative counter in state")
        if min([*meter.unallocated.values(), *meter.unobserved.values(), *meter.energy.unallocated.values(),
                *meter.energy.unobserved.values(), meter.energy.unmeasured_s, 0.0]) < 0:
            raise StateError("negative counter in state")
        return meter
    except StateError:
        raise
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise StateError(f"malformed state: {exc!r}") from exc


def write_state(path: Path, state: dict[str, Any], *, fsync: bool = True) -> None:
    """Atomically replace the state file with an already dumped meter (blocking).

    ``fsync=False`` keeps the atomic rename but skips the flushes: only for simulations on a virtual
    clock, where a power loss is not part of the experiment."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    payload = json.dumps(state, separators=(",", ":")).encode()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, payload)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    tmp.replace(path)
    if not fsync:
        return
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def read_state(path: Path, node: str) -> Meter | None:
    """The saved meter, or None when there is no file. Raises ``StateError`` when it is corrupt."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise StateError(f"state file is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise StateError("state file is not an object")
    return load_meter(data, node)
