"""Static agents pin a node to the URL that first proved it: the books stay exact whichever URL answers
first, and a URL never speaks for a second node. Real agents, a real aggregator and the simulator's peers on
loopback (the rig of test_books_integrity)."""

from __future__ import annotations

import pytest
from aiohttp import web

from exporter.sim.runner import free_port
from tests.integration.test_books_integrity import Rig, _hostile_snapshot, _rig

_FIXTURES = (_rig,)  # used by name
pytestmark = pytest.mark.timeout(60)  # in-process rigs, each test under 1 s


@pytest.mark.parametrize("impostor_listed_first", [True, False])
async def test_an_impostor_that_comes_up_late_never_moves_the_books(rig: Rig, impostor_listed_first: bool) -> None:
    """The real a100 agent proves a100 while the impostor (on the l4 node, calling itself a100) is down; once
    the impostor answers, listed before or after the real one, a100's books still follow the real agent
    only: nothing of l4's pods is booked, and every impostor answer is refused for the pin, not as a mere
    duplicate (which would let it in on any tick it answered first)."""
    listen = f"127.0.0.1:{free_port()}"
    impostor = f"http://{listen}"
    real = await rig.agent("a100", node="a100")
    agg = await rig.start_aggregator(agents=[impostor, real] if impostor_listed_first else [real, impostor])
    await rig.run(range(0, 60, 15))  # the impostor is not up yet: a100 is proved by the real agent
    await rig.agent("impostor", node="a100", peers_of="l4", listen=listen)
    await rig.run(range(60, 165, 15))
    assert rig.agent_allocated("impostor", "d") > 0  # the impostor did count l4's pod
    assert rig.booked("t") == pytest.approx(rig.agent_allocated("a100", "t")) == pytest.approx(150.0)
    assert rig.booked("d") == 0.0
    assert agg.gate.rejected == {"node_mismatch": 7}
    assert agg.gate.pins == {"a100": real}


async def test_a_url_that_proved_one_node_is_refused_for_another(rig: Rig) -> None:
    """The URL that proved a100 answers, after a restart, as l4 (an address handed to another node): l4 is
    not booked from it and not pinned to it; a100's books keep what the first agent counted."""
    listen = f"127.0.0.1:{free_port()}"
    url = await rig.agent("a100", node="a100", listen=listen)
    agg = await rig.start_aggregator(agents=[url])
    await rig.run(range(0, 60, 15))
    counted = rig.agent_allocated("a100", "t")
    await rig.agents.pop("a100").close()
    await rig.agent("l4", node="l4", listen=listen)
    await rig.run(range(60, 165, 15))
    assert rig.agent_allocated("l4", "d") > 0
    assert rig.booked("d") == 0.0
    assert rig.booked("t") == pytest.approx(counted) == pytest.approx(45.0)
    assert agg.gate.rejected == {"url_mismatch": 7}
    assert agg.gate.pins == {"a100": url}
    assert await agg.ledger.query("SELECT node, url FROM agent_urls") == [("a100", url)]


async def test_only_a_booked_snapshot_pins_a_node(rig: Rig) -> None:
    """A hostile server claims a100 once, on the first tick, listed before the real agent: the gate admits it (no
    pin yet) and the books refuse it (1e12 GPU-seconds in 15 s). Its URL must not be pinned to a100, or the
    real agent would be refused as node_mismatch for good (0 of 150 GPU-seconds booked). The real agent's
    answer of that tick is refused (the hostile one came first); from the next tick on it proves a100, and its
    counters carry the whole 150 s (1 GPU x 150 s)."""
    body = _hostile_snapshot("a100", capacity=[{"gpu_uuid": "GPU-9", "gpu_model": "NVIDIA A100-SXM4-80GB"}],
                             holders=[{"namespace": "x", "pod": "p", "container": "c", "device_id": "GPU-9",
                                       "fraction": 1.0, "allocated_s": 1e12, "used_s": 0.0, "unmeasured_s": 0.0}])
    answered = 0

    async def usage(_request: web.Request) -> web.Response:
        nonlocal answered
        answered += 1
        if answered > 1:
            return web.json_response({"error": "gone"}, status=503)
        return web.Response(text=body(rig.clock.now()), content_type="application/json")

    app = web.Application()
    app.router.add_get("/v1/usage", usage)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    hostile = f"http://127.0.0.1:{port}"
    try:
        real = await rig.agent("a100", node="a100")
        agg = await rig.start_aggregator(agents=[hostile, real])
        await rig.run(range(0, 165, 15))
        assert agg.gate.rejected == {"faster_than_wall_time": 1, "node_mismatch": 1}
        assert agg.gate.pins == {"a100": real}
        assert await agg.ledger.query("SELECT node, url FROM agent_urls") == [("a100", real)]
        assert rig.booked("t") == pytest.approx(rig.agent_allocated("a100", "t")) == pytest.approx(150.0)
        assert rig.booked("x") == 0.0
    finally:
        await runner.cleanup()
