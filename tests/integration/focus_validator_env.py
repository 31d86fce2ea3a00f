"""The FinOps Foundation's focus-validator in its own Python 3.12 virtualenv (it needs Python >= 3.12; the
product runs on 3.11). Built once per machine under a stable temp path keyed by the validator's version;
the validator itself then runs offline (the FOCUS 1.2 requirements model is bundled)."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

VALIDATOR_VERSION = "2.2.1"
VENV = Path(tempfile.gettempdir()) / f"gpucost-focus-validator-{VALIDATOR_VERSION}"
# pyarrow: the newest needs numpy 2 and the validator pins numpy < 2
REQUIREMENTS = [f"focus-validator=={VALIDATOR_VERSION}", "pyarrow<19"]
CRITERIA = ("USAGE_MEASUREMENT_SUPPORTED,BILLING_BASED_ON_PROVISIONED_RESOURCES_SUPPORTED,"
            "RESOURCE_TYPE_ASSIGNMENT_SUPPORTED,UNIT_PRICING_SUPPORTED,SUB_ACCOUNT_SUPPORTED,TAGGING_SUPPORTED,"
            "REGION_SUPPORTED,MULTIPLE_PRICING_CATEGORIES_SUPPORTED,DATA_GENERATOR_SPLIT_COST_ALLOCATION_SUPPORTED,"
            "COMMITMENT_DISCOUNT_SUPPORTED")


def validator_venv() -> Path:
    """The virtualenv, built if missing; a build that cannot happen (no network, no 3.12) fails the test."""
    marker = VENV / ".complete"
    lock_path = VENV.with_name(VENV.name + ".lock")
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists():
            return VENV
        shutil.rmtree(VENV, ignore_errors=True)
        env = {**os.environ, "PYENV_VERSION": "3.12.1"}  # the pyenv shim needs the version named
        steps = [["python3.12", "-m", "venv", str(VENV)],
                 [str(VENV / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", *REQUIREMENTS]]
        for step in steps:
            try:
                done = subprocess.run(step, env=env, capture_output=True, text=True, timeout=900, check=False)
            except FileNotFoundError as exc:
                pytest.fail(f"cannot build the focus-validator virtualenv: {exc} (Python 3.12 is required)")
            if done.returncode != 0:
                pytest.fail(f"cannot build the focus-validator virtualenv ({' '.join(step[:3])}): "
                            f"{(done.stderr or done.stdout)[-2000:]}")
        marker.write_text(VALIDATOR_VERSION)
    return VENV


@dataclass(frozen=True)
class Outcome:
    """What the validator's JUnit XML says."""

    tests: int
    skipped: int
    failed: dict[str, str]  # rule id -> message


def run_validator(data_file: Path, workdir: Path, *, version: str = "1.2") -> Outcome:
    """Validate offline and parse the JUnit XML (the exit code is 0 even when rules fail)."""
    venv = validator_venv()
    rules = next(venv.glob("lib/python*/site-packages/focus_validator/rules/currency_codes.csv"))
    (workdir / "focus_validator" / "rules").mkdir(parents=True, exist_ok=True)
    shutil.copy(rules, workdir / "focus_validator" / "rules")  # the validator opens it by a relative path
    xml = workdir / "focus.xml"
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "focus_validator.main", "--data-file", str(data_file),
         "--validate-version", version, "--block-download", "--applicability-criteria", CRITERIA,
         "--output-type", "unittest", "--output-destination", str(xml)],
        cwd=workdir, capture_output=True, text=True, timeout=600, check=False)
    assert xml.exists(), f"the validator wrote no report: {done.stderr[-2000:]}"
    root = ET.parse(xml).getroot()
    failed: dict[str, str] = {}
    for case in root.iter("testcase"):
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is not None:
            failed[str(case.get("name", "")).split(" ")[0]] = problem.get("message") or ""
    return Outcome(int(root.get("tests", 0)), int(root.get("skipped", 0)), failed)
