"""One tick booked end to end: ``sim-cluster`` on loopback, then one agent and the aggregator started from
the env files it writes, until the aggregator's ``/api/v1/report`` shows the tick's cost. The daemons run
either from a virtualenv (``--exe``) or inside an image (``--container``), so the same check proves the tested
dependency set and the image.

In the image the agent runs as the Helm chart renders it: its container's security context (user, group,
every capability dropped, no new privileges, read-only root filesystem) and its volume mounts (the kubelet's
socket folder read-only, the state folder, the token), against the socket and state folder sim-cluster made
as a kubelet makes them (root-owned, 0755, when run as root). The aggregator runs as the image's UID 65532;
its ledger folder and token are given group 65532, as the chart's ``fsGroup`` does for its volumes. Nothing of
the agent's node is chowned. Every wait has a timeout; every process started here is stopped by its process
group at the end; exit 1 on any failure.
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


@dataclass(frozen=True)
class AgentPod:
    """What the chart renders for the agent's container: its security context and where its volumes go."""

    security: dict[str, Any]
    socket_dir: str  # mountPath of the kubelet's pod-resources folder
    socket_read_only: bool
    state_dir: str  # mountPath of the state hostPath
    token_dir: str  # mountPath of the token Secret
    token_mode: int  # the Secret volume's defaultMode
    fs_group: int | None  # the pod's fsGroup: the Secret's files' group, and a supplementary group


def agent_pod(values_json: str) -> AgentPod:
    """Render the chart (Helm as a library, as the chart tests do) and read the agent container."""
    import helm_python  # the dev extra's helm-python-sdk; imported here so --exe runs need none of it
    import yaml

    chart = helm_python.Chart.load(str(Path(__file__).resolve().parents[1] / "helm" / "gpu-cost-exporter"))
    try:
        out = chart.render(json.loads(values_json), name="gce", namespace="gpu-cost-exporter", is_install=True)
    finally:
        chart.close()
    (ds,) = [d for path, text in out.items() if not path.endswith("NOTES.txt") for d in yaml.safe_load_all(text)
             if d and d["kind"] == "DaemonSet"]
    spec = ds["spec"]["template"]["spec"]
    (ctr,) = spec["containers"]
    mounts = {m["name"]: m for m in ctr["volumeMounts"]}
    secret = next(v["secret"] for v in spec["volumes"] if v["name"] == "agent-token")
    return AgentPod(security=ctr.get("securityContext", {}), socket_dir=mounts["pod-resources"]["mountPath"],
                    socket_read_only=bool(mounts["pod-resources"].get("readOnly")),
                    state_dir=mounts["state"]["mountPath"], token_dir=mounts["agent-token"]["mountPath"],
                    token_mode=int(secret.get("defaultMode", 0o644)),
                    fs_group=(spec.get("securityContext") or {}).get("fsGroup"))


def aggregator_volumes(work: Path, env: dict[str, str]) -> dict[str, str]:
    """The aggregator's ledger folder and token readable/writable by group 65532, as the chart's fsGroup makes
    its volume and Secret; returns its env pointing at them."""
    data = work / "aggregator-data"
    data.mkdir(mode=0o2770, exist_ok=True)
    token = data / "agent-token"
    token.write_bytes(Path(env["GPUCOST_AGENT_TOKEN_FILE"]).read_bytes())
    if os.geteuid() == 0:
        os.chown(data, 0, 65532)
        os.chown(token, 0, 65532)
    token.chmod(0o440)
    data.chmod(0o2770)
    return {**env, "GPUCOST_LEDGER": str(data / "ledger.db"), "GPUCOST_AGENT_TOKEN_FILE": str(token)}


#: Runs in a new mount namespace as root on the host: bind the container's root onto itself, mount the pod's
#: volumes into it, make it read-only (when the context says so), then enter it and drop to the context's
#: user, group, capabilities and no_new_privs with the image's own setpriv.
_POD_SHELL = r"""
set -eu
root="$1"; shift
mount --make-rprivate /
mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
while [ "$1" != "--" ]; do
  src="$1" dst="$root$2" ro="$3"; shift 3  # $2: already resolved inside the root (``inside``)
  if [ -d "$src" ]; then mkdir -p "$dst"; else mkdir -p "$(dirname "$dst")"; : > "$dst"; fi
  mount --bind "$src" "$dst"
  if [ "$ro" = ro ]; then mount -o remount,bind,ro "$dst"; fi
done
shift
if [ "$READ_ONLY_ROOT" = true ]; then mount -o remount,bind,ro "$root"; fi
exec unshare --root="$root" --wd=/ -- "$@"
"""


def secret_volume(token: Path, pod: AgentPod) -> Path:
    """The token as the kubelet writes a Secret volume's file: root's, the volume's mode, group fsGroup."""
    out = token.parent / "agent-secret-volume" / "token"
    out.parent.mkdir(mode=0o755, exist_ok=True)
    out.write_bytes(token.read_bytes())
    if os.geteuid() == 0:
        os.chown(out, 0, pod.fs_group if pod.fs_group is not None else 0)
    out.chmod(pod.token_mode)
    return out


