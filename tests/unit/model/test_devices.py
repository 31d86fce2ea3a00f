"""Device IDs and GPU fractions (whole, replica, MIG), with hand-computed answers."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from exporter.model.devices import (
    DeviceKind,
    device_kind,
    gpu_slices,
    mig_fraction,
    mig_profile_from_resource,
    parse_device_id,
)


@pytest.mark.parametrize(
    ("raw", "kind", "physical", "replica"),
    [
        ("GPU-5f0e2c1a-0000-1111-2222-333344445555", DeviceKind.GPU, "GPU-5f0e2c1a-0000-1111-2222-333344445555", None),
        ("GPU-abc::3", DeviceKind.REPLICA, "GPU-abc", 3),
        ("MIG-1234-5678", DeviceKind.MIG, "MIG-1234-5678", None),
        ("MIG-1234::1", DeviceKind.MIG, "MIG-1234", 1),
        ("amd-gpu-0", DeviceKind.OTHER, "amd-gpu-0", None),
    ],
)
def test_parse_device_id(raw: str, kind: DeviceKind, physical: str, replica: int | None) -> None:
    """Every device-plugin ID form maps to its kind and physical identity."""
    d = parse_device_id(raw)
    assert (d.kind, d.physical, d.replica) == (kind, physical, replica)


_ID_PARTS = st.sampled_from(["GPU-", "MIG-", "gpu-", "GPU", "MIG", "::", ":", "3", "abc", "-", ""])


@settings(max_examples=300, deadline=None)
@given(st.lists(_ID_PARTS, max_size=6).map("".join) | st.text(max_size=12))
@example("GPU-:3")
@example("MIG-x::1")
@example("::GPU-")
def test_the_kind_alone_is_the_parsed_ids_kind(raw: str) -> None:
    """``device_kind`` (asked once per holder per tick) answers what ``parse_device_id`` does, for any ID."""
    assert device_kind(raw) is parse_device_id(raw).kind


def test_mig_fractions() -> None:
    """3g.40gb on a 7-slice H100 is 3/7; 2g.12gb on a 4-slice A30 is 2/4."""
    assert mig_fraction("3g.40gb", "NVIDIA H100 80GB HBM3") == pytest.approx(3 / 7)
    assert mig_fraction("1g.10gb", "NVIDIA A100-SXM4-80GB") == pytest.approx(1 / 7)
    assert mig_fraction("2g.12gb", "NVIDIA A30") == pytest.approx(2 / 4)
    assert mig_fraction("1g.6gb", None) == pytest.approx(1 / 4)
    assert gpu_slices("NVIDIA A30") == 4
    assert mig_profile_from_resource("nvidia.com/mig-3g.40gb") == "3g.40gb"
    assert mig_profile_from_resource("nvidia.com/gpu") is None
    with pytest.raises(ValueError, match="not a MIG profile"):
        mig_fraction("banana", None)
