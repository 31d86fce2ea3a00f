"""The status page's "GPUs by vendor and model" section: what each kind of accelerator in the fleet is, holds
and costs, so AMD Instinct, Intel Gaudi and partitioned GPUs are visible beside NVIDIA's at a glance."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from html import escape
from typing import Any

from exporter.aggregator.ledger.report import vendor_of
from exporter.model.usage import UsageSnapshot

HEAD = ["vendor", "GPU model", "GPUs now", "GPUs held now", "GPU-h this month", "cost this month",
        "idle this month", "held by nobody this month"]


def _money(v: Any, currency: str) -> str:
    return f"{float(v):,.2f} {escape(currency)}" if abs(float(v)) >= 10 else f"{float(v):.4f} {escape(currency)}"


def model_rows(latest: Mapping[str, UsageSnapshot], month: Iterable[Mapping[str, Any]], *, currency: str) -> list[str]:
    """One row per (vendor, model): devices and holdings now from the agents' latest snapshots, GPU-hours and
    money this month from the ledger's ``vendor,gpu_model`` report (capacity nobody held in its own column)."""
    now: dict[tuple[str, str], list[float]] = {}
    for snap in latest.values():
        for gpu in snap.capacity:
            key = (vendor_of(gpu.gpu_model), gpu.gpu_model)
            present, held = now.get(key, [0.0, 0.0])
            now[key] = [present + 1, held + min(1.0, gpu.held_fraction)]
    booked = {(str(r["vendor"]), str(r["gpu_model"])): r for r in month if r.get("currency") in (currency, None)}
    out = []
    for key in sorted(set(now) | set(booked)):
        present, held = now.get(key, [0.0, 0.0])
        r = booked.get(key, {})
        out.append(
            f"<tr><td>{escape(key[0])}</td><td style='text-align:left'>{escape(key[1] or 'unknown')}</td>"
            f"<td>{present:g}</td>"
            f"<td>{held:.2f}</td><td>{float(r.get('allocated_gpu_hours', 0)):.2f}</td>"
            f"<td>{_money(r.get('cost', 0), currency)}</td><td>{_money(r.get('idle_cost', 0), currency)}</td>"
            f"<td>{_money(r.get('unallocated_cost', 0), currency)}</td></tr>")
    return out
