"""Release metadata agrees with itself: pyproject.toml's version is the chart's appVersion, the image's
version label default and a CHANGELOG section; the chart's own version is semver."""

from __future__ import annotations

import re
import tomllib

import yaml

from tests.conftest import REPO

#: semver 2.0.0 (the pattern semver.org publishes), which Helm requires of a chart's version.
SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)"
                    r"(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$")


def package_version() -> str:
    return str(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"])


def chart() -> dict[str, object]:
    doc: dict[str, object] = yaml.safe_load((REPO / "helm" / "gpu-cost-exporter" / "Chart.yaml").read_text())
    return doc


def test_chart_version_is_semver() -> None:
    """Chart.yaml's version is semver (Helm refuses anything else at `helm package`/`helm push`)."""
    assert SEMVER.match(str(chart()["version"])), chart()["version"]
    assert not SEMVER.match("0.1"), "the pattern must refuse a two-part version"


def test_chart_app_version_is_the_package_version() -> None:
    """appVersion is the package's version, as a string (YAML would read 0.10 as a float)."""
    app = chart()["appVersion"]
    assert isinstance(app, str) and app == package_version()


def test_image_version_label_default_is_the_package_version() -> None:
    """The Dockerfile's VERSION default (the org.opencontainers.image.version label of a plain
    `docker build .`) is the package's version; scripts/build-image and the release pass it explicitly."""
    text = (REPO / "Dockerfile").read_text()
    assert re.search(r"^ARG VERSION=(\S+)$", text, re.M)[1] == package_version()  # type: ignore[index]
    assert 'org.opencontainers.image.version="${VERSION}"' in text


def test_every_from_takes_the_base_argument() -> None:
    """Each FROM is `FROM ${BASE}` with `ARG BASE` declared before it, so any Debian bookworm base works."""
    lines = (REPO / "Dockerfile").read_text().splitlines()
    froms = [i for i, line in enumerate(lines) if line.startswith("FROM ")]
    assert froms and all(lines[i].startswith("FROM ${BASE}") for i in froms)
    for i in froms:
        assert any(line.startswith("ARG BASE=") for line in lines[:i])


def test_changelog_has_unreleased_and_the_current_version() -> None:
    """CHANGELOG.md (Keep a Changelog) has an Unreleased section and one for the package's version."""
    text = (REPO / "CHANGELOG.md").read_text()
    assert re.search(r"^## \[Unreleased\]$", text, re.M)
    assert re.search(rf"^## \[{re.escape(package_version())}\] - \d{{4}}-\d{{2}}-\d{{2}}$", text, re.M)
