"""Accelerators other than NVIDIA's, and measured per-pod use on shared GPUs.

This package owns reading AMD's device-metrics-exporter into the agent's device records (``amd``),
joining the kubelet's ``amd.com/*`` device IDs (PCI addresses, ``amdgpu_xcp_N`` compute partitions) to
them (``amd_attribution``), and the per-pod utilisation series of dcgm-exporter and HAMi's vGPU
monitor that split a shared GPU's busy time by what each pod measurably used (``measured``). Kept apart
from the NVIDIA path so each exporter's quirks stay in one place.
"""
