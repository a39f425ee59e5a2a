"""Settings from the environment (pydantic-settings): OPTSERVE_<SECTION>__<FIELD> overrides the YAML file,
which overrides the defaults; a bad value names its field and variable; the auth token is a secret that
`optserve config show` never prints."""

from __future__ import annotations

import json

import pytest
import yaml

from optserve.cli import main
from optserve.clients.python.channel import ChannelSettings
from optserve.config import (
    Settings,
    SettingsError,
    load_settings,
    load_settings_with_sources,
    replica_config,
)
from optserve.serve.edges.access import check_token
from optserve.serve.errors import ServiceError

TOKEN = "s3cret-token-5e1d"


@pytest.fixture(autouse=True)
def _no_outside_settings(monkeypatch):
    """The tests' environment holds no optserve settings but the ones each test sets."""
    import os

    for name in list(os.environ):
        if name.upper().startswith("OPTSERVE_"):
            monkeypatch.delenv(name)


@pytest.fixture
def config_file(tmp_path):
    path = tmp_path / "optserve.yaml"
    path.write_text(
        yaml.safe_dump({"serve": {"http_port": 8100, "host": "0.0.0.0"}, "compiler": {"workers": 3}})
    )
    return path


def test_an_environment_variable_overrides_one_nested_field_of_the_file(config_file, monkeypatch):
    monkeypatch.setenv("OPTSERVE_SERVE__HTTP_PORT", "8200")
    loaded = load_settings_with_sources(config_file)
    assert loaded.settings.serve.http_port == 8200
    assert loaded.settings.serve.host == "0.0.0.0"  # the rest of the file's section stays
    assert loaded.sources["serve.http_port"] == "env"
    assert loaded.sources["serve.host"] == "file"
    assert loaded.sources["serve.grpc_port"] == "default"


def test_the_yaml_file_named_by_optserve_config_overrides_the_defaults(config_file, monkeypatch):
    monkeypatch.setenv("OPTSERVE_CONFIG", str(config_file))
    settings = load_settings()
    assert (settings.serve.http_port, settings.compiler.workers) == (8100, 3)
    assert settings.serve.grpc_port == Settings().serve.grpc_port


def test_null_in_the_environment_sets_an_optional_field_to_none(monkeypatch):
    monkeypatch.setenv("OPTSERVE_COMPILER__WORKER_MEMORY_MB", "null")
    assert load_settings().compiler.worker_memory_mb is None


def test_a_bad_environment_value_fails_naming_the_field_and_the_variable(monkeypatch):
    monkeypatch.setenv("OPTSERVE_SERVE__HTTP_PORT", "eighty")
    with pytest.raises(SettingsError, match=r"serve\.http_port \(from \$OPTSERVE_SERVE__HTTP_PORT\)"):
        load_settings()


def test_a_misspelt_environment_field_is_refused_not_ignored(monkeypatch):
    monkeypatch.setenv("OPTSERVE_SERVE__HTTP_PROT", "8200")
    with pytest.raises(SettingsError, match=r"serve\.http_prot .*Extra inputs are not permitted"):
        load_settings()


def test_a_bad_file_value_fails_naming_the_field_and_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("compiler:\n  workers: 0\n")
    with pytest.raises(SettingsError, match=rf"compiler\.workers \(from {path}\)"):
        load_settings(path)


def test_a_missing_config_file_is_an_error_not_the_defaults(tmp_path):
    with pytest.raises(SettingsError, match="cannot read the config file"):
        load_settings(tmp_path / "absent.yaml")


