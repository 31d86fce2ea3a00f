"""What both daemons' settings share: where values come from, and the fields every daemon has.

Strongest first: keyword arguments (the command line's flags), ``GPUCOST_<NAME>`` environment variables
in any case, the settings file (``--config-file`` / ``GPUCOST_CONFIG_FILE``), the defaults. No secret
travels in any of them: a setting names the file that holds a token or password (``*_token_file``,
``ledger_password_file``), which is where the chart mounts it, so no ``secrets_dir`` source is read either.
"""

from __future__ import annotations

import difflib
import io
import os
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator, Field, ValidationError, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict
from typing_extensions import override

from exporter.model.durations import parse_duration
from exporter.secrets import secret_file_problem

ENV_PREFIX = "GPUCOST_"
CONFIG_FILE = "config_file"

Duration = Annotated[float, BeforeValidator(parse_duration)]


def _split_list(value: object) -> object:
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return value


CommaList = Annotated[list[str], BeforeValidator(_split_list)]


def _secret_path(path: Path | None) -> Path | None:
    if path is not None and (problem := secret_file_problem(path)):
        raise ValueError(problem)
    return path


#: A file holding a token or password: it must exist, be a readable regular file and hold more than whitespace.
SecretPath = Annotated[Path | None, AfterValidator(_secret_path)]


def url_problem(url: str) -> str:
    """Why ``url`` is no http(s) URL of a host (and a valid port), or "": a URL that cannot parse must stop the
    start, not fail every tick."""
    try:
        parts = urlsplit(url)
        _port = parts.port  # raises on a port that is not a number in 0..65535
    except ValueError as exc:
        return f"{url!r} is not a URL ({exc})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{url!r} is not an http:// or https:// URL with a host"
    return ""


def check_urls(urls: list[str]) -> list[str]:
    """``urls`` when each is an http(s) URL of a host; else a ValueError naming the first that is not."""
    if bad := next((p for p in map(url_problem, urls) if p), ""):
        raise ValueError(bad)
    return urls


class SettingsFileError(ValueError):
    """The settings file cannot be read, is not a mapping of settings, or names one this daemon lacks."""


def _environment(name: str) -> str | None:
    """``GPUCOST_<NAME>`` in any case, as the environment source reads it."""
    wanted = (ENV_PREFIX + name).upper()
    return next((v for k, v in os.environ.items() if k.upper() == wanted), None)


def settings_file(init: dict[str, Any]) -> Path | None:
    """The settings file this start reads: the flag's, else ``GPUCOST_CONFIG_FILE``'s, else none."""
    value = init.get(CONFIG_FILE) or _environment(CONFIG_FILE)
    return Path(value) if value else None


def read_settings_file(path: Path, known: set[str]) -> dict[str, Any]:
    """Settings by name from ``path``: ``GPUCOST_NAME=value`` lines when it ends in ``.env`` (what
    ``sim-cluster`` writes), else a YAML mapping of setting names (``tick: 30s``). A name this daemon
    lacks is refused: a typo must not silently leave a default in place. The parsers load only when a file is
    named: a daemon started from its environment alone does not carry them (about 0.5 MB of the agent's RSS)."""
    import yaml
    from dotenv import dotenv_values

    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsFileError(f"{path}: cannot read ({exc.__class__.__name__})") from None
    values: dict[str, Any]
    if path.suffix == ".env":
        lines = {k: v for k, v in dotenv_values(stream=io.StringIO(text), interpolate=False).items() if v is not None}
        if bad := sorted(k for k in lines if not k.upper().startswith(ENV_PREFIX)):
            raise SettingsFileError(f"{path}: {bad[0]} is not a {ENV_PREFIX}<NAME> variable")
        values = {k[len(ENV_PREFIX):].lower(): v for k, v in lines.items()}
    else:
        try:
            raw = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise SettingsFileError(f"{path}: not YAML ({str(exc).splitlines()[0]})") from None
        if not isinstance(raw, dict | None):
            raise SettingsFileError(f"{path}: expected a mapping of setting names to values")
        values = {str(k): v for k, v in (raw or {}).items()}
    if bad := sorted(k for k in values if k not in known or k == CONFIG_FILE):
        raise SettingsFileError(f"{path}: {bad[0]} is not a setting of this daemon")
    return values


