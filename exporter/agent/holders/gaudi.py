"""Who holds an Intel Gaudi card: the kubelet's ``habana.ai/gaudi`` device IDs joined to the exporter's cards.

The Habana device plugin gives the kubelet each card's serial number as its device ID, and
gaudi-metric-exporter labels every series with the same ``Serial``: that is the join. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping

from exporter.agent.exporters.dcgm import DcgmDevice
from exporter.agent.exporters.gaudi import MODEL, VENDOR
from exporter.agent.holders.assignment import Assignment
from exporter.model.devices import DeviceKind
from exporter.model.pod_resources import ContainerDevices

RESOURCE = "habana.ai/gaudi"


def gaudi_assignments(held: list[ContainerDevices],
                      devices: Mapping[tuple[str, str], DcgmDevice]) -> list[Assignment]:
    """One whole-card assignment per held serial; its reading is the card's with that ``Serial``. Pure."""
    out: list[Assignment] = []
    for cd in held:
        if cd.resource != RESOURCE:
            continue
        for serial in cd.device_ids:
            key = (serial, "")
            dev = devices.get(key)
            known = dev is not None and dev.vendor == VENDOR
            out.append(Assignment(cd.namespace, cd.pod, cd.container, serial, DeviceKind.GPU, serial,
                                  key if known else None, MODEL, None, 1.0))
    return out
