"""What a GPU model can hold and compute, for moving a workload to another model or a MIG slice.

Compute is compared by dense FP16 Tensor Core throughput (TFLOPS, without structured sparsity), the
figure NVIDIA publishes for every data-centre GPU; memory by the marketed capacity. Sources (NVIDIA
product datasheets; the datasheets print the sparse figure, dense is half of it):

==================  ======  =====  ====================================================================
model (DCGM name)   TFLOPS  GB     source
==================  ======  =====  ====================================================================
H100 SXM5           989     80     NVIDIA H100 Tensor Core GPU datasheet (FP16 Tensor 1,979* sparse)
H100 NVL            835     94     same datasheet, H100 NVL column (1,671* sparse)
H100 PCIe           756     80     same datasheet, H100 PCIe column (1,513* sparse)
H200                989     141    NVIDIA H200 Tensor Core GPU datasheet (1,979* sparse)
A100 80GB           312     80     NVIDIA A100 Tensor Core GPU datasheet (FP16 Tensor 312, 624* sparse)
A100 40GB           312     40     same datasheet
A30                 165     24     NVIDIA A30 datasheet (330* sparse)
L40S                362     48     NVIDIA L40S datasheet (733* sparse)
L40                 181     48     NVIDIA L40 datasheet (362* sparse)
L4                  121     24     NVIDIA L4 datasheet (242* sparse)
A10                 125     24     NVIDIA A10 datasheet (250* sparse)
T4                  65      16     NVIDIA T4 datasheet (FP16/FP32 mixed precision 65)
MI325X              1307    256    AMD Instinct MI325X datasheet (peak FP16 1307.4 dense, 2614.9 sparse)
MI300X              1307    192    AMD Instinct MI300X datasheet (peak FP16 1307.4 dense, 2614.9 sparse)
MI250X              383     128    AMD Instinct MI250X datasheet (peak FP16 383)
MI210               181     64     AMD Instinct MI210 datasheet (peak FP16 181)
==================  ======  =====  ====================================================================

AMD models match device-metrics-exporter's ``card_series`` (``AMD Instinct MI300X OAM``, a VF's
``Aqua Vanjaram [Instinct MI300X VF]``). A workload is only ever moved to a model of its own vendor: CUDA and
ROCm builds are not interchangeable, whatever the throughput says.

Memory is counted as GB x 10^9 bytes, a little less than the GiB the boards carry, and a MIG profile
``Ng.Mgb`` as M x 10^9 bytes (NVIDIA's MIG user guide lists e.g. 1g.10gb at 9.75 GiB): both err
towards "does not fit". A model not in the table is never a target, and never a source for rescaling.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

GB = 10**9


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One GPU model's dense FP16 throughput and memory."""

    name: str
    fp16_dense_tflops: float
    memory_bytes: int
    vendor: str = "nvidia"


#: Most specific pattern first (``H100 NVL`` before ``H100``, ``L40S`` before ``L40`` before ``L4``).
_SPECS: tuple[tuple[re.Pattern[str], GpuSpec], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), GpuSpec(name, tflops, gb * GB, "amd" if name.startswith("MI") else "nvidia"))
    for pattern, name, tflops, gb in (
        (r"H100\s*NVL", "H100 NVL", 835.0, 94),
        (r"H100.*PCIe", "H100 PCIe", 756.0, 80),
        (r"H100", "H100 SXM5", 989.0, 80),
        (r"H200", "H200", 989.0, 141),
        (r"A100.*40\s*GB", "A100 40GB", 312.0, 40),
        (r"A100", "A100 80GB", 312.0, 80),
        (r"\bA30\b", "A30", 165.0, 24),
        (r"L40S", "L40S", 362.0, 48),
        (r"L40\b", "L40", 181.0, 48),
        (r"\bL4\b", "L4", 121.0, 24),
        (r"\bA10\b", "A10", 125.0, 24),
        (r"\bT4\b", "T4", 65.0, 16),
        (r"MI325X", "MI325X", 1307.4, 256),
        (r"MI300X", "MI300X", 1307.4, 192),
        (r"MI250X", "MI250X", 383.0, 128),
        (r"MI210\b", "MI210", 181.0, 64),
    ))

_PROFILE_MEMORY_RE = re.compile(r"^\d+g\.(\d+)gb")


def gpu_spec(model: str) -> GpuSpec | None:
    """The table's row for a DCGM model name (``NVIDIA A100-SXM4-80GB``), or None when unknown."""
    for pattern, spec in _SPECS:
        if pattern.search(model):
            return spec
    return None


def mig_profile_memory_bytes(profile: str) -> int | None:
    """Memory of a MIG instance by its profile name (``1g.10gb`` -> 10 x 10^9), None if unparseable."""
    match = _PROFILE_MEMORY_RE.match(profile)
    return int(match.group(1)) * GB if match else None
