"""The optional NVML resolver: absent without its library or a driver, never an error."""

from __future__ import annotations


def test_nvml_resolver_absent_without_library_or_driver() -> None:
    """Without nvidia-ml-py or a driver the NVML resolver is simply unavailable (None), never an error."""
    from exporter.agent.nvml import load_nvml_resolver

    resolver = load_nvml_resolver()
    assert resolver is None or callable(resolver)
