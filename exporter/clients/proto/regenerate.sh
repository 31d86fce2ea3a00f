#!/usr/bin/env bash
# Regenerates the committed gRPC stubs from podresources_v1.proto (needs the dev extra: grpcio-tools).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
cd "$root"
python -m grpc_tools.protoc -I. --python_out=. --grpc_python_out=. \
  exporter/clients/proto/podresources_v1.proto
