"""What the simulator assumes about each GPU model: framebuffer size, power envelope, driver version.

One table per fact, matched by the longest model-name fragment, so "A100-SXM4-80GB" beats "A100".
"""

from __future__ import annotations

from dataclasses import dataclass

DRIVER_VERSION = "580.105.08"


@dataclass(frozen=True, slots=True)
class PowerRange:
    """Board power at idle and at full load, in watts; draw is linear in utilisation between them."""

    idle_w: float
    max_w: float


#: As nvidia-smi reports the total (MiB); H200: 143771 MiB, its "141 GB" of HBM3e.
#: AMD Instinct in MB as amd-smi reports them (192 GB MI300X, 256 GB MI325X); Gaudi 2 96 GB, Gaudi 3 128 GB.
_FB_MIB = {"H100": 81559, "H200": 143771, "A100-SXM4-80GB": 81920, "A100": 40960, "L4": 23034, "A30": 24576,
           "MI300X": 196592, "MI325X": 262128, "Gaudi": 98304, "Gaudi 3": 131072}
#: AMD and Gaudi maxima are the boards' rated power (MI300X OAM 750 W, MI325X 1000 W, Gaudi 2 600 W, Gaudi 3
#: 900 W); their idle figures are the simulator's assumption.
_WATTS = {"H100": PowerRange(70.0, 700.0), "A100": PowerRange(55.0, 400.0), "L4": PowerRange(16.0, 72.0),
          "A30": PowerRange(30.0, 165.0), "MI300X": PowerRange(140.0, 750.0), "MI325X": PowerRange(160.0, 1000.0),
          "Gaudi": PowerRange(90.0, 600.0), "Gaudi 3": PowerRange(110.0, 900.0)}


def _best_key(keys: list[str], model: str) -> str | None:
    for key in sorted(keys, key=len, reverse=True):
        if key in model:
            return key
    return None


def framebuffer_mib(model: str) -> int:
    """Physical framebuffer of one GPU of ``model`` in MiB (16 GiB for models not in the table)."""
    key = _best_key(list(_FB_MIB), model)
    return _FB_MIB[key] if key is not None else 16384


def power_range(model: str) -> PowerRange:
    """Idle and full-load board power of one GPU of ``model`` (50-300 W for models not in the table)."""
    key = _best_key(list(_WATTS), model)
    return _WATTS[key] if key is not None else PowerRange(50.0, 300.0)
