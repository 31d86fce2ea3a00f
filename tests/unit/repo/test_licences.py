"""The licence gate (scripts/check_licences.py) over the installed environment: every runtime dependency of
the package is under an allowed licence, read from its own metadata; anything else fails."""

from __future__ import annotations

import importlib.metadata as md
import subprocess
import sys
from pathlib import Path

import pytest

from scripts import check_licences
from tests.conftest import REPO


def dist(tmp_path: Path, name: str, *fields: str) -> md.Distribution:
    """A real installed-distribution record (a .dist-info directory) with these METADATA fields."""
    info = tmp_path / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("\n".join(["Metadata-Version: 2.4", f"Name: {name}", "Version: 1.0", *fields])
                                   + "\n")
    return md.PathDistribution(info)


def test_every_runtime_dependency_is_allowed() -> None:
    """The package and everything it requires at run time, as installed here (whatever versions pip picked on
    this machine: README's command installs the newest within pyproject.toml's ranges), pass. The pinned set
    itself is checked where it is installed: scripts/constraints-smoke runs the gate in a virtualenv built from
    constraints.txt (``.ci/run``)."""
    verdicts = [check_licences.judge(d) for d in check_licences.closure("gpu-cost-exporter")]
    assert [v for v in verdicts if not v.allowed] == []
    assert "check_licences.py" in (REPO / "scripts" / "constraints-smoke").read_text()
    assert "scripts/constraints-smoke" in (REPO / ".ci" / "run").read_text()


@pytest.mark.parametrize("fields", [
    ("License-Expression: MIT-0",),  # cffi 2.x
    ("Classifier: License :: OSI Approved :: MIT No Attribution License (MIT-0)",),
    ("License-Expression: 0BSD",),
    ("License: Zlib/libpng License",),
    ("License-Expression: Unlicense",),
    ("License-Expression: BSL-1.0",),
])
def test_the_permissive_family_is_allowed_not_just_todays_ids(tmp_path: Path, fields: tuple[str, ...]) -> None:
    """A dependency's next release under a sibling permissive licence passes on any machine pip installs it on."""
    assert check_licences.judge(dist(tmp_path, "permissive", *fields)).allowed


def test_script_exit_code_over_the_environment() -> None:
    """The command line checks the closure and exits 0, one line per distribution."""
    proc = subprocess.run([sys.executable, "scripts/check_licences.py", "--closure", "gpu-cost-exporter"], cwd=REPO,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ok  grpcio==" in proc.stdout and "all allowed" in proc.stdout


def test_licence_sources_in_order(tmp_path: Path) -> None:
    """License-Expression first; else a known License string; else the classifiers (several = a choice)."""
    expr = dist(tmp_path, "a", "License-Expression: MIT OR GPL-3.0-only", "License: GPL")
    assert check_licences.judge(expr).allowed and check_licences.licence_of(expr) == "MIT OR GPL-3.0-only"
    text = dist(tmp_path, "b", "License: Apache 2.0")
    assert check_licences.licence_of(text) == "Apache-2.0"
    dual = dist(tmp_path, "c", "License: Dual License", "Classifier: License :: OSI Approved :: BSD License",
                "Classifier: License :: OSI Approved :: Apache Software License")
    assert check_licences.licence_of(dual) == "BSD OR Apache-2.0" and check_licences.judge(dual).allowed


def test_disallowed_and_unknown_licences_fail(tmp_path: Path) -> None:
    """GPL, an AND with a GPL term, and no licence at all are refused; an exception must be listed by name."""
    gpl = dist(tmp_path, "gpl", "Classifier: License :: OSI Approved :: GNU General Public License v3 (GPLv3)")
    both = dist(tmp_path, "both", "License-Expression: MIT AND GPL-2.0-only")
    none = dist(tmp_path, "none")
    assert [check_licences.judge(d).allowed for d in (gpl, both, none)] == [False, False, False]
    assert check_licences.judge(none).licence == "(none stated)"
