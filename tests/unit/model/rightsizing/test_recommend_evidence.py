"""The fixed-bucket utilisation histogram: bucket edges, quantiles as upper bounds, merge and text form."""

from __future__ import annotations

import pytest

from exporter.model.rightsizing.evidence import BUCKET_UPPER_PERCENT, UtilBucket, UtilHistogram
from exporter.model.rightsizing.gpus import GB, gpu_spec, mig_profile_memory_bytes


def test_bucket_is_half_open_at_the_idle_edge() -> None:
    """4.9 % goes to [2 %, 5 %), 5 % exactly to [5 %, 10 %); 100 % to the last bucket."""
    h = UtilHistogram.empty().add(0.049, 1.0).add(0.05, 2.0).add(1.0, 3.0)
    seconds = {b.upper_percent: b.seconds for b in h.buckets}
    assert seconds[5] == 1.0 and seconds[10] == 2.0 and seconds[100] == 3.0
    assert h.total_seconds == 6.0


def test_quantiles_are_bucket_upper_bounds() -> None:
    """94 s at 0 % and 6 s at 60 %: p50 = 1 %, p95 = 70 % (94 < 95 of 100 s), max = 70 %."""
    h = UtilHistogram.of([(0.0, 94.0), (0.6, 6.0)])
    assert h.quantile(0.5) == pytest.approx(0.01)
    assert h.quantile(0.95) == pytest.approx(0.70)
    assert h.quantile(1.0) == pytest.approx(0.70)
    assert UtilHistogram.empty().quantile(0.95) is None


def test_merge_adds_seconds_and_json_round_trips() -> None:
    a = UtilHistogram.of([(0.03, 10.0)])
    b = UtilHistogram.of([(0.03, 5.0), (0.99, 1.0)])
    merged = a.merge(b)
    assert {x.upper_percent: x.seconds for x in merged.buckets if x.seconds} == {5: 15.0, 100: 1.0}
    assert merged.to_json() == '{"5":15.0,"100":1.0}'
    assert UtilHistogram.from_json(merged.to_json()) == merged
    assert len(merged.buckets) == len(BUCKET_UPPER_PERCENT)
    with pytest.raises(ValueError, match="unknown bucket 7"):
        UtilHistogram.from_json('{"7": 1.0}')


def test_named_buckets_in_any_order_and_a_wrong_shape_refused() -> None:
    """Ledger columns arrive as named buckets: 3 s below 1 %, 2 + 4 s at [90 %, 100 %]; p50 = 100 %."""
    h = UtilHistogram.of_buckets([UtilBucket(100, 2.0), UtilBucket(1, 3.0), UtilBucket(100, 4.0)])
    assert h == UtilHistogram.of([(0.0, 3.0), (0.95, 6.0)])
    assert h.quantile(0.5) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="unknown bucket 7"):
        UtilHistogram.of_buckets([UtilBucket(7, 1.0)])
    with pytest.raises(ValueError, match="14 buckets"):
        UtilHistogram((0.0,) * 14)


def test_gpu_table_matches_dcgm_model_names() -> None:
    """Most specific first: an L40S is not an L4, an A100 40GB is not an A100 80GB, an A10 is not an A100."""
    assert (spec := gpu_spec("NVIDIA L40S")) is not None and spec.fp16_dense_tflops == 362.0
    assert (spec := gpu_spec("NVIDIA L4")) is not None and spec.memory_bytes == 24 * GB
    assert (spec := gpu_spec("NVIDIA A100-SXM4-40GB")) is not None and spec.memory_bytes == 40 * GB
    assert (spec := gpu_spec("NVIDIA A10")) is not None and spec.fp16_dense_tflops == 125.0
    assert (spec := gpu_spec("NVIDIA H100 80GB HBM3")) is not None and spec.fp16_dense_tflops == 989.0
    assert gpu_spec("Some Future GPU") is None
    assert mig_profile_memory_bytes("1g.10gb") == 10 * GB
    assert mig_profile_memory_bytes("bogus") is None


def test_edges_of_adding_and_reading() -> None:
    """4.99 % is still below 5 %; half a second is evidence (p50 1 %); an empty bucket is never a quantile,
    not even the 0th; seconds are written to the millisecond; empty text is the empty histogram."""
    assert UtilHistogram.empty().add(0.0499, 1.0).seconds[2] == 1.0  # the [2 %, 5 %) bucket
    half = UtilHistogram.of([(0.0, 0.5)])
    assert half.quantile(0.5) == pytest.approx(0.01)
    assert UtilHistogram.of([(0.6, 6.0)]).quantile(0.0) == pytest.approx(0.70)
    assert UtilHistogram.of([(0.03, 1.23456)]).to_json() == '{"5":1.235}'
    assert UtilHistogram.from_json("") == UtilHistogram.empty()
    with pytest.raises(ValueError) as info:
        UtilHistogram.from_json("[1]")
    assert str(info.value) == "utilisation histogram: expected a JSON object"
