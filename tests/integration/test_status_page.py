"""The status page and the capacity, quota and queue views on the default demo scenario."""

from __future__ import annotations

from pathlib import Path

from exporter.aggregator.web.exposition import ExpositionRenderer
from exporter.aggregator.web.status_page import render_status
from exporter.clock import VirtualClock
from exporter.pipeline import Pipeline
from exporter.sim.scenario import load_scenario
from tests.conftest import REPO

START = 1_800_000_000.0


async def test_default_scenario_status_and_metrics(tmp_path: Path) -> None:
    """After 3 simulated minutes of the demo scenario: every namespace, the pending pod with its reason,
    the quota rejection (counted once), quotas matching the scenario, pools with unallocated capacity."""
    scenario = load_scenario(REPO / "exporter" / "sim" / "scenarios" / "default.yaml")
    clock = VirtualClock(START)
    pipe = Pipeline(scenario, tmp_path, clock=clock)
    await pipe.start(serve_aggregator=False)
    agg = pipe.aggregator
    assert agg is not None
    try:
        for k in range(13):
            await pipe.step(k * 15)
        # The rejection event is updated (count 2): it counts once more, not twice.
        ev = next(o for o in pipe.peers.cluster.store.objects["events"].values() if o["reason"] == "FailedCreate")
        pipe.peers.cluster.store.upsert("events", {**ev, "count": 2})
        pipe.peers.cluster.store.upsert("events", {**ev, "count": 2, "message": ev["message"]})
        await pipe.wait_watch_caught_up()
        html = await render_status(agg)
        metrics = ExpositionRenderer().render(list(agg.collector.collect())).decode()
    finally:
        await pipe.close()
    for ns in ("ai-training", "ai-inference", "ai-dev"):
        assert f"<td>{ns}</td>" in html
    assert "train-big-0 <span class=tag>insufficient_gpu</span>" in html
    assert "exceeded quota: gpu-quota" in html
    assert "notebook-alice-0" in html  # the idle squatter is in the top idle pods
    assert "<td>training</td>" in html and "<td>inference</td>" in html and "<td>dev</td>" in html
    # train-llm-0 (4 GPUs) holds under gpu-batch; the MIG serving pods 2 x 3/7 under inference-critical
    assert "<tr><td>gpu-batch</td><td>4.00</td></tr>" in html
    assert "<tr><td>inference-critical</td><td>0.86</td></tr>" in html
    assert "<tr><td>training</td><td>ai-training</td><td>5.00</td></tr>" in html
    models = html.split("<h2>GPUs by vendor and model</h2>", 1)[1].split("<h2>", 1)[0]
    # H200: 8 GPUs all held by pretrain-0 for 12 x 15 s = 0.05 h -> 0.40 GPU-h at the blended 3.50 (6 of 8
    # committed at 3.00, 2 at 5.00) = 1.40 USD; 90 % busy -> 0.14 idle; nothing unheld
    assert ("<tr><td>nvidia</td><td style='text-align:left'>NVIDIA H200</td><td>8</td><td>8.00</td><td>0.40</td>"
            "<td>1.4000 USD</td><td>0.1400 USD</td><td>0.0000 USD</td></tr>") in models
    # H100: 8 on gpu-h100-0 (train-llm-0 4 + the notebook 1) and 8 on the spot node (sweep-0): 13 of 16 held;
    # the 3 nobody held for 0.05 h at 4.00 = 0.60 USD
    assert "NVIDIA H100 80GB HBM3</td><td>16</td><td>13.00</td>" in models and "<td>0.6000 USD</td></tr>" in models
    assert sum(c for ns, c in agg.kube.quota_event_counts.values() if ns == "ai-dev") == 2
    # ai-training at 3m: train-llm-0 (4) + notebook (1) + the pending train-big-0 (8, admitted) = 13
    assert agg.kube.quota_by_namespace() == {"ai-training": (16.0, 13.0), "ai-inference": (4.0, 0.0),
                                             "ai-dev": (4.0, 2.0)}
    pending = [(p.namespace, agg.kube.pending_reasons(p)) for p in agg.kube.pending_gpu_pods()]
    assert pending == [("ai-training", ["insufficient_gpu"])]
    # the metrics carry the same numbers: the pending pod (created at 1m) is 2 minutes old at 3m
    assert 'gpucost_pending_gpu_pods{namespace="ai-training",reason="insufficient_gpu"} 1.0' in metrics
    assert 'gpucost_pending_gpu_pods_oldest_age_seconds{namespace="ai-training"} 120.0' in metrics
    assert 'gpucost_quota_headroom_gpus{namespace="ai-training",source="resourcequota"} 3.0' in metrics
    assert 'gpucost_quota_rejections_total{namespace="ai-dev"} 2.0' in metrics
