"""MIG UUID -> (parent GPU UUID, GPU instance id) through NVML, when the library loads.

On a GPU node with the driver mounted (see the chart's ``agent.nvml``), ``nvidia-ml-py`` resolves a
``MIG-<uuid>`` from pod-resources to the parent GPU and GPU instance DCGM reports. Anywhere else —
no package, no driver, no device — this returns None and attribution falls back to what it learned
and to DCGM's pod labels.
"""

from __future__ import annotations

from typing import Any

from exporter.agent.holders.attribution import MigLocation, MigResolver
from exporter.logs import get_logger

log = get_logger("nvml")


def _as_str(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def load_nvml_resolver() -> MigResolver | None:
    """Resolves a MIG device UUID to its GPU and instance through NVML; None when pynvml or the driver is missing."""
    try:
        import pynvml  # optional: pip install 'gpu-cost-exporter[nvml]'
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        log.info("nvml_unavailable", error=str(exc))
        return None
    cache: dict[str, MigLocation | None] = {}

    def resolve(mig_uuid: str) -> MigLocation | None:
        if mig_uuid in cache:
            return cache[mig_uuid]
        try:
            handle = pynvml.nvmlDeviceGetHandleByUUID(mig_uuid)
            parent = pynvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle)
            loc = MigLocation(_as_str(pynvml.nvmlDeviceGetUUID(parent)),
                              str(pynvml.nvmlDeviceGetGpuInstanceId(handle)), None)
        except Exception as exc:  # an unknown UUID is not an agent failure
            log.warning("nvml_resolve_failed", mig_uuid=mig_uuid, error=str(exc))
            loc = None
        cache[mig_uuid] = loc
        return loc

    log.info("nvml_loaded")
    return resolve
