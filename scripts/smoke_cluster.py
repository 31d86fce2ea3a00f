"""One tick booked end to end: ``sim-cluster`` on loopback, then one agent and the aggregator started from
the env files it writes, until the aggregator's ``/api/v1/report`` shows the tick's cost. The daemons run
either from a virtualenv (``--exe``) or inside an image (``--container``, with ``buildah run`` as UID
65532), so the same check proves the tested dependency set and the image. Every wait has a timeout; every
process started here is stopped by its process group at the end; exit 1 on any failure.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: One node, one pod holding one of two GPUs at 50 %: the first tick books team-a a positive cost.
SCENARIO = """\
tick: 15s
duration: 24h
prices: {"NVIDIA H100 80GB HBM3": 4.0}
nodes: [{name: smoke-0, model: "NVIDIA H100 80GB HBM3", gpus: 2}]
pods: [{name: trainer, namespace: team-a, node: smoke-0, gpus: 1, utilization: 0.5}]
"""
#: The daemons tick every second here (the scenario's 15 s would make the check slow, not stronger).
TICK = "1s"


class SmokeError(Exception):
    """A step of the smoke check failed; the message says which, with the end of the relevant log."""


@dataclass
class Procs:
    """Processes started here, each in its own session, so the whole group (a ``buildah run`` and the
    daemon it runs) is stopped by that group's id."""

    logs: Path
    started: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def spawn(self, name: str, argv: list[str], *, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        """Start ``argv`` with stdout and stderr in logs/<name>.log."""
        with (self.logs / f"{name}.log").open("ab") as log:
            proc = subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                                    env={**os.environ, **(env or {})}, start_new_session=True)
        self.started[name] = proc
        return proc

    def tail(self, name: str, lines: int = 30) -> str:
        """The end of a process's log, for an error message."""
        path = self.logs / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def alive(self, name: str) -> None:
        """Raise with the log's end when the process has exited."""
        code = self.started[name].poll()
        if code is not None:
            raise SmokeError(f"{name} exited with {code}:\n{self.tail(name)}")

    def stop_all(self) -> None:
        """SIGTERM each process group, then SIGKILL what is left after 15 s."""
        for proc in self.started.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.started.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


def env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines as sim-cluster writes them."""
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def wait_for(what: str, check: Any, *, timeout: float, procs: Procs, watch: list[str]) -> Any:
    """Poll ``check()`` until it returns something truthy; fail when a watched process dies or time is up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name in watch:
            procs.alive(name)
        try:
            got = check()
        except (OSError, ValueError):
            got = None
        if got:
            return got
        time.sleep(0.5)
    raise SmokeError(f"timed out after {timeout:g} s waiting for {what}:\n" +
                     "\n".join(f"--- {n}\n{procs.tail(n)}" for n in watch))


def booked(listen: str) -> list[dict[str, Any]] | None:
    """The aggregator's report rows once team-a's cost is booked, else None."""
    with urllib.request.urlopen(f"http://{listen}/api/v1/report?by=namespace", timeout=5) as resp:
        rows: list[dict[str, Any]] = json.loads(resp.read())
    return rows if any(r.get("namespace") == "team-a" and r.get("cost", 0) > 0 for r in rows) else None


def daemon_argv(args: argparse.Namespace, command: str, *, env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """How to run a daemon: the virtualenv's entry point with ``env``, or ``buildah run`` in the container
    as UID 65532 with the workdir bind-mounted at the same path and ``env`` passed as --env."""
    if not args.container:
        return [args.exe, command], env
    run = ["buildah", "--storage-driver", os.environ.get("STORAGE_DRIVER", "vfs"), "run", "--isolation", "chroot",
           "--user", "65532:65532", "--volume", f"{args.workdir}:{args.workdir}"]
    for key, value in env.items():
        run += ["--env", f"{key}={value}"]
    return [*run, args.container, "gpu-cost-exporter", command], {}


def smoke(args: argparse.Namespace, procs: Procs) -> list[dict[str, Any]]:
    """Bring up the peers, one agent and the aggregator; return the report rows once a tick is booked."""
    work: Path = args.workdir
    (work / "scenario.yaml").write_text(SCENARIO)
    procs.spawn("sim", [args.sim, "sim-cluster", "--scenario", str(work / "scenario.yaml"), "--workdir", str(work)])
    wait_for("sim-cluster's ready file", (work / "ready").exists, timeout=args.timeout, procs=procs, watch=["sim"])
    if args.container and os.geteuid() == 0:
        # The daemons run as 65532: hand them the workdir (token file, kubelet socket, state, ledger).
        subprocess.run(["chown", "-R", "65532:65532", str(work)], check=True)
    agent_env = {**env_file(work / "agents" / "smoke-0.env"), "GPUCOST_TICK": TICK, "GPUCOST_STATE_FSYNC": "false"}
    agg_env = {**env_file(work / "aggregator.env"), "GPUCOST_TICK": TICK}
    for name, env in (("agent", agent_env), ("aggregator", agg_env)):
        argv, run_env = daemon_argv(args, name, env=env)
        procs.spawn(name, argv, env=run_env)
    rows: list[dict[str, Any]] = wait_for("a booked tick in the aggregator's /api/v1/report",
                                          lambda: booked(agg_env["GPUCOST_LISTEN"]), timeout=args.timeout,
                                          procs=procs, watch=["sim", "agent", "aggregator"])
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run the check; print the booked rows, or the failure with the logs' ends; exit 0 or 1."""
    p = argparse.ArgumentParser(description="one tick booked by a real agent and aggregator against sim-cluster")
    p.add_argument("--sim", required=True, help="the gpu-cost-exporter that serves sim-cluster on this host")
    p.add_argument("--exe", default="gpu-cost-exporter", help="the daemons' gpu-cost-exporter (virtualenv mode)")
    p.add_argument("--container", default="", help="a buildah working container to run the daemons in instead")
    p.add_argument("--workdir", type=Path, required=True, help="an empty directory (short path: kubelet socket)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds each wait may take (default 120)")
    args = p.parse_args(argv)
    args.workdir = args.workdir.resolve()
    procs = Procs(args.workdir / "logs")
    procs.logs.mkdir(parents=True, exist_ok=True)
    try:
        rows = smoke(args, procs)
    except (SmokeError, subprocess.CalledProcessError) as exc:
        print(f"smoke: FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        procs.stop_all()
    team = next(r for r in rows if r["namespace"] == "team-a")
    print(f"smoke: one tick booked: team-a {team['allocated_gpu_hours']:.6f} GPU-h, cost {team['cost']:.6f} "
          f"{team.get('currency', '')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
