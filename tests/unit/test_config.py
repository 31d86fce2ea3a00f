"""Settings: flags, else ``GPUCOST_<NAME>`` in any case, else the settings file, else the default; a bad value
names its variable (and the file it came from)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from exporter.cli import _settings, build_parser, main
from exporter.cli_common import UsageError
from exporter.config import AgentSettings, AggregatorSettings
from tests.conftest import REPO


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


def _agent_flags(*flags: str) -> AgentSettings:
    """Settings as ``gpu-cost-exporter agent FLAGS`` builds them."""
    return _settings(AgentSettings, build_parser().parse_args(["agent", *flags]))


def test_precedence_is_flags_then_environment_then_file_then_defaults(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """tick: flag 5s over env 30s over file 40s; dcgm_url: env over file; log_level: the file's; listen: default."""
    cfg = tmp_path / "agent.yaml"
    cfg.write_text("tick: 40s\ndcgm_url: http://file:9400/metrics\nlog_level: debug\n"
                   "resource_names: [amd.com/gpu]\nwatch_pods: true\n")
    monkeypatch.setenv("GPUCOST_TICK", "30s")
    monkeypatch.setenv("GPUCOST_DCGM_URL", "http://env:9400/metrics")
    s = _agent_flags("--config", str(cfg), "--tick", "5s")
    assert (s.tick, s.dcgm_url, s.log_level, s.listen) == (5.0, "http://env:9400/metrics", "debug", "0.0.0.0:9500")
    assert (s.resource_names, s.watch_pods, s.config_file) == (["amd.com/gpu"], True, cfg)
    assert _agent_flags("--config-file", str(cfg)).tick == 30.0  # no flag: the environment's
    monkeypatch.delenv("GPUCOST_TICK")
    monkeypatch.delenv("GPUCOST_DCGM_URL")
    assert (_agent_flags("--config", str(cfg)).tick, _agent_flags().tick) == (40.0, 15.0)  # the file's; the default


