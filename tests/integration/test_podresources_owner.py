"""The kubelet's socket as a node presents it (sim-cluster run as root makes it as the kubelet does: folder
root:root 0750, socket root:root 0755), read by real processes: UID 0 with every capability dropped connects (it
is the owner); UID 65532 -- the image's user -- is refused, and the client reports the peer down with the cause
instead of raising (real-nodes.md §1)."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from exporter.sim.runner import SimPeers
from exporter.sim.scenario import parse_scenario
from tests.conftest import REPO

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                                reason="needs root (to run clients as other users) and setpriv")

SCENARIO = """
tick: 15s
duration: 1h
prices: {"NVIDIA L4": 0.8}
nodes: [{name: n0, model: "NVIDIA L4", gpus: 1}]
pods: [{name: p, namespace: ml, node: n0, gpus: 1, utilization: 0.5}]
"""

#: What the agent does with the socket, in a process of its own. Started as root with everything imported, it
#: becomes ``argv[2]`` for good before it connects: the interpreter and its packages may live where only root may
#: read (a pyenv under /root, 0700), so no other user could start it. setresuid from 0 to a non-zero UID clears
#: every capability (capabilities(7)); for UID 0 the caller drops them (setpriv, below).
LIST = """
import asyncio, os, sys
from pathlib import Path
from exporter.clients.errors import PeerError
from exporter.clients.podresources import PodResourcesClient

uid = int(sys.argv[2])
if os.getuid() != uid:
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
assert (os.getuid(), os.geteuid(), os.getgid(), os.getgroups()) == (uid, uid, uid, []) or uid == 0

async def main() -> None:
    try:
        held = await PodResourcesClient(Path(sys.argv[1]), 5.0).list()
        print("listed", [c.pod for c in held])
    except PeerError as exc:
        print("down", exc)

asyncio.run(main())
"""


def owner_and_mode(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_uid, st.st_mode & 0o777


def searchable_dir() -> Path:
    """A folder of the test's own, as /var/lib/kubelet is: searchable by anyone."""
    work = Path(tempfile.mkdtemp(prefix="gce-own-"))
    work.chmod(0o755)
    return work


@pytest.fixture(name="socket")
async def _socket() -> AsyncIterator[Path]:
    work = searchable_dir()
    peers = SimPeers(parse_scenario(SCENARIO, "owner.yaml"), work, time.time())
    await peers.start()
    await peers.advance(0.0)
    try:
        yield peers.nodes["n0"].kubelet.socket_path
    finally:
        await peers.close()
        shutil.rmtree(work, ignore_errors=True)


async def run_as(uid: int, socket: Path) -> str:
    """LIST as ``uid`` (its own group, no supplementary group) with no capability: UID 0 through setpriv with
    empty bounding and inheritable sets and no new privileges, any other UID by the script's own setresuid;
    the simulated kubelet keeps serving on this loop meanwhile."""
    no_capability = ["setpriv", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]
    prefix = no_capability if uid == 0 else []
    proc = await asyncio.create_subprocess_exec(
        *prefix, sys.executable, "-c", LIST, str(socket), str(uid), cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, err.decode()
    return out.decode().strip()


async def test_socket_and_folder_are_as_the_kubelet_makes_them(socket: Path) -> None:
    assert owner_and_mode(socket) == (0, 0o755) and owner_and_mode(socket.parent) == (0, 0o750)


async def test_root_without_capabilities_lists_as_the_owner(socket: Path) -> None:
    assert await run_as(0, socket) == "listed ['p']"


async def test_the_images_user_is_refused_and_the_client_says_so(socket: Path) -> None:
    out = await run_as(65532, socket)
    assert out.startswith("down pod-resources socket") and "Permission denied" in out, out
