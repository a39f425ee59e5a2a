"""serve/config.yaml, the Ray Serve config file for `serve run` / `serve deploy`: Ray Serve's own schema
accepts it, and it says what optserve's code does (gRPC services, logging, deployments, the app builder)."""

from __future__ import annotations

from pathlib import Path

import yaml
from ray.serve import Application
from ray.serve.schema import ServeDeploySchema

from optserve.serve.app import APP_NAME, GRPC_SERVICER_FUNCTIONS, app_builder
from optserve.serve.observability.logs import LOGGING_CONFIG

CONFIG_YAML = Path(__file__).resolve().parents[2] / "serve" / "config.yaml"


def _config() -> ServeDeploySchema:
    return ServeDeploySchema.model_validate(yaml.safe_load(CONFIG_YAML.read_text()))


def test_ray_serve_accepts_the_config_file():
    config = _config()
    assert [app.name for app in config.applications] == [APP_NAME]
    assert config.http_options.host == "127.0.0.1"  # loopback unless told otherwise


def test_the_config_file_registers_the_grpc_services_and_logging_of_the_code():
    config = _config()
    assert config.grpc_options.grpc_servicer_functions == GRPC_SERVICER_FUNCTIONS
    assert config.logging_config.encoding == LOGGING_CONFIG.encoding
    assert config.logging_config.log_level == LOGGING_CONFIG.log_level


def test_the_config_file_gives_serve_s_controller_the_environment_of_the_code():
    """The proxy start-up budget `optserve serve` gives Serve's controller (serve.proxy_ready_timeout_s)."""
    from optserve.config import Settings
    from optserve.serve.server import controller_options

    assert _config().controller_options == controller_options(Settings().serve)


def test_its_import_path_builds_the_app_with_the_deployments_it_overrides(tmp_path):
    """`args.config` names an optserve YAML; the builder reads it, and every deployment the file overrides
    exists in the application it builds."""
    (application,) = _config().applications
    module, _, attribute = application.import_path.partition(":")
    assert (module, attribute) == ("optserve.serve.app", "app_builder")
    settings = tmp_path / "optserve.yaml"
    settings.write_text(yaml.safe_dump({"engine": {"model_dir": str(tmp_path)}, "compiler": {"workers": 1}}))
    built = app_builder({**application.args, "config": str(settings)})
    names = set()
    pending = [built]
    while pending:  # the ingress and the deployments bound into it
        deployment = pending.pop()._bound_deployment
        names.add(deployment.name)
        assert deployment.logging_config["encoding"] == "JSON"
        pending += [arg for arg in deployment.init_args if isinstance(arg, Application)]
    assert {d.name for d in application.deployments} <= names
    assert names == {"Ingress", "PassOrderingEngine", "CompilerWorkers", "LoopTuneScheduler"}


def test_the_loopback_runtime_env_names_the_hook_and_values_of_the_code():
    """serve/loopback_env.yaml repeats for `serve run` what `optserve serve` sets: Ray's single-machine mode,
    the hook that rebinds Serve's gRPC servers, the proxy's host (= http_options.host) and message limit."""
    from optserve.config import Settings
    from optserve.serve.replicas import loopback
    from optserve.serve.server import grpc_message_limit

    runtime_env = yaml.safe_load((CONFIG_YAML.parent / "loopback_env.yaml").read_text())
    hook = loopback.bind_serve_grpc
    assert runtime_env["worker_process_setup_hook"] == f"{hook.__module__}.{hook.__name__}"
    assert runtime_env["env_vars"] == {
        loopback.SINGLE_MACHINE_ENV: "0",
        loopback.PROXY_HOST_ENV: _config().http_options.host,
        "RAY_SERVE_GRPC_MAX_MESSAGE_SIZE": str(grpc_message_limit(Settings())),
    }


def _ingress_settings(application: Application) -> dict:
    return application._bound_deployment.init_args[0]


def test_serve_run_reads_the_token_from_the_environment_as_optserve_serve_does(tmp_path, monkeypatch):
    """$OPTSERVE_TOKEN guards the app `serve run serve/config.yaml` builds, over the optserve YAML's token;
    without the variable the YAML's token stays."""
    settings = tmp_path / "optserve.yaml"
    settings.write_text(yaml.safe_dump({"serve": {"auth_token": "from-the-file"}}))
    monkeypatch.delenv("OPTSERVE_TOKEN", raising=False)
    assert _ingress_settings(app_builder({}))["serve"]["auth_token"] is None
    assert _ingress_settings(app_builder({"config": str(settings)}))["serve"]["auth_token"] == "from-the-file"
    monkeypatch.setenv("OPTSERVE_TOKEN", "from-the-environment")
    for args in ({}, {"config": str(settings)}):
        assert _ingress_settings(app_builder(args))["serve"]["auth_token"] == "from-the-environment"
