"""What the export writes, byte for byte where it matters: nulls in the raw CSV text, Parquet on stdout, the
exit 2 of a Parquet export without pyarrow, and the allocation method's documentation in the metadata."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa  # in the dev extra: the Parquet path is tested, never skipped
import pyarrow.parquet as pq
import pytest

from exporter.aggregator.focus.rows import METHOD_DOC, METHOD_ID
from tests.unit.aggregator.focus.focus_helpers import CapacityRow, UsageRow, write_ledger
from tests.unit.aggregator.focus.test_focus_golden import HOUR, REPO, run_cli

WINDOW = ("--since", "2026-11-03T00:00:00Z", "--until", "2026-11-04T00:00:00Z", "--cluster", "prod-eu1")
QUOTED_EMPTY = re.compile(r'(?:^|,)""(?=,|$)')  # a field that is exactly "" (inside JSON, "" is an escaped quote)
FIELD = re.compile(r'(?:^|(?<=,))("(?:[^"]|"")*"|[^,"]*)(?=,|$)')  # one raw field, quotes kept


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    """The worked example: a pod's 2 GPU-h (8.00) and the unallocated 6 GPU-h (24.00) on gpu-node-07."""
    path = tmp_path / "ledger.db"
    write_ledger(path, [UsageRow(hour=HOUR, node="gpu-node-07", namespace="ml-team", pod="trainer-7f9c",
                                 allocated_s=7200.0, used_s=4320.0, idle_s=2880.0, cost=8.0, idle_cost=3.2)],
                 [CapacityRow(hour=HOUR, node="gpu-node-07", seconds=21600.0, cost=24.0)])
    return path


def test_nulls_are_empty_unquoted_fields_in_the_raw_csv(ledger: Path) -> None:
    """FOCUS null handling: a null is an empty unquoted field, never "" nor a placeholder."""
    done = run_cli("export", "--ledger", str(ledger), "--format", "focus-csv", *WINDOW)
    assert done.returncode == 0, done.stderr
    header, pod, free = done.stdout.splitlines()
    for line in (header, pod, free):
        assert not QUOTED_EMPTY.search(line), line
        assert not re.search(r"(?:^|,)(?:None|null|NULL|N/A)(?=,|$)", line), line
    names = header.split(",")
    pod_fields, free_fields = (FIELD.findall(line) for line in (pod, free))
    assert len(pod_fields) == len(free_fields) == len(names)
    assert pod_fields[names.index("ChargeClass")] == free_fields[names.index("ChargeClass")] == ""  # null on both
    for column in ("AllocatedResourceId", "AllocatedResourceName", "AllocatedTags", "x_Namespace"):
        assert free_fields[names.index(column)] == "" != pod_fields[names.index(column)], column
    assert pod_fields[names.index("AllocatedTags")].startswith('"{""gpu-cost-exporter/namespace"":""ml-team""')


def test_parquet_on_stdout_is_the_file_export(ledger: Path, tmp_path: Path) -> None:
    """``--output -`` writes the same Parquet table to stdout (binary) and no metadata file."""
    out = tmp_path / "focus.parquet"
    assert run_cli("export", "--ledger", str(ledger), "--format", "focus-parquet", *WINDOW,
                   "--output", str(out)).returncode == 0
    done = subprocess.run([sys.executable, "-m", "exporter", "export", "--ledger", str(ledger), "--format",
                           "focus-parquet", *WINDOW, "--output", "-"], cwd=REPO, capture_output=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout[:4] == b"PAR1" and done.stdout[-4:] == b"PAR1"
    streamed = pq.read_table(pa.BufferReader(done.stdout))
    assert streamed.num_rows == 2 and streamed.equals(pq.read_table(out))
    assert not (REPO / "-.metadata.json").exists()


def test_metadata_documents_the_allocation_method(ledger: Path, tmp_path: Path) -> None:
    """FOCUS: the data generator documents each AllocatedMethodId; the metadata carries that documentation."""
    out = tmp_path / "focus.csv"
    assert run_cli("export", "--ledger", str(ledger), "--format", "focus-csv", *WINDOW,
                   "--output", str(out)).returncode == 0
    meta = json.loads((tmp_path / "focus.csv.metadata.json").read_text())
    assert meta["AllocationMethods"] == [{"AllocatedMethodId": METHOD_ID, "Documentation": METHOD_DOC}]
    assert METHOD_DOC.startswith("Each row splits one origin charge") and "AllocatedRatio" in METHOD_DOC
