"""What the end-to-end alerting tests share: Debian's Prometheus and Alertmanager binaries, a loopback Slack stand-in
that records what Alertmanager posts, the chart's rules rendered with test durations, and the example Alertmanager
config pointed at the stand-in with shortened notification timings."""

from __future__ import annotations

import json
import shutil
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO

ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")  # Debian's name first
BINARIES = ("prometheus", "promtool", "amtool")
NEEDS_BINARIES = pytest.mark.skipif(
    ALERTMANAGER is None or any(shutil.which(b) is None for b in BINARIES),
    reason="needs Debian's prometheus and prometheus-alertmanager (installed by .ci/run)")


class SlackStandIn:
    """A loopback HTTP server that records what Alertmanager posts."""

    def __init__(self) -> None:
        self.posts: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                outer.posts.append({"path": self.path, "body": json.loads(body)})
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/services/T000/B000/XXXX"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def find(self, status: str, pod: str) -> dict[str, Any] | None:
        """The first GPUAllocatedButIdle post of ``status`` (FIRING, RESOLVED) naming ``pod``."""
        return self.find_alert(status, "GPUAllocatedButIdle", pod)

    def find_alert(self, status: str, alertname: str, text: str) -> dict[str, Any] | None:
        """The first post of ``status`` for ``alertname`` whose message text contains ``text``."""
        for p in self.posts:
            att = p["body"]["attachments"][0]
            if att["title"].startswith(f"[{status}") and alertname in att["title"] and text in att["text"]:
                body: dict[str, Any] = p["body"]
                return body
        return None


def render_rules(tmp: Path, thresholds: dict[str, Any]) -> Path:
    """The chart's rule template rendered with ``thresholds`` (test durations) over the chart's defaults."""
    sys.path.insert(0, str(REPO / "alerts"))
    try:
        import render
    finally:
        sys.path.pop(0)
    path = tmp / "rules.yaml"
    path.write_text(render.render(thresholds))
    return path


def alertmanager_config(tmp: Path, slack_url: str) -> Path:
    """The example config, pointed at the stand-in; only the notification timings are shortened."""
    text = (REPO / "alerts" / "alertmanager.yaml").read_text()
    url_file = tmp / "slack-webhook-url"
    url_file.write_text(slack_url)
    text = text.replace("/etc/alertmanager/secrets/slack-webhook-url", str(url_file))
    text = text.replace("group_wait: 30s", "group_wait: 1s").replace("group_interval: 5m", "group_interval: 2s")
    shutil.copy(REPO / "alerts" / "slack.tmpl", tmp / "slack.tmpl")
    path = tmp / "alertmanager.yaml"
    path.write_text(text)
    return path
