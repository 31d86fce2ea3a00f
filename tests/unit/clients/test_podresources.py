"""The committed kubelet pod-resources gRPC stubs are what the .proto generates today."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REPO


def test_generated_stubs_are_current(tmp_path: Path) -> None:
    """The committed gRPC stubs are what regenerate.sh produces from the .proto today."""
    pytest.importorskip("grpc_tools")
    from grpc_tools import protoc

    rc = protoc.main(["protoc", f"-I{REPO}", f"--python_out={tmp_path}", f"--grpc_python_out={tmp_path}",
                      str(REPO / "exporter/clients/proto/podresources_v1.proto")])
    assert rc == 0
    def essence(text: str) -> str:
        """What the .proto determines: the serialized descriptor and the stubs, minus tool-version stamps."""
        descriptor = re.findall(r"AddSerializedFile\((b'.*?')\)", text)
        lines = [ln for ln in text.splitlines()
                 if "Version" not in ln and "VERSION" not in ln and not re.match(r"\s+_runtime_version|\s+\d+,", ln)]
        return "\n".join(descriptor) + "\n".join(lines)

    for name in ("podresources_v1_pb2.py", "podresources_v1_pb2_grpc.py"):
        fresh = (tmp_path / "exporter/clients/proto" / name).read_text()
        committed = (REPO / "exporter/clients/proto" / name).read_text()
        assert essence(fresh) == essence(committed), f"{name} is stale: run regenerate.sh"
