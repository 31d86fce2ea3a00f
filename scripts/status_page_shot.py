"""The pictures of the status page in docs/, made from the running demo so they cannot go stale.

``python -m scripts.status_page_shot`` starts ``gpu-cost-exporter demo`` (the built-in scenario, or
``--scenario``), waits until the page shows every section the scenario fills (budgets, savings, trends: a few
minutes in), and has headless Chromium render the whole page into ``docs/status-page.png`` (``--out``). Chromium
is driven over its DevTools protocol (one WebSocket), so the picture is the full page at 1280 CSS pixels wide,
not a fixed window. The demo is stopped by its process id at the end, whatever happened.

The same driver gives the end-to-end test the page as Chromium laid it out (``rendered``).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

REPO = Path(__file__).resolve().parent.parent
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars")
WIDTH = 1280
#: What the demo's page shows once its first minutes are booked: the sections the picture is meant to have.
READY = (b"<table class=savings>", b"<h2>Budgets</h2><table", b"<table class=charts>",
         b"<h2>GPUs by vendor and model</h2><table")
SECTIONS_JS = "JSON.stringify(Array.from(document.querySelectorAll('h2')).map(h => h.textContent.trim()))"


def chromium() -> str | None:
    """Debian's chromium, if installed."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass(frozen=True, slots=True)
class Rendered:
    """The page as Chromium laid it out: its section titles, its height and (if asked) the PNG."""

    sections: list[str]
    height: int
    png: bytes


class _Tab:
    """One page target of a headless Chromium, spoken to over its DevTools WebSocket."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.ids = itertools.count(1)

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        n = next(self.ids)
        await self.ws.send_json({"id": n, "method": method, "params": params})
        while True:
            msg = await self.ws.receive_json(timeout=60)
            if msg.get("id") == n:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                result: dict[str, Any] = msg.get("result", {})
                return result

    async def until_event(self, name: str) -> None:
        while (await self.ws.receive_json(timeout=60)).get("method") != name:
            pass


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _render(url: str, *, port: int, png: bool) -> Rendered:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        targets: list[dict[str, Any]] = []
        for _ in range(300):
            with contextlib.suppress(aiohttp.ClientError, OSError):
                async with http.get(f"http://127.0.0.1:{port}/json/list") as r:
                    targets = [t for t in await r.json() if t.get("type") == "page"]
            if targets:
                break
            await asyncio.sleep(0.1)
        if not targets:
            raise RuntimeError("chromium's DevTools endpoint did not come up")
        async with http.ws_connect(targets[0]["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            return await _shoot(_Tab(ws), url, png=png)


async def _shoot(tab: _Tab, url: str, *, png: bool) -> Rendered:
    await tab.call("Page.enable")
    await tab.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=800, deviceScaleFactor=1, mobile=False)
    await tab.call("Page.navigate", url=url)
    await tab.until_event("Page.loadEventFired")
    metrics = await tab.call("Page.getLayoutMetrics")
    height = int(metrics["cssContentSize"]["height"]) + 1

    found = await tab.call("Runtime.evaluate", expression=SECTIONS_JS, returnByValue=True)
    sections = list(json.loads(found["result"]["value"]))
    data = b""
    if png:
        await tab.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=height, deviceScaleFactor=1,
                       mobile=False)
        shot = await tab.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        data = base64.b64decode(shot["data"])
    return Rendered(sections, height, data)


def rendered(url: str, *, png: bool = False) -> Rendered:
    """The page at ``url`` as headless Chromium lays it out (and its full-page PNG with ``png``)."""
    browser = chromium()
    if browser is None:
        raise RuntimeError("needs Debian's chromium")
    port = _free_port()
    # Chromium's helper processes may still write to the profile as the browser exits: the browser runs in a
    # session of its own whose whole group is stopped, and a file left behind by a straggler is not an error.
    with tempfile.TemporaryDirectory(prefix="gpucost-chromium-", ignore_cleanup_errors=True) as profile:
        proc = subprocess.Popen([browser, *FLAGS, f"--remote-debugging-port={port}", f"--user-data-dir={profile}",
                                 "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            return asyncio.run(_render(url, port=port, png=png))
        finally:
            _stop_group(proc)


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the browser's process group, SIGKILL after 15 s; then wait for the browser itself."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _get(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            body: bytes = r.read()
            return body
    except OSError:
        return b""


def wait_for(url: str, marks: tuple[bytes, ...], *, timeout: float) -> bytes:
    """The page once it holds every one of ``marks``; TimeoutError naming the ones missing."""
    deadline = time.monotonic() + timeout
    body = b""
    while time.monotonic() < deadline:
        body = _get(url)
        if all(m in body for m in marks):
            return body
        time.sleep(2)
    missing = [m.decode() for m in marks if m not in body]
    raise TimeoutError(f"{url} did not show {missing} within {timeout:g} s")


def main(argv: list[str] | None = None) -> int:
    """Run the demo, wait for its page to fill, write the picture; exit 1 on any failure."""
    p = argparse.ArgumentParser(prog="python -m scripts.status_page_shot", description=__doc__.split("\n")[0])
    p.add_argument("--scenario", type=Path, default=None, help="scenario file (default: the built-in one)")
    p.add_argument("--out", type=Path, default=REPO / "docs" / "status-page.png")
    p.add_argument("--listen", default=f"127.0.0.1:{_free_port()}", help="the demo's address (default: a free port)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for every section (600)")
    p.add_argument("--ready", default=",".join(m.decode() for m in READY),
                   help="comma-separated HTML the page must hold before the picture is taken")
    args = p.parse_args(argv)
    cmd = [sys.executable, "-m", "exporter", "demo", "--listen", args.listen, "--refresh", "5s"]
    if args.scenario is not None:
        cmd += ["--scenario", str(args.scenario)]
    with tempfile.TemporaryFile() as log:
        demo = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        try:
            url = f"http://{args.listen}/"
            wait_for(url, tuple(m.encode() for m in args.ready.split(",") if m), timeout=args.timeout)
            page = rendered(url, png=True)
            args.out.write_bytes(page.png)
            print(f"{args.out}: {WIDTH}x{page.height}, sections: {', '.join(page.sections)}")
            return 0
        except (TimeoutError, RuntimeError) as exc:
            log.seek(0)
            print(f"status_page_shot: {exc}\n{log.read()[-3000:].decode(errors='replace')}", file=sys.stderr)
            return 1
        finally:
            demo.terminate()
            try:
                demo.wait(timeout=30)
            except subprocess.TimeoutExpired:
                demo.kill()
                demo.wait()


if __name__ == "__main__":
    raise SystemExit(main())