class _FileSource(PydanticBaseSettingsSource):
    """The settings file's values, below the environment's."""

    def __init__(self, settings_cls: type[BaseSettings], values: dict[str, Any]) -> None:
        super().__init__(settings_cls)
        self._values = values

    @override
    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self._values.get(field_name), field_name, False

    @override
    def __call__(self) -> dict[str, Any]:
        return dict(self._values)


class DaemonSettings(BaseSettings):
    """Fields and sources both daemons share; each daemon's own module adds its fields.

    Validators are built on first use (``defer_build``): a process builds only its own daemon's, not
    this base's nor the other daemon's, which keeps the agent's memory within its budget."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, case_sensitive=False, extra="ignore",
                                      validate_default=True, enable_decoding=False, defer_build=True)

    listen: str = Field(description="host:port the HTTP server listens on")
    tick: Duration = Field(default=15.0, description="interval between ticks (e.g. 15s)")
    log_level: str = Field(default="info", description="debug, info, warning or error")
    log_format: str = Field(default="auto", description="json, console, or auto (console on a TTY)")
    max_request_bytes: int = Field(default=1 << 20, ge=1024, description="largest HTTP request accepted")
    tls_cert_file: Path | None = Field(default=None, description="serve HTTPS with this certificate (PEM)")
    tls_key_file: Path | None = Field(default=None, description="private key of tls_cert_file (PEM)")
    config_file: Path | None = Field(
        default=None, description="settings file read at start: a YAML mapping of setting names (tick: 30s), or "
        "GPUCOST_NAME=value lines when it ends in .env; flags and GPUCOST_* variables override it")

    @classmethod
    @override
    def settings_customise_sources(
            cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource) -> tuple[PydanticBaseSettingsSource, ...]:
        """Flags, environment, then the settings file; no implicit .env nor secrets directory."""
        path = settings_file(init_settings())
        values = read_settings_file(path, set(cls.model_fields)) if path else {}
        return init_settings, env_settings, _FileSource(settings_cls, values)

    @field_validator("listen")
    @classmethod
    def _host_port(cls, v: str) -> str:
        _host, sep, port = v.rpartition(":")
        if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
            raise ValueError(f"expected host:port, got {v!r}")
        return v

    @field_validator("tick")
    @classmethod
    def _positive_tick(cls, v: float) -> float:
        if v <= 0:
            raise ValueError("must be > 0")
        return v


def unknown_variables(model: type[DaemonSettings], *, others: Collection[str] = (),
                      environ: Mapping[str, str] | None = None) -> list[str]:
    """One warning per ``GPUCOST_*`` environment variable that names no setting of ``model``: a typo
    (``GPUCOST_TIK``) would otherwise leave the default in place without a word. ``others``: the other daemon's
    settings, named as such (a deployment that shares one environment between both daemons is told, not
    refused)."""
    known = set(model.model_fields)
    out = []
    for key in sorted(os.environ if environ is None else environ):
        if not key.upper().startswith(ENV_PREFIX):
            continue
        name = key[len(ENV_PREFIX):].lower()
        if name in known:
            continue
        if name in others:
            out.append(f"{key} is a setting of the other daemon, not of this one; ignored")
            continue
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
        hint = f" (did you mean {ENV_PREFIX}{close[0].upper()}?)" if close else ""
        out.append(f"{key} is not a setting{hint}; ignored")
    return out


def error_line(model: type[DaemonSettings], exc: ValidationError | SettingsFileError, *, init: dict[str, Any]) -> str:
    """One line naming the setting, its variable, and the settings file when the bad value came from there."""
    if isinstance(exc, SettingsFileError):
        return f"setting {CONFIG_FILE} ({ENV_PREFIX}{CONFIG_FILE.upper()}): {exc}"
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err["loc"])
    where = f"{ENV_PREFIX}{field.upper()}"
    path = settings_file(init)
    if (path is not None and field not in init and _environment(field) is None
            and field in read_settings_file(path, set(model.model_fields))):
        where += f", from {path}"
    return f"setting {field} ({where}): {str(err['msg']).removeprefix('Value error, ')}"
