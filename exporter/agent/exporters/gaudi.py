"""Intel Gaudi: gaudi-metric-exporter's ``habanalabs_*`` series as device records.

The Habana device plugin gives the kubelet each card's serial number as its device ID, and the exporter
labels every series with the same ``Serial``: that is the join. The exporter has no model label, so a
card's model is ``Intel Gaudi``. Power comes in milliwatts (``habanalabs_power_mW``, also fed to
``accelerator_power_usage_watts`` despite its name) and is converted to W. ``habanalabs_utilization`` is
read as percent, the unit dashboards built on the exporter use (its help text states none). The unit
of ``habanalabs_energy`` is documented nowhere, so it is not read: Gaudi energy is unmeasured, and counted
as such, until a source confirms it.

When the exporter's own pod-resources ``List`` fails it serves a scrape without any device series; the
agent treats such a scrape as the exporter being down for that tick, not as idle cards (``service``).
Pure and total: bad values, duplicates and missing labels are refused and counted.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from exporter.agent.exporters.dcgm import DcgmDevice
from exporter.model.samples import Sample

VENDOR = "gaudi"
MODEL = "Intel Gaudi"
#: Family -> (quantity, multiplier to the product's unit).
GAUDI_NAMES: dict[str, tuple[str, float]] = {
    "habanalabs_utilization": ("util", 0.01),
    "habanalabs_memory_used_bytes": ("fb_used", 1.0),
    "habanalabs_memory_free_bytes": ("fb_free", 1.0),
    "habanalabs_power_mW": ("power", 0.001),
    "habanalabs_temperature_onchip": ("temp", 1.0),
}


def looks_like_gaudi(text: str) -> bool:
    """Whether an exposition body is gaudi-metric-exporter's (with device series or at least its families)."""
    return "habanalabs_" in text


@dataclass(slots=True)
class GaudiScrape:
    """One scrape's cards by serial, and the samples refused."""

    devices: dict[tuple[str, str], DcgmDevice] = field(default_factory=dict)
    refused: int = 0


def gaudi_devices(samples: Iterable[Sample]) -> GaudiScrape:
    """Group ``habanalabs_*`` samples by ``Serial``; other families of the exporter only name the card."""
    out = GaudiScrape()
    seen: dict[tuple[str, str], float] = {}
    for s in samples:
        if not s.name.startswith("habanalabs_"):
            continue
        labels = s.labels
        serial = labels.get("Serial", "").strip()
        if not serial:
            out.refused += 1
            continue
        key = (serial, "")
        dev = out.devices.get(key)
        if dev is None:
            dev = out.devices[key] = DcgmDevice(gpu_uuid=serial, index=labels.get("id", ""), model=MODEL,
                                                vendor=VENDOR)
        ns, pod = labels.get("pod_namespace", ""), labels.get("pod_name", "")
        if ns and pod:
            dev.pods.add((ns, pod, ""))  # the exporter names no container
        spec = GAUDI_NAMES.get(s.name)
        if spec is None:
            continue
        quantity, scale = spec
        if math.isnan(s.value) or math.isinf(s.value) or s.value < 0:
            dev.bad_readings += 1
            out.refused += 1
            continue
        if (serial, quantity) in seen:
            out.refused += 1
            if seen[(serial, quantity)] != s.value:
                setattr(dev, quantity, None)
            continue
        seen[(serial, quantity)] = s.value
        setattr(dev, quantity, s.value * scale)
    return out
