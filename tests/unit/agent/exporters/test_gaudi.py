"""Intel Gaudi: gaudi-metric-exporter's series (its documented label set: Serial, UUID, device, id, driver,
pod_namespace, pod_name) read into cards joined by serial number; a golden Gaudi node for an hour; an empty
scrape read as the exporter being down, through a real HTTP peer on loopback."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import generate_latest

from exporter.agent.exporters.gaudi import MODEL, gaudi_devices
from exporter.agent.holders.attribution import attribute
from exporter.agent.meter import Meter
from exporter.agent.service import Agent
from exporter.clients.exposition import parse_exposition
from exporter.config import AgentSettings
from exporter.model.pod_resources import ContainerDevices
from exporter.model.pricing.document import parse_pricing
from exporter.sim.runner import free_port
from tests.metrics_peer import serve_metrics

SERIALS = [f"AM{n:02d}000{n}" for n in range(8)]


def card(i: int, *, util: float, pod: tuple[str, str] = ("", ""), power_mw: float = 300_000) -> str:
    labels = (f'Serial="{SERIALS[i]}",UUID="01P{i}-HL2080A0-18-U4V193-22-07-00",device="{SERIALS[i]}",id="{i}",'
              f'driver="1.21.0",pod_namespace="{pod[0]}",pod_name="{pod[1]}"')
    return "\n".join([f"habanalabs_utilization{{{labels}}} {util}", f"habanalabs_power_mW{{{labels}}} {power_mw}",
                      f"habanalabs_memory_used_bytes{{{labels}}} 1073741824",
                      f"habanalabs_energy{{{labels}}} 123456789"])


def test_units_and_join_labels() -> None:
    """Percent -> ratio, mW -> W, bytes as is; habanalabs_energy (unit undocumented) is not read."""
    scrape = gaudi_devices(parse_exposition(card(3, util=45, pod=("nlp", "bert"))).samples)
    dev = scrape.devices[(SERIALS[3], "")]
    assert (dev.util, dev.power, dev.fb_used, dev.energy) == (0.45, 300.0, 1073741824.0, None)
    assert (dev.model, dev.vendor, dev.index, dev.pods) == (MODEL, "gaudi", "3", {("nlp", "bert", "")})
    assert scrape.refused == 0


def test_golden_gaudi_node() -> None:
    """8 Gaudi cards; nlp/bert holds cards 0 and 1 (80 % and 40 %), cv/yolo card 2 (10 %), 5 free, for an hour at
    5.00 per card-hour. nlp: 2 card-h allocated, 0.8 + 0.4 = 1.2 used, cost 10.00; cv: 1 allocated, 0.1 used,
    cost 5.00; unallocated 5 card-h; energy unmeasured on all 8 cards: 8 x 3600 card-seconds counted."""
    body = "\n".join([card(0, util=80, pod=("nlp", "bert")), card(1, util=40, pod=("nlp", "bert")),
                      card(2, util=10, pod=("cv", "yolo")), *(card(i, util=0) for i in range(3, 8))])
    devices = gaudi_devices(parse_exposition(body).samples).devices
    held = [ContainerDevices("nlp", "bert", "main", "habana.ai/gaudi", (SERIALS[0], SERIALS[1])),
            ContainerDevices("cv", "yolo", "main", "habana.ai/gaudi", (SERIALS[2],))]
    meter = Meter(node="n")
    for now in (0.0, 3600.0):
        meter.tick(now, attribute(held, devices, allocatable=None, mig_known={}, inventory={}), dcgm=devices,
                   cap=3600.0)
    price = parse_pricing('{"currency": "USD", "default_price": 1.0, "models": {"Intel Gaudi": 5.0}}', "t")
    rows: dict[str, tuple[float, float, float, float]] = {}
    for h in meter.holders.values():
        a, u, m, c = rows.get(h.namespace, (0.0, 0.0, 0.0, 0.0))
        rows[h.namespace] = (a + h.usage.allocated / 3600, u + h.usage.used / 3600, m + h.usage.unmeasured / 3600,
                             c + h.usage.allocated / 3600 * price.price(h.model).per_gpu_hour)
    assert rows == {"nlp": pytest.approx((2.0, 1.2, 0.0, 10.0)), "cv": pytest.approx((1.0, 0.1, 0.0, 5.0))}
    assert meter.unallocated == {MODEL: pytest.approx(5 * 3600.0)}
    assert meter.energy.unmeasured_s == pytest.approx(8 * 3600.0)


def test_bad_samples_refused_never_a_wrong_card() -> None:
    """No Serial, NaN, negative, and two different readings of one card: refused and counted."""
    good = card(0, util=50)
    body = "\n".join([good, 'habanalabs_utilization{Serial="",id="9"} 10',
                      f'habanalabs_utilization{{Serial="{SERIALS[1]}"}} NaN',
                      f'habanalabs_power_mW{{Serial="{SERIALS[1]}"}} -3',
                      f'habanalabs_utilization{{Serial="{SERIALS[2]}"}} 10',
                      f'habanalabs_utilization{{Serial="{SERIALS[2]}"}} 90'])
    scrape = gaudi_devices(parse_exposition(body).samples)
    assert scrape.refused == 4
    assert scrape.devices[(SERIALS[0], "")].util == 0.5
    assert scrape.devices[(SERIALS[1], "")].util is None and scrape.devices[(SERIALS[2], "")].util is None


async def test_empty_scrape_is_the_exporter_down_not_idle_cards(tmp_path: Path) -> None:
    """gaudi-metric-exporter serves no device series when its pod-resources List failed: after a Gaudi scrape, such
    a body marks the exporter down for that tick (no readings), and the next full scrape brings it back."""
    bodies = [card(0, util=50), "# HELP go_goroutines x\n# TYPE go_goroutines gauge\ngo_goroutines 9\n",
              card(0, util=50)]

    runner, url = await serve_metrics(lambda: bodies.pop(0))
    settings = AgentSettings(node_name="g", dcgm_url=url,
                             podresources_socket=tmp_path / "none.sock", state_dir=tmp_path,
                             listen=f"127.0.0.1:{free_port()}")
    agent = Agent(settings)
    try:
        seen = []
        for _ in range(3):
            await agent.tick()
            seen.append((agent.health.dcgm_up, sorted(agent.meter.device_readings)))
            if len(seen) == 1:  # the agent's device metric names the vendor
                (line,) = [x for x in generate_latest(agent.registry).decode().splitlines()
                           if x.startswith("gpucost_device_utilization_ratio{")]
                assert f'gpu_uuid="{SERIALS[0]}"' in line and line.endswith('vendor="gaudi"} 0.5')
    finally:
        await agent.close()
        await runner.cleanup()
    assert seen == [(True, [(SERIALS[0], "")]), (False, []), (True, [(SERIALS[0], "")])]
