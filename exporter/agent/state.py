"""Persist the meter across restarts: written atomically (write, fsync, rename, fsync dir) every tick.

A missing or corrupt file starts a new epoch; the aggregator then sees a reset, never a decrease.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

from exporter.agent.attribution import MigLocation
from exporter.agent.meter import HolderState, Meter
from exporter.model.accounting import Usage

STATE_VERSION = 1


class StateError(ValueError):
    """The state file exists but cannot be used."""


def state_path(state_dir: Path) -> Path:
    return state_dir / "agent-state.json"


def dump_meter(meter: Meter) -> dict[str, Any]:
    return {
        "version": STATE_VERSION,
        "node": meter.node,
        "epoch": meter.epoch,
        "seq": meter.seq,
        "last_tick": meter.last_tick,
        "capped_seconds_total": meter.capped_seconds_total,
        "holders": [
            [s.namespace, s.pod, s.container, s.device_id, s.gpu_uuid, s.model, s.mig_profile, s.fraction,
             *s.usage.as_tuple(), s.active, s.last_active]
            for s in meter.holders.values()
        ],
        "unallocated": dict(meter.unallocated),
        "energy_last": meter.energy_last,
        "mig_known": {k: [v.gpu_uuid, v.gpu_instance_id, v.profile] for k, v in meter.mig_known.items()},
        "inventory": meter.inventory,
        "inventory_index": meter.inventory_index,
    }


def load_meter(data: dict[str, Any], node: str) -> Meter:
    """Rebuild a meter; raises ``StateError`` on anything unexpected."""
    try:
        if data.get("version") != STATE_VERSION:
            raise StateError(f"unsupported state version {data.get('version')!r}")
        if data["node"] != node:
            raise StateError(f"state belongs to node {data['node']!r}, not {node!r}")
        meter = Meter(node=node, epoch=str(data["epoch"]), seq=int(data["seq"]),
                      last_tick=None if data["last_tick"] is None else float(data["last_tick"]))
        meter.capped_seconds_total = float(data.get("capped_seconds_total", 0.0))
        for row in data["holders"]:
            (ns, pod, ctr, dev, uuid, model, profile, frac, alloc, used, unmeas, energy, active, last) = row
            meter.holders[f"{ns}/{pod}/{ctr}/{dev}"] = HolderState(
                ns, pod, ctr, dev, uuid, model, profile, float(frac),
                Usage(float(alloc), float(used), float(unmeas), float(energy)), bool(active), float(last))
        meter.unallocated = defaultdict(float, {str(k): float(v) for k, v in data["unallocated"].items()})
        meter.energy_last = {str(k): float(v) for k, v in data["energy_last"].items()}
        meter.mig_known = {k: MigLocation(v[0], v[1], v[2]) for k, v in data["mig_known"].items()}
        meter.inventory = {str(k): str(v) for k, v in data["inventory"].items()}
        meter.inventory_index = {str(k): str(v) for k, v in data.get("inventory_index", {}).items()}
        for h in meter.holders.values():
            if min(h.usage.as_tuple()) < 0:
                raise StateError("negative counter in state")
        return meter
    except StateError:
        raise
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise StateError(f"malformed state: {exc!r}") from exc


def write_state(path: Path, state: dict[str, Any], fsync: bool = True) -> None:
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
