"""The pages a newcomer reads first say what the product shows: every status-page section described (and
nothing described the page does not show), the status picture made by the script that renders the demo, the
home page's architecture picture narrow enough for the site's column, every FOCUS column compared with its
1.3 definition."""

from __future__ import annotations

import re
import struct

from exporter.aggregator.focus.columns import FOCUS_COLUMNS
from tests.conftest import REPO

DOCS = REPO / "docs"
WEB = REPO / "exporter" / "aggregator" / "web"
#: The widest code line the site's content column shows without a scroll bar (Material theme, default font).
SITE_CODE_COLUMNS = 80


def page_sections() -> set[str]:
    """Every ``<h2>`` the status page's modules write."""
    return {m.group(1) for p in WEB.glob("status*.py") for m in re.finditer(r"<h2>([^<{]+)</h2>", p.read_text())}


def test_every_status_page_section_is_described_and_nothing_else() -> None:
    documented = set(re.findall(r"^## (.+)$", (DOCS / "status-page.md").read_text(), re.M))
    assert page_sections() == documented


def test_the_status_pictures_are_the_scripts() -> None:
    """README and the status-page doc show docs/status-page.png, which names the script that makes it; the picture
    is a PNG 1280 pixels wide (the script's full-page render), not a hand-cropped window."""
    assert "![status page of the demo cluster](docs/status-page.png)" in (REPO / "README.md").read_text()
    doc = (DOCS / "status-page.md").read_text()
    assert "![status page of the demo cluster](status-page.png)" in doc and "scripts.status_page_shot" in doc
    head = (DOCS / "status-page.png").read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", head[16:24])
    assert width == 1280 and height > 1500, (width, height)


def test_the_home_page_architecture_picture_fits_the_sites_column() -> None:
    text = (DOCS / "index.md").read_text()
    blocks = re.findall(r"^```\n(.*?)^```", text, re.M | re.S)
    wide = [line for block in blocks for line in block.splitlines() if len(line) > SITE_CODE_COLUMNS]
    assert blocks and wide == []


def test_every_focus_column_is_compared_with_its_definition() -> None:
    """docs/focus.md's comparison table names every FOCUS column the export writes, in its first cell, and says
    for each whether it agrees."""
    text = (DOCS / "focus.md").read_text()
    table = text.split("## Against the FOCUS 1.3 definitions", 1)[1].split("\n## ", 1)[0]
    rows = [r for r in table.splitlines() if r.startswith("| `")]
    named = {n for r in rows for n in re.findall(r"`([A-Za-z]+)`", r.split(" | ", 1)[0])}
    assert {c.name for c in FOCUS_COLUMNS if not c.name.startswith("x_")} == named
    assert all(r.rstrip(" |").rsplit("| ", 1)[1].startswith(("yes", "partly")) for r in rows)
