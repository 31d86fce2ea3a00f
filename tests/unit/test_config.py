"""Settings: flags, else ``GPUCOST_<NAME>`` in any case, else the default; a bad value names its variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.cli import main
from exporter.config import AgentSettings, AggregatorSettings


def test_environment_is_read_and_flags_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUCOST_TICK", "30s")
    monkeypatch.setenv("gpucost_dcgm_url", "http://dcgm:9400/metrics")  # any case, as the kubelet passes it
    monkeypatch.setenv("GPUCOST_RESOURCE_NAMES", "amd.com/gpu, example.com/gpu")
    monkeypatch.setenv("GPUCOST_WATCH_PODS", "true")
    s = AgentSettings()
    assert s.tick == 30.0
    assert s.dcgm_url == "http://dcgm:9400/metrics"
    assert s.resource_names == ["amd.com/gpu", "example.com/gpu"]
    assert s.watch_pods is True
    assert AgentSettings(tick=5.0).tick == 5.0  # a flag (keyword) wins over the environment


def test_unset_environment_gives_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GPUCOST_TICK", "GPUCOST_LEDGER", "GPUCOST_AGENTS"):
        monkeypatch.delenv(name, raising=False)
    s = AggregatorSettings()
    assert (s.tick, str(s.ledger), s.agents) == (15.0, "/var/lib/gpu-cost-exporter/ledger.db", [])


def test_a_bad_environment_value_is_one_line_naming_the_variable(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GPUCOST_TICK", "-3s")
    monkeypatch.setenv("GPUCOST_LEDGER", str(tmp_path / "l.db"))
    assert main(["aggregator"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "GPUCOST_TICK" in err, err


def test_recommendation_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Window 1 h (3600 s), evidence 2 min (120 s), refresh 30 s; unset: 7 d, 24 h, 1 h."""
    assert (AggregatorSettings().recommend_window, AggregatorSettings().recommend_min_evidence,
            AggregatorSettings().recommend_refresh) == (604800.0, 86400.0, 3600.0)
    monkeypatch.setenv("GPUCOST_RECOMMEND_WINDOW", "1h")
    monkeypatch.setenv("GPUCOST_RECOMMEND_MIN_EVIDENCE", "2m")
    monkeypatch.setenv("GPUCOST_RECOMMEND_REFRESH", "30s")
    s = AggregatorSettings()
    assert (s.recommend_window, s.recommend_min_evidence, s.recommend_refresh) == (3600.0, 120.0, 30.0)
