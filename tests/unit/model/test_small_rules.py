"""Small rules at their edges: budget amounts from labels, GPU slice counts, device IDs, split seconds
(added, advanced from a mark, bounded by allocated), and an interval's hours when it is empty or backwards."""

from __future__ import annotations

from decimal import Decimal

from exporter.model.accounting import Usage
from exporter.model.books import SPLIT_UNKNOWN, CounterMark, hour_shares
from exporter.model.budget_values import parse_budget
from exporter.model.devices import DeviceId, DeviceKind, gpu_slices, hami_device_gpu, parse_device_id
from exporter.model.plausibility import counter_advance, implausible

UUID = "GPU-12345678-abcd-ef01-2345-6789abcdef01"


def test_budget_amounts() -> None:
    """Below one is still an amount; a number too large for a float, or a value of another type, is none."""
    assert parse_budget("0.5") == 0.5
    assert parse_budget(" 12 ") == 12.0
    assert parse_budget("1e400") is None
    assert parse_budget(Decimal("5")) is None
    assert parse_budget(True) is None


def test_slices_come_from_the_model_when_it_is_known() -> None:
    """Without model or profile: 7. A known model decides, whatever the profile says; only without a model
    does an A30-only profile mean 4."""
    assert gpu_slices(None) == 7
    assert gpu_slices(None, "1g.10gb") == 7
    assert gpu_slices(None, "1g.6gb") == 4
    assert gpu_slices("NVIDIA H100 80GB HBM3", "1g.6gb") == 7


def test_hami_device_ids() -> None:
    assert hami_device_gpu(f"{UUID}-3") == UUID
    assert hami_device_gpu(f"{UUID}-x") is None
    assert hami_device_gpu(UUID) is None


def test_adding_usage_adds_split_seconds() -> None:
    total = Usage(allocated=10.0, split=2.0)
    total.add(Usage(allocated=5.0, split=3.0))
    assert total.split == 5.0


def test_split_seconds_advance_from_a_known_mark_and_never_go_back() -> None:
    prev = CounterMark(allocated_s=100.0, split_s=40.0)
    assert counter_advance(prev, CounterMark(allocated_s=160.0, split_s=70.0)) == CounterMark(
        allocated_s=60.0, split_s=30.0)
    assert counter_advance(prev, CounterMark(allocated_s=160.0, split_s=39.0)) is None


def test_a_mark_without_split_seconds_advances_none_whatever_the_agent_says() -> None:
    """The agent's 70 split seconds cover its whole epoch, not this interval: the advance splits nothing, and a
    split below the unknown mark's -1 is not "going back"."""
    prev = CounterMark(allocated_s=100.0, split_s=SPLIT_UNKNOWN)
    assert counter_advance(prev, CounterMark(allocated_s=160.0, split_s=70.0)) == CounterMark(allocated_s=60.0)
    assert counter_advance(prev, CounterMark(allocated_s=160.0, split_s=-5.0)) == CounterMark(allocated_s=60.0)


def test_split_seconds_may_reach_allocated_but_not_pass_it() -> None:
    assert implausible([CounterMark(allocated_s=60.0, split_s=60.0)], wall=None, gpus=0) == ""
    assert implausible([CounterMark(allocated_s=60.0, split_s=60.1)], wall=None, gpus=0) == "split_above_allocated"


def test_an_empty_or_backwards_interval_belongs_wholly_to_the_hour_of_its_end() -> None:
    assert hour_shares(7200.0, 7200.0) == [(7200, 1.0)]
    assert hour_shares(8000.0, 4000.0) == [(3600, 1.0)]
    assert hour_shares(7300.0, 7300.0) == [(7200, 1.0)]


def test_every_device_id_keeps_its_raw_text_and_replica() -> None:
    """The raw ID is what the plugin said, in every form; an unknown form keeps its ``::n`` replica too."""
    gpu = "GPU-1f0e"
    assert parse_device_id(gpu) == DeviceId(gpu, DeviceKind.GPU, gpu)
    assert parse_device_id(f"{gpu}::2") == DeviceId(f"{gpu}::2", DeviceKind.REPLICA, gpu, 2)
    assert parse_device_id("MIG-7a::1") == DeviceId("MIG-7a::1", DeviceKind.MIG, "MIG-7a", 1)
    assert parse_device_id("npu-0::3") == DeviceId("npu-0::3", DeviceKind.OTHER, "npu-0::3", 3)
