"""The GitHub Actions workflows: actionlint finds nothing, and the release workflow keeps its promises
(tag trigger, version check, multi-arch image with SBOM and provenance, keyless signing, the chart as an
OCI artifact)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO

WORKFLOWS = REPO / ".github" / "workflows"


def load(name: str) -> dict[Any, Any]:
    doc: dict[Any, Any] = yaml.safe_load((WORKFLOWS / name).read_text())
    return doc


def steps(job: dict[str, Any]) -> list[dict[str, Any]]:
    return list(job["steps"])


def uses(job: dict[str, Any], action: str) -> dict[str, Any]:
    (step,) = [s for s in steps(job) if str(s.get("uses", "")).startswith(f"{action}@")]
    return step


def actionlint(*paths: Path) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("actionlint")
    if exe is None:
        pytest.fail("actionlint is missing: it is in the dev extra (pip install -e '.[dev]')")
    return subprocess.run([exe, "-no-color", *map(str, paths)], capture_output=True, text=True, check=False)


def test_actionlint_passes_every_workflow() -> None:
    """actionlint (expressions, job needs, permissions, action inputs, deprecated runtimes) finds nothing."""
    files = sorted(WORKFLOWS.glob("*.yml"))
    assert {f.name for f in files} >= {"test.yml", "release.yml"}
    proc = actionlint(*files)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_actionlint_catches_a_broken_workflow(tmp_path: Path) -> None:
    """The linter really runs: a job that needs a job that does not exist is reported."""
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    text = (WORKFLOWS / "release.yml").read_text().replace("needs: [version, image]", "needs: [version, imagee]")
    assert text != (WORKFLOWS / "release.yml").read_text()
    bad.write_text(text)
    proc = actionlint(bad)
    assert proc.returncode != 0 and "imagee" in proc.stdout


def test_test_workflow_runs_readmes_command() -> None:
    """test.yml runs README's test command verbatim, after the Debian packages .ci/run installs."""
    (job,) = load("test.yml")["jobs"].values()
    runs = [str(s.get("run", "")) for s in steps(job)]
    assert "pip install -q -e '.[dev]' && python -m pytest -q" in [r.strip() for r in runs]
    assert "pip install -q -e '.[dev]' && python -m pytest -q" in (REPO / "README.md").read_text()
    apt = next(r for r in runs if "apt-get install" in r)
    for pkg in ("prometheus", "prometheus-alertmanager", "chromium", "postgresql", "kubernetes-client"):
        assert f" {pkg}" in apt


def test_release_workflow() -> None:
    """release.yml: runs on v* tags; checks the tag against pyproject; builds amd64+arm64 with SBOM and
    provenance; signs by digest with cosign under id-token: write; pushes the chart to oci://.../charts."""
    doc = load("release.yml")
    assert doc[True]["push"]["tags"] == ["v*"]  # YAML 1.1 reads the key `on` as True
    jobs = doc["jobs"]
    check = next(s["run"] for s in steps(jobs["version"]) if s.get("id") == "check")
    assert '"$TAG" != "v$version"' in check and "pyproject.toml" in check
    image = jobs["image"]
    assert image["permissions"]["id-token"] == "write" and image["needs"] == "version"
    build = uses(image, "docker/build-push-action")["with"]
    assert build["platforms"] == "linux/amd64,linux/arm64" and build["push"] is True
    assert build["sbom"] is True and str(build["provenance"]).startswith("mode=")
    uses(image, "docker/setup-qemu-action")
    uses(image, "docker/setup-buildx-action")
    uses(image, "sigstore/cosign-installer")
    sign = next(s for s in steps(image) if "cosign sign" in str(s.get("run", "")))
    assert "steps.build.outputs.digest" in sign["env"]["IMAGE"]
    chart = jobs["chart"]
    push = next(str(s["run"]) for s in steps(chart) if "helm push" in str(s.get("run", "")))
    assert 'oci://$REGISTRY/$owner/charts' in push and doc["env"]["REGISTRY"] == "ghcr.io"