def test_the_file_is_named_by_the_environment_too(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """GPUCOST_CONFIG_FILE picks the file when no flag does; a flag's file wins over it."""
    env_file, flag_file = tmp_path / "env.yaml", tmp_path / "flag.yaml"
    env_file.write_text("tick: 20s\n")
    flag_file.write_text("tick: 25s\n")
    monkeypatch.setenv("GPUCOST_CONFIG_FILE", str(env_file))
    assert AgentSettings().tick == 20.0
    assert _agent_flags("--config", str(flag_file)).tick == 25.0


def test_a_dotenv_file_as_sim_cluster_writes_it(tmp_path: Path) -> None:
    """``.env`` files are GPUCOST_NAME=value lines (any case), read as the environment would be."""
    cfg = tmp_path / "n.env"
    cfg.write_text("GPUCOST_NODE_NAME=n\ngpucost_tick=45s\nGPUCOST_RESOURCE_NAMES=amd.com/gpu, example.com/gpu\n"
                   "GPUCOST_STATE_DIR=/tmp/state-${HOME}\n")
    s = _agent_flags("--config", str(cfg))
    assert (s.node_name, s.tick, s.resource_names) == ("n", 45.0, ["amd.com/gpu", "example.com/gpu"])
    assert s.state_dir == Path("/tmp/state-${HOME}")  # taken as written: nothing interpolated


def test_aggregator_settings_from_a_yaml_file(tmp_path: Path) -> None:
    """Native YAML values (a mapping of budgets, a list of agents) as well as the environment's strings."""
    cfg = tmp_path / "aggregator.yaml"
    cfg.write_text("budgets: {team-a: 1500, team-b: '20.5'}\nagents: [http://a:9500, http://b:9500]\n"
                   "cluster: prod\nrecommend_window: 1h\n")
    s = AggregatorSettings(config_file=cfg)
    assert (s.budgets, s.agents) == ({"team-a": 1500.0, "team-b": 20.5}, ["http://a:9500", "http://b:9500"])
    assert (s.cluster_name(), s.recommend_window) == ("prod", 3600.0)


def _refused(model: type[AgentSettings] | type[AggregatorSettings], *flags: str) -> str:
    """The one-line usage error the daemon's command stops with at start, from settings alone (no daemon runs)."""
    command = "agent" if model is AgentSettings else "aggregator"
    with pytest.raises(UsageError) as info:
        _settings(model, build_parser().parse_args([command, *flags]))
    assert "\n" not in str(info.value)
    return str(info.value)


def test_a_bad_value_in_the_file_is_one_line_naming_the_setting_and_the_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Exit 2 at start, one line with the setting, its variable and the file, nothing written; a bad value
    from the environment does not blame the file."""
    cfg, bad_pricing = tmp_path / "aggregator.yaml", tmp_path / "pricing.yaml"
    cfg.write_text(f"ledger: {tmp_path / 'l.db'}\ntick: 0s\n")
    bad_pricing.write_text("default_price: -1\n")  # were the file's tick let through, this would stop it instead
    assert main(["aggregator", "--config", str(cfg), "--pricing-file", str(bad_pricing)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"setting tick (GPUCOST_TICK, from {cfg}): must be > 0" in err, err
    assert not (tmp_path / "l.db").exists()
    cfg.write_text("tick: 10s\nbudgets: {team-a: -5}\n")
    assert f"setting budgets (GPUCOST_BUDGETS, from {cfg}):" in _refused(AggregatorSettings, "--config", str(cfg))
    monkeypatch.setenv("GPUCOST_BUDGETS", "team-a=0")
    err = _refused(AggregatorSettings, "--config", str(cfg))
    assert "setting budgets (GPUCOST_BUDGETS):" in err and str(cfg) not in err, err


def test_a_default_refused_because_of_the_file_blames_the_setting_not_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The file's 2 shards make the hostname's ordinal 4 an invalid default shard_index: the line names
    shard_index, which the file does not set, without pointing at the file."""
    monkeypatch.setattr("socket.gethostname", lambda: "gpu-cost-exporter-aggregator-4")  # the seam, as in test_shards
    cfg = tmp_path / "aggregator.yaml"
    cfg.write_text("ledger: postgresql://gpucost@db:5432/gpucost\ncluster: prod\nshards: 2\n")
    err = _refused(AggregatorSettings, "--config", str(cfg))
    assert err.startswith("setting shard_index (GPUCOST_SHARD_INDEX): ") and str(cfg) not in err, err


@pytest.mark.parametrize(("text", "says"), [
    ("tik: 30s\n", "tik is not a setting of this daemon"),
    ("ledger: /tmp/l.db\n", "ledger is not a setting of this daemon"),  # the aggregator's, not the agent's
    ("config_file: other.yaml\n", "config_file is not a setting of this daemon"),
    ("- tick\n", "expected a mapping of setting names to values"),
    ("tick: [30s\n", "not YAML"),
    (None, "cannot read"),
])
def test_an_unusable_file_is_one_line_naming_it(text: str | None, says: str, tmp_path: Path) -> None:
    """A typo, another daemon's setting, broken YAML or a missing file stops the start: one line naming
    config_file, the file and what is wrong with it."""
    cfg = tmp_path / "agent.yaml"
    if text is not None:
        cfg.write_text(text)
    err = _refused(AgentSettings, "--node-name", "n", "--config", str(cfg))
    assert f"setting config_file (GPUCOST_CONFIG_FILE): {cfg}: {says}" in err, err


def test_a_dotenv_line_without_the_prefix_is_refused(tmp_path: Path) -> None:
    cfg = tmp_path / "n.env"
    cfg.write_text("GPUCOST_NODE_NAME=n\nTICK=30s\n")
    assert f"{cfg}: TICK is not a GPUCOST_<NAME> variable" in _refused(AgentSettings, "--config", str(cfg))


def test_help_documents_the_settings_file(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["agent", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--config-file FILE, --config FILE settings file read at start: a YAML mapping" in out, out
    assert "[env GPUCOST_CONFIG_FILE, default None]" in out


@pytest.mark.parametrize("model", [AgentSettings, AggregatorSettings])
def test_secrets_are_files_never_values(model: type[AgentSettings] | type[AggregatorSettings]) -> None:
    """A token or password is never itself a setting (it would sit in the environment or a file of
    settings): the setting names the file the chart mounts it as."""
    secret = [n for n in model.model_fields if any(w in n for w in ("token", "password", "secret", "key"))]
    assert secret, model
    for name in secret:
        assert name.endswith("_file") and model.model_fields[name].annotation == Path | None, name


def test_settings_without_a_file_load_no_file_parser() -> None:
    """The YAML parser loads only when a settings file is named: the agent, started from its environment,
    does not carry it (about 0.9 MB of its RSS in bench/run.py --only agent)."""
    code = ("import sys\nfrom exporter.config import AgentSettings, AggregatorSettings\n"
            "AgentSettings(node_name='n'), AggregatorSettings()\nprint('yaml' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("GPUCOST_")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO, env=env)
    assert proc.stdout.strip() == "False"
