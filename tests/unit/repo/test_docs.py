"""The documentation: the README stays a front door, the site builds strictly, generated reference pages are
current, and every alert's runbook_url opens its runbook page on the site."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO
from tools import gen_docs

DOCS = REPO / "docs"
README_COMMANDS = [
    "```bash",
    "pip install . && gpu-cost-exporter demo            "
    "# install, then run the whole product on a simulated GPU cluster",
    "pip install -q -e '.[dev]' && python -m pytest -q   # install the dev extra and run the whole test suite",
    "```",
]
# Every section the README had when it was the whole manual; each is now a heading of a page of the site.
MANUAL_SECTIONS = [
    "What `demo` shows", "Architecture", "Accounting definitions", "Configuration", "Metrics", "FinOps / FOCUS",
    "Recommendations", "Budgets and forecast", "Status page", "Security and operations", "PostgreSQL ledger",
    "Try the daemons by hand", "Deploy (Helm)", "Alerts, dashboards, KEDA", "Scale", "Benchmarks", "Development",
    "Where a test goes", "Running tests", "Fixtures",
]


def _site_url() -> str:
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    url = config["site_url"]
    assert isinstance(url, str) and url.endswith("/")
    return url


def test_readme_is_a_front_door_that_starts_with_the_two_commands() -> None:
    """At most 250 lines; right after the title, the install-and-demo and the CI test command, byte for byte."""
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 250, len(lines)
    assert lines[0].startswith("# ")
    assert lines[1] == ""
    assert lines[2:6] == README_COMMANDS


def test_ci_runs_the_readme_test_command() -> None:
    """.ci/run's last command is README's second command, verbatim."""
    ci = (REPO / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == README_COMMANDS[2].split("   #")[0]


def test_every_section_of_the_old_manual_is_a_heading_of_the_site() -> None:
    """Nothing the README used to explain was dropped when it moved to the site."""
    headings = {m.group(1).strip() for page in DOCS.rglob("*.md")
                for m in re.finditer(r"^#{1,4} (.+)$", page.read_text(), flags=re.MULTILINE)}
    missing = [s for s in MANUAL_SECTIONS if s not in headings]
    assert not missing, missing


@pytest.mark.parametrize("page", gen_docs.pages(), ids=lambda p: p.path.name)
def test_generated_reference_pages_are_current(page: gen_docs.Page) -> None:
    """docs/reference/ equals what tools/gen_docs.py writes from the settings models and the chart now."""
    committed = page.path.read_text() if page.path.is_file() else ""
    assert committed == page.text, f"stale {page.path.relative_to(REPO)}: run python tools/gen_docs.py"


def test_settings_reference_lists_every_field_of_both_models() -> None:
    """Each settings field is a row under its daemon, as GPUCOST_<FIELD> with its flag."""
    from exporter.config import AgentSettings, AggregatorSettings

    text = (DOCS / "reference" / "settings.md").read_text()
    agent, _, aggregator = text.partition("## Aggregator")
    for model, section in ((AgentSettings, agent), (AggregatorSettings, aggregator)):
        for name in model.model_fields:
            assert f"| `GPUCOST_{name.upper()}`<br>`--{name.replace('_', '-')}` |" in section, name


def test_values_reference_lists_every_key_of_the_schema() -> None:
    """Each key of values.schema.json, nested ones by their dotted path, is a row of the values page."""
    import json

    schema = json.loads((REPO / "helm" / "gpu-cost-exporter" / "values.schema.json").read_text())
    text = (DOCS / "reference" / "helm-values.md").read_text()
    rows = set(re.findall(r"^\| `([\w.]+)` \|", text, flags=re.MULTILINE))

    def keys(node: dict[str, Any], prefix: str) -> set[str]:
        if "$ref" in node:  # "#/definitions/<name>": a shared shape (label selectors)
            node = schema["definitions"][node["$ref"].rpartition("/")[2]]
        out: set[str] = set()
        for name, child in node.get("properties", {}).items():
            out |= {prefix + name} | keys(child, prefix + name + ".")
        return out

    expected = keys(schema, "")
    assert "alerts.thresholds.runbookBaseUrl" in expected
    assert rows == expected


def test_every_alert_has_a_runbook_page_at_its_runbook_url() -> None:
    """runbook_url = site_url + runbooks/<page>/, the page exists and is titled with the alert, and the chart's
    default runbookBaseUrl is the same base; no runbook page is left without its alert."""
    site = _site_url()
    rules = yaml.safe_load((REPO / "alerts" / "gpu-cost-exporter.rules.yaml").read_text())
    alerts = {r["alert"]: r["annotations"]["runbook_url"] for g in rules["groups"] for r in g["rules"] if "alert" in r}
    assert len(alerts) == 12
    pages = set()
    for alert, url in alerts.items():
        assert url.startswith(site + "runbooks/") and url.endswith("/"), (alert, url)
        page = DOCS / "runbooks" / f"{url.removeprefix(site + 'runbooks/').rstrip('/')}.md"
        assert page.is_file(), (alert, url)
        assert page.read_text().splitlines()[0] == f"# {alert}", page
        pages.add(page.name)
    assert {p.name for p in (DOCS / "runbooks").glob("*.md")} - pages == {"index.md"}
    values = yaml.safe_load((REPO / "helm" / "gpu-cost-exporter" / "values.yaml").read_text())
    assert values["alerts"]["thresholds"]["runbookBaseUrl"] == site + "runbooks"


@pytest.mark.slow
def test_mkdocs_build_strict(tmp_path: Path) -> None:
    """`mkdocs build --strict` passes (a broken link, anchor or a page missing from the nav fails it), and every
    runbook is served where its alert's runbook_url points."""
    pytest.importorskip("mkdocs", reason="mkdocs not installed (dev extra)")
    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=REPO, capture_output=True, text=True, check=False,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "gpu-cost-exporter" in (site / "index.html").read_text()
    for page in (DOCS / "runbooks").glob("gpu-*.md"):
        assert (site / "runbooks" / page.stem / "index.html").is_file(), page
    assert (site / "keda" / "scaledobject-prometheus.yaml").is_file()