def test_config_show_prints_each_field_with_its_source(config_file, monkeypatch, capsys):
    monkeypatch.setenv("OPTSERVE_SERVE__HTTP_PORT", "8200")
    assert main(["config", "show", "--config", str(config_file), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["config_file"] == str(config_file)
    assert shown["fields"]["serve.http_port"] == {
        "value": 8200,
        "source": "env",
        "env": "OPTSERVE_SERVE__HTTP_PORT",
    }
    assert shown["fields"]["compiler.workers"]["source"] == "file"
    assert shown["fields"]["tuning.default_budget"] == {
        "value": 300,
        "source": "default",
        "env": "OPTSERVE_TUNING__DEFAULT_BUDGET",
    }


def test_config_show_refuses_bad_settings_with_the_field_on_stderr(monkeypatch, capsys):
    monkeypatch.setenv("OPTSERVE_COMPILER__WORKERS", "-1")
    assert main(["config", "show"]) == 2
    assert "compiler.workers (from $OPTSERVE_COMPILER__WORKERS)" in capsys.readouterr().err


@pytest.mark.parametrize("source", ["env", "file"])
@pytest.mark.parametrize("as_json", [False, True])
def test_the_token_never_appears_in_config_show(source, as_json, tmp_path, monkeypatch, capsys):
    path = tmp_path / "optserve.yaml"
    if source == "env":
        monkeypatch.setenv("OPTSERVE_SERVE__AUTH_TOKEN", TOKEN)
        path.write_text("{}\n")
    else:
        path.write_text(yaml.safe_dump({"serve": {"auth_token": TOKEN}}))
    assert main(["config", "show", "--config", str(path)] + (["--json"] if as_json else [])) == 0
    out = capsys.readouterr().out
    assert TOKEN not in out
    assert "serve.auth_token" in out and "**********" in out


def test_the_token_is_masked_in_the_settings_repr_and_their_json(monkeypatch):
    monkeypatch.setenv("OPTSERVE_SERVE__AUTH_TOKEN", TOKEN)
    settings = load_settings()
    assert settings.serve.auth_token.get_secret_value() == TOKEN
    assert TOKEN not in repr(settings) and TOKEN not in str(settings)
    assert TOKEN not in settings.model_dump_json()


def test_the_replicas_receive_the_driver_s_settings_token_included(monkeypatch):
    """serve/app.py hands each deployment `replica_config`: the replica validates the same settings, its
    own environment overriding nothing (the driver already applied it, and `--token` after it)."""
    settings = Settings.model_validate({"serve": {"auth_token": TOKEN, "http_port": 8300}})
    monkeypatch.setenv("OPTSERVE_SERVE__AUTH_TOKEN", "another")
    monkeypatch.setenv("OPTSERVE_SERVE__HTTP_PORT", "8400")
    replica = Settings.model_validate(replica_config(settings))
    assert replica.serve.auth_token.get_secret_value() == TOKEN
    assert replica.serve.http_port == 8300
    assert replica == settings


def test_the_service_checks_callers_against_the_secret_token():
    expected = Settings.model_validate({"serve": {"auth_token": TOKEN}}).serve.auth_token
    check_token(f"Bearer {TOKEN}", expected)
    with pytest.raises(ServiceError):
        check_token("Bearer **********", expected)


def test_the_client_sends_its_token_but_never_shows_it():
    channel = ChannelSettings.of("localhost:9000", token=TOKEN)
    assert ("authorization", f"Bearer {TOKEN}") in channel.metadata
    assert TOKEN not in repr(channel)
    assert ChannelSettings.of("localhost:9000", token="").metadata == ()


def test_the_client_never_sends_its_token_over_plaintext_beyond_loopback(tmp_path):
    """A bearer token over plaintext to another machine could be read on the path: refused when the client
    is made, with both ways out; loopback, TLS and no token are all fine."""
    with pytest.raises(ValueError, match="OPTSERVE_CA_CERT") as refused:
        ChannelSettings.of("build-farm.example:50051", token=TOKEN)
    assert TOKEN not in str(refused.value)
    for target in ("127.0.0.1:9000", "[::1]:9000", "unix:/tmp/optserve.sock", "localhost:9000"):
        assert ChannelSettings.of(target, token=TOKEN).metadata
    ca = tmp_path / "ca.pem"
    ca.write_text("not read until a channel is opened")
    assert ChannelSettings.of("build-farm.example:50051", token=TOKEN, ca_cert=ca).metadata
    assert ChannelSettings.of("build-farm.example:50051", token=TOKEN, tls=True).metadata
    assert ChannelSettings.of("build-farm.example:50051").metadata == ()


def test_serve_refuses_to_listen_beyond_loopback_without_a_token_where_told_to(monkeypatch, capsys):
    """What the image sets: no service starts on 0.0.0.0 without a token; the message says both ways out."""
    monkeypatch.setenv("OPTSERVE_SERVE__REQUIRE_TOKEN_BEYOND_LOOPBACK", "true")
    assert main(["serve", "--host", "0.0.0.0"]) == 1
    error = capsys.readouterr().err
    assert "refusing to listen on 0.0.0.0 without a token" in error
    assert "$OPTSERVE_TOKEN" in error and "OPTSERVE_SERVE__REQUIRE_TOKEN_BEYOND_LOOPBACK=false" in error