def inside(root: Path, path: str) -> str:
    """``path`` as seen inside ``root``, its symlinks resolved there (the image's /var/run -> /run points at the
    root's /run, never the host's); returned relative to the root, with a leading slash."""
    parts: list[str] = []
    todo = [p for p in Path(path).parts if p != "/"]
    hops = 0
    while todo:
        part = todo.pop(0)
        if part == "..":
            parts = parts[:-1]
            continue
        here = root.joinpath(*parts, part)
        if here.is_symlink() and hops < 40:
            hops += 1
            target = here.readlink()
            todo = [p for p in target.parts if p != "/"] + todo
            if target.is_absolute():
                parts = []
            continue
        parts.append(part)
    return "/" + "/".join(parts)


def pod_argv(args: argparse.Namespace, pod: AgentPod, *, env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The agent in the image's root filesystem as the chart's pod runs it (see ``_POD_SHELL``), its env's
    paths rewritten to the chart's mount paths."""
    sc = pod.security
    if sc.get("capabilities", {}).get("add"):
        raise SmokeError(f"the chart adds capabilities {sc['capabilities']['add']}: not modelled here")
    user = int(sc.get("runAsUser", 65532))  # the image's USER when the chart names none
    group = int(sc.get("runAsGroup", 65532))
    drop_all = "ALL" in sc.get("capabilities", {}).get("drop", [])
    socket = Path(env["GPUCOST_PODRESOURCES_SOCKET"])
    token = secret_volume(Path(env["GPUCOST_USAGE_TOKEN_FILE"]), pod)
    kubeconfig = Path(env["GPUCOST_KUBECONFIG"])
    volumes = [(str(socket.parent), pod.socket_dir, "ro" if pod.socket_read_only else "rw"),
               (env["GPUCOST_STATE_DIR"], pod.state_dir, "rw"),
               (str(token), f"{pod.token_dir}/token", "ro"),
               (str(kubeconfig), str(kubeconfig), "ro")]  # the API's address, where a pod has its ServiceAccount
    env = {**env, "GPUCOST_PODRESOURCES_SOCKET": f"{pod.socket_dir}/{socket.name}",
           "GPUCOST_STATE_DIR": pod.state_dir, "GPUCOST_USAGE_TOKEN_FILE": f"{pod.token_dir}/token",
           "PATH": "/opt/gpu-cost-exporter/bin:/usr/bin:/bin", "PYTHONUNBUFFERED": "1"}
    drop = ["--inh-caps=-all", "--bounding-set=-all", "--ambient-caps=-all"] if drop_all else []
    nnp = ["--no-new-privs"] if sc.get("allowPrivilegeEscalation") is False else []
    inner = ["/usr/bin/env", "-i", *(f"{k}={v}" for k, v in env.items()),
             "/usr/bin/setpriv", f"--reuid={user}", f"--regid={group}",
             *(["--clear-groups"] if pod.fs_group is None else [f"--groups={pod.fs_group}"]), *drop, *nnp, "--",
             "gpu-cost-exporter", "agent"]
    root = subprocess.run(["buildah", "--storage-driver", os.environ.get("STORAGE_DRIVER", "vfs"), "mount",
                           args.container], check=True, capture_output=True, text=True).stdout.strip()
    volumes = [(src, inside(Path(root), dst), mode) for src, dst, mode in volumes]
    argv = ["unshare", "--mount", "--fork", "--", "sh", "-c", _POD_SHELL, "pod", root,
            *(field for volume in volumes for field in volume), "--", *inner]
    return argv, {"READ_ONLY_ROOT": "true" if sc.get("readOnlyRootFilesystem") else "false"}


def smoke(args: argparse.Namespace, procs: Procs) -> list[dict[str, Any]]:
    """Bring up the peers, one agent and the aggregator; return the report rows once a tick is booked."""
    work: Path = args.workdir
    (work / "scenario.yaml").write_text(SCENARIO)
    procs.spawn("sim", [args.sim, "sim-cluster", "--scenario", str(work / "scenario.yaml"), "--workdir", str(work)])
    wait_for("sim-cluster's ready file", (work / "ready").exists, timeout=args.timeout, procs=procs, watch=["sim"])
    agent_env = {**env_file(work / "agents" / "smoke-0.env"), "GPUCOST_TICK": TICK, "GPUCOST_STATE_FSYNC": "false"}
    agg_env = {**env_file(work / "aggregator.env"), "GPUCOST_TICK": TICK}
    if args.container:
        agg_env = aggregator_volumes(work, agg_env)
        argv, run_env = pod_argv(args, agent_pod(args.agent_values), env=agent_env)
    else:
        argv, run_env = daemon_argv(args, "agent", env=agent_env)
    procs.spawn("agent", argv, env=run_env)
    argv, run_env = daemon_argv(args, "aggregator", env=agg_env)
    procs.spawn("aggregator", argv, env=run_env)
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
    p.add_argument("--agent-values", default="{}",
                   help="chart values (JSON) to render the agent's pod from (--container; default: the chart's own)")
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
