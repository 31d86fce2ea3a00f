"""Helpers to run the real daemons as processes against `gpu-cost-exporter sim-cluster`."""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any


def env_file(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if line)


def get(url: str, headers: dict[str, str] | None = None, context: ssl.SSLContext | None = None) -> tuple[int, bytes]:
    try:
        req = urllib.request.Request(url, headers=headers or {})
        with urllib.request.urlopen(req, timeout=5, context=context) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def usage(env: dict[str, str]) -> dict[str, Any]:
    """An agent's /v1/usage snapshot, with the bearer token its env file names (secure by default)."""
    token = Path(env["GPUCOST_USAGE_TOKEN_FILE"]).read_text().strip()
    status, body = get(f"http://{env['GPUCOST_LISTEN']}/v1/usage", {"Authorization": f"Bearer {token}"})
    assert status == 200, (status, body[:200])
    snap: dict[str, Any] = json.loads(body)
    return snap


def wait(predicate: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():  # type: ignore[operator]
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError("timed out waiting")


class Cluster:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.logs = workdir / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)

    def spawn(self, name: str, args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        log = (self.logs / f"{name}.log").open("ab")
        proc = subprocess.Popen([sys.executable, "-m", "exporter", *args], stdout=log, stderr=log,
                                env={**os.environ, **(env or {})})
        self.procs[name] = proc
        return proc

    def agent_env(self, node: str, **extra: str) -> dict[str, str]:
        return {**env_file(self.workdir / "agents" / f"{node}.env"), "GPUCOST_TICK": "0.5s", **extra}

    def aggregator_env(self) -> dict[str, str]:
        return {**env_file(self.workdir / "aggregator.env"), "GPUCOST_TICK": "0.5s"}

    def stop(self, name: str, sig: int = signal.SIGTERM) -> int:
        """Signal a daemon and wait for it; a non-zero exit after SIGTERM prints the end of its log, which
        pytest shows beside the failing assertion."""
        proc = self.procs.pop(name)
        proc.send_signal(sig)
        code = proc.wait(timeout=20)
        if code != 0 and sig != signal.SIGKILL:
            print(f"--- {name} exited {code}; the end of its log:\n{self.tail(name)}")
        return code

    def tail(self, name: str, lines: int = 40) -> str:
        return "\n".join((self.logs / f"{name}.log").read_text(errors="replace").splitlines()[-lines:])

    def running(self, name: str) -> bool:
        """Still alive; when it has exited, its log's end is printed (a respawn that died on start)."""
        code = self.procs[name].poll()
        if code is not None:
            print(f"--- {name} exited {code}; the end of its log:\n{self.tail(name)}")
        return code is None

    def close(self) -> None:
        for name in list(self.procs):
            proc = self.procs.pop(name)
            proc.kill()
            proc.wait(timeout=10)


