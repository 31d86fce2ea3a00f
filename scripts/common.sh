# Shared by build-image, constraints-smoke, image-smoke and update-constraints (sourced, not run): the
# one way wheels are built from constraints.txt and a virtualenv is made from them, so the dependency
# set CI proves with real peers is byte for byte the one the image ships.
# shellcheck shell=bash

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

# quiet_pip: pip's stderr without the notes this host's extra (file) index locations produce per package.
quiet_pip() { "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2); }

log() { printf '%s %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

# build_wheels OUT: wheels of the package and every runtime dependency, at constraints.txt's versions.
# The dependencies' wheels are kept while constraints.txt and pyproject.toml are unchanged (OUT/.key), so a
# second caller in the same checkout (constraints-smoke, then image-smoke) only rebuilds the package's own.
build_wheels() {
  local out="$1" key
  key="$(cat "$REPO_ROOT/constraints.txt" "$REPO_ROOT/pyproject.toml" | sha256sum | cut -c1-16)"
  if [ -f "$out/.key" ] && [ "$(cat "$out/.key")" = "$key" ]; then
    rm -f "$out"/gpu_cost_exporter-*.whl
    quiet_pip "$PYTHON" -m pip wheel -q --no-deps --wheel-dir "$out" "$REPO_ROOT"
  else
    rm -rf "$out" && mkdir -p "$out"
    quiet_pip "$PYTHON" -m pip wheel -q --wheel-dir "$out" -c "$REPO_ROOT/constraints.txt" "$REPO_ROOT"
    echo "$key" > "$out/.key"
  fi
  # (an in-tree build leaves build/lib, build/bdist.* and *.egg-info behind; git ignores them)
}

# make_venv DIR WHEELS: a fresh virtualenv with the package installed from WHEELS only (no index), and
# pip/setuptools removed so the environment holds exactly the runtime set (what the SBOM lists).
make_venv() {
  local dir="$1" wheels="$2"
  rm -rf "$dir"
  "$PYTHON" -m venv "$dir"
  quiet_pip "$dir/bin/pip" install -q --no-index --find-links "$wheels" gpu-cost-exporter
  "$dir/bin/pip" uninstall -q -y pip setuptools
}

# pick_builder: $BUILDER when set; else "docker" when a Docker daemon answers, else "buildah" (a docker
# binary alone is not enough).
pick_builder() {
  if [ -n "${BUILDER:-}" ]; then
    echo "$BUILDER"
  elif command -v docker >/dev/null && timeout 20 docker info >/dev/null 2>&1; then
    echo docker
  elif command -v buildah >/dev/null; then
    echo buildah
  else
    echo "neither a working Docker daemon nor buildah (apt-get install buildah)" >&2
    return 1
  fi
}

# buildah with this machine's settings: vfs storage unless STORAGE_DRIVER says otherwise.
bah() { buildah --storage-driver "${STORAGE_DRIVER:-vfs}" "$@"; }

# version: the package version, read from pyproject.toml (the one place it lives).
project_version() {
  "$PYTHON" -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["project"]["version"])' \
    "$REPO_ROOT/pyproject.toml"
}

# sbom_tools DIR: a virtualenv of its own holding the SBOM generator, so it is never part of what it lists.
sbom_tools() {
  local dir="$1"
  if [ ! -x "$dir/bin/cyclonedx-py" ]; then
    rm -rf "$dir"
    "$PYTHON" -m venv "$dir"
    quiet_pip "$dir/bin/pip" install -q "cyclonedx-bom==7.5.0"
  fi
}
